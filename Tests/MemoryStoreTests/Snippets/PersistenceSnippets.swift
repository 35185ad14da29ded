import Foundation
import MemoryStoreKit
import Testing

// The Persistence article's Swift code, as written (see `SnippetCheck`), run and checked
// against its comments. The article's overview is in `ArticleSnippets.swift`.

@Suite("Snippets: Persistence") struct PersistenceSnippets {
  struct Quote: Codable, Sendable, Equatable {
    var bid: Double
    var ask: Double
  }

  @Test func oneFileOneWriter() throws {
    let temporary = TemporaryDirectory()
    let url = temporary.url.appending(path: "quotes.snapshot")
    // Another writer saved the file that this manager has not loaded.
    let other = MemoryStore<String, Quote>()
    other["MSFT"] = Quote(bid: 415.20, ask: 415.30)
    try PersistenceManager(store: other, fileURL: url).save()
    let quotes = MemoryStore<String, Quote>()
    quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)
    let persistence = try PersistenceManager(store: quotes, fileURL: url)

    try Self.saveAfterAConflict(persistence)

    // The save met the conflict: the load brought the other writer's entry into the store.
    #expect(quotes["MSFT"] == Quote(bid: 415.20, ask: 415.30))
    #expect(persistence.lastSaveError == nil)
    let reloaded = MemoryStore<String, Quote>()
    #expect(try PersistenceManager(store: reloaded, fileURL: url).load() == 2)
    #expect(reloaded.allItems == quotes.allItems)
  }

  /// The article's block.
  ///
  /// It checks the kind in the `catch` clause's body rather than with `where`: Swift 6.3.1
  /// crashes (signal 11, in MandatoryAllocBoxToStack) compiling a `catch … where` clause whose
  /// body calls a function with typed throws, such as `load()`.
  static func saveAfterAConflict(_ persistence: PersistenceManager<String, Quote>) throws {
    // Persistence.md, "One file, one writer"
    do {
      try persistence.save()
    } catch {
      guard error.kind == .conflict else { throw error }
      try persistence.load()  // merge the other writer's snapshot into the store
      try persistence.save()  // then replace it
    }
  }
}
