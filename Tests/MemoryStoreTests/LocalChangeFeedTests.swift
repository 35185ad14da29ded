import Foundation
import Testing

@testable import MemoryStoreKit

/// The feed of local changes: what a bus that keeps several instances coherent learns of.
@Suite("Local change feed") struct LocalChangeFeedTests {
  typealias Change = LocalChange<String, Int>

  @Test func everyWriteOfTheAPIReachesTheFeedInCommitOrder() {
    let store = MemoryStore<String, Int>()
    store["before"] = 0  // before the feed: not reported
    let feed = store.openLocalChangeFeed()
    store["a"] = 1
    store.updateValue(2, forKey: "a")
    store.setValue(3, forKey: "b", cost: 2, timeToLive: .seconds(60))
    store["before"] = nil
    store.removeValue(forKey: "absent")  // absent here, perhaps not elsewhere: reported
    store.update(forKey: "a") { $0? += 10 }
    store.merge(["b": 1], uniquingKeysWith: +)
    store.removeValues(forKeys: ["b", "never"])
    store.addEntries(["c": 5])
    store.removeAll(where: { $0.key == "c" })
    store.removeAll()
    store.removeAll()  // of an empty store: still a clear, for the other instances
    let expected: [Change] = [
      .updated("a", 1), .updated("a", 2), .updated("b", 3), .removed("before"),
      .removed("absent"), .updated("a", 12), .updated("b", 4), .removed("b"),
      .removed("never"), .updated("c", 5), .removed("c"), .cleared, .cleared,
    ]
    #expect(feed.take() == expected)
    #expect(feed.take().isEmpty, "a take hands each change over once")
  }

