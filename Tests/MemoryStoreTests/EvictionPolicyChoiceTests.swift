import MemoryStoreKit
import Synchronization
import Testing

/// `evictionPolicy`: the adaptive order by default, or least recently used.
@Suite("Eviction: choosing the policy") struct EvictionPolicyChoiceTests {
  @Test func theDefaultIsAdaptive() {
    let store = MemoryStore<Int, Int>()
    #expect(store.evictionPolicy == .adaptive)
    #expect(EvictionPolicy.allCases == [.adaptive, .lru])
  }

  @Test func lruEvictsTheEntryUnusedLongest() {
    let store = MemoryStore<String, Int>()
    store.evictionPolicy = .lru
    store.countLimit = 3
    store["a"] = 1
    store["b"] = 2
    store["c"] = 3
    _ = store["a"]  // used: a second chance, at the newest end (after d)
    store["d"] = 4  // evicts b, the oldest unused
    #expect(Set(store.keys) == ["a", "c", "d"])
    store["c"] = 30  // a rewrite is a use: c goes to the newest end too
    store["e"] = 5  // evicts d, now the oldest unused
    #expect(Set(store.keys) == ["a", "c", "e"])
    #expect(store.statistics.evictions[.countLimit] == 2)
    #expect(store._policyMismatch() == nil)
  }

  /// Where every new key is read once and then never again, LRU keeps the newest keys and
  /// admits every one; the adaptive order keeps the keys used often and turns away the rest.
  @Test func lruAdmitsEveryNewKeyWhereTheAdaptiveOrderKeepsTheFrequentOnes() {
    func survivors(_ policy: EvictionPolicy) -> Int {
      let store = MemoryStore<Int, Int>()
      store.evictionPolicy = policy
      store.countLimit = 100
      for key in 0..<100 { store[key] = key }
      for _ in 0..<20 { for key in 0..<100 { _ = store[key] } }
      // A scan of new keys, each written and read once.
      for key in 1_000..<1_400 {
        store[key] = key
        _ = store[key]
      }
      return (0..<100).filter { store.contains($0) }.count
    }
    #expect(survivors(.lru) == 0)
    #expect(survivors(.adaptive) > 80)
  }

  @Test func changingThePolicyOfALimitedStoreKeepsEveryEntryAndTheLimit() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 500
    for key in 0..<800 { store[key] = key }
    #expect(store.count == 500)
    let before = store.allItems
    store.evictionPolicy = .lru
    #expect(store.allItems == before)
    #expect(store._policyMismatch() == nil)
    for key in 1_000..<1_300 { store[key] = key }
    #expect(store.count == 500)
    store._checkInvariants()
    store.evictionPolicy = .adaptive
    #expect(store._policyMismatch() == nil)
    for key in 2_000..<2_300 { store[key] = key }
    #expect(store.count == 500)
    store._checkInvariants()
  }

  /// Random writes, removals, costs, expiries, clears and limit changes: the LRU order keeps
  /// every entry once, its links matched, as the ring moves entries to fill holes.
  @Test func lruKeepsItsInvariantsThroughRandomWork() {
    let clock = ManualScheduler()
    let store = MemoryStore<Int, Int>(scheduler: clock)
    store.evictionPolicy = .lru
    store.countLimit = 300
    store.costLimit = 2_000
    var random = SplitMix64(seed: 41)
    for step in 0..<30_000 {
      let key = random.below(1_000)
      switch random.below(100) {
      case 0..<50: store[key] = step
      case 50..<65: store.setValue(step, forKey: key, cost: random.below(20))
      case 65..<75: store.setValue(step, forKey: key, timeToLive: .milliseconds(random.below(50)))
      case 75..<88: store[key] = nil
      case 88..<97: _ = store[key]
      case 97: clock.advance(by: .milliseconds(20))
      case 98: store.countLimit = 100 + random.below(400)
      default: if random.below(20) == 0 { store.removeAll() }
      }
      if step % 1_000 == 0 { #expect(store._policyMismatch() == nil, "step \(step)") }
    }
    store._checkInvariants()
    #expect(store.count <= store.countLimit ?? .max)
    #expect(store.statistics.totalCost <= 2_000)
  }

  @Test func lruWithACostLimitPassesOverEntriesWithoutCost() {
    let store = MemoryStore<String, Int>()
    store.evictionPolicy = .lru
    store.costLimit = 10
    store["free"] = 0
    store.setValue(1, forKey: "a", cost: 6)
    store.setValue(2, forKey: "b", cost: 6)  // over: evicts a, never "free"
    #expect(Set(store.keys) == ["free", "b"])
    #expect(store.statistics.evictions[.costLimit] == 1)
  }
}
