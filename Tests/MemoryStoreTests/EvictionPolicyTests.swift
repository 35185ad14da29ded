import Testing

@_spi(Testing) @testable import MemoryStoreKit

/// The eviction policy's rules on small traces with known answers: entries leave in the order
/// they came unless read since the hand last passed them, a key evicted and written again
/// starts a whole pass away, a loop over more keys than the store holds keeps most of the
/// store, and the record of evicted keys behaves as a first-in, first-out multiset.
@Suite("Eviction: policy rules") struct EvictionPolicyTests {
  /// Writes new keys from `next` one at a time until `key` is gone; returns how many.
  private func writesUntilEvicted(
    _ key: Int, from next: inout Int, in store: MemoryStore<Int, Int>, atMost limit: Int
  ) -> Int? {
    for written in 1...limit {
      store[next] = next
      next += 1
      // `allItems` notes no read, so looking does not change the order.
      if store.allItems[key] == nil { return written }
    }
    return nil
  }

  @Test func unreadEntriesLeaveInTheOrderTheyCameAndReadOnesGetAnotherPass() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 10
    for key in 0..<10 { store[key] = key }
    _ = store[3]
    _ = store[7]
    // The hand starts at the oldest entry: 0, 1, 2 go, 3 was read (its counter is lowered
    // and it stays where it is), then 4, 5, 6, then 8 and 9 past the read 7, then the new
    // keys in the order they came.
    var evicted: [Int] = []
    for key in 100..<112 {
      let before = Set(store.allItems.keys)
      store[key] = key
      evicted += before.subtracting(store.allItems.keys).sorted()
    }
    #expect(evicted == [0, 1, 2, 4, 5, 6, 8, 9, 100, 101, 102, 103])
    // 3 and 7 were passed once: unread since, they go when the hand next reaches them.
    #expect(store.allItems.keys.sorted() == [3, 7] + Array(104..<112))
    #expect(store._policyMismatch() == nil)
  }

  @Test func aKeyEvictedRecentlyStartsAWholePassAway() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 100
    for key in 0..<100 { store[key] = key }
    // 2 new keys evict 0 and 1: the hand is now at 2. (Only two keys are evicted, so that the
    // record of evicted keys, two slots to a bucket, cannot have dropped 1 for a third key of
    // its bucket: with more, whether it did depends on the process's hash seed.)
    for key in 1_000..<1_002 { store[key] = key }
    // 1 was evicted within the last cache-ful: written again, it starts just behind the hand,
    // a whole pass away. A key never seen starts at the newest end, which the hand reaches
    // once it has passed the 99 entries before it.
    store[1] = 1
    store[3_000] = 3_000
    var next = 4_000
    let freshLifetime = writesUntilEvicted(3_000, from: &next, in: store, atMost: 200)
    #expect(freshLifetime == 99, "lived \(String(describing: freshLifetime)) writes")
    #expect(store.allItems[1] == 1)
    // New keys keep coming at the newest end, ahead of the hand, which evicts them as it
    // reaches them and does not come round to 1 while they do.
    let returningLifetime = writesUntilEvicted(1, from: &next, in: store, atMost: 200)
    #expect(returningLifetime == nil, "lived \(String(describing: returningLifetime)) more writes")
    #expect(store.count == 100)
    #expect(store._policyMismatch() == nil)
  }

  @Test func aLoopOverMoreKeysThanTheStoreHoldsKeepsMostOfTheStore() {
    // Any order that keeps the newest keys (LRU, FIFO) misses every access of such a loop.
    // One key in 16 (by hash) is watched: once most of them come back after being evicted,
    // new keys start at the hand and one position churns. 1 200 keys give about 75 watched
    // ones, whatever the process's hash seed.
    let store = MemoryStore<Int, Int>()
    store.countLimit = 1_000
    var hits = 0
    for round in 0..<40 {
      for key in 0..<1_200 {
        if store[key] != nil {
          if round >= 30 { hits += 1 }
        } else {
          store[key] = key
        }
      }
    }
    // At best 999 of 1 200 per round (83 %).
    #expect(hits > 10 * 1_200 * 7 / 10, "\(hits) hits in the last 10 rounds")
    #expect(store._policyMismatch() == nil)
  }

  @Test func keysThatComeBackInNoParticularOrderAreNotTakenForALoop() {
    // A working set a little larger than the store that drifts: evicted keys come back often,
    // as in a loop, but in any order. Starting new keys at the hand would freeze the store on
    // keys the set has left; the order in which keys come back tells the two apart.
    let store = MemoryStore<Int, Int>()
    store.countLimit = 1_000
    var random = SplitMix64(seed: 7)
    var hits = 0
    let accesses = 200_000
    for step in 0..<accesses {
      let key = step / 100 + random.below(1_200)
      if store[key] != nil {
        if step >= accesses / 2 { hits += 1 }
      } else {
        store[key] = key
      }
    }
    // The store hits about 82 % of the second half's accesses; frozen by the loop rule, 18 %.
    #expect(hits > accesses / 2 * 70 / 100, "\(hits) hits in the second half")
    #expect(store._policyMismatch() == nil)
  }

  @Test func theOrderHoldsEveryEntryOnceThroughEveryKindOfWrite() {
    // Every write that adds, moves or removes entries, at random, with the limits changing:
    // after each, the eviction order holds every entry once (and the totals, the heap and
    // the limits hold; see `_policyMismatch`).
    let clock = ManualScheduler()
    let store = MemoryStore<Int, Int>(name: "order", scheduler: clock) { key, _, _ in
      key % 5 == 0
    }
    store.evictionInterval = .zero
    store.countLimit = 200
    var random = SplitMix64(seed: 21)
    for step in 0..<12_000 {
      let key = random.below(step < 8_000 ? 1_000 : 150)
      switch random.below(100) {
      case 0..<40: store[key] = step
      case 40..<50:
        store.setValue(
          step, forKey: key, cost: random.below(30),
          timeToLive: random.below(2) == 0 ? nil : .seconds(Int64(random.below(5) + 1)))
      case 50..<62: store[key] = nil
      case 62..<70: _ = store[key]
      case 70..<75:
        store.addEntries(Dictionary((0..<6).map { ($0 * 37 + key, step) }, uniquingKeysWith: max))
      case 75..<78: store.removeValues(forKeys: (0..<4).map { $0 * 11 + key })
      case 78..<81: _ = store.touch(key, timeToLive: .seconds(3))
      case 81..<84: clock.advance(by: .seconds(1))
      case 84: _ = store.purgeEvictableItems()
      case 85: store.handleMemoryPressure(.warning)
      case 86: if random.below(20) == 0 { store.removeAll() }
      case 87:
        store.countLimit = [nil, 50, 200, 600][random.below(4)]
      case 88:
        store.costLimit = [nil, 300, 2_000][random.below(3)]
      default: _ = store.valueOrInsert(forKey: key) { step }
      }
      if let mismatch = store._policyMismatch() {
        Issue.record("step \(step): \(mismatch)")
        break
      }
    }
    store._checkInvariants()
  }

  @Test func aStoreWithoutLimitsKeepsNoOrderUntilItsFirstLimit() {
    // A time to live makes entries carry metadata, but only a limit evicts by the order: the
    // first limit puts the entries there, oldest (by position) first.
    let store = MemoryStore<Int, Int>()
    store.defaultTimeToLive = .seconds(3_600)
    for key in 0..<100 { store[key] = key }
    store.removeValues(forKeys: Array(stride(from: 0, to: 100, by: 3)))
    #expect(store._policyMismatch() == nil)
    store.countLimit = 50
    #expect(store.count == 50)
    #expect(store._policyMismatch() == nil)
    for key in 1_000..<1_100 { store[key] = key }
    #expect(store.count == 50)
    #expect(store._policyMismatch() == nil)
    // Without the limit, the order is still kept (entries come and go in it).
    store.countLimit = nil
    for key in 2_000..<2_030 { store[key] = key }
    store.removeValues(forKeys: Array(1_000..<1_100))
    #expect(store._policyMismatch() == nil)
  }

  @Test func everyWriteKeepsItsOwnEntryWhileTheTableGrows() {
    // Growth copies nodes while writes evict: the entry a write sets must survive that write
    // whichever copy of it the table holds.
    for limit in [30, 100, 700] {
      let store = MemoryStore<Int, Int>()
      store.countLimit = limit
      for key in 0..<(limit * 20) {
        store[key] = key
        #expect(store[key] == key, "limit \(limit), key \(key)")
      }
      #expect(store.count == limit)
      #expect(store._policyMismatch() == nil)
    }
  }

  @Test func expiringEntriesKeepTheirPlacesInTheHeapAndTheOrderThroughHoleFilling() {
    // Evictions and expiries leave holes in the ring, which later writes fill with its last
    // entries: their deadlines and places in the eviction order follow them.
    let clock = ManualScheduler()
    let store = MemoryStore<Int, Int>(scheduler: clock)
    store.countLimit = 50
    for key in 0..<400 {
      store.setValue(
        key, forKey: key, timeToLive: key % 3 == 0 ? nil : .seconds(Int64(key % 7 + 1)))
      #expect(store._policyMismatch() == nil)
    }
    clock.advance(by: .seconds(8))
    #expect(store.allItems.keys.allSatisfy { $0 % 3 == 0 })
    #expect(store._policyMismatch() == nil)
  }

  @Test func onlyTheLimitsRecordEvictedKeysAndMemoryPressureFreesTheRecord() {
    let store = MemoryStore<Int, Int>(name: "record")
    store.countLimit = 100
    for key in 0..<150 { store[key] = key }
    #expect(store._rememberedEvictions.count == 50)
    #expect(store._rememberedEvictions.capacity == 125)
    store.handleMemoryPressure(.warning)
    #expect(store.count == 50)
    // The trim's 50 evictions are not remembered, and the record's memory is gone.
    #expect(store._rememberedEvictions == (0, 0))
    for key in 1_000..<1_070 { store[key] = key }
    #expect(store._rememberedEvictions.count == 20)
  }

  @Test func evictedKeysAreRememberedTwoPerBucketNewestFirstWithinWindows() {
    var ghosts = _GhostKeys()
    ghosts.ensureCapacity(32)
    #expect(ghosts.capacity == 32)
    // 1.25 slots per fingerprint of capacity: 21 buckets of two. A fingerprint's bucket is
    // its fraction of the bucket count.
    #expect(ghosts.bucketCount == 21)
    #expect([0, 1 << 31, UInt32.max].map(ghosts.bucket) == [0, 20, 40])
    // A model: per bucket, the insertion numbers of its fingerprints, at most two, the newest
    // kept (a fingerprint already there is renumbered in place).
    var model: [Int: [(fingerprint: UInt32, number: Int)]] = [:]
    var random = SplitMix64(seed: 7)
    let candidates = (0..<90).map { UInt32($0) &* 47_721_859 | 1 }
    for number in 0..<5_000 {
      let fingerprint = candidates[random.below(candidates.count)]
      ghosts.insert(fingerprint)
      let bucket = ghosts.bucket(fingerprint)
      var slots = model[bucket, default: []]
      if let index = slots.firstIndex(where: { $0.fingerprint == fingerprint }) {
        slots[index].number = number
      } else if slots.count < 2 {
        slots.append((fingerprint, number))
      } else {
        let older = slots[0].number < slots[1].number ? 0 : 1
        slots[older] = (fingerprint, number)
      }
      model[bucket] = slots
      for candidate in candidates {
        let numbers = model[ghosts.bucket(candidate), default: []]
          .filter { $0.fingerprint == candidate }.map(\.number)
        for window in [1, 7, 32] {
          let expected = numbers.contains { number + 1 - $0 <= window }
          #expect(ghosts.contains(candidate, within: window) == expected)
        }
      }
    }
    #expect(ghosts.rememberedCount > 0)
    // Growing forgets, and at least doubles.
    ghosts.ensureCapacity(40)
    #expect(ghosts.capacity == 64)
    #expect(candidates.allSatisfy { !ghosts.contains($0, within: ghosts.capacity) })
  }
}
