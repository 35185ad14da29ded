import Testing

@_spi(Testing) @testable import MemoryStoreKit

/// The eviction policy's rules on small traces with known answers: a new key written into a
/// full store gets a short trial, a key evicted and written again is kept a whole turn, and
/// the record of evicted keys behaves as a first-in, first-out multiset.
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

  @Test func aNewKeyInAFullStoreGetsAShortTrialAndAReturningKeyAWholeTurn() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 100
    for key in 0..<100 { store[key] = key }
    var next = 1_000
    // A key never seen before, written into the full store, sits a twentieth of the ring
    // (5 positions) ahead of the hand: unread, it goes within a few writes.
    let fresh = next
    next += 1
    store[fresh] = fresh
    let freshLifetime = writesUntilEvicted(fresh, from: &next, in: store, atMost: 100)
    #expect(
      freshLifetime != nil && freshLifetime! <= 10,
      "lived \(String(describing: freshLifetime)) writes")
    // Written again while its eviction is remembered, it takes the place behind the hand and
    // outlives dozens of new keys.
    store[fresh] = fresh
    let returningLifetime = writesUntilEvicted(fresh, from: &next, in: store, atMost: 100)
    #expect(
      returningLifetime == nil || returningLifetime! >= 50,
      "lived \(String(describing: returningLifetime)) writes")
    #expect(store.count == 100)
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

  @Test func aKeyReadDuringItsTrialStays() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 100
    for key in 0..<100 { store[key] = key }
    store[500] = 500
    #expect(store[500] == 500)  // Read once during its trial.
    for key in 1_000..<1_010 { store[key] = key }
    #expect(store.allItems[500] == 500)
    #expect(store._policyMismatch() == nil)
  }

  @Test func trialsKeepExpiringEntriesInTheHeap() {
    // Moving an entry to its trial position swaps it with another; both deadlines follow.
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
    #expect(store._rememberedEvictions.capacity == 250)
    store.handleMemoryPressure(.warning)
    #expect(store.count == 50)
    // The trim's 50 evictions are not remembered, and the record's memory is gone.
    #expect(store._rememberedEvictions == (0, 0))
    for key in 1_000..<1_070 { store[key] = key }
    #expect(store._rememberedEvictions.count == 20)
  }

  @Test func evictedKeysAreRememberedFirstInFirstOutWithRepeats() {
    var ghosts = _GhostKeys()
    ghosts.ensureCapacity(20)
    #expect(ghosts.capacity == 20)
    // A fingerprint's home is its fraction of the set's 40 slots.
    #expect([0, 1 << 31, UInt32.max].map(ghosts.home) == [0, 20, 39])
    var reference: [UInt32] = []
    var random = SplitMix64(seed: 7)
    for _ in 0..<5_000 {
      // Few distinct fingerprints, so that repeats and long probe chains occur; half of them
      // home at the last slot, so that chains wrap round the end of the set.
      let pick = UInt32(random.below(60))
      let fingerprint = pick < 30 ? pick * 2 + 1 : UInt32.max - (pick - 30) * 2
      ghosts.insert(fingerprint)
      reference.append(fingerprint)
      if reference.count > 20 { reference.removeFirst() }
      for candidate in (0..<30).map({ UInt32($0) * 2 + 1 })
        + (0..<30).map({ UInt32.max - UInt32($0) * 2 })
      {
        #expect(ghosts.contains(candidate) == reference.contains(candidate))
      }
      #expect(ghosts.occupiedCount == reference.count)
    }
    // Growing forgets, and at least doubles.
    ghosts.ensureCapacity(30)
    #expect(ghosts.capacity == 40)
    #expect(!ghosts.contains(reference[0]))
  }
}
