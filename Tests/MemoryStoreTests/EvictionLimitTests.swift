import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// Count and cost limits, eviction order, memory pressure and statistics.
  @Suite("Eviction: limits, memory pressure and statistics") struct EvictionLimits {
    @Test func aCountLimitIsNeverExceededWhenAWriteReturns() {
      let store = MemoryStore<Int, Int>()
      store.countLimit = 100
      for key in 0..<1_000 {
        store[key] = key
        #expect(store.count <= 100)
      }
      #expect(store.count == 100)
      #expect(store.statistics.evictions[.countLimit] == 900)
      // The write that goes over the limit never evicts the entry it writes.
      #expect(store[999] == 999)
    }

    @Test func limitsAreNeverExceededWhenAWriteReturnsOnEightThreads() {
      // Every write ends by evicting to the limits before it publishes, whichever thread
      // makes it: no thread ever sees a count or a total cost over the limits.
      let store = MemoryStore<Int, Int>()
      store.countLimit = 200
      store.costLimit = 1_500
      let results: [Int]? = runOnThreads(8) { thread in
        var random = SplitMix64(seed: UInt64(thread) &+ 77)
        var violations = 0
        for step in 0..<3_000 {
          let key = thread * 1_000_000 + step
          store.setValue(step, forKey: key, cost: random.below(15))
          if store.count > 200 { violations += 1 }
          let statistics = store.statistics
          if statistics.count > 200 || statistics.totalCost > 1_500 { violations += 1 }
          // Reads are uses: they move entries between the policy's lists.
          if step % 7 == 0 { _ = store[thread * 1_000_000 + random.below(step + 1)] }
        }
        return violations
      }
      #expect(results == Array(repeating: 0, count: 8))
      #expect(store.statistics.evictions[.countLimit] + store.statistics.evictions[.costLimit] > 0)
      #expect(store._policyMismatch() == nil)
      store._checkInvariants()
    }

    @Test func rewritingAKeyPresentKeepsItsPlaceAndAccountsForItsCost() {
      // A new value for a key present, in a store that times nothing, skips the transaction's
      // beginning and end: the count, the total cost and the order must come out as through
      // one, with or without a cost limit, whether the cost changes or not.
      for hasCostLimit in [false, true] {
        let store = MemoryStore<Int, Int>()
        store.countLimit = 10
        if hasCostLimit { store.costLimit = 1_000 }
        for key in 0..<10 { store.setValue(key, forKey: key, cost: 5) }
        for _ in 0..<3 { _ = store[3] }
        #expect(store.setValue(30, forKey: 3, cost: 5) == 3)  // The same cost.
        #expect(store.setValue(31, forKey: 3, cost: 9) == 30)  // Another cost.
        store[4] = 40  // No cost given: 0.
        #expect(store.statistics.totalCost == 5 * 8 + 9)
        #expect(store.count == 10)
        #expect(store.statistics.evictions.total == 0)
        #expect(store[3] == 31 && store[4] == 40)
        #expect(store._policyMismatch() == nil)
        store._checkInvariants()
        // The key read and rewritten keeps its place: it outlives twenty keys written once.
        for key in 100..<120 { store[key] = key }
        #expect(store[3] == 31, "cost limit \(hasCostLimit)")
        #expect(store.count == 10)
        #expect(store._policyMismatch() == nil)
        store._checkInvariants()
      }
    }

    @Test func entriesReadSurviveTheUnreadGo() {
      let store = MemoryStore<Int, Int>()
      store.countLimit = 4
      let k = Array(0..<6)
      for key in k[0..<4] { store[key] = key }
      // Reads raise k0 and k2; k1 and k3 are unread since they were written.
      _ = store[k[0]]
      _ = store[k[2]]
      store[k[4]] = 4
      store[k[5]] = 5
      let kept = Set(store.allItems.keys)
      #expect(kept.isSuperset(of: [k[0], k[2], k[5]]) && kept.count == 4, "\(kept)")
      #expect(store.statistics.evictions[.countLimit] == 2)
      #expect(store._policyMismatch() == nil)
    }

    @Test func aKeyReadOftenOutlivesAScanOfColdKeys() {
      // Strict LRU would drop the hot key after `limit` cold insertions; its uses keep it
      // against keys used once.
      let store = MemoryStore<Int, Int>()
      store.countLimit = 8
      let k = Array(0..<13)
      store[k[0]] = 0
      for _ in 0..<3 { _ = store[k[0]] }
      for key in k[1...] { store[key] = key }
      #expect(store[k[0]] == 0)
      #expect(store.count == 8)
    }

    @Test func entriesWrittenBeforeTheFirstLimitAreEvictedAndExpireLikeTheRest() {
      // A store with a time to live keeps no hash in its entries; the first limit starts
      // keeping them, and must still evict and expire the entries written before.
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.defaultTimeToLive = .seconds(10)
      for index in 0..<1_000 { store["old-\(index)"] = index }
      store.countLimit = 100
      #expect(store.count == 100)
      #expect(store._policyMismatch() == nil)
      // New keys used twice, more than any old entry: they displace the old entries.
      for index in 0..<300 {
        store["new-\(index)"] = index
        for _ in 0..<2 { _ = store["new-\(index)"] }
      }
      #expect(store.count == 100)
      #expect(store.keys.allSatisfy { $0.hasPrefix("new-") }, "the old entries went first")
      #expect(store._policyMismatch() == nil)
      clock.move(by: .seconds(10))
      #expect(store.isEmpty)
      #expect(store._policyMismatch() == nil)
    }

    @Test func loweringTheLimitEvictsAtOnce() {
      let store = MemoryStore<Int, Int>()
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<5_000).map { ($0, $0) }))
      #expect(store.countLimit == nil)
      store.countLimit = 10
      #expect(store.count == 10)
      #expect(store.countLimit == 10)
      store.countLimit = nil
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<50).map { ($0, $0) }))
      #expect(store.count >= 50)
    }

    @Test func aCostLimitEvictsUntilTheTotalFits() {
      let store = MemoryStore<String, Int>()
      store.costLimit = 100
      store.setValue(1, forKey: "a", cost: 40)
      store.setValue(2, forKey: "b", cost: 40)
      #expect(store.statistics.totalCost == 80)
      store.setValue(3, forKey: "c", cost: 30)
      #expect(store.statistics.totalCost <= 100)
      #expect(store["c"] == 3)
      #expect(store.count == 2)
      #expect(store.statistics.evictions[.costLimit] == 1)
      // Replacing an entry replaces its cost.
      store.setValue(4, forKey: "c", cost: 10)
      #expect(store.statistics.totalCost == 50)
      // An entry that alone exceeds the limit is evicted by its own write, and only it.
      store.setValue(5, forKey: "huge", cost: 500)
      #expect(store["huge"] == nil)
      #expect(store.statistics.totalCost == 50)
      #expect(store.count == 2)
      #expect(store.statistics.evictions[.costLimit] == 2)
      store._checkInvariants()
    }

    @Test func anEntryTooCostlyForTheLimitReplacesNothingAndIsReportedEvicted() async {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.costLimit = 10
      store.setValue(1, forKey: "kept", cost: 5)
      store.notificationInterval = .seconds(1)
      let collector = BatchCollector<String, Int>()
      let subscription = store.observe { collector.append($0) }
      // Replacing a present key with a value too costly for the limit removes the key.
      store.setValue(2, forKey: "kept", cost: 11)
      await store.flush()
      #expect(store["kept"] == nil)
      #expect(collector.batches.last?.removed == ["kept"])
      #expect(collector.batches.last?.reason(forKey: "kept") == .evictedByCostLimit)
      subscription.cancel()
    }

    @Test func entriesOfCostZeroAreNeverEvictedForTheCostLimit() {
      let store = MemoryStore<Int, Int>()
      store.costLimit = 10
      for key in 0..<1_000 { store[key] = key }  // cost 0
      for key in 1_000..<1_100 { store.setValue(key, forKey: key, cost: 3) }
      // Every costed write after the third went over the limit and evicted a costed entry,
      // however many free entries the order passed over.
      #expect((0..<1_000).allSatisfy { store[$0] == $0 })
      #expect(store.statistics.totalCost <= 10)
      #expect(store.count == 1_003)
      #expect(store.statistics.evictions[.costLimit] == 97)
      store._checkInvariants()
    }

    @Test func limitsHoldUnderConcurrentWriters() async {
      let store = MemoryStore<Int, Int>()
      store.countLimit = 500
      store.costLimit = 4_000
      let done: [Void]? = runOnThreads(8) { thread in
        var random = SplitMix64(seed: UInt64(thread) + 1)
        for step in 0..<5_000 {
          let key = random.below(4_000)
          switch step % 5 {
          case 0: store.setValue(step, forKey: key, cost: random.below(20))
          case 1: _ = store[key]
          case 2: store.removeValue(forKey: key)
          case 3: store.addEntries([key: step, key + 1: step])
          default: store[key] = step
          }
        }
      }
      #expect(done != nil)
      await store.flush()
      let stats = store.statistics
      #expect(store.count <= 500)
      #expect(stats.count == store.count)
      #expect(stats.totalCost <= 4_000)
      #expect(stats.evictions[.countLimit] + stats.evictions[.costLimit] > 0)
      #expect(store._policyMismatch() == nil)
      store._checkInvariants()
    }

    @Test func limitEvictionsAppearInChangeBatchesWithTheirReason() async throws {
      let observed = ObservedStore<Int, Int>()
      observed.store.countLimit = 2
      observed.store[1] = 1
      observed.store[2] = 2
      await observed.store.flush()
      observed.store[3] = 3
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].updated == [3: 3])
      #expect(batches[1].removed == [1])
      #expect(batches[1].reason(forKey: 1) == .evictedByCountLimit)
      #expect(batches[1].reason(forKey: 3) == .write)
    }

    @Test func aWarningTrimsALimitedStoreToHalfItsLimit() {
      let store = MemoryStore<Int, Int>()
      store.countLimit = 100
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<100).map { ($0, $0) }))
      store.handleMemoryPressure(.warning)
      #expect(store.count == 50)
      #expect(store.statistics.evictions[.memoryPressure] == 50)
      store.memoryPressurePolicy = MemoryPressurePolicy(warningFraction: 0.2)
      store.handleMemoryPressure(.warning)
      #expect(store.count == 20)
      store.handleMemoryPressure(.critical)
      #expect(store.isEmpty)
    }

    @Test func aCriticalEventEmptiesAnUnlimitedStoreOnlyIfThePolicySaysSo() async throws {
      let observed = ObservedStore<Int, Int>()
      let store = observed.store
      store.addEntries([1: 1, 2: 2])
      await store.flush()
      store.handleMemoryPressure(.critical)
      #expect(store.count == 2)
      store.memoryPressurePolicy = MemoryPressurePolicy(removesAllOnCritical: true)
      store.handleMemoryPressure(.critical)
      #expect(store.isEmpty)
      #expect(store.statistics.evictions[.memoryPressure] == 2)
      let batches = await observed.flushedBatches()
      #expect(batches.last?.removed == [1, 2])
      #expect(batches.last?.reason(forKey: 1) == .evictedByMemoryPressure)
    }

    @Test func memoryPressureRunsTheDeciderWithItsLevel() {
      let levels = Locked<[MemoryPressureLevel]>([])
      let store = MemoryStore<Int, Int>(scheduler: ManualScheduler()) { _, value, context in
        if case .memoryPressure(let level) = context.trigger {
          levels.withLock { $0.append(level) }
        }
        return value > 1
      }
      store.addEntries([1: 1, 2: 2])
      store.handleMemoryPressure(.critical)
      #expect(levels.value == [.critical, .critical])
      #expect(store.allItems == [1: 1])
      #expect(store.statistics.evictions[.decider] == 1)
    }

    @Test func statisticsCountHitsAndMissesOfEveryLookup() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      _ = store["a"]
      _ = store["a"]
      _ = store["zz"]
      _ = store.values(forKeys: ["a", "b"])
      _ = store.valueOrInsert(forKey: "c") { 3 }
      _ = store.valueOrInsert(forKey: "c") { 4 }
      let stats = store.statistics
      #expect(stats.hits == 4)
      #expect(stats.misses == 3)
      #expect(abs(stats.hitRate - 4.0 / 7.0) < 1e-9)
      #expect(stats.count == 2)
      #expect(stats.evictions.total == 0)
      #expect(MemoryStore<Int, Int>().statistics.hitRate == 0)
    }

    @Test func hitsFromManyThreadsAreAllCounted() {
      let store = MemoryStore<Int, Int>()
      store[1] = 1
      let done: [Void]? = runOnThreads(6) { _ in
        for _ in 0..<10_000 {
          _ = store[1]
          _ = store[2]
        }
      }
      #expect(done != nil)
      #expect(store.statistics.hits == 60_000)
      #expect(store.statistics.misses == 60_000)
    }
  }
}

