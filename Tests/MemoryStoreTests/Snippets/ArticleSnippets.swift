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
    var removals = store.removals().makeAsyncIterator()  // subscribed from here on
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

@Suite("Snippets: Running Several Instances", .serialized) struct SeveralInstancesSnippets {
  @Test func learningOfLocalChanges() {
    output.clear()
    // SeveralInstances.md, "Learning of local changes"
    let store = MemoryStore<String, Int>(name: "counters")
    let feed = store.openLocalChangeFeed()
    store["a"] = 1
    store.removeValue(forKey: "b")  // absent here, perhaps not elsewhere: reported
    store.countLimit = 1
    store["c"] = 3  // evicts "a": not a local change
    print(feed.take())  // [.updated("a", 1), .removed("b"), .updated("c", 3)]

    #expect(output.printed == [#"[.updated("a", 1), .removed("b"), .updated("c", 3)]"#])
    #expect(store.allItems == ["c": 3])
  }

  @Test func applyingTheOthersChanges() {
    output.clear()
    // SeveralInstances.md, "Applying the others' changes"
    let cache = MemoryStore<String, Int>(name: "prices")
    cache.addEntries(["AAPL": 231, "MSFT": 415, "NVDA": 142])
    let outbox = cache.openLocalChangeFeed()
    cache["NVDA"] = 143  // a local write, not yet published
    cache.invalidateValues(forKeys: ["AAPL", "NVDA"])  // another instance wrote these
    print(cache.allItems.keys.sorted())  // ["MSFT", "NVDA"]: the local write wins
    print(outbox.take())  // [.updated("NVDA", 143)]: no echo

    #expect(output.printed == [#"["MSFT", "NVDA"]"#, #"[.updated("NVDA", 143)]"#])
    #expect(cache["NVDA"] == 143)
  }

  @Test func loadsThatRaceAnInvalidation() {
    output.clear()
    // SeveralInstances.md, "Loads that race an invalidation"
    let sessions = MemoryStore<String, String>(name: "sessions")
    let mark = sessions.loadMark()  // before reading the source
    let row = "alice"  // … read from the database
    sessions.invalidateValues(forKeys: ["s1"])  // meanwhile, s1 changed elsewhere
    print(sessions.insertLoaded(row, forKey: "s1", after: mark))  // false: not stored

    #expect(output.printed == ["false"])
    #expect(sessions["s1"] == nil)
  }
}
