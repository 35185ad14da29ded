import Foundation
import MemoryStoreKit
import Testing

// The README's Swift code, as written (see `SnippetCheck`), run and checked against its
// comments.

private let output = SnippetOutput()

/// The snippets' `print`, recorded for the checks.
private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
  output.record(items, separator: separator)
}

@Suite("Snippets: README", .serialized) struct ReadmeSnippets {
  @Test func theUsageExampleWorksAsItsCommentsSay() async throws {
    output.clear()
    // swift-format-ignore: AlwaysUseLowerCamelCase
    let URL = SnippetDirectory()  // `URL.temporaryDirectory` below: a directory of this test's
    // "Use it"
    struct Quote: Codable, Sendable {
      var bid: Double
      var ask: Double
    }

    let quotes = MemoryStore<String, Quote>(name: "quotes")
    quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)  // an ordered write; assigning nil removes
    let aapl = quotes["AAPL"]  // a synchronous read: sees the write

    quotes.notificationInterval = .milliseconds(250)  // at most one change batch per 250 ms
    let subscription = quotes.observe { batch in  // or: for await batch in quotes.changes
      print("\(batch.updated.count) updated, \(batch.removed.count) removed")
    }

    let persistence = try PersistenceManager(  // crash-safe snapshots of the store
      store: quotes, fileURL: URL.temporaryDirectory.appending(path: "quotes.snapshot"))
    try persistence.load()  // merge the last saved snapshot, if any
    persistence.saveInterval = .seconds(30)  // auto-save while the store changes

    // What the comments say.
    #expect(aapl?.bid == 231.40)
    quotes["MSFT"] = Quote(bid: 415.2, ask: 415.3)
    quotes["AAPL"] = nil
    #expect(quotes["AAPL"] == nil)
    await quotes.flush()
    #expect(output.printed == ["1 updated, 1 removed"])
    subscription.cancel()

    #expect(quotes.count == 1)  // nothing to load the first time
    try persistence.save()
    let reloaded = MemoryStore<String, Quote>()
    #expect(try PersistenceManager(store: reloaded, fileURL: persistence.fileURL).load() == 1)
    #expect(reloaded["MSFT"]?.ask == 415.3)
  }
}
