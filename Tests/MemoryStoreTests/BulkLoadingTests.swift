import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `values(forKeys:orLoad:)`: one load call for every miss, loads shared with single-key
  /// callers both ways, errors and cancellation as for one key.
  @Suite("Bulk get or load") struct BulkGetOrLoad {
    struct Failure: Error, Equatable {}

    /// A bulk load the test controls: it records the keys it is asked for, reports that it
    /// started, then waits to be let through and returns `result(keys)`.
    final class ControlledBulkLoad: Sendable {
      let requests = Mutex<[[String]]>([])
      let started: AsyncStream<Void>
      let startedContinuation: AsyncStream<Void>.Continuation
      let gate: AsyncStream<Void>
      let gateContinuation: AsyncStream<Void>.Continuation
      let result: @Sendable ([String]) throws -> [String: Int]

      init(result: @escaping @Sendable ([String]) throws -> [String: Int]) {
        (started, startedContinuation) = AsyncStream.makeStream()
        (gate, gateContinuation) = AsyncStream.makeStream()
        self.result = result
      }

      func run(_ keys: [String]) async throws -> [String: Int] {
        requests.withLock { $0.append(keys) }
        startedContinuation.yield()
        for await _ in gate { break }
        return try result(keys)
      }

      func waitUntilStarted() async {
        for await _ in started { break }
      }

      func letThrough() { gateContinuation.yield() }

      var allRequests: [[String]] { requests.withLock { $0 } }
    }

    /// Every key's value, as the loaders in these tests compute it.
    static func value(of key: String) -> Int {
      key.unicodeScalars.reduce(0) { $0 * 31 + Int($1.value) }
    }

    @Test func hitsAreReadAndEveryMissIsLoadedByOneCall() async throws {
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      store["b"] = 2
      let requests = Mutex<[[String]]>([])
      let values = try await store.values(forKeys: ["a", "x", "b", "y", "x", "z"]) { keys in
        requests.withLock { $0.append(keys) }
        return Dictionary(uniqueKeysWithValues: keys.map { ($0, Self.value(of: $0)) })
      }
      #expect(
        values == [
          "a": 1, "b": 2, "x": Self.value(of: "x"), "y": Self.value(of: "y"),
          "z": Self.value(of: "z"),
        ])
      #expect(requests.withLock { $0 } == [["x", "y", "z"]], "one call, each missing key once")
      #expect(store.count == 5)
      #expect(store.statistics.hits == 2)
      #expect(store.statistics.misses == 3)
      // All present now: the loader is not called.
      let again = try await store.values(forKeys: ["x", "a"]) { _ in
        Issue.record("loaded although every key is stored")
        return [:]
      }
      #expect(again == ["x": Self.value(of: "x"), "a": 1])
    }

    @Test func keysTheLoaderLeavesOutAreAbsentAndNotStored() async throws {
      let store = MemoryStore<String, Int>()
      let values = try await store.values(forKeys: ["found", "missing"]) { _ in
        // A value for a key not asked for is ignored.
        ["found": 1, "other": 2]
      }
      #expect(values == ["found": 1])
      #expect(store.allItems == ["found": 1])
    }

    @Test func aKeyAlreadyLoadingIsNotAskedForAgain() async throws {
      let store = MemoryStore<String, Int>()
      let single = StoreContractTests.GetOrLoad.ControlledLoad { 42 }
      let first = Task { try await store.value(forKey: "a") { try await single.run() } }
      await single.waitUntilStarted()
      let bulk = Task {
        try await store.values(forKeys: ["a", "b", "c"]) { keys in
          #expect(keys == ["b", "c"])
          return Dictionary(uniqueKeysWithValues: keys.map { ($0, Self.value(of: $0)) })
        }
      }
      // The bulk call waits for the single load of "a".
      single.letThrough()
      #expect(try await first.value == 42)
      let values = try await bulk.value
      #expect(values == ["a": 42, "b": Self.value(of: "b"), "c": Self.value(of: "c")])
      #expect(single.calls.load(ordering: .relaxed) == 1)
    }

    @Test func singleKeyCallersShareTheBulkLoadAndLoadWhatItLeftOut() async throws {
      let store = MemoryStore<String, Int>()
      // The bulk loader finds "a" and not "b".
      let bulkLoad = ControlledBulkLoad { keys in
        keys.contains("a") ? ["a": 1] : [:]
      }
      let bulk = Task {
        try await store.values(forKeys: ["a", "b"]) { try await bulkLoad.run($0) }
      }
      await bulkLoad.waitUntilStarted()
      let ownLoads = Locked(0)
      let forA = Task {
        try await store.value(forKey: "a") {
          ownLoads.withLock { $0 += 1 }
          return -1
        }
      }
      let forB = Task {
        try await store.value(forKey: "b") {
          ownLoads.withLock { $0 += 1 }
          return 2
        }
      }
      bulkLoad.letThrough()
      #expect(try await bulk.value == ["a": 1])
      #expect(try await forA.value == 1, "the bulk load's value")
      #expect(try await forB.value == 2, "its own load, since the bulk load found none")
      #expect(ownLoads.value == 1, "only \"b\" was loaded again")
      #expect(bulkLoad.allRequests == [["a", "b"]])
      #expect(store.allItems == ["a": 1, "b": 2])
    }

    @Test func aThrownErrorReachesEveryWaiterAndStoresNothing() async throws {
      let store = MemoryStore<String, Int>()
      let bulkLoad = ControlledBulkLoad { _ in throw Failure() }
      let bulk = Task {
        try await store.values(forKeys: ["a", "b"]) { try await bulkLoad.run($0) }
      }
      await bulkLoad.waitUntilStarted()
      let forA = Task { try await store.value(forKey: "a") { 7 } }
      bulkLoad.letThrough()
      await #expect(throws: Failure.self) { try await bulk.value }
      // "a" either waited for the failed load (and throws its error) or came after it.
      switch await forA.result {
      case .success(let value): #expect(value == 7)
      case .failure(let error): #expect(error is Failure)
      }
      #expect(store["b"] == nil)
      // The next call loads again.
      #expect(try await store.values(forKeys: ["b"]) { _ in ["b": 3] } == ["b": 3])
    }

    @Test func aCancelledCallerStopsWaitingAndTheLoadStillStores() async throws {
      let store = MemoryStore<String, Int>()
      let bulkLoad = ControlledBulkLoad { keys in
        Dictionary(uniqueKeysWithValues: keys.map { ($0, Self.value(of: $0)) })
      }
      let bulk = Task {
        try await store.values(forKeys: ["a", "b"]) { try await bulkLoad.run($0) }
      }
      await bulkLoad.waitUntilStarted()
      bulk.cancel()
      await #expect(throws: CancellationError.self) { try await bulk.value }
      bulkLoad.letThrough()
      // A later caller waits for the same load (or finds what it stored): nothing is loaded
      // again.
      let values = try await store.values(forKeys: ["a", "b"]) { _ in
        Issue.record("loaded again")
        return [:]
      }
      #expect(values == ["a": Self.value(of: "a"), "b": Self.value(of: "b")])
      #expect(bulkLoad.allRequests.count == 1)
    }

    @Test func concurrentBulkAndSingleCallersLoadEachKeyOnce() async throws {
      let store = MemoryStore<String, Int>()
      let keys = (0..<24).map { "k\($0)" }
      let loads = Locked<[String: Int]>([:])
      @Sendable func note(_ loaded: [String]) {
        loads.withLock { counts in for key in loaded { counts[key, default: 0] += 1 } }
      }
      try await withThrowingTaskGroup(of: [String: Int].self) { group in
        for caller in 0..<64 {
          group.addTask {
            if caller.isMultiple(of: 3) {
              let key = keys[caller % keys.count]
              let value = try await store.value(forKey: key) {
                note([key])
                await Task.yield()
                return Self.value(of: key)
              }
              return [key: value]
            }
            let wanted = (0..<6).map { keys[(caller * 5 + $0 * 7) % keys.count] }
            return try await store.values(forKeys: wanted) { missing in
              note(missing)
              await Task.yield()
              return Dictionary(uniqueKeysWithValues: missing.map { ($0, Self.value(of: $0)) })
            }
          }
        }
        for try await values in group {
          for (key, value) in values { #expect(value == Self.value(of: key)) }
        }
      }
      let counts = loads.value
      #expect(counts.values.allSatisfy { $0 == 1 }, "loads per key: \(counts)")
      #expect(store.count == counts.count)
    }
  }
}
