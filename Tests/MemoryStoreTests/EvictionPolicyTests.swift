import Testing

@testable import MemoryStoreKit

/// The eviction policy's rules on small traces with known answers: admission by frequency,
/// promotion to protected, the window's adaptation, loops, and the frequency sketch.
@Suite("Eviction: policy rules") struct EvictionPolicyTests {
  /// Replays `accesses` keys that `key` draws (a miss writes the key, as a cache does) and
  /// returns how many of the second half's accesses hit.
  private func secondHalfHits(
    _ store: MemoryStore<Int, Int>, accesses: Int, seed: UInt64,
    _ key: (Int, inout SplitMix64) -> Int
  ) -> Int {
    var random = SplitMix64(seed: seed)
    var hits = 0
    for step in 0..<accesses {
      let key = key(step, &random)
      if store[key] != nil {
        if step >= accesses / 2 { hits += 1 }
      } else {
        store[key] = key
      }
    }
    return hits
  }

  @Test func aKeyUsedOnceNeverPushesOutKeysUsedOften() {
    // Admission: a new key leaves the window as a candidate, and stays only if its key was
    // used more lately than probation's oldest entry. Strict LRU would keep none of the
    // frequent keys after a scan as long as the store.
    let store = MemoryStore<Int, Int>()
    store.countLimit = 100
    for round in 0..<4 {
      for key in 0..<100 {
        if store[key] == nil { store[key] = key }
        if round == 0 { _ = store[key] }
      }
    }
    // Keys used once, three times as many as the store holds.
    for key in 1_000..<1_300 { store[key] = key }
    let kept = (0..<100).filter { store.allItems[$0] != nil }.count
    #expect(kept >= 90, "\(kept) of the frequent keys kept")
    #expect(store[1_299] == 1_299)
    #expect(store.count == 100)
    #expect(store._policyMismatch() == nil)
  }

  @Test func aKeyUsedMoreThanTheVictimIsAdmitted() {
    // A key used often, though new to the store, replaces probation's oldest entry once it
    // leaves the window: its uses were counted while it was absent.
    let store = MemoryStore<Int, Int>()
    store.countLimit = 50
    for key in 0..<50 { store[key] = key }
    for key in 100..<150 { store[key] = key }  // the first keys leave; these are used once
    // Key 7 was evicted; it comes back four times (each a miss and a write), then more keys.
    for _ in 0..<4 {
      store[7] = nil
      store[7] = 7
    }
    for key in 200..<210 { store[key] = key }
    #expect(store.allItems[7] == 7)
    #expect(store._estimatedUses(of: 7) >= 4)
    #expect(store._policyMismatch() == nil)
  }

