import MemoryStoreKit
import Testing

/// Writes made while a reader stays inside a read section (one preempted in the middle of a
/// lookup) go on without waiting for it, and what they replace stays allocated until it leaves;
/// these tests park a reader deterministically and check that the store behaves exactly like a
/// dictionary.
extension StoreContractTests {
  @Suite("Parked readers") struct ParkedReaders {
    @Test func writesWhileAReaderIsParkedAreVisibleAndWhatTheyReplacedIsFreedAfterwards() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2, "c": 3])
      store._withReaderParked {
        store["a"] = 10
        store["b"] = 20
        // The replaced values stay allocated: the parked reader may still read them.
        #expect(store._retainsReplacedValues)
        #expect(store["a"] == 10)
        #expect(store["b"] == 20)
        #expect(store.removeValue(forKey: "c") == 3)
        #expect(store["c"] == nil)
        #expect(store.updateValue(30, forKey: "c") == nil)
        #expect(store.count == 3)
        #expect(store.allItems == ["a": 10, "b": 20, "c": 30])
        #expect(store.values(forKeys: ["a", "c", "zz"]) == ["a": 10, "c": 30])
        #expect(store.valueOrInsert(forKey: "d") { 4 } == 4)
        #expect(store.valueOrInsert(forKey: "d") { 99 } == 4)
        store.removeAll()
        #expect(store.isEmpty)
        #expect(store["a"] == nil)
        store.addEntries(["x": 1, "y": 2])
        store.removeValues(forKeys: ["y", "nope"])
        #expect(store.allItems == ["x": 1])
      }
      #expect(!store._retainsReplacedValues)
      #expect(store.allItems == ["x": 1])
      store["z"] = 26
      store["w"] = 23
      #expect(store.allItems == ["x": 1, "z": 26, "w": 23])
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func randomOperationsWithParkedReadersMatchADictionary(seed: UInt64) {
      var random = SplitMix64(seed: seed)
      let store = MemoryStore<Int, Int>()
      var model: [Int: Int] = [:]

      func step() {
        let key = Int(random.next() % 16)
        switch random.next() % 10 {
        case 0, 1, 2:
          let value = Int(random.next() % 1_000)
          #expect(store.updateValue(value, forKey: key) == model.updateValue(value, forKey: key))
        case 3:
          #expect(store.removeValue(forKey: key) == model.removeValue(forKey: key))
        case 4:
          let entries = [key: 1, (key + 1) % 16: 2]
          store.addEntries(entries)
          model.merge(entries) { _, new in new }
        case 5:
          let keys = [key, (key + 3) % 16]
          store.removeValues(forKeys: keys)
          for key in keys { model[key] = nil }
        case 6 where random.next() % 8 == 0:
          store.removeAll()
          model.removeAll()
        case 7:
          let made = store.valueOrInsert(forKey: key) { -key }
          if model[key] == nil { model[key] = -key }
          #expect(made == model[key])
        default:
          #expect(store[key] == model[key])
        }
      }

      for _ in 0..<200 {
        if random.next() % 3 == 0 {
          store._withReaderParked {
            for _ in 0..<Int(random.next() % 12) { step() }
            #expect(store.count == model.count)
            #expect(store.allItems == model)
          }
        } else {
          for _ in 0..<Int(random.next() % 6) { step() }
        }
        #expect(store.count == model.count)
        #expect(store.allItems == model)
      }
    }
  }
}