extension StoreContractTests {
  /// Evictions and expiries keep every other guarantee: batches rebuild the store, and the
  /// writes racing a parked reader enforce the same limits.
  @Suite("Eviction: with batches and parked readers") struct EvictionInvariants {
    @Test(arguments: [false, true])
    func aMirrorBuiltFromBatchesEqualsTheStoreThroughEvictionsAndExpiries(parked: Bool) async {
      let scheduler = ManualScheduler()
      let store = MemoryStore<Int, Int>(scheduler: scheduler) { key, _, _ in key % 7 == 0 }
      store.notificationInterval = .milliseconds(100)
      store.countLimit = 40
      store.costLimit = 300
      let collector = BatchCollector<Int, Int>()
      let subscription = store.observe { collector.append($0) }
      var random = SplitMix64(seed: parked ? 11 : 12)
      func step(_ index: Int) {
        let key = random.below(120)
        switch index % 9 {
        case 0: store.setValue(index, forKey: key, timeToLive: .milliseconds(random.below(400) + 1))
        case 1: store.setValue(index, forKey: key, cost: random.below(30))
        case 2: store.removeValue(forKey: key)
        case 3: store.addEntries([key: index, key + 1: index])
        case 4: _ = store[key]
        case 5: if index % 45 == 5 { store.purgeEvictableItems() }
        case 6: if index % 90 == 6 { store.handleMemoryPressure(.warning) }
        case 7: scheduler.advance(by: .milliseconds(random.below(60)))
        default: store[key] = index
        }
      }
      for index in 0..<1_500 {
        if parked && index % 50 == 0 {
          store._withReaderParked { for inner in 0..<20 { step(index + inner) } }
        } else {
          step(index)
        }
      }
      await store.flush()
      await store.flush()
      var mirror: [Int: Int] = [:]
      for batch in collector.batches { batch.apply(to: &mirror) }
      #expect(collector.isContiguous)
      #expect(mirror == store.allItems)
      #expect(store.count <= 40)
      #expect(store.statistics.totalCost <= 300)
      #expect(store._policyMismatch() == nil)
      store._checkInvariants()
      let reasons = Set(
        collector.batches.flatMap { batch in batch.removed.compactMap { batch.reason(forKey: $0) } }
      )
      #expect(reasons.contains(.expired))
      #expect(reasons.contains(.evictedByCountLimit) || reasons.contains(.evictedByCostLimit))
      subscription.cancel()
    }
  }
}