  @Test func entriesReadInProbationMoveToProtected() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 100
    for key in 0..<200 { store[key] = key }
    #expect(store._evictionOrderState.protected == 0)
    // Every entry outside the window is read: the next evictions move them to protected,
    // up to 80 % of the entries outside the window.
    for key in store.allItems.keys { _ = store[key] }
    for key in 1_000..<1_010 { store[key] = key }
    let state = store._evictionOrderState
    #expect(state.protected > 70 && state.protected <= 80, "\(state)")
    #expect(state.window + state.probation + state.protected == 100)
    #expect(store._policyMismatch() == nil)
  }

  @Test func withACostLimitTheListsAreSizedInCost() {
    // 100 entries of cost 1 000 fill the cost limit; then 50 new keys of cost 10 arrive. The
    // window is 1 % of the cost limit (999), so it holds all 50 small entries; sized in
    // entries, it would hold one or two.
    let store = MemoryStore<Int, Int>()
    store.costLimit = 100_000
    for key in 0..<100 { store.setValue(key, forKey: key, cost: 1_000) }
    for key in 1_000..<1_050 { store.setValue(key, forKey: key, cost: 10) }
    var state = store._evictionOrderState
    #expect(state.window == 50, "\(state)")
    #expect(state.windowCost == 500, "\(state)")
    #expect(
      state.windowCost + state.probationCost + state.protectedCost == store.statistics.totalCost)
    #expect(store._policyMismatch() == nil)
    // Every entry is read, then new ones arrive: protected fills to 80 % of the cost outside
    // the window, whatever the number of entries that takes.
    for key in store.allItems.keys { _ = store[key] }
    for key in 2_000..<2_010 { store.setValue(key, forKey: key, cost: 1_000) }
    state = store._evictionOrderState
    #expect(state.protectedCost <= 80_000 && state.protectedCost > 70_000, "\(state)")
    #expect(store._policyMismatch() == nil)
    // Without a cost limit the lists keep no cost.
    store.costLimit = nil
    store.countLimit = 1_000
    #expect(store._evictionOrderState.windowCost == 0)
    store.countLimit = nil
    store.costLimit = 100_000
    state = store._evictionOrderState
    #expect(
      state.windowCost + state.probationCost + state.protectedCost == store.statistics.totalCost)
    #expect(store._policyMismatch() == nil)
  }

  @Test func aHugeCostLimitSizesTheListsWithoutOverflowing() {
    // 2^60 is over what a cost limit times the window's share (in 65 536ths) can hold in 64
    // bits. Entries of the largest cost (2^48) fill it: the window holds about 1 % of it,
    // some 40 of them.
    let store = MemoryStore<Int, Int>()
    store.costLimit = 1 << 60
    for key in 0..<4_200 { store.setValue(key, forKey: key, cost: Int.max) }
    let state = store._evictionOrderState
    #expect(store.count == 4_096)
    #expect(state.window >= 35 && state.window <= 45, "\(state)")
    #expect(store._policyMismatch() == nil)
  }

  @Test func withACostLimitALargeCandidateNeedsMoreUsesThanASmallVictim() {
    // 100 victims of cost 1 (weight 1), each written twice: 2 uses. Then 20 candidates of cost
    // 16 (weight 2, the fourth root of 16), each written `writes` times (removed in between,
    // so that every write is counted). A candidate's uses, not counting the write that
    // brought it in, times 1 must exceed the victim's 2 times 2: five writes (4 uses) are not
    // enough, where uses alone would admit it; six are. Each candidate admitted takes the
    // place of 16 victims, so at most six fit.
    //
    // The sketch of uses is indexed by the keys' hashes, which Swift seeds anew in each
    // process: now and then a victim shares its counters with a candidate and looks used
    // more than it was. So each count is the median of three stores with keys of their own.
    func keptCandidates(writes: Int) -> Int {
      let kept = [0, 100_000, 200_000].map { base in
        let store = MemoryStore<Int, Int>()
        store.costLimit = 100
        for key in base..<base + 100 {
          store.setValue(key, forKey: key, cost: 1)
          store.setValue(key, forKey: key, cost: 1)
        }
        let candidates = base + 1_000..<base + 1_020
        for key in candidates {
          for _ in 0..<writes {
            store[key] = nil
            store.setValue(key, forKey: key, cost: 16)
          }
        }
        #expect(store._policyMismatch() == nil)
        #expect(store.statistics.totalCost <= 100)
        return candidates.filter { store.allItems[$0] != nil }.count
      }
      return kept.sorted()[1]
    }
    // The last candidate is still in the window, not judged yet.
    #expect(keptCandidates(writes: 5) <= 2)
    #expect(keptCandidates(writes: 6) >= 5)
  }

  @Test func theWindowGrowsForRecencyAndStaysSmallForFrequency() {
    // Hill climbing: a working set that drifts (each key used in a short span, then never
    // again) is served by recency, and the window grows to nearly the whole store; hot keys
    // among keys used once are served by frequency, and it stays small.
    func run(_ key: (Int, inout SplitMix64) -> Int) -> (hitRatio: Double, windowShare: Int) {
      let store = MemoryStore<Int, Int>()
      store.countLimit = 100
      let accesses = 100_000
      let hits = secondHalfHits(store, accesses: accesses, seed: 3, key)
      #expect(store._policyMismatch() == nil)
      return (Double(hits) / Double(accesses / 2), store._evictionOrderState.windowShare)
    }
    let drifting = run { step, random in step / 20 + random.below(90) }
    // Nearly the whole store: LRU, which is what this workload wants. LRU hits 0.94 of the
    // second half's accesses, the store about 0.93 (0.80 with the unluckiest hash seeds seen,
    // whose climb takes longer); with its window held at 1 %, about 0.70.
    #expect(drifting.windowShare > 3 * 16_384, "window \(drifting.windowShare) / 65 536")
    #expect(drifting.hitRatio > 0.75, "hit ratio \(drifting.hitRatio)")
    // Half the accesses go to 75 hot keys, half to keys never seen again: a window larger
    // than the 25 entries the hot keys leave would push hot keys out.
    let scanned = run { step, random in
      random.below(2) == 0 ? random.below(75) : 1_000_000 + step
    }
    // The hit ratio is flat while the window leaves the hot keys room (up to 25 %): the
    // climber wanders there and a little beyond, and turns back, never towards the recency
    // the other workload wants.
    #expect(scanned.windowShare < 32_768, "window \(scanned.windowShare) / 65 536")
    #expect(scanned.hitRatio > 0.45, "hit ratio \(scanned.hitRatio) of at most 0.5")
  }

  @Test func aLoopOverMoreKeysThanTheStoreHoldsKeepsMostOfTheStore() {
    // Any order that keeps the newest keys (LRU, FIFO) misses every access of such a loop.
    // Every key of the loop is used as often as every other: a candidate never displaces
    // probation's oldest entry, so the store keeps most of its keys and the window churns.
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
    // as in a loop, but in any order. An order that froze the store on the keys it holds
    // would lose the keys the set moves to.
    let store = MemoryStore<Int, Int>()
    store.countLimit = 1_000
    let accesses = 200_000
    let hits = secondHalfHits(store, accesses: accesses, seed: 7) { step, random in
      step / 100 + random.below(1_200)
    }
    // The store hits about 82 % of the second half's accesses; frozen, 18 %.
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

  @Test func memoryPressureFreesTheFrequencySketchAndTheRecordOfEvictedKeys() {
    let store = MemoryStore<Int, Int>(name: "sketch")
    store.countLimit = 100
    #expect(store._evictionOrderState.sketchWords == 0)
    #expect(store._evictedKeyRecordWords == 0)
    for key in 0..<150 { store[key] = key }
    // One word of 16 counters per entry of the limit, rounded up to a power of two; the record
    // of evicted keys, an eighth of a word per entry, at least 64 words.
    #expect(store._evictionOrderState.sketchWords == 128)
    #expect(store._evictedKeyRecordWords == 64)
    store.handleMemoryPressure(.warning)
    #expect(store.count == 50)
    #expect(store._evictionOrderState.sketchWords == 0)
    #expect(store._evictedKeyRecordWords == 0)
    for key in 1_000..<1_070 { store[key] = key }
    #expect(store._evictionOrderState.sketchWords == 128)
    #expect(store._evictedKeyRecordWords == 64)
    #expect(store._policyMismatch() == nil)
  }

  @Test func aLinksWordKeepsBothLinksAndTheTagApart() {
    // Each of the three fields of a position's word is set without touching the others, from
    // none (-1) to the largest position.
    var links = _OrderLinks()
    links.grow(toHold: 3)
    let largest = Int32(_OrderLinks.maximumPosition)
    links.set(2, newer: largest, older: -1, tag: 3 | _EvictionOrder.uncountedWrite)
    #expect(links.newer(2) == largest && links.older(2) == -1)
    #expect(links.tag(2) == 3 | _EvictionOrder.uncountedWrite)
    links.setOlder(2, largest - 1)
    links.setNewer(2, -1)
    links.setTag(2, 1)
    #expect(links.newer(2) == -1 && links.older(2) == largest - 1 && links.tag(2) == 1)
    links.setNewer(2, 0)
    #expect(links.newer(2) == 0 && links.older(2) == largest - 1 && links.tag(2) == 1)
    #expect(links.newer(1) == -1 && links.older(3) == -1 && links.tag(1) == 0)
  }

  @Test func theSketchCountsUsesUpToFifteenAndHalvesEveryTenUsesPerEntry() {
    var sketch = _FrequencySketch()
    sketch.ensureCapacity(64)
    #expect(sketch.wordCount == 64)
    #expect(sketch.period == 640)
    let keys: [Int] = (0..<8).map { $0 &* 0x9E37_79B9 }
    for (index, key) in keys.enumerated() { sketch.increment(key, by: index) }
    // Never below the true count (a count-min sketch); with 8 keys in 1 024 counters, exact.
    #expect(keys.map(sketch.frequency) == Array(0..<8))
    sketch.increment(keys[3], by: 40)
    #expect(sketch.frequency(keys[3]) == 15)
    #expect(sketch.frequency(12_345) == 0)
    // 28 + 40 raises so far; the 640th halves every counter.
    sketch.increment(keys[1], by: 640 - 68 - 1)
    #expect(sketch.frequency(keys[7]) == 7)
    sketch.increment(keys[0])
    #expect(keys.map(sketch.frequency) == [0, 7, 1, 7, 2, 2, 3, 3])
    #expect(sketch.additions == 320)
    // Growing forgets, and only when the table is under half a word per entry.
    sketch.ensureCapacity(100)
    #expect(sketch.wordCount == 64)
    sketch.ensureCapacity(200)
    #expect(sketch.wordCount == 256)
    #expect(sketch.frequency(keys[7]) == 0)
  }

  @Test func evictedKeysThatComeBackWithinTheMarginMoveTheWindowSixteenAtATime() {
    var ghosts = _EvictionGhosts()
    #expect(ghosts.windowChange(returning: 1) == 0)  // Nothing made yet.
    ghosts.ensureCapacity(1_000)
    // A margin of 62 entries (a sixteenth), one tick per event; 128 words.
    #expect(ghosts.marginTicks == 62 && ghosts.eventsPerTick == 1 && ghosts.wordMask == 127)
    // Hashes in distinct words, so that none overwrites another.
    var hashes: [Int] = []
    var words = Set<Int>()
    var next = 1
    while hashes.count < 114 {
      if words.insert(ghosts.cell(of: next).index).inserted { hashes.append(next) }
      next += 1
    }
    // Sixteen rejected candidates back at once: a window larger by the margin would have kept
    // them. The sixteenth return decides: the window grows by 1/128 of the entries.
    for hash in hashes[0..<16] { ghosts.record(hash, rejected: true) }
    for hash in hashes[0..<15] { #expect(ghosts.windowChange(returning: hash) == 0) }
    #expect(ghosts.windowChange(returning: hashes[15]) == 512)
    // Each return counts once; a key not evicted counts nothing.
    #expect(ghosts.windowChange(returning: hashes[0]) == 0)
    #expect(ghosts.windowChange(returning: hashes[113]) == 0)
    #expect(ghosts.gains == 0 && ghosts.losses == 0)
    // Sixteen victims back: a main region larger by the margin would have kept them.
    for hash in hashes[16..<32] { ghosts.record(hash, rejected: false) }
    #expect(hashes[16..<32].map { ghosts.windowChange(returning: $0) }.reduce(0, +) == -512)
    // Ten gains against six losses: neither side has twice the other's, and the window stays.
    for hash in hashes[32..<42] { ghosts.record(hash, rejected: true) }
    for hash in hashes[42..<48] { ghosts.record(hash, rejected: false) }
    #expect(hashes[32..<48].map { ghosts.windowChange(returning: $0) }.allSatisfy { $0 == 0 })
    // A rejected candidate is within the margin until 62 entries have left the window after
    // it; a victim until 62 more victims have been evicted. Each clock runs on its own: the
    // victims do not age a rejected candidate, nor the window's exits a victim.
    ghosts.record(hashes[48], rejected: true)
    ghosts.record(hashes[49], rejected: true)
    ghosts.record(hashes[50], rejected: false)
    for _ in 0..<61 { ghosts.countWindowExit() }
    #expect(ghosts.windowChange(returning: hashes[48]) == 0)
    #expect(ghosts.gains == 1)
    ghosts.countWindowExit()
    #expect(ghosts.windowChange(returning: hashes[49]) == 0)
    #expect(ghosts.gains == 1, "62 exits later: too late")
    #expect(ghosts.windowChange(returning: hashes[50]) == 0)
    #expect(ghosts.losses == 1, "the window's exits do not age a victim")
    // hashes[51] and the 60 victims after it, then 2 more: 61 and 62 victims after
    // hashes[52].
    for hash in hashes[51..<112] { ghosts.record(hash, rejected: false) }
    #expect(ghosts.windowChange(returning: hashes[51]) == 0)
    #expect(ghosts.losses == 2, "60 victims later: within the margin")
    for hash in hashes[112..<114] { ghosts.record(hash, rejected: false) }
    #expect(ghosts.windowChange(returning: hashes[52]) == 0)
    #expect(ghosts.losses == 2, "62 victims later: too late")
  }

  @Test func aRejectedCandidateAndAVictimInTheSameWordAreBothKept() {
    var ghosts = _EvictionGhosts()
    ghosts.ensureCapacity(1_000)
    // Two hashes of the same word, and different tags.
    let first = 1
    var second = 2
    while ghosts.cell(of: second).index != ghosts.cell(of: first).index { second += 1 }
    ghosts.record(first, rejected: true)
    ghosts.record(second, rejected: false)
    #expect(ghosts.windowChange(returning: first) == 0 && ghosts.gains == 1)
    #expect(ghosts.windowChange(returning: second) == 0 && ghosts.losses == 1)
    // A later eviction of the same kind in the same word takes its place.
    ghosts.record(first, rejected: true)
    ghosts.record(second, rejected: true)
    #expect(ghosts.windowChange(returning: first) == 0 && ghosts.gains == 1)
    #expect(ghosts.windowChange(returning: second) == 0 && ghosts.gains == 2)
  }

  @Test func theWindowGrowsWithinACachefulForKeysThatComeBackJustAfterLeavingIt() {
    // Every other access is one of 600 keys used often; the others are keys used twice, 42
    // accesses apart (about 21 new keys in between). The window of 1 % (10 entries) lets each
    // leave before it comes back, and admission, which weighs its one use against keys used
    // often, evicts it. Those keys coming back grow the window long before the hill
    // climber's first look (after ten cachefuls of lookups): by the second half, the second
    // uses hit. The window grows until they do, and then stops (over 600 hash seeds: at least
    // 3.3 % of the entries, and at least 94 % of the second uses hitting).
    let store = MemoryStore<Int, Int>()
    store.countLimit = 1_000
    var random = SplitMix64(seed: 7)
    var hits = 0
    var lookups = 0
    for step in 0..<6_000 {
      let key =
        step % 2 == 0
        ? Int(random.below(600)) : 1_000_000 + (step % 4 == 1 ? step : step - 42)
      let hit = store[key] != nil
      if !hit { store[key] = key }
      if step >= 3_000 && step % 4 == 3 {
        lookups += 1
        if hit { hits += 1 }
      }
    }
    let window = store._evictionOrderState.windowShare
    #expect(window > 2 * 655, "window \(window) / 65 536")
    #expect(Double(hits) / Double(lookups) > 0.9, "\(hits) of \(lookups) second uses hit")
    #expect(store._policyMismatch() == nil)
  }
}
