import Foundation
import MemoryStoreKit
import Observation
import Testing

// The Getting Started article's Swift code, as written (see `SnippetCheck`), run and checked
// against its comments.

private let output = SnippetOutput()

/// The snippets' `print`, recorded for the checks.
private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
  output.record(items, separator: separator)
}

@Suite("Snippets: Getting Started", .serialized) struct GettingStartedSnippets {
  /// The article's blocks from "Create a store" to "Save and load", in order, on one store.
  @Test func fromCreatingAStoreToSavingIt() async throws {
    output.clear()
    // swift-format-ignore: AlwaysUseLowerCamelCase
    let URL = SnippetDirectory()  // `URL.temporaryDirectory` below: a directory of this test's
    // swift-format-ignore: AlwaysUseLowerCamelCase
    let Task = SnippetTasks()  // `Task { … }` below: iterations ended at the end of the test

    // "Create a store"
    struct Quote: Codable, Sendable, Equatable {
      var bid: Double
      var ask: Double
    }

    let quotes = MemoryStore<String, Quote>(name: "quotes")

    // "Read and write"
    quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)  // insert or replace
    if let aapl = quotes["AAPL"] {  // read
      print(aapl.bid)
    }
    quotes["AAPL"] = nil  // remove

    let previous = quotes.updateValue(Quote(bid: 415.2, ask: 415.3), forKey: "MSFT")  // nil: new
    let removed = quotes.removeValue(forKey: "MSFT")  // the quote just stored
    print(quotes.count, quotes.isEmpty)  // 0 true

    #expect(output.printed == ["231.4", "0 true"])
    #expect(previous == nil)
    #expect(removed == Quote(bid: 415.2, ask: 415.3))

    quotes.addEntries([  // one atomic write
      "NVDA": Quote(bid: 131.9, ask: 132.0),
      "AMZN": Quote(bid: 186.4, ask: 186.5),
    ])
    let pair = quotes.values(forKeys: ["NVDA", "AMZN"])  // both, from the same instant
    let snapshot = quotes.allItems  // every entry; later writes leave it alone
    let symbols = quotes.keys  // every key, from one instant too
    let listed = quotes.contains("NVDA")  // no hit or miss counted, no use noted
    quotes.removeValues(forKeys: ["NVDA", "AMZN"])  // one atomic write

    #expect(pair.count == 2 && snapshot == pair && Set(symbols) == ["NVDA", "AMZN"] && listed)
    #expect(quotes.isEmpty && snapshot.count == 2)

    let session = quotes.valueOrInsert(forKey: "TSLA") { Quote(bid: 0, ask: 0) }

    #expect(session == Quote(bid: 0, ask: 0) && quotes["TSLA"] == session)
    let fetches = Locked(0)
    @Sendable func fetchQuote(_ symbol: String) async throws -> Quote {
      fetches.withLock { $0 += 1 }
      return Quote(bid: 240.1, ask: 240.2)
    }

    let quote = try await quotes.value(forKey: "IBM") {
      try await fetchQuote("IBM")  // once, however many callers miss at the same time
    }

    #expect(quote == Quote(bid: 240.1, ask: 240.2) && fetches.value == 1)
    let requests = Locked<[[String]]>([])
    @Sendable func fetchQuotes(_ symbols: [String]) async throws -> [String: Quote] {
      requests.withLock { $0.append(symbols) }
      return Dictionary(uniqueKeysWithValues: symbols.map { ($0, Quote(bid: 1, ask: 2)) })
    }

    let page = try await quotes.values(forKeys: ["IBM", "AAPL", "MSFT"]) { missing in
      try await fetchQuotes(missing)  // one request: ["AAPL", "MSFT"]; "IBM" is stored
    }

    #expect(requests.value == [["AAPL", "MSFT"]] && page.count == 3 && page["IBM"] == quote)

    quotes.update(forKey: "TSLA") { quote in quote?.bid += 0.5 }  // absent: stays absent
    let visits = MemoryStore<String, Int>()
    visits.update(forKey: "/home", default: 0) { $0 += 1 }  // never loses an increment
    visits.merge(["/home": 2, "/about": 1], uniquingKeysWith: +)  // several keys, one write
    visits.removeAll { $0.value < 2 }  // judged and removed at once
    print(visits["/home", default: 0])  // 3

