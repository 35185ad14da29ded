import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `valueOrInsert(forKey:_:)`: one creation per key, no lock held while it runs.
  @Suite("Get or create") struct GetOrCreate {
    struct Failure: Error, Equatable {
      var id = 0
    }

    @Test func aMissCallsMakeValueOnceAndStoresTheResult() {
      let store = MemoryStore<String, Int>()
      var calls = 0
      let value = store.valueOrInsert(forKey: "a") {
        calls += 1
        return 1
      }
      #expect(value == 1)
      #expect(calls == 1)
      #expect(store["a"] == 1)
      #expect(store.allItems == ["a": 1])
    }

    @Test func aHitNeverCallsMakeValue() {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      let first = store.valueOrInsert(forKey: "a") {
        Issue.record("makeValue ran although the key was present")
        return 2
      }
      #expect(first == 1)
      _ = store.valueOrInsert(forKey: "b") { 3 }
      let second = store.valueOrInsert(forKey: "b") {
        Issue.record("makeValue ran for a value it had already created")
        return 4
      }
      #expect(second == 3)
      #expect(store.allItems == ["a": 1, "b": 3])
    }

    @Test func aThrowingMakeValueStoresNothingAndRethrowsToItsCaller() {
      let store = MemoryStore<String, Int>()
      store["other"] = 0
      #expect(throws: Failure(id: 1)) {
        try store.valueOrInsert(forKey: "a") { throw Failure(id: 1) }
      }
      #expect(store["a"] == nil)
      #expect(store.allItems == ["other": 0])
      // A later call creates the value.
      #expect(store.valueOrInsert(forKey: "a") { 2 } == 2)
      #expect(store["a"] == 2)
    }

    @Test func afterAThrowAnotherThreadCanCreateTheValue() throws {
      let store = MemoryStore<String, Int>()
      #expect(throws: Failure.self) {
        try store.valueOrInsert(forKey: "a") { throw Failure() }
      }
      // A creation left behind by the throw would make this thread wait forever.
      let values = try #require(
        runOnThreads(1, timeout: 10) { _ in store.valueOrInsert(forKey: "a") { 5 } })
      #expect(values == [5])
      #expect(store["a"] == 5)
    }

    @Test func makeValueMayReadAndWriteTheStore() {
      let store = MemoryStore<String, Int>()
      store["existing"] = 1
      let value = store.valueOrInsert(forKey: "new") {
        #expect(store["new"] == nil)
        #expect(store.values(forKeys: ["new", "existing"]) == ["existing": 1])
        store["other"] = 2
        #expect(store["other"] == 2)
        #expect(store.updateValue(20, forKey: "other") == 2)
        return store["other"]! + store["existing"]!
      }
      #expect(value == 21)
      #expect(store.allItems == ["existing": 1, "other": 20, "new": 21])
    }

    /// One round's shared counters.
    final class Round: Sendable {
      let arrived = Atomic<Int>(0)
      let makeValueCalls = Atomic<Int>(0)
      let waitTimedOut = Atomic<Bool>(false)
    }

    @Test func concurrentMissesOnTheSameKeyCallMakeValueExactlyOnce() throws {
      let store = MemoryStore<Int, Int>()
      let threads = 8
      let rounds = (0..<150).map { _ in Round() }
      let received = try #require(
        runOnThreads(threads) { thread in
          rounds.enumerated().map { key, round in
            round.arrived.wrappingAdd(1, ordering: .relaxed)
            return store.valueOrInsert(forKey: key) {
              round.makeValueCalls.wrappingAdd(1, ordering: .relaxed)
              // Keep the creation going until every thread has called for this key, so they
              // all miss together.
              let allCalled = spinWait(timeout: 10) {
                round.arrived.load(ordering: .relaxed) == threads
              }
              if !allCalled { round.waitTimedOut.store(true, ordering: .relaxed) }
              return key * 100 + thread
            }
          }
        }, "the threads did not finish in time")
      for (key, round) in rounds.enumerated() {
        #expect(round.makeValueCalls.load(ordering: .relaxed) == 1, "key \(key)")
        let timedOut = round.waitTimedOut.load(ordering: .relaxed)
        #expect(!timedOut, "key \(key)")
        let stored = try #require(store[key])
        #expect(stored / 100 == key)
        #expect(received.allSatisfy { $0[key] == stored }, "key \(key)")
      }
      #expect(store.count == rounds.count)
    }

    @Test func whenTheCreatorThrowsOneWaitingCallerCreatesTheValue() throws {
      for key in 0..<20 {
        let store = MemoryStore<Int, Int>()
        let creating = Atomic<Bool>(false)
        let arrived = Atomic<Int>(0)
        let creations = Atomic<Int>(0)
        let outcomes = try #require(
          runOnThreads(8) { thread -> Result<Int, Failure> in
            if thread == 0 {
              do {
                return .success(
                  try store.valueOrInsert(forKey: key) {
                    creating.store(true, ordering: .relaxed)
                    // Throw only once the seven others are calling for the same key.
                    _ = spinWait(timeout: 10) { arrived.load(ordering: .relaxed) == 7 }
                    throw Failure(id: key)
                  })
              } catch {
                return .failure(error as? Failure ?? Failure(id: -1))
              }
            }
            _ = spinWait(timeout: 10) { creating.load(ordering: .relaxed) }
            arrived.wrappingAdd(1, ordering: .relaxed)
            return .success(
              store.valueOrInsert(forKey: key) {
                creations.wrappingAdd(1, ordering: .relaxed)
                return thread
              })
          })
        #expect(outcomes[0] == .failure(Failure(id: key)))
        let stored = try #require(store[key])
        #expect((1..<8).contains(stored))
        #expect(outcomes.dropFirst().allSatisfy { $0 == .success(stored) })
        #expect(creations.load(ordering: .relaxed) == 1)
      }
    }

    struct HelperObservations: Sendable, Equatable {
      var otherAfterWrite: Int?
      var keyBeingCreated: Int?
      var created: Int
      var removed: Int?
      var batch: [String: Int]
    }

    @Test func makeValueDoesNotBlockOtherThreads() {
      let store = MemoryStore<String, Int>()
      store["other"] = 1
      let observations = Locked<HelperObservations?>(nil)
      let value = store.valueOrInsert(forKey: "slow") {
        // While this creation runs, another thread reads and writes other keys, creates
        // another key, and reads the key being created.
        let helper = startThread {
          store["other"] = 2
          let otherAfterWrite = store["other"]
          let keyBeingCreated = store["slow"]
          let created = store.valueOrInsert(forKey: "another") { 3 }
          let removed = store.removeValue(forKey: "other")
          store.addEntries(["x": 4, "y": 5])
          let batch = store.values(forKeys: ["x", "y", "slow"])
          observations.withLock {
            $0 = HelperObservations(
              otherAfterWrite: otherAfterWrite, keyBeingCreated: keyBeingCreated,
              created: created, removed: removed, batch: batch)
          }
        }
        #expect(helper.wait(timeout: 10), "another thread was blocked while makeValue ran")
        return 42
      }
      #expect(value == 42)
      let expected = HelperObservations(
        otherAfterWrite: 2, keyBeingCreated: nil, created: 3, removed: 2, batch: ["x": 4, "y": 5])
      #expect(observations.value == expected)
      #expect(store.allItems == ["slow": 42, "another": 3, "x": 4, "y": 5])
    }

    @Test func creationsOfDifferentKeysProceedSideBySide() {
      let store = MemoryStore<Int, Int>()
      // Each creation waits for the other to start: if creations were serialised, neither
      // wait could succeed.
      let started = (0..<2).map { _ in TimedSemaphore() }
      let outcomes = runOnThreads(2, timeout: 30) { thread in
        store.valueOrInsert(forKey: thread) {
          started[thread].signal()
          return started[1 - thread].wait(timeout: 10) ? thread + 10 : -1
        }
      }
      #expect(outcomes == [10, 11])
    }
  }
}
