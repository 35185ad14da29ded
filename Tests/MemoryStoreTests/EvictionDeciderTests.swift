import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// The eviction decider: YMCache's model, without its race.
  @Suite("Eviction: decider and purges") struct EvictionDecider {
    /// What a decider saw, per call.
    final class Calls: Sendable {
      private let calls = Locked<[(key: String, value: Int, context: EvictionContext)]>([])
      func append(_ key: String, _ value: Int, _ context: EvictionContext) {
        calls.withLock { $0.append((key, value, context)) }
      }
      var all: [(key: String, value: Int, context: EvictionContext)] { calls.withLock { $0 } }
      var keys: [String] { all.map(\.key).sorted() }
    }

    @Test func thePurgeAsksOncePerEntryAndRemovesWhatTheDeciderChose() {
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler()) { key, value, context in
        calls.append(key, value, context)
        return value.isMultiple(of: 2)
      }
      store.addEntries(["a": 1, "b": 2, "c": 3, "d": 4])
      let evicted = store.purgeEvictableItems()
      #expect(calls.keys == ["a", "b", "c", "d"])
      #expect(evicted == ["b": 2, "d": 4])
      // Visible to every read when the purge returns.
      #expect(store.allItems == ["a": 1, "c": 3])
      #expect(store["b"] == nil)
      #expect(store.count == 2)
      #expect(store.statistics.evictions[.decider] == 2)
    }

    @Test func withTheSystemClockAWriteTimeIsNeverLateAndAtMostATickEarly() throws {
      // With only a decider timing entries, writes may take the coarse clock: the write time
      // must not be after the write returned, nor more than a tick (at most 10 ms) before
      // the write started, and an age is never negative. A time to live needs the precise
      // clock again.
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: .dispatch) { key, value, context in
        calls.append(key, value, context)
        return false
      }
      var windows: [String: (ContinuousClock.Instant, ContinuousClock.Instant)] = [:]
      for round in 0..<50 {
        let key = "k\(round)"
        let before = ContinuousClock.now
        if round == 25 {
          store.setValue(round, forKey: key, timeToLive: .seconds(600))
        } else {
          store[key] = round
        }
        windows[key] = (before, ContinuousClock.now)
      }
      _ = store.purgeEvictableItems()
      #expect(calls.all.count == 50)
      for (key, _, context) in calls.all {
        let (before, after) = try #require(windows[key])
        #expect(context.writtenAt <= after, "\(key) written after its write returned")
        #expect(before - context.writtenAt <= .milliseconds(10), "\(key) written too early")
        #expect(context.age >= .zero)
        if key == "k25" { #expect(context.writtenAt >= before, "a timed write is precise") }
      }
    }

    @Test func theCallersPayloadReachesTheDeciderUnchanged() throws {
      struct Payload: Sendable, Equatable { let reason: String }
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler()) { key, value, context in
        calls.append(key, value, context)
        return false
      }
      store["a"] = 1
      store.purgeEvictableItems(trigger: .manual(Payload(reason: "low disk")))
      let context = try #require(calls.all.first?.context)
      #expect(context.userInfo as? Payload == Payload(reason: "low disk"))
      guard case .manual = context.trigger else {
        Issue.record("expected a manual trigger, got \(context.trigger)")
        return
      }
    }

    @Test func anEmptyStoreNeverCallsTheDecider() {
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler()) { key, value, context in
        calls.append(key, value, context)
        return true
      }
      #expect(store.purgeEvictableItems().isEmpty)
      store["a"] = 1
      store["a"] = nil
      #expect(store.purgeEvictableItems().isEmpty)
      #expect(calls.all.isEmpty)
    }

    @Test func withoutADeciderAPurgeDoesNothingAndNoTimerExists() {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store["a"] = 1
      #expect(store.purgeEvictableItems().isEmpty)
      store.evictionInterval = .seconds(1)
      #expect(store.evictionInterval == .zero)
      #expect(scheduler.pendingCount == 0)
      store.handleMemoryPressure(.warning)
      #expect(store["a"] == 1)
    }

    @Test func aDeciderCanBeSetReplacedAndRemovedAfterCreation() throws {
      let scheduler = ManualScheduler()
      let origin = scheduler.now
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.countLimit = 100  // entries already carry metadata, without a write time
      store["old"] = 1
      #expect(store.evictionDecider == nil)
      scheduler.advance(by: .seconds(10))
      let calls = Calls()
      store.evictionDecider = { key, value, context in
        calls.append(key, value, context)
        return value == 2
      }
      #expect(store.evictionDecider != nil)
      #expect(store.evictionInterval == .seconds(600))
      scheduler.advance(by: .seconds(5))
      store["new"] = 2
      #expect(store.purgeEvictableItems() == ["new": 2])
      let contexts = Dictionary(uniqueKeysWithValues: calls.all.map { ($0.key, $0.context) })
      // An entry written before the first decider reports the instant it was set.
      #expect(try #require(contexts["old"]).writtenAt == origin + .seconds(10))
      #expect(try #require(contexts["new"]).writtenAt == origin + .seconds(15))
      // Replaced: the new decider judges the next purge.
      store.evictionDecider = { _, _, _ in true }
      #expect(store.purgeEvictableItems() == ["old": 1])
      // Removed: purges do nothing.
      store["again"] = 3
      store.evictionDecider = nil
      #expect(store.purgeEvictableItems().isEmpty)
      #expect(store.allItems == ["again": 3])
    }

    /// Reads the store's decider when it is released.
    final class ReadsTheDeciderOnRelease: Sendable {
      weak let store: MemoryStore<String, Int>?
      init(_ store: MemoryStore<String, Int>) { self.store = store }
      deinit { _ = store?.evictionDecider }
    }

    @Test func aReplacedDeciderIsReleasedOutsideEveryLock() throws {
      let store = MemoryStore<String, Int>()
      do {
        let capture = ReadsTheDeciderOnRelease(store)
        store.evictionDecider = { _, _, _ in
          withExtendedLifetime(capture) {}
          return false
        }
      }
      // Releasing the old decider runs the capture's deinit, which uses the store.
      let finished = try #require(
        runOnThreads(1, timeout: 30) { _ in
          store.evictionDecider = nil
          return true
        })
      #expect(finished == [true])
    }

    @Test func aDeciderMayReplaceItselfWhileItRuns() {
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler())
      store.addEntries(["a": 1, "b": 2])
      let runs = Atomic(0)
      store.evictionDecider = { _, _, _ in
        runs.wrappingAdd(1, ordering: .relaxed)
        store.evictionDecider = { _, _, _ in false }
        return true
      }
      // The purge finishes with the decider it started with.
      #expect(store.purgeEvictableItems().count == 2)
      #expect(runs.load(ordering: .relaxed) == 2)
      store["c"] = 3
      #expect(store.purgeEvictableItems().isEmpty)
    }

    @Test func theContextCarriesTheEntrysMetadataFromTheStoresClock() throws {
      let scheduler = ManualScheduler()
      let origin = scheduler.now
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: scheduler) { key, value, context in
        calls.append(key, value, context)
        return false
      }
      store.evictionInterval = .zero
      let unreadKey = "unread"
      scheduler.advance(by: .seconds(2))
      store.setValue(1, forKey: "read", cost: 7, timeToLive: .seconds(100))
      store[unreadKey] = 2
      scheduler.advance(by: .seconds(3))
      _ = store["read"]
      scheduler.advance(by: .milliseconds(2_500))
      store.purgeEvictableItems()
      let byKey = Dictionary(uniqueKeysWithValues: calls.all.map { ($0.key, $0.context) })
      let read = try #require(byKey["read"])
      #expect(read.now == origin + .milliseconds(7_500))
      #expect(read.writtenAt == origin + .seconds(2))
      #expect(read.age == .milliseconds(5_500))
      #expect(read.lastReadAt == origin + .seconds(5))
      #expect(read.cost == 7)
      #expect(read.expiresAt == origin + .seconds(102))
      let unread = try #require(byKey[unreadKey])
      #expect(unread.lastReadAt == nil)
      #expect(unread.cost == 0)
      #expect(unread.expiresAt == nil)
    }

    @Test func theIntervalPurgeRunsOnTheStoresClockWithTheIntervalTrigger() {
      let scheduler = ManualScheduler()
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: scheduler) { key, value, context in
        calls.append(key, value, context)
        return value > 1
      }
      #expect(store.evictionInterval == .seconds(600))
      store.addEntries(["a": 1, "b": 2])
      scheduler.advance(by: .seconds(599))
      #expect(calls.all.isEmpty)
      scheduler.advance(by: .seconds(1))
      #expect(calls.keys == ["a", "b"])
      #expect(
        calls.all.allSatisfy { if case .interval = $0.context.trigger { true } else { false } })
      #expect(store.allItems == ["a": 1])
      // And again one period later.
      store["c"] = 3
      scheduler.advance(by: .seconds(600))
      #expect(calls.all.count == 4)
      #expect(store.allItems == ["a": 1])
    }

    @Test func settingTheIntervalRestartsThePeriodAndZeroStopsIt() {
      let scheduler = ManualScheduler()
      let calls = Calls()
      let store = MemoryStore<String, Int>(scheduler: scheduler) { key, value, context in
        calls.append(key, value, context)
        return false
      }
      store["a"] = 1
      scheduler.advance(by: .seconds(500))
      store.evictionInterval = .seconds(200)
      scheduler.advance(by: .seconds(199))
      #expect(calls.all.isEmpty, "the old period must not fire at 600 s, nor the new one early")
      scheduler.advance(by: .seconds(1))
      #expect(calls.all.count == 1)
      store.evictionInterval = .zero
      scheduler.advance(by: .seconds(10_000))
      #expect(calls.all.count == 1)
    }

    @Test func theDeciderMayReadAndWriteTheStore() {
      let store = Locked<MemoryStore<String, Int>?>(nil)
      let created = MemoryStore<String, Int>(scheduler: ManualScheduler()) { key, value, _ in
        guard let store = store.value else { return false }
        // Reads, writes and a nested purge (refused, not deadlocked) from inside the decider.
        _ = store[key]
        _ = store.count
        store["seen-\(key)"] = value
        #expect(store.purgeEvictableItems().isEmpty)
        return key == "a"
      }
      store.withLock { $0 = created }
      created.addEntries(["a": 1, "b": 2])
      let evicted = created.purgeEvictableItems()
      #expect(evicted == ["a": 1])
      // Entries written by the decider during the purge are not judged by it.
      #expect(created.allItems == ["b": 2, "seen-a": 1, "seen-b": 2])
      store.withLock { $0 = nil }
    }

    @Test func aValueReplacedAfterItWasJudgedIsNotRemoved() {
      let store = Locked<MemoryStore<String, Int>?>(nil)
      let created = MemoryStore<String, Int>(scheduler: ManualScheduler()) { key, value, _ in
        // Judge the old value, then replace it before the purge removes what it judged.
        if key == "a", value == 1 { store.value?["a"] = 2 }
        return true
      }
      store.withLock { $0 = created }
      created.addEntries(["a": 1, "b": 1])
      let evicted = created.purgeEvictableItems()
      #expect(evicted == ["b": 1])
      #expect(created.allItems == ["a": 2])
      store.withLock { $0 = nil }
    }

    @Test func theDeciderNeverRunsConcurrentlyWithItself() {
      let inside = Atomic<Int>(0)
      let overlaps = Atomic<Int>(0)
      let store = MemoryStore<Int, Int>(scheduler: ManualScheduler()) { _, _, _ in
        if inside.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue > 1 {
          overlaps.wrappingAdd(1, ordering: .relaxed)
        }
        inside.wrappingSubtract(1, ordering: .sequentiallyConsistent)
        return false
      }
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<2_000).map { ($0, $0) }))
      let done: [Void]? = runOnThreads(4) { _ in
        for _ in 0..<5 { store.purgeEvictableItems() }
        store.handleMemoryPressure(.warning)
      }
      #expect(done != nil)
      #expect(overlaps.load(ordering: .relaxed) == 0)
      #expect(store.count == 2_000)
    }

    /// Purges that evict everything race a writer that rewrites every key with increasing
    /// values. A purge may remove only the value it judged, and no write may be lost: each
    /// key ends with the writer's last value, unless a purge returned exactly that value.
    ///
    /// However the threads are scheduled, the writer goes on until the purges have removed
    /// something a number of times (and for at least `minimumRounds`), so that purges
    /// certainly race the writes; `maximumRounds` only keeps a stalled purger from hanging
    /// the test.
    @Test func purgesRacingAWriterRemoveOnlyWhatTheyJudgedAndLoseNoWrite() {
      let judged = Locked<Set<Pair>>([])
      let store = MemoryStore<Int, Int>(scheduler: ManualScheduler()) { key, value, _ in
        judged.withLock { _ = $0.insert(Pair(key: key, value: value)) }
        return true
      }
      let keys = 64
      let minimumRounds = 300
      let maximumRounds = 1_000_000
      let fruitfulPurgesWanted = 20
      let evicted = Locked<[Pair]>([])
      let fruitfulPurges = Atomic<Int>(0)
      let lastRound = Atomic<Int>(0)
      let writing = Atomic<Bool>(true)
      let done: [Void]? = runOnThreads(2) { thread in
        if thread == 0 {
          var round = 0
          while round < minimumRounds
            || (fruitfulPurges.load(ordering: .acquiring) < fruitfulPurgesWanted
              && round < maximumRounds)
          {
            round += 1
            for key in 0..<keys { store[key] = round }
          }
          lastRound.store(round, ordering: .relaxed)
          writing.store(false, ordering: .releasing)
        } else {
          while writing.load(ordering: .acquiring) {
            let removed = store.purgeEvictableItems()
            guard !removed.isEmpty else { continue }
            evicted.withLock { $0 += removed.map { Pair(key: $0.key, value: $0.value) } }
            fruitfulPurges.wrappingAdd(1, ordering: .releasing)
          }
        }
      }
      #expect(done != nil)
      let removed = evicted.value
      #expect(
        fruitfulPurges.load(ordering: .relaxed) >= fruitfulPurgesWanted,
        "the purges removed something only \(fruitfulPurges.load(ordering: .relaxed)) times")
      #expect(Set(removed).isSubset(of: judged.value), "a purge removed a value it never judged")
      let rounds = lastRound.load(ordering: .relaxed)
      let final = store.allItems
      let lastEvicted = Set(removed.filter { $0.value == rounds })
      for key in 0..<keys {
        if let value = final[key] {
          #expect(value == rounds, "key \(key) holds \(value), not the last write")
        } else {
          #expect(
            lastEvicted.contains(Pair(key: key, value: rounds)), "the last write of \(key) was lost"
          )
        }
      }
    }

    struct Pair: Hashable, Sendable {
      let key: Int
      let value: Int
    }

    @Test func evictionsAppearInChangeBatchesWithTheirReason() async throws {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler) { key, _, _ in key == "a" }
      store.addEntries(["a": 1, "b": 2])
      store.notificationInterval = .milliseconds(100)
      let collector = BatchCollector<String, Int>()
      let subscription = store.observe { collector.append($0) }
      store.purgeEvictableItems()
      await store.flush()
      let batch = try #require(collector.batches.first)
      #expect(batch.removed == ["a"])
      #expect(batch.reason(forKey: "a") == .evictedByDecider)
      #expect(batch.reason(forKey: "a")?.evictionReason == .decider)
      subscription.cancel()
    }

    @Test func aPurgeOverManyEntriesWorksInChunksAndJudgesEachOnce() {
      let calls = Atomic<Int>(0)
      let store = MemoryStore<Int, Int>(scheduler: ManualScheduler()) { key, _, _ in
        calls.wrappingAdd(1, ordering: .relaxed)
        return key.isMultiple(of: 3)
      }
      let count = 10_000
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<count).map { ($0, $0) }))
      let evicted = store.purgeEvictableItems()
      #expect(calls.load(ordering: .relaxed) == count)
      #expect(evicted.count == (count + 2) / 3)
      #expect(evicted.keys.allSatisfy { $0.isMultiple(of: 3) })
      #expect(store.count == count - evicted.count)
    }
  }
}
