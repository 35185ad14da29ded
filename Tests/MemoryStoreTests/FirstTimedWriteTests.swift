import MemoryStoreKit
import Synchronization
import Testing

/// The first write with a cost or a time to live into a store that had none copies nothing:
/// the entries written before keep their nodes (no cost, no deadline) until written again, and
/// the features that walk every entry (a limit's eviction order, a decider's purges) give them
/// metadata when they are set.
@Suite("First timed write") struct FirstTimedWriteTests {
  /// A store of plain entries, written before any policy.
  static func plainStore(_ count: Int, scheduler: some StoreScheduler = .dispatch)
    -> MemoryStore<Int, Int>
  {
    let store = MemoryStore<Int, Int>(scheduler: scheduler)
    store.addEntries(Dictionary(uniqueKeysWithValues: (0..<count).map { ($0, $0) }))
    return store
  }

  @Test func theFirstWriteWithATimeToLiveOrACostReplacesNoOtherEntry() {
    for timed in [true, false] {
      let store = Self.plainStore(20_000)
      if timed {
        store.setValue(-1, forKey: -1, timeToLive: .seconds(60))
      } else {
        store.setValue(-1, forKey: -1, cost: 5)
      }
      // The write copied none of the entries present.
      #expect(store._entriesWithoutMetadata == 20_000)
      #expect(store.count == 20_001)
      #expect(store[7] == 7)
      #expect(store._policyMismatch() == nil)
      store._checkInvariants()
    }
  }

  @Test func entriesWrittenBeforeThePolicyLiveBesideTimedOnes() {
    let clock = ManualScheduler()
    let store = Self.plainStore(1_000, scheduler: clock)
    store.setValue(-1, forKey: -1, cost: 3, timeToLive: .seconds(10))
    // Rewritten, touched, removed, read: each as any entry.
    store[1] = 100
    #expect(store.touch(2, timeToLive: .seconds(5)))
    store[3] = nil
    #expect(store[4] == 4)
    #expect(store.statistics.totalCost == 3)
    #expect(store._policyMismatch() == nil)
    clock.advance(by: .seconds(6))
    #expect(store[2] == nil)  // its touch gave it a deadline
    #expect(store[5] == 5)  // never given one
    clock.advance(by: .seconds(5))
    #expect(store[-1] == nil)
    #expect(store.count == 998)
    #expect(store.statistics.totalCost == 0)
    #expect(store._policyMismatch() == nil)
    store._checkInvariants()
  }

  @Test func aFirstLimitEvictsEntriesWrittenBeforeThePolicy() {
    let store = Self.plainStore(1_000)
    store.setValue(-1, forKey: -1, timeToLive: .seconds(60))
    #expect(store._entriesWithoutMetadata == 1_000)
    store.countLimit = 100
    #expect(store._entriesWithoutMetadata == 0)
    #expect(store.count == 100)
    #expect(store.statistics.evictions[.countLimit] == 901)
    #expect(store._policyMismatch() == nil)
    store._checkInvariants()
    for key in 1_000..<1_200 { store[key] = key }
    #expect(store.count == 100)
    store._checkInvariants()
  }

  @Test func aDeciderJudgesEntriesWrittenBeforeThePolicy() {
    let store = Self.plainStore(1_000)
    store.setValue(-2, forKey: -2, cost: 1)
    store.evictionDecider = { _, value, _ in value < 0 || value % 2 == 1 }
    let purged = store.purgeEvictableItems()
    #expect(purged.count == 501)
    #expect(store.count == 500)
    #expect(store._policyMismatch() == nil)
    store._checkInvariants()
  }
}

/// A first default time to live set while another thread writes: the writes that follow it
/// get deadlines from the clock, none earlier than a write made after the setting, and the
/// policy's bookkeeping stays exact through the switch from writes that need no clock to writes
/// that read it (decided under the write lock).
@Suite("Write time under the lock") struct WriteTimeUnderTheLockTests {
  @Test func writesRacingTheFirstDefaultTimeToLiveGetDeadlinesFromTheClock() {
    for round in 0..<20 {
      let store = MemoryStore<Int, Int>()
      let keys = 512
      let isSet = Atomic<Bool>(false)
      let done: [Void]? = runOnThreads(2) { thread in
        if thread == 0 {
          // Writes before, across and after the setting, then every key once more after it.
          var step = 0
          while !isSet.load(ordering: .acquiring) {
            store[step % keys] = step
            step += 1
          }
          for key in 0..<keys { store[key] = -key }
        } else {
          // A little later each round, so that the setting falls among the writes.
          var spin = 0
          for _ in 0..<(round * 2_000) { spin &+= 1 }
          store.defaultTimeToLive = .seconds(3_600)
          // A write after the setting: its deadline is the earliest any later write may get.
          store[-1] = spin
          isSet.store(true, ordering: .releasing)
        }
      }
      #expect(done != nil)
      #expect(store.count == keys + 1)
      for key in 0..<keys {
        // Written after the sentinel, each key expires no earlier than it.
        let left = store.terms(forKey: key)?.timeToLive
        let sentinelLeft = store.terms(forKey: -1)?.timeToLive
        #expect(
          left != nil && sentinelLeft != nil && left! >= sentinelLeft!,
          "\(key): \(String(describing: left)), the sentinel \(String(describing: sentinelLeft))")
      }
      #expect(store._policyMismatch() == nil)
      store._checkInvariants()
    }
  }
}
