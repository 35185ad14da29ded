import MemoryStoreKit
import Testing

extension StoreContractTests {
  /// Used from one thread, the store behaves exactly like a `Dictionary`.
  @Suite("Dictionary semantics") struct DictionarySemantics {
    @Test(arguments: [nil, "", "quotes", "名前 with spaces"] as [String?])
    func nameRoundTrips(name: String?) {
      #expect(MemoryStore<String, Int>(name: name).name == name)
    }

    @Test func aNewStoreIsEmpty() {
      let store = MemoryStore<String, Int>()
      #expect(store.isEmpty)
      #expect(store.count == 0)
      #expect(store.allItems.isEmpty)
      #expect(store["anything"] == nil)
      #expect(store.values(forKeys: ["a", "b"]).isEmpty)
    }

    @Test func aValueThatWasSetCanBeRead() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      #expect(store["a"] == 1)
      #expect(store["b"] == nil)
      #expect(store.count == 1)
      #expect(!store.isEmpty)
    }

    @Test func settingAnExistingKeyReplacesItsValue() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      store["b"] = 2
      store["a"] = 10
      #expect(store["a"] == 10)
      #expect(store["b"] == 2)
      #expect(store.count == 2)
    }

    @Test func assigningNilRemovesTheKey() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      store["a"] = nil
      #expect(store["a"] == nil)
      #expect(store.allItems == ["b": 2])
      #expect(store.count == 1)
    }

    @Test func removingAnAbsentKeyIsANoOp() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      store["missing"] = nil
      #expect(store.removeValue(forKey: "missing") == nil)
      store.removeValues(forKeys: ["missing", "also missing"])
      #expect(store.allItems == ["a": 1, "b": 2])
      #expect(store.count == 2)
      // And the store keeps working normally afterwards.
      store["c"] = 3
      #expect(store.allItems == ["a": 1, "b": 2, "c": 3])
    }

    @Test func addEntriesOverwritesExistingKeysAndKeepsTheOthers() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      store.addEntries(["b": 20, "c": 30])
      #expect(store.allItems == ["a": 1, "b": 20, "c": 30])
      store.addEntries([:])
      #expect(store.allItems == ["a": 1, "b": 20, "c": 30])
    }

    @Test func removeValuesRemovesTheGivenKeysAndIgnoresAbsentOnes() {
      let store = MemoryStore<Int, String>()
      store.addEntries([1: "one", 2: "two", 3: "three", 4: "four"])
      store.removeValues(forKeys: [1, 3, 99, 3])
      #expect(store.allItems == [2: "two", 4: "four"])
      store.removeValues(forKeys: [Int]())
      #expect(store.allItems == [2: "two", 4: "four"])
      // Any sequence will do.
      store.removeValues(forKeys: (2...4).lazy.filter { $0 != 3 })
      #expect(store.isEmpty)
    }

    @Test func removeAllEmptiesTheStoreWhichStaysUsable() {
      let store = MemoryStore<Int, Int>()
      store.addEntries(Dictionary(uniqueKeysWithValues: (0..<100).map { ($0, $0) }))
      store.removeAll()
      #expect(store.isEmpty)
      #expect(store.count == 0)
      #expect(store.allItems.isEmpty)
      #expect(store[5] == nil)
      store.removeAll()
      #expect(store.isEmpty)
      store[7] = 49
      #expect(store.allItems == [7: 49])
    }

    @Test func countAndIsEmptyFollowTheContents() {
      let store = MemoryStore<Int, Int>()
      for key in 0..<10 {
        store[key] = key
        #expect(store.count == key + 1)
        #expect(!store.isEmpty)
      }
      store[3] = 300
      #expect(store.count == 10)
      for key in 0..<10 {
        store[key] = nil
        #expect(store.count == 9 - key)
      }
      #expect(store.isEmpty)
    }

    @Test func allItemsIsASnapshotThatLaterWritesDoNotChange() {
      let store = MemoryStore<Int, String>()
      store.addEntries([1: "one", 2: "two"])
      let snapshot = store.allItems
      store[1] = "uno"
      store[3] = "three"
      store.removeValue(forKey: 2)
      let second = store.allItems
      store.removeAll()
      #expect(snapshot == [1: "one", 2: "two"])
      #expect(second == [1: "uno", 3: "three"])
      #expect(store.allItems.isEmpty)
    }

    @Test func valuesForKeysOmitsAbsentKeys() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2, "c": 3])
      #expect(store.values(forKeys: ["a", "c", "zz"]) == ["a": 1, "c": 3])
      #expect(store.values(forKeys: ["zz", "yy"]).isEmpty)
      #expect(store.values(forKeys: [String]()).isEmpty)
    }

    @Test func valuesForKeysToleratesDuplicateKeys() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      #expect(store.values(forKeys: ["a", "a", "b", "a", "zz", "zz"]) == ["a": 1, "b": 2])
    }

    @Test func valuesForKeysAcceptsAnySequence() {
      let store = MemoryStore<Int, Int>()
      store.addEntries([1: 10, 2: 20, 3: 30])
      #expect(store.values(forKeys: 0...2) == [1: 10, 2: 20])
      #expect(store.values(forKeys: Set([3, 4])) == [3: 30])
      #expect(
        store.values(forKeys: (1...3).lazy.map { $0 * 1 }.filter { $0 != 2 }) == [1: 10, 3: 30])
    }

    @Test func updateValueReturnsThePreviousValue() {
      let store = MemoryStore<String, Int>()
      #expect(store.updateValue(1, forKey: "a") == nil)
      #expect(store.updateValue(2, forKey: "a") == 1)
      #expect(store.updateValue(3, forKey: "a") == 2)
      #expect(store["a"] == 3)
    }

    @Test func removeValueReturnsTheRemovedValue() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      #expect(store.removeValue(forKey: "a") == 1)
      #expect(store.removeValue(forKey: "a") == nil)
      #expect(store.allItems == ["b": 2])
    }

    @Test func valuesOfAnySendableTypeAreStoredAsGiven() {
      struct Quote: Sendable, Equatable {
        var bid: Double
        var ask: Double
      }
      let store = MemoryStore<String, Quote>()
      store["AAPL"] = Quote(bid: 231.4, ask: 231.5)
      #expect(store["AAPL"] == Quote(bid: 231.4, ask: 231.5))
      let lists = MemoryStore<Int, [String]>()
      lists[1] = ["a", "b"]
      lists[1]?.append("c")  // Read, modify, write back.
      #expect(lists[1] == ["a", "b", "c"])
    }

    /// Long random sequences of every operation, compared with a `Dictionary` after each step:
    /// the store's internal copies must never drift apart, whatever the order of writes.
    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func randomOperationsMatchADictionary(seed: UInt64) {
      var random = SplitMix64(seed: seed)
      let store = MemoryStore<Int, Int>()
      var model: [Int: Int] = [:]
      for step in 0..<3_000 {
        let key = random.below(24)
        switch random.below(14) {
        case 0, 1:
          store[key] = step
          model[key] = step
        case 2:
          store[key] = nil
          model[key] = nil
        case 3:
          #expect(store.updateValue(step, forKey: key) == model.updateValue(step, forKey: key))
        case 4:
          #expect(store.removeValue(forKey: key) == model.removeValue(forKey: key))
        case 5:
          let entries = Dictionary(
            (0..<random.below(5)).map { _ in (random.below(24), step) }, uniquingKeysWith: max)
          store.addEntries(entries)
          model.merge(entries) { _, new in new }
        case 6:
          let keys = (0..<random.below(6)).map { _ in random.below(30) }
          store.removeValues(forKeys: keys)
          for key in keys { model[key] = nil }
        case 7 where random.below(10) == 0:
          store.removeAll()
          model.removeAll()
        case 8:
          let made = store.valueOrInsert(forKey: key) { step }
          if model[key] == nil { model[key] = step }
          #expect(made == model[key])
        case 9:
          let keys = (0..<random.below(6)).map { _ in random.below(30) }
          #expect(store.values(forKeys: keys) == model.filter { keys.contains($0.key) })
        default:
          #expect(store[key] == model[key])
        }
        #expect(store.count == model.count)
        #expect(store.isEmpty == model.isEmpty)
        if step % 16 == 0 { #expect(store.allItems == model) }
      }
      #expect(store.allItems == model)
    }
  }
}
