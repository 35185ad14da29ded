import Foundation
import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// Time to live: never returned once expired, swept lazily and on a timer, reported.
  @Suite("Eviction: time to live") struct Expiry {
    @Test func anExpiredEntryIsNeverReturnedByAnyReadEvenBeforeItIsSwept() {
      // The scheduler never runs the expiry timer: only reads can notice.
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "short", timeToLive: .seconds(10))
      store["forever"] = 2
      clock.move(by: .milliseconds(9_999))
      #expect(store["short"] == 1)
      clock.move(by: .milliseconds(1))
      #expect(store["short"] == nil)
      #expect(store.count == 1)
      #expect(store.allItems == ["forever": 2])
      #expect(store.values(forKeys: ["short", "forever"]) == ["forever": 2])
      #expect(store.updateValue(3, forKey: "short") == nil, "an expired entry is no previous value")
    }

    @Test func withTheSystemClockAnEntryIsGoneAsSoonAsItsTimeToLiveHasPassed() {
      // Reads of the system scheduler's store first compare the earliest deadline with a
      // coarse bound of the clock; that bound must never hide an expiry. The deadline is
      // waited for on the clock, not slept past: ContinuousClock advances at least as fast
      // as the store's clock.
      let store = MemoryStore<Int, Int>(scheduler: .dispatch)
      store[-1] = -1  // An entry without a deadline, which reads keep finding.
      for round in 0..<20 {
        let lifetime = Duration.microseconds(200 * (round % 5 + 1))
        store.setValue(round, forKey: round, timeToLive: lifetime)
        // The write read the clock before returning: its deadline is at most `lifetime` after
        // this instant.
        let written = ContinuousClock.now
        while ContinuousClock.now - written < lifetime {
          #expect(store[-1] == -1)
        }
        #expect(store[round] == nil, "round \(round): read after its time to live")
      }
      #expect(store.count == 1)
      #expect(store._policyMismatch() == nil)
    }

    @Test func withTheSystemClockALongTimeToLiveIsNeverShortAndAtMostASixtyFourthLong() throws {
      // A keyed write whose lifetime is long may count its deadline from the coarse clock's
      // upper bound: the entry must never expire before its time to live has passed since
      // the write started, nor more than 1/64 of it after the write returned. A short one
      // counts from the clock itself. Written again and again, the deadline only moves back.
      let store = MemoryStore<Int, Int>(scheduler: .dispatch)
      store.defaultTimeToLive = .seconds(3_600)
      let long = Duration.seconds(3_600)
      let short = Duration.milliseconds(100)
      var previous: [Int: ContinuousClock.Instant] = [:]
      for round in 0..<200 {
        let key = round % 10
        let lifetime = round % 3 == 0 ? short : long
        let before = ContinuousClock.now
        if lifetime == short {
          store.setValue(round, forKey: key, timeToLive: short)
        } else {
          store[key] = round
        }
        let after = ContinuousClock.now
        let deadline = try #require(store._deadline(forKey: key))
        #expect(deadline >= before + lifetime, "round \(round): a deadline too early")
        let slack = lifetime == short ? Duration.zero : lifetime / 64
        #expect(deadline <= after + lifetime + slack, "round \(round): a deadline too late")
        if lifetime == long, let earlier = previous[key] {
          #expect(deadline >= earlier, "round \(round): a rewrite brought the deadline forward")
        }
        previous[key] = lifetime == long ? deadline : nil
        #expect(store[key] == round)
      }
      #expect(store._policyMismatch() == nil)
    }

    @Test func withTheSystemClockAnIdleDeadlineIsNeverLate() throws {
      // A time to idle is never late, however long: a store that has one counts every
      // deadline from the clock itself.
      let store = MemoryStore<Int, Int>(scheduler: .dispatch)
      store.defaultTimeToLive = .seconds(7_200)
      store.timeToIdle = .seconds(3_600)
      for round in 0..<50 {
        let before = ContinuousClock.now
        store[round % 5] = round
        let after = ContinuousClock.now
        let deadline = try #require(store._deadline(forKey: round % 5))
        #expect(deadline >= before + .seconds(3_600), "round \(round): a deadline too early")
        #expect(deadline <= after + .seconds(3_600), "round \(round): an idle deadline late")
      }
    }

    @Test func aWriteNeverReportsAnExpiredValueAsThePreviousOne() {
      for write in 0..<3 {
        let clock = HeldScheduler()
        let store = MemoryStore<String, Int>(scheduler: clock)
        store.setValue(1, forKey: "a", timeToLive: .seconds(1))
        clock.move(by: .seconds(1))
        let previous: Int? =
          switch write {
          case 0: store.updateValue(2, forKey: "a")
          case 1: store.removeValue(forKey: "a")
          default: store.setValue(2, forKey: "a", cost: 1)
          }
        #expect(previous == nil)
      }
    }

    @Test func readsAloneRemoveExpiredEntriesWhenTheTimerIsLate() {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "a", timeToLive: .seconds(5))
      store.setValue(2, forKey: "b", timeToLive: .seconds(50))
      clock.move(by: .seconds(6))  // No timer runs.
      #expect(store["a"] == nil)
      #expect(store.count == 1)
      #expect(store.statistics.evictions[.expired] == 1)
      #expect(store._policyMismatch() == nil)
      clock.move(by: .seconds(60))
      #expect(store.isEmpty)
      #expect(store.statistics.evictions[.expired] == 2)
    }

    @Test func theTimerRemovesExpiredEntriesAndReportsThemAsExpired() async throws {
      let observed = ObservedStore<String, Int>()
      let store = observed.store
      store.setValue(1, forKey: "a", timeToLive: .seconds(5))
      store.setValue(2, forKey: "b", timeToLive: .seconds(8))
      await store.flush()
      observed.scheduler.advance(by: .seconds(5))
      // The timer removed "a" without any read.
      #expect(store.statistics.evictions[.expired] == 1)
      observed.scheduler.advance(by: .seconds(3))
      #expect(store.statistics.evictions[.expired] == 2)
      let batches = await observed.flushedBatches()
      let removals = batches.dropFirst().flatMap(\.removed)
      #expect(Set(removals) == ["a", "b"])
      for batch in batches.dropFirst() {
        for key in batch.removed { #expect(batch.reason(forKey: key) == .expired) }
      }
      observed.scheduler.advance(by: .seconds(1))  // The last batch's publication timer.
      #expect(observed.scheduler.pendingCount == 0, "no timer is left once nothing expires")
    }

    @Test func theDefaultTimeToLiveAppliesToLaterWritesAndAnEntryMayOverrideIt() {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store["before"] = 0
      store.defaultTimeToLive = .seconds(10)
      #expect(store.defaultTimeToLive == .seconds(10))
      store["default"] = 1
      store.addEntries(["merged": 2])
      store.setValue(3, forKey: "long", timeToLive: .seconds(100))
      _ = store.valueOrInsert(forKey: "created") { 4 }
      scheduler.advance(by: .seconds(10))
      #expect(store.allItems == ["before": 0, "long": 3])
      scheduler.advance(by: .seconds(90))
      #expect(store.allItems == ["before": 0])
    }

    @Test func timesOfCenturiesSaturateInsteadOfOverflowing() {
      // A time to live or an interval of centuries is "never", not an arithmetic trap: on the
      // store's clock and on the system scheduler alike.
      DispatchScheduler().schedule(after: .seconds(Int64.max)) {}
      let store = MemoryStore<String, Int>()
      store.setValue(1, forKey: "a", timeToLive: .seconds(Int64.max))
      store.notificationInterval = .seconds(Int64.max)
      store["b"] = 2
      #expect(store["a"] == 1)
      #expect(store.count == 2)
    }

    @Test func rewritingAnEntryRenewsItsTimeToLive() {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.defaultTimeToLive = .seconds(10)
      store["a"] = 1
      scheduler.advance(by: .seconds(8))
      store["a"] = 2
      scheduler.advance(by: .seconds(8))
      #expect(store["a"] == 2)
      scheduler.advance(by: .seconds(2))
      #expect(store["a"] == nil)
    }

    @Test func aTimeToLiveOfZeroOrLessExpiresAtOnce() {
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler())
      store.setValue(1, forKey: "a", timeToLive: .zero)
      store.setValue(2, forKey: "b", timeToLive: .seconds(-1))
      #expect(store["a"] == nil)
      #expect(store["b"] == nil)
      #expect(store.isEmpty)
    }

    @Test func getOrCreateTreatsAnExpiredEntryAsAbsent() {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.setValue(1, forKey: "a", timeToLive: .seconds(1))
      scheduler.advance(by: .seconds(1))
      #expect(store.valueOrInsert(forKey: "a") { 2 } == 2)
    }

    @Test func aSnapshotNeverHoldsAnExpiredEntry() throws {
      let directory = TemporaryDirectory()
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "gone", timeToLive: .seconds(1))
      store["kept"] = 2
      clock.move(by: .seconds(2))
      let manager = try PersistenceManager(
        store: store, fileURL: directory.url.appending(path: "s.snapshot"))
      #expect(try manager.save().entryCount == 1)
      let restored = MemoryStore<String, Int>()
      _ = try PersistenceManager(store: restored, fileURL: manager.fileURL).load()
      #expect(restored.allItems == ["kept": 2])
    }

    @Test func manyEntriesExpiringAtOnceAreAllRemovedBeforeTheNextRead() {
      let clock = HeldScheduler()
      let store = MemoryStore<Int, Int>(scheduler: clock)
      store.defaultTimeToLive = .seconds(1)
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<10_000).map { ($0, $0) }))
      store.setValue(-1, forKey: -1, timeToLive: .seconds(100))
      clock.move(by: .seconds(1))
      #expect(store.count == 1)
      #expect(store.statistics.evictions[.expired] == 10_000)
      #expect(store._policyMismatch() == nil)
    }

    @Test func expiryHoldsUnderConcurrentReaders() async {
      let clock = HeldScheduler()
      let store = MemoryStore<Int, Int>(scheduler: clock)
      let stale = Atomic<Int>(0)
      let returned = Atomic<Int>(0)
      let writerDone = Atomic<Bool>(false)
      let done: [Void]? = runOnThreads(4) { thread in
        var random = SplitMix64(seed: UInt64(thread) + 7)
        // A value returned was written less than its lifetime before the read began.
        func read(_ key: Int) {
          let now = clock.nanoseconds
          if let written = store[key] {
            returned.wrappingAdd(1, ordering: .relaxed)
            if now - written >= 1_000_000_000 { stale.wrappingAdd(1, ordering: .relaxed) }
          }
        }
        if thread == 0 {
          // The only writer also moves the clock, so a value's stamp is its write time.
          for step in 0..<6_000 {
            if step % 300 == 0 { clock.move(by: .milliseconds(300)) }
            store.setValue(clock.nanoseconds, forKey: random.below(500), timeToLive: .seconds(1))
          }
          writerDone.store(true, ordering: .releasing)
        } else {
          // Readers run as long as the writer does, however the threads are scheduled, then
          // read every key once: the writer's last value has not expired, since the clock
          // stopped with it, so at least that read returns a value.
          while !writerDone.load(ordering: .acquiring) { read(random.below(500)) }
          for key in 0..<500 { read(key) }
        }
      }
      #expect(done != nil)
      #expect(returned.load(ordering: .relaxed) > 0)
      #expect(stale.load(ordering: .relaxed) == 0)
      await store.flush()
      #expect(store._policyMismatch() == nil)
    }
  }
}

/// A scheduler whose clock moves only when told and which never runs its timers: the case of a
/// late timer, where only reads and writes can notice expiries.
final class HeldScheduler: StoreScheduler {
  private let offset = Atomic<Int64>(0)
  private let start = ContinuousClock.now

  var now: ContinuousClock.Instant { start + .nanoseconds(offset.load(ordering: .acquiring)) }

  /// Nanoseconds since the scheduler was created.
  var nanoseconds: Int { Int(offset.load(ordering: .acquiring)) }

  func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) {}

  func move(by duration: Duration) {
    let (seconds, attoseconds) = duration.components
    offset.wrappingAdd(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, ordering: .releasing)
  }
}