  @Test func theFeedAndChangeBatchesEachGetTheWritesMadeWhileTheyAreOn() async throws {
    let observed = ObservedStore<String, Int>()
    let store = observed.store
    store["a"] = 1  // batches alone
    let feed = store.openLocalChangeFeed()
    store["b"] = 2  // batches and the feed
    _ = await observed.flushedBatches()
    store.notificationInterval = .zero  // the feed alone
    store["c"] = 3
    store["a"] = nil
    store.tracksReads = true  // the feed and tracked reads
    store["f"] = 6
    store.tracksReads = false
    store.notificationInterval = ObservedStore<String, Int>.interval  // both again
    store["d"] = 4
    store._checkInvariants()
    #expect(
      feed.take() == [
        .updated("b", 2), .updated("c", 3), .removed("a"), .updated("f", 6), .updated("d", 4),
      ])
    feed.close()
    store["e"] = 5  // batches alone
    store["b"] = nil
    store._checkInvariants()
    let batches = await observed.flushedBatches()
    var updated: [String: Int] = [:]
    var removed: Set<String> = []
    for batch in batches {
      updated.merge(batch.updated) { _, newer in newer }
      removed.formUnion(batch.removed)
    }
    #expect(updated == ["a": 1, "b": 2, "d": 4, "e": 5], "the writes made while batches were on")
    #expect(removed == ["b"])
    #expect(feed.take().isEmpty)
  }

  @Test func aRemovalOfAnExpiredEntryIsStillALocalChange() {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.setValue(1, forKey: "k", timeToLive: .seconds(1))
    let feed = store.openLocalChangeFeed()
    scheduler.advance(by: .seconds(2))
    store.removeValue(forKey: "k")
    #expect(feed.take() == [.removed("k")])
  }

  @Test func whatTheStoreDoesOnItsOwnOrCopiesFromASourceIsNotALocalChange() async throws {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.countLimit = 2
    let feed = store.openLocalChangeFeed()
    store["a"] = 1
    store["b"] = 2
    store["c"] = 3  // evicts one of them
    #expect(store.count == 2)
    #expect(feed.take() == [.updated("a", 1), .updated("b", 2), .updated("c", 3)])

    store.countLimit = nil
    store.setValue(4, forKey: "short", timeToLive: .seconds(1))
    #expect(feed.take() == [.updated("short", 4)])
    scheduler.advance(by: .seconds(2))  // the expiry timer removes it
    #expect(store["short"] == nil)

    _ = store.valueOrInsert(forKey: "created") { 5 }
    let loaded = try await store.value(forKey: "loaded") { 6 }
    let bulk = try await store.values(forKeys: ["bulk"]) { keys in
      Dictionary(uniqueKeysWithValues: keys.map { ($0, 7) })
    }
    #expect(loaded == 6 && bulk == ["bulk": 7])
    #expect(store["created"] == 5 && store["loaded"] == 6 && store["bulk"] == 7)
    store.touch("created", timeToLive: .seconds(60))
    store.invalidateValues(forKeys: ["created"])
    store.invalidateAll()
    #expect(store.isEmpty)
    #expect(feed.take().isEmpty, "evictions, expiry, loads, touches and invalidations are not fed")

    store["after"] = 8  // the feed still works after them
    #expect(feed.take() == [.updated("after", 8)])
  }

  @Test func aRefreshIsNotALocalChange() async throws {
    let clock = HeldScheduler()
    let store = MemoryStore<String, Int>(scheduler: clock)
    store.timeToRefresh = .seconds(10)
    let (reloads, continuation) = AsyncStream.makeStream(of: Void.self)
    store._inFlight.withLock { $0.afterReload = { continuation.yield() } }
    _ = try await store.value(forKey: "k") { 1 }
    let feed = store.openLocalChangeFeed()
    clock.move(by: .seconds(11))
    #expect(try await store.value(forKey: "k") { 2 } == 1)
    for await _ in reloads { break }
    #expect(store["k"] == 2, "the reload stored its value")
    #expect(feed.take().isEmpty)
  }

  @Test func anIterationWaitsForChangesAndEndsWhenTheFeedCloses() async throws {
    let store = MemoryStore<String, Int>()
    let feed = store.openLocalChangeFeed()
    let received = Locked<[Change]>([])
    // Waited for without blocking a thread of the task pool, which the consumer needs.
    let (arrivals, arrived) = AsyncStream.makeStream(of: Void.self)
    let consumer = Task(executorPreference: ThreadExecutor.shared) {
      for await changes in feed {
        received.withLock { $0.append(contentsOf: changes) }
        arrived.yield()
      }
      return received.value
    }
    store["a"] = 1
    let woke = await finishes(within: 30) {
      for await _ in arrivals { return }
    }
    #expect(woke, "the write woke the waiting iteration")
    store["b"] = 2
    feed.close()
    let all = await consumer.value
    // The change written before the close was either taken by the iteration or dropped by it.
    #expect(all.first == .updated("a", 1))
    #expect(all.count <= 2)
    #expect(!feed.isOpen)
    store["c"] = 3
    #expect(feed.take().isEmpty, "a closed feed hands nothing over")
  }

  @Test func closingDropsWhatWasNotTakenAndAnotherFeedCanOpen() {
    let store = MemoryStore<String, Int>()
    let first = store.openLocalChangeFeed()
    store["a"] = 1
    first.close()
    first.close()  // twice does nothing
    store["b"] = 2
    let second = store.openLocalChangeFeed()
    store["c"] = 3
    #expect(second.take() == [.updated("c", 3)])
    #expect(first.take().isEmpty)
  }

  @Test func anIterationEndsWhenTheStoreIsFreed() async {
    var store: MemoryStore<String, Int>? = MemoryStore<String, Int>()
    let feed = store!.openLocalChangeFeed()
    let consumer = Task(executorPreference: ThreadExecutor.shared) {
      var count = 0
      for await changes in feed { count += changes.count }
      return count
    }
    store!["a"] = 1
    store = nil
    let ended = await finishes(within: 30) { _ = await consumer.value }
    #expect(ended)
    #expect(!feed.isOpen)
  }

  @Test func aCancelledIterationEnds() async {
    let store = MemoryStore<String, Int>()
    let feed = store.openLocalChangeFeed()
    let consumer = Task(executorPreference: ThreadExecutor.shared) {
      for await _ in feed {}
    }
    consumer.cancel()
    #expect(await finishes(within: 30) { await consumer.value })
    withExtendedLifetime(store) {}
  }

  /// Four writers on their own threads and a consumer taking as they go: every write reaches
  /// the feed once, each writer's in its order, and the last change of each key is the value
  /// the store holds.
  @Test func concurrentWritersHandEveryChangeOverOnceInOrder() throws {
    let store = MemoryStore<String, Int>()
    store.countLimit = 5_000  // a policy: writes go through transactions as well
    let feed = store.openLocalChangeFeed()
    let writes = 5_000
    let taken = Locked<[Change]>([])
    let done = Locked(false)
    let consumer = startThread {
      while true {
        let isDone = done.value
        let changes = feed.take()
        taken.withLock { $0.append(contentsOf: changes) }
        if isDone && changes.isEmpty { return }
      }
    }
    let finished = runOnThreads(4) { thread in
      for index in 0..<writes {
        store["t\(thread)-\(index % 100)"] = index
        if index % 7 == 0 { store["shared"] = thread * writes + index }
        if index % 50 == 49 { store.removeValue(forKey: "t\(thread)-\(index % 100)") }
      }
      return true
    }
    try #require(finished != nil)
    done.withLock { $0 = true }
    #expect(consumer.wait(timeout: 60))
    let changes = taken.value
    let expectedCount = 4 * (writes + (writes + 6) / 7 + writes / 50)
    #expect(changes.count == expectedCount)
    // Each writer's own values come in the order it wrote them.
    for thread in 0..<4 {
      let values = changes.compactMap { change -> Int? in
        guard case .updated(let key, let value) = change, key.hasPrefix("t\(thread)-") else {
          return nil
        }
        return value
      }
      #expect(values == Array(0..<writes))
    }
    // Commit order: the last change of every key is what the store holds.
    var last: [String: Int?] = [:]
    for change in changes {
      switch change {
      case .updated(let key, let value): last[key] = .some(value)
      case .removed(let key): last[key] = .some(nil)
      case .cleared: last = [:]
      }
    }
    let stored = store.allItems
    for (key, value) in last {
      #expect(stored[key] == value, "\(key)")
    }
  }

  @Test func aTakeHandsTheWritesBackTheChunksThePreviousOneEmptied() {
    let store = MemoryStore<String, Int>()
    let feed = store.openLocalChangeFeed()
    let chunk = _LocalChangeChunk<String, Int>.capacity
    for round in 0..<2 {
      for index in 0..<(3 * chunk) { store["k\(index)"] = round }
      let taken = feed.take()
      #expect(taken.count == 3 * chunk)
      #expect(taken.first == .updated("k0", round))
      #expect(taken.last == .updated("k\(3 * chunk - 1)", round))
    }
    // The next changes fill the three chunks the first take emptied, with no allocation.
    let room = store._writer.withLock { $0.changes.localChanges.room }
    #expect(room == 3 * chunk)
    store["after"] = 1
    #expect(feed.take() == [.updated("after", 1)])
  }

  @Test func changesThatOutgrowTheChunksHandedBackAreAllTakenInOrder() {
    let store = MemoryStore<Int, Int>()
    let feed = store.openLocalChangeFeed()
    let chunk = _LocalChangeChunk<Int, Int>.capacity
    var expected: [LocalChange<Int, Int>] = []
    // Bursts of every size around a chunk's, each larger or smaller than the previous one.
    for (round, size) in [1, chunk - 1, chunk, chunk + 1, 5 * chunk + 7, 2, 0, 3 * chunk]
      .enumerated()
    {
      expected = []
      for index in 0..<size {
        if index % 7 == 3 {
          store[index] = nil
          expected.append(.removed(index))
        } else {
          store[index] = round
          expected.append(.updated(index, round))
        }
      }
      #expect(feed.take() == expected, "round \(round)")
    }
    #expect(feed.take().isEmpty)
  }
}
