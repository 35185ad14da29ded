import MemoryStoreKit
import Testing

extension StoreContractTests {
  /// `keys`, `values` and `contains(_:)`: reads at one point of the write order, and
  /// `contains` neither counts as a lookup nor keeps an entry cached.
  @Suite("Dictionary basics") struct DictionaryBasics {
    @Test func keysValuesAndContainsReadWhatTheSubscriptReads() {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      #expect(store.keys.isEmpty)
      #expect(store.values.isEmpty)
      #expect(!store.contains("a"))
      store.addEntries(["a": 1, "b": 2, "c": 3])
      store.setValue(4, forKey: "short", timeToLive: .seconds(1))
      store["b"] = nil
      #expect(Set(store.keys) == ["a", "c", "short"])
      #expect(store.values.sorted() == [1, 3, 4])
      #expect(store.contains("a") && store.contains("short"))
      #expect(!store.contains("b"))
      // An expired entry is absent to all three, as to the subscript.
      clock.advance(by: .seconds(1))
      #expect(!store.contains("short"))
      #expect(Set(store.keys) == ["a", "c"])
      #expect(store.values.sorted() == [1, 3])
      // A snapshot: later writes leave the arrays alone.
      let keys = store.keys
      store.removeAll()
      #expect(Set(keys) == ["a", "c"])
    }

    @Test func containsIsNeitherAHitNorAMiss() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      #expect(store.contains("a"))
      #expect(!store.contains("z"))
      #expect(store.statistics.hits == 0)
      #expect(store.statistics.misses == 0)
      _ = store["a"]
      _ = store["z"]
      #expect(store.statistics.hits == 1)
      #expect(store.statistics.misses == 1)
    }

    @Test func askingWhetherAKeyIsCachedDoesNotKeepItCached() {
      // A read is a use, which wins a new key its place in the store (see the policy tests);
      // asking whether it is there is not.
      let store = MemoryStore<Int, Int>()
      store.countLimit = 100
      for key in 0..<100 { store[key] = key }
      store[500] = 500
      #expect(store.contains(500))
      store[501] = 501
      #expect(store[501] == 501)
      #expect(store[501] == 501)
      // Both leave the window for keys used less than the read one: it stays, the other goes.
      for key in 1_000..<1_100 { store[key] = key }
      #expect(!store.contains(500))
      #expect(store.contains(501))
      #expect(store._policyMismatch() == nil)
    }

    @Test func keysAndValuesAreTakenAtOnePointOfTheWriteOrder() throws {
      // Two stores whose every intermediate state has a shape. In `ranges`, one writer inserts
      // keys 0..<64 in order, then removes them in order: the keys present always form one
      // range. In `generations`, one writer gives keys 0..<64 generation g + 1, one key at a
      // time: the values are always at most two consecutive generations. A snapshot made of
      // two moments would break the shapes; readers check every `keys` and `values`.
      let ranges = MemoryStore<Int, Int>()
      let generations = MemoryStore<Int, Int>()
      let keyCount = 64
      let rounds = 200
      generations.addEntries(Dictionary(uniqueKeysWithValues: (0..<keyCount).map { ($0, 0) }))
      // Readers keep reading until both writers are done (and at least 300 times).
      let writersDone = Locked(0)
      let results: [String?]? = runOnThreads(4) { thread in
        switch thread {
        case 0:
          for _ in 0..<rounds {
            for key in 0..<keyCount { ranges[key] = key }
            for key in 0..<keyCount { ranges[key] = nil }
          }
          writersDone.withLock { $0 += 1 }
          return nil
        case 1:
          for generation in 1...rounds {
            for key in 0..<keyCount { generations[key] = generation }
          }
          writersDone.withLock { $0 += 1 }
          return nil
        default:
          var reads = 0
          while reads < 300 || writersDone.withLock({ $0 }) < 2 {
            reads += 1
            let keys = ranges.keys.sorted()
            if let first = keys.first, keys != Array(first..<(first + keys.count)) {
              return "keys not one range: \(keys)"
            }
            let values = generations.values
            if values.count != keyCount {
              return "\(values.count) values of \(keyCount) keys"
            }
            if let low = values.min(), let high = values.max(), high - low > 1 {
              return "values of more than two generations: \(Set(values).sorted())"
            }
          }
          return nil
        }
      }
      let violations = try #require(results, "the threads did not finish in time")
      #expect(violations.compactMap { $0 }.isEmpty, "\(violations.compactMap { $0 })")
      #expect(ranges.keys.isEmpty)
      #expect(Set(generations.values) == [rounds])
    }
  }
}
