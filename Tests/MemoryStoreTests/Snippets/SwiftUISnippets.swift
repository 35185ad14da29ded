// The articles' SwiftUI code, as written (see `SnippetCheck`): compiled where SwiftUI exists
// (Apple platforms). What it relies on, reads tracked by Observation, is tested on every
// platform by "Observation: tracked reads" and by the Getting Started snippet that runs
// without SwiftUI.

#if canImport(SwiftUI)
  import MemoryStoreKit
  import SwiftUI

  /// "Use with SwiftUI" (Getting Started).
  enum GettingStartedSwiftUISnippet {
    struct Quote: Sendable {
      var bid: Double
      var ask: Double
    }

    @Observable @MainActor final class Market {
      let quotes = MemoryStore<String, Quote>(name: "quotes", tracksReads: true)
    }

    struct QuoteRow: View {
      let market: Market
      let symbol: String

      var body: some View {
        Text("\(symbol) \(market.quotes[symbol]?.bid ?? 0)")  // redrawn when this symbol changes
      }
    }
  }

  /// "Using with SwiftUI and Observation" (Observing Changes).
  enum ObservingChangesSwiftUISnippet {
    typealias Quote = GettingStartedSwiftUISnippet.Quote

    struct Watchlist: View {
      let quotes: MemoryStore<String, Quote>  // created with tracksReads: true
      let symbols: [String]

      var body: some View {
        List(symbols, id: \.self) { symbol in
          Text("\(symbol) \(quotes[symbol]?.bid ?? 0)")
        }
        Text("\(quotes.count) symbols listed")  // redrawn when a symbol is added or removed
      }
    }
  }
#endif
