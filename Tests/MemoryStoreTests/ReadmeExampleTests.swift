import Foundation
import MemoryStore
import Testing

/// The README's usage example, kept compiling and checked.
@Suite struct ReadmeExample {
  struct Quote: Codable, Sendable, Equatable { var bid: Double; var ask: Double }

  @Test func theUsageExampleWorksAsTheReadmeSays() async throws {
    let quotes = MemoryStore<String, Quote>(name: "quotes")
    quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)
    let aapl = quotes["AAPL"]
    quotes.addEntries([
      "MSFT": Quote(bid: 415.2, ask: 415.3),
      "NVDA": Quote(bid: 131.9, ask: 132.0),
    ])
    let pair = quotes.values(forKeys: ["MSFT", "NVDA"])
    let session = quotes.value(forKey: "TSLA") { Quote(bid: 0, ask: 0) }
    quotes["AAPL"] = nil
    let snapshot = quotes.allItems

    quotes.notificationInterval = .milliseconds(250)
    let printed = Locked<[String]>([])
    let subscription = quotes.observe { batch in
      printed.withLock { $0.append("\(batch.updated.count) updated, \(batch.removed.count) removed") }
    }
    quotes["AAPL"] = Quote(bid: 231.50, ask: 231.55)
    quotes["TSLA"] = nil
    await quotes.flushChanges()
    #expect(printed.value == ["1 updated, 1 removed"])
    subscription.cancel()

    let directory = TemporaryDirectory()  // the README uses URL.temporaryDirectory
    let persistence = try PersistenceManager(
      store: quotes, fileURL: directory.url.appending(path: "quotes.snapshot"))
    let restored = try persistence.load()
    persistence.saveInterval = .seconds(30)
    try persistence.save()
    #expect(restored == 0)
    let reloaded = MemoryStore<String, Quote>()
    #expect(try PersistenceManager(store: reloaded, fileURL: persistence.fileURL).load() == 3)
    #expect(reloaded.allItems == quotes.allItems)

    #expect(aapl == Quote(bid: 231.40, ask: 231.45))
    #expect(pair.count == 2)
    #expect(session == Quote(bid: 0, ask: 0))
    #expect(snapshot.keys.sorted() == ["MSFT", "NVDA", "TSLA"])
  }
}
