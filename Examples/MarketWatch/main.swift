// MarketWatch: an `@Observable @MainActor` view model over a store whose reads are tracked by
// Swift's Observation framework, as SwiftUI tracks them. Three "views" render text from the
// model; each re-renders, at the next frame, only when something it read changed. Runs on Linux
// and macOS: a view here is a function that returns text, and a frame is a function call.
//
//     swift run -c release MarketWatch

import Dispatch
import MemoryStoreKit
import Observation
import Synchronization

// MARK: - The model

/// The app's view model: which symbols the user watches, and the quotes, read from a store.
@Observable @MainActor
final class WatchlistModel {
  /// The live quotes, written by the market feed on any thread. `tracksReads` makes the
  /// store's reads visible to Observation, as this model's own properties are.
  @ObservationIgnored let quotes: MemoryStore<String, Double>
  /// Which symbols the user watches: an ordinary observable property.
  var watched: [String]

  init(quotes: MemoryStore<String, Double>, watched: [String]) {
    self.quotes = quotes
    self.watched = watched
  }

  /// The watched symbols and their prices: reads `watched` and one key per symbol.
  var rows: [(symbol: String, price: Double?)] {
    watched.map { ($0, quotes[$0]) }
  }

  /// How many symbols are listed: reads the store's `count`.
  var listedCount: Int { quotes.count }
}

// MARK: - Views and frames

/// Set by an observation's `onChange` on whatever thread changed the store; read by the next
/// frame, as SwiftUI invalidates a view and redraws it at the next display refresh.
final class Invalidation: Sendable {
  private let flag = Atomic(false)
  func set() { flag.store(true, ordering: .releasing) }
  func take() -> Bool { flag.exchange(false, ordering: .acquiringAndReleasing) }
}

/// A view: its body renders text from the model; it renders again only once invalidated.
@MainActor
final class View {
  let name: String
  let body: @MainActor () -> String
  let invalidation = Invalidation()
  private(set) var renders = 0

  init(_ name: String, body: @escaping @MainActor () -> String) {
    self.name = name
    self.body = body
  }

  /// Renders the body, tracking what it reads, and prints the result.
  func render() {
    let text = withObservationTracking(body) { [invalidation] in invalidation.set() }
    renders += 1
    print("    \(name) renders: \(text)")
  }

  func renderIfInvalidated() {
    if invalidation.take() { render() }
  }
}

/// `189.50`, or `-` for a symbol without a quote.
func price(_ price: Double?) -> String {
  guard let price else { return "-" }
  let cents = Int((price * 100).rounded())
  return "\(cents / 100).\(cents % 100 < 10 ? "0" : "")\(cents % 100)"
}

// MARK: - The app

let quotes = MemoryStore<String, Double>(name: "quotes", tracksReads: true)
let model = WatchlistModel(quotes: quotes, watched: ["AAPL", "MSFT", "NVDA"])

let views = [
  View("Watchlist") {
    model.rows.map { "\($0.symbol) \(price($0.price))" }.joined(separator: ", ")
  },
  View("Header") { "\(model.listedCount) symbols listed" },
  View("AAPL detail") { "AAPL \(price(quotes["AAPL"]))" },
]

/// One frame: what writes on other threads notified is delivered, then every invalidated view
/// renders again.
@MainActor
func frame(_ title: String) async {
  await quotes.flush()
  print("- \(title)")
  let before = views.map(\.renders)
  for view in views { view.renderIfInvalidated() }
  if views.map(\.renders) == before { print("    (nothing re-renders)") }
}

/// The market feed: writes quotes from a background thread, as a network client would.
func feed(_ prices: [String: Double]) async {
  await withCheckedContinuation { continuation in
    DispatchQueue.global().async {
      for (symbol, price) in prices.sorted(by: { $0.key < $1.key }) { quotes[symbol] = price }
      continuation.resume()
    }
  }
}

print("First frame: every view renders once.")
for view in views { view.render() }

await feed(["AAPL": 189.5, "MSFT": 411.2, "NVDA": 124.1, "AMZN": 186.3, "GOOG": 175.9])
await frame("the market opens: five quotes")

await feed(["AMZN": 187.0, "GOOG": 176.4])
await frame("AMZN and GOOG move: nobody shows them")

await feed(["AAPL": 190.25])
await frame("AAPL moves")

await feed(["TSLA": 248.5])
await frame("TSLA is listed: only the count changed for the views")

model.watched.append("GOOG")
await frame("the user watches GOOG too (the model's own property)")

await feed(["GOOG": 177.1])
await frame("GOOG moves, now watched")

quotes["MSFT"] = nil
await frame("MSFT is delisted")

// A burst: 8 threads write 4 000 quotes of watched symbols. Observation fires each view once;
// the next frame renders the final prices.
DispatchQueue.concurrentPerform(iterations: 8) { thread in
  for step in 0..<500 {
    quotes[["AAPL", "NVDA", "GOOG"][(thread + step) % 3]] = 100 + Double(thread * 500 + step) / 100
  }
}
quotes["AAPL"] = 200
quotes["NVDA"] = 130
quotes["GOOG"] = 180
await frame("a burst of 4 000 quotes from 8 threads, ending at AAPL 200, NVDA 130, GOOG 180")

print("")
for view in views { print("\(view.name): \(view.renders) renders") }
print("\(quotes.count) symbols listed at the close.")
