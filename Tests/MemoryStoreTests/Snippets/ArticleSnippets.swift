import Foundation
import MemoryStoreKit
import Testing

// The Swift code of the landing page and of the Observing Changes, Persistence and Migrating
// from YMCache articles, as written (see `SnippetCheck`), run and checked against its comments.

private let output = SnippetOutput()

/// The snippets' `print`, recorded for the checks.
private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
  output.record(items, separator: separator)
}

@Suite("Snippets: the other articles", .serialized) struct ArticleSnippets {
  struct Quote: Codable, Sendable, Equatable {
    var bid: Double
    var ask: Double
  }

  @Test func theLandingPage() {
    // MemoryStoreKit.md
    let flags = MemoryStore<String, Bool>(name: "flags")
    flags["newCheckout"] = true  // an ordered write
    if flags["newCheckout"] == true {  // a synchronous read that sees it
      // …
    }

    #expect(flags.allItems == ["newCheckout": true])
  }

  @Test func observingChangesThreeWays() async {
    output.clear()
    // swift-format-ignore: AlwaysUseLowerCamelCase
    let Task = SnippetTasks()  // `Task { … }` below: iterations ended at the end of the test

    // ObservingChanges.md, "Overview"
    let quotes = MemoryStore<String, Double>(name: "quotes")
    quotes.notificationInterval = .milliseconds(250)

    // 1. An AsyncSequence: each `for await` is its own subscriber.
    Task {
      for await batch in quotes.changes {
        print("\(batch.updated.count) updated, \(batch.removed.count) removed")
      }
    }

    // 2. A handler on a queue; keep the token for as long as you want batches.
    let subscription = quotes.observe(on: .main) { batch in
      for (symbol, price) in batch.updated { print(symbol, price) }
    }

    // 3. NotificationCenter, as YMCache did; no main run loop needed.
    quotes.notificationCenter = .default

    let posted = Locked(0)
    let observer = NotificationCenter.default.addObserver(
      forName: MemoryStore<String, Double>.didChangeNotification, object: quotes, queue: nil
    ) { _ in posted.withLock { $0 += 1 } }
    quotes["AAPL"] = 231.4
    await quotes.flush()
    #expect(output.printed.contains("AAPL 231.4"))
    #expect(spinWait(timeout: 30) { posted.value == 1 })
    NotificationCenter.default.removeObserver(observer)
    quotes.notificationCenter = nil
    subscription.cancel()
    #expect(await Task.cancelAll(), "an iteration did not end when cancelled")
  }

  @Test func observingChangesOnAManualClock() async {
    // ObservingChanges.md, manual time
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.notificationInterval = .milliseconds(100)
    let changes = store.changes.makeAsyncIterator()  // subscribed from here on
    store["a"] = 1
    scheduler.advance(by: .milliseconds(100))  // publishes now, on this thread

    var iterator = changes
    #expect(await iterator.next()?.updated == ["a": 1])
  }

  @Test func observingChangesSubscribesWhereTheIteratorIsMade() async {
    let store = MemoryStore<String, Int>()
    store["a"] = 1

    // ObservingChanges.md, "When a sequence subscribes"
    var removals = store.removals.makeAsyncIterator()  // subscribed from here on
    store["a"] = nil
    await store.flush()
    let removal = await removals.next()  // a's removal

    #expect(removal?.key == "a" && removal?.value == 1)
  }

  @Test func persistenceOverview() throws {
    let temporary = TemporaryDirectory()
    let directory = temporary.url
    let quotes = MemoryStore<String, Quote>()
    quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)

    // Persistence.md, "Overview"
    let persistence = try PersistenceManager(
      store: quotes, fileURL: directory.appending(path: "quotes.snapshot"))
    let restored = try persistence.load()  // at start: 0 if there is no file yet
    persistence.saveInterval = .seconds(30)  // auto-save while the store changes
    try persistence.save()  // before quitting

    #expect(restored == 0)
    let reloaded = MemoryStore<String, Quote>()
    #expect(try PersistenceManager(store: reloaded, fileURL: persistence.fileURL).load() == 1)
    #expect(reloaded.allItems == quotes.allItems)
  }

  @Test func migratingFromYMCache() async {
    let quote = Quote(bid: 231.40, ask: 231.45)
    let received = Locked<[String: Quote]>([:])
    @Sendable func quotesDidChange(updated: [String: Quote], removed: Set<String>) {
      received.withLock { $0.merge(updated) { _, new in new } }
    }

    // MigratingFromYMCache.md
    let cache = MemoryStore<String, Quote>(name: "quotes")
    cache.notificationInterval = .milliseconds(250)
    cache["AAPL"] = quote
    let subscription = cache.observe(on: .main) { batch in
      quotesDidChange(updated: batch.updated, removed: batch.removed)
    }

    await cache.flush()
    #expect(received.value == ["AAPL": quote])
    subscription.cancel()
  }
}
