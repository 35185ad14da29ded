import Foundation
import MemoryStoreKit
import Testing

/// The README's usage example, kept compiling and checked.
@Suite struct ReadmeExample {
  struct Quote: Codable, Sendable, Equatable {
    var bid: Double
    var ask: Double
  }

  @Test func theUsageExampleWorksAsTheReadmeSays() async throws {
    // The README's lines, in order; only printing and the directory differ.
    let quotes = MemoryStore<String, Quote>(name: "quotes")
    quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)
    let aapl = quotes["AAPL"]

    quotes.update(forKey: "AAPL") { quote in
      quote?.bid += 0.05
    }

    quotes.notificationInterval = .milliseconds(250)
    let printed = Locked<[String]>([])
    let subscription = quotes.observe { batch in
      printed.withLock {
        $0.append("\(batch.updated.count) updated, \(batch.removed.count) removed")
      }
    }

    let directory = TemporaryDirectory()  // the README uses URL.temporaryDirectory
    let persistence = try PersistenceManager(
      store: quotes, fileURL: directory.url.appending(path: "quotes.snapshot"))
    try persistence.load()
    persistence.saveInterval = .seconds(30)

    // What the comments say.
    #expect(aapl == Quote(bid: 231.40, ask: 231.45))
    #expect(quotes["AAPL"] == Quote(bid: 231.40 + 0.05, ask: 231.45))
    quotes["MSFT"] = Quote(bid: 415.2, ask: 415.3)
    quotes["AAPL"] = nil
    #expect(quotes["AAPL"] == nil)
    await quotes.flush()
    #expect(printed.value == ["1 updated, 1 removed"])
    subscription.cancel()

    #expect(quotes.count == 1)  // nothing to load the first time
    try persistence.save()
    let reloaded = MemoryStore<String, Quote>()
    #expect(try PersistenceManager(store: reloaded, fileURL: persistence.fileURL).load() == 1)
    #expect(reloaded.allItems == quotes.allItems)
  }
}
