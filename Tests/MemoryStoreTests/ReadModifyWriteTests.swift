import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `update(forKey:)`, `update(forKey:default:)`, the default subscript, `merge` and
  /// `removeAll(where:)`: reads and writes as one step, with the caller's code outside every
  /// lock.
  @Suite("Read-modify-write") struct ReadModifyWrite {
    struct Failure: Error {}

    @Test func updateReadsChangesAndStoresTheValue() {
      let store = MemoryStore<String, Int>()
      // Absent: body sees nil; what it leaves is stored.
      let sawAbsent = store.update(forKey: "a") { value -> Bool in
        defer { value = 1 }
        return value == nil
      }
      #expect(sawAbsent)
      #expect(store["a"] == 1)
      store.update(forKey: "a") { $0! += 10 }
      #expect(store["a"] == 11)
      // nil removes; leaving an absent key nil writes nothing.
      store.update(forKey: "a") { $0 = nil }
      #expect(store["a"] == nil)
      store.update(forKey: "b") { _ in }
      #expect(store.allItems.isEmpty)
    }

    @Test func aThrowingBodyStoresNothing() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      #expect(throws: Failure.self) {
        try store.update(forKey: "a") { value in
          value = 2
          throw Failure()
        }
      }
      #expect(store["a"] == 1)
    }

    @Test func anUpdateOfARemovedKeyDoesNotBringItBack() {
      // A session "touch" must not resurrect a session another thread just removed.
      let store = MemoryStore<String, [String]>()
      store["session"] = ["login"]
      store["session"] = nil
      store.update(forKey: "session") { $0?.append("touch") }
      #expect(store["session"] == nil)
      #expect(store.count == 0)
    }

    @Test func theBodyRunsAgainWhenTheEntryChangesWhileItRuns() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      var runs: [Int?] = []
      store.update(forKey: "a") { value in
        runs.append(value)
        // Another write to the key lands while the body runs (here, from inside it: no lock is
        // held, so it does not deadlock).
        if runs.count == 1 { store["a"] = 100 }
        value = (value ?? 0) + 1
      }
      #expect(runs == [1, 100])
      #expect(store["a"] == 101)
    }

    @Test func theBodyMayReadAndWriteOtherKeys() {
      let store = MemoryStore<String, Int>()
      store["other"] = 5
      store.update(forKey: "a") { value in
        value = store["other"]! * 2
        store["log"] = value
      }
      #expect(store.allItems == ["other": 5, "a": 10, "log": 10])
    }

    @Test func updateIsNeitherAHitNorAMiss() {
      let store = MemoryStore<String, Int>()
      store.update(forKey: "a") { $0 = 1 }
      store.update(forKey: "a") { $0! += 1 }
      #expect(store.statistics.hits == 0)
      #expect(store.statistics.misses == 0)
    }

    @Test func anExpiredEntryIsAbsentToTheBody() {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "a", timeToLive: .seconds(1))
      clock.advance(by: .seconds(1))
      var seen: Int? = -1
      store.update(forKey: "a") { value in
        seen = value
        value = 7
      }
      #expect(seen == nil)
      #expect(store["a"] == 7)
    }

    @Test func defaultUpdatesStartFromTheDefault() {
      let store = MemoryStore<String, Int>()
      #expect(store["a", default: 0] == 0)
      store.update(forKey: "a", default: 0) { $0 += 1 }
      store.update(forKey: "a", default: 0) { $0 += 1 }
      #expect(store["a"] == 2)
      #expect(store["a", default: 0] == 2)
      // The default is evaluated only when the key is absent.
      var evaluated = 0
      func fallback() -> Int {
        evaluated += 1
        return 0
      }
      _ = store["a", default: fallback()]
      store.update(forKey: "a", default: fallback()) { $0 += 1 }
      #expect(evaluated == 0)
      #expect(store["a"] == 3)
    }

    @Test(arguments: StoreFlavour.allCases)
    func concurrentUpdatesNeverLoseAnIncrement(_ flavour: StoreFlavour) throws {
      let store = flavour.make()
      let threads = 8
      let increments = 2_000
      let keys = 4
      let done = try #require(
        runOnThreads(threads, timeout: 60) { thread in
          for step in 0..<increments {
            let key = (thread + step) % keys
            if step % 2 == 0 {
              store.update(forKey: key) { $0 = ($0 ?? 0) + 1 }
            } else {
              store.update(forKey: key, default: 0) { $0 += 1 }
            }
          }
          return true
        })
      #expect(done.count == threads)
      let total = (0..<keys).reduce(0) { $0 + (store[$1] ?? 0) }
      #expect(total == threads * increments)
      for key in 0..<keys { #expect(store[key] == threads * increments / keys) }
    }

    // MARK: merge

    @Test func mergeCombinesInOrderLikeADictionary() {
      let store = MemoryStore<String, String>()
      store["a"] = "1"
      let pairs = [("a", "2"), ("b", "3"), ("a", "4"), ("b", "5"), ("c", "6")]
      store.merge(pairs) { old, new in old + new }
      var expected = ["a": "1"]
      expected.merge(pairs) { old, new in old + new }
      #expect(store.allItems == expected)
      #expect(store.allItems == ["a": "124", "b": "35", "c": "6"])
      store.merge(["c": "7", "d": "8"]) { old, new in old + "," + new }
      #expect(store["c"] == "6,7")
      #expect(store["d"] == "8")
    }

    @Test func aThrowingMergeStoresNothing() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      #expect(throws: Failure.self) {
        try store.merge([("b", 2), ("a", 3)]) { _, _ in throw Failure() }
      }
      #expect(store.allItems == ["a": 1])
    }

    @Test func mergeCombinesAKeyAgainWhenItChangesMeanwhile() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 10])
      var calls: [String] = []
      store.merge([("a", 1), ("b", 1)]) { old, new in
        calls.append("\(old)+\(new)")
        // The first call changes "b" behind the merge's back.
        if calls.count == 1 { store["b"] = 20 }
        return old + new
      }
      #expect(store.allItems == ["a": 2, "b": 21])
      // "a" was combined once, "b" once before and once after the change.
      #expect(calls.filter { $0.hasPrefix("1+") } == ["1+1"])
      #expect(calls.contains("20+1"))
    }

    @Test(arguments: StoreFlavour.allCases)
    func concurrentMergesNeverLoseAnAddition(_ flavour: StoreFlavour) throws {
      let store = flavour.make()
      let threads = 8
      let rounds = 500
      let done = try #require(
        runOnThreads(threads, timeout: 60) { _ in
          for _ in 0..<rounds { store.merge([0: 1, 1: 1, 2: 1], uniquingKeysWith: +) }
          return true
        })
      #expect(done.count == threads)
      #expect(store.allItems == [0: threads * rounds, 1: threads * rounds, 2: threads * rounds])
    }

    @Test func noReadSeesAMergeHalfDone() throws {
      let store = MemoryStore<Int, Int>()
      store.addEntries([0: 0, 1: 0])
      let writes = 2_000
      let results = try #require(
        runOnThreads(2, timeout: 60) { thread -> Int in
          if thread == 0 {
            for _ in 0..<writes { store.merge([0: 1, 1: 1], uniquingKeysWith: +) }
            return 0
          }
          var torn = 0
          for _ in 0..<20_000 {
            let both = store.values(forKeys: [0, 1])
            if both[0] != both[1] { torn += 1 }
          }
          return torn
        })
      #expect(results[1] == 0)
      #expect(store.allItems == [0: writes, 1: writes])
    }

    // MARK: removeAll(where:)

    @Test func removeAllWhereRemovesWhatThePredicateSelects() {
      let store = MemoryStore<Int, Int>()
      for key in 0..<100 { store[key] = key * 10 }
      var judged = 0
      store.removeAll { entry in
        judged += 1
        return entry.key % 3 == 0 || entry.value > 900
      }
      #expect(judged == 100)
      #expect(Set(store.keys) == Set((0..<100).filter { $0 % 3 != 0 && $0 <= 90 }))
      #expect(store.count == store.keys.count)
    }

    @Test func aThrowingPredicateRemovesNothing() {
      let store = MemoryStore<Int, Int>()
      for key in 0..<10 { store[key] = key }
      #expect(throws: Failure.self) {
        try store.removeAll { entry in
          if entry.key == 7 { throw Failure() }
          return true
        }
      }
      #expect(store.count == 10)
    }

    @Test func entriesWrittenWhileThePredicateRunsAreJudgedByTheirNewValue() {
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 1, "c": 2])
      var values: [String: [Int]] = [:]
      store.removeAll { entry in
        values[entry.key, default: []].append(entry.value)
        if values.count == 1 && values[entry.key]!.count == 1 {
          // While the first entry is judged: rewrite "b" to a value that stays, and add an
          // entry that goes.
          store["b"] = 2
          store["new"] = 1
        }
        return entry.value == 1
      }
      #expect(store.allItems == ["b": 2, "c": 2])
      #expect(values["new"] == [1])
    }

    @Test func entriesCopiedWithMetadataMidWayAreJudgedAgainNotSkipped() {
      // The first limit copies every entry into a node with metadata, a new version with the
      // same value: an entry so copied is not "changed", and must still be removed.
      let store = MemoryStore<String, Int>()
      for index in 0..<10 { store["m\(index)"] = 1 }
      var calls = 0
      store.removeAll { entry in
        calls += 1
        switch calls {
        case 1, 11: store["w\(calls)"] = 0  // a write in rounds 1 and 2: on to round 3
        case 12: store.countLimit = 1_000  // in the last round: every entry is copied
        default: break
        }
        return entry.value == 1
      }
      #expect(store.allItems == ["w1": 0, "w11": 0])
    }

    @Test func noReadSeesARemoveAllWhereHalfDone() throws {
      let store = MemoryStore<Int, Int>()
      let rounds = 200
      let results = try #require(
        runOnThreads(2, timeout: 60) { thread -> Int in
          if thread == 0 {
            for _ in 0..<rounds {
              store.addEntries(Dictionary(uniqueKeysWithValues: (0..<32).map { ($0, $0) }))
              store.removeAll { $0.value % 2 == 1 }
            }
            return 0
          }
          // Odd keys are added and removed together: a snapshot holds all 16 or none.
          var torn = 0
          for _ in 0..<5_000 {
            let odd = store.allItems.keys.filter { $0 % 2 == 1 }.count
            if odd != 0 && odd != 16 { torn += 1 }
          }
          return torn
        })
      #expect(results[1] == 0)
      #expect(store.allItems == Dictionary(uniqueKeysWithValues: (0..<16).map { ($0 * 2, $0 * 2) }))
    }
  }
}

/// The kinds of store the read-modify-write stress tests run on: plain, and with a policy
/// (whose writes take the policy's path).
enum StoreFlavour: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case plain
  case countLimited
  case withTimeToLive

  func make() -> MemoryStore<Int, Int> {
    let store = MemoryStore<Int, Int>()
    switch self {
    case .plain: break
    case .countLimited: store.countLimit = 1_000
    case .withTimeToLive: store.defaultTimeToLive = .seconds(3_600)
    }
    return store
  }

  var testDescription: String { rawValue }
}
