import Foundation
import MemoryStoreKit
import Testing

// The Swift code of the Running Several Instances article, as written (see `SnippetCheck`),
// run and checked against its comments. Its own output: suites run in parallel.

private let output = SnippetOutput()

/// The snippets' `print`, recorded for the checks.
private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
  output.record(items, separator: separator)
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