    #expect(quotes["TSLA"]?.bid == 0.5)
    #expect(visits.allItems == ["/home": 3])
    #expect(output.printed.last == "3")

    await withTaskGroup(of: Void.self) { group in
      for symbol in ["AAPL", "MSFT", "NVDA"] {
        group.addTask { quotes[symbol] = Quote(bid: 100, ask: 100.05) }
      }
    }
    print(quotes.count)  // 5: TSLA, IBM and the three written by the tasks

    #expect(output.printed.last == "5")
    #expect(Set(quotes.keys) == ["TSLA", "IBM", "AAPL", "MSFT", "NVDA"])

    // "Observe changes"
    quotes.notificationInterval = .milliseconds(250)

    // A handler on a queue of its own; keep the subscription for as long as you want batches.
    let subscription = quotes.observe { batch in
      for (symbol, quote) in batch.updated { print(symbol, quote.bid) }
      for symbol in batch.removed { print(symbol, "removed") }
    }

    // Or an AsyncSequence: each `for await` loop is a subscriber of its own.
    Task {
      for await batch in quotes.changes {
        print("\(batch.count) symbols changed")
      }
    }

    Task {
      var mirror: [String: Quote] = [:]
      for await batch in quotes.changes(includingInitialSnapshot: true) {
        batch.apply(to: &mirror)  // the first batch is the whole store
      }
    }
    Task {
      for await update in quotes.updates(of: "AAPL") {  // now, then after each change
        print("AAPL", update.value?.bid ?? 0)  // value nil: the key is absent
      }
    }

    Task {
      for await removal in quotes.removals where removal.cause.isEviction {
        print(removal.key, "evicted:", removal.cause)
      }
    }

    // The handler prints each change of a batch; the iterations run on.
    quotes["AAPL"] = Quote(bid: 101, ask: 101.05)
    quotes["MSFT"] = nil
    await quotes.flush()
    #expect(output.printed.contains("AAPL 101.0"))
    #expect(output.printed.contains("MSFT removed"))

    // "Save and load"
    let fileURL = URL.temporaryDirectory.appending(path: "quotes.snapshot")  // your app's directory
    let persistence = try PersistenceManager(store: quotes, fileURL: fileURL, coder: .binary)
    do {
      let restored = try persistence.load()  // 0 when there is no file yet
      print("restored \(restored) quotes")
    } catch {
      // A damaged file: `error` is a PersistenceError; the file was moved aside and the store is
      // untouched, so the app starts afresh.
      print("starting afresh: \(error)")
    }
    persistence.saveInterval = .seconds(30)  // auto-save while `persistence` is alive
    // …
    try persistence.save()  // once more before quitting

    #expect(output.printed.contains("restored 0 quotes"))
    let reloaded = MemoryStore<String, Quote>()
    let loaded = try PersistenceManager(store: reloaded, fileURL: fileURL, coder: .binary).load()
    #expect(loaded == 4 && reloaded.allItems == quotes.allItems)
    subscription.cancel()
    #expect(await Task.cancelAll(), "an iteration did not end when cancelled")
  }

  @Test func usingWithSwiftUI() async {
    output.clear()
    // "Use with SwiftUI", the block that runs without SwiftUI
    let prices = MemoryStore<String, Double>(name: "prices", tracksReads: true)
    withObservationTracking {
      _ = prices["AAPL"]
    } onChange: {
      print("AAPL changed")
    }
    prices["MSFT"] = 411.2  // prints nothing: nobody read MSFT
    prices["AAPL"] = 189.5  // prints "AAPL changed", on the store's scheduler
    await prices.flush()  // returns once it has
    #expect(output.printed == ["AAPL changed"])
    #expect(prices["MSFT"] == 411.2)
  }

  @Test func testingWithManualTime() async {
    // "Test with manual time"
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.notificationInterval = .seconds(1)
    var changes = store.changes.makeAsyncIterator()  // subscribed from here on
    store["a"] = 1
    scheduler.advance(by: .seconds(1))  // publishes the batch now
    let batch = await changes.next()  // ["a": 1]

    #expect(batch?.updated == ["a": 1])
  }
}
