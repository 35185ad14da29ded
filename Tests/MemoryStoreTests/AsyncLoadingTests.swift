import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `value(forKey:orLoad:)`: one asynchronous load per key, no lock held while it runs,
  /// cancellation per caller.
  @Suite("Get or load") struct GetOrLoad {
    struct Failure: Error, Equatable {}

    /// A load the test controls: it reports that it started, then waits to be let through.
    final class ControlledLoad: Sendable {
      let calls = Atomic(0)
      let started: AsyncStream<Void>
      let startedContinuation: AsyncStream<Void>.Continuation
      let gate: AsyncStream<Void>
      let gateContinuation: AsyncStream<Void>.Continuation
      let result: @Sendable () throws -> Int

      init(result: @escaping @Sendable () throws -> Int) {
        (started, startedContinuation) = AsyncStream.makeStream()
        (gate, gateContinuation) = AsyncStream.makeStream()
        self.result = result
      }

      func run() async throws -> Int {
        calls.wrappingAdd(1, ordering: .relaxed)
        startedContinuation.yield()
        for await _ in gate { break }
        return try result()
      }

      func waitUntilStarted() async {
        for await _ in started { break }
      }

      func letThrough() { gateContinuation.yield() }
    }

    @Test func aMissLoadsOnceAndStoresAHitNeverLoads() async throws {
      let store = MemoryStore<String, Int>()
      let loads = Atomic(0)
      let load: @Sendable () async throws -> Int = {
        loads.wrappingAdd(1, ordering: .relaxed)
        return 42
      }
      #expect(try await store.value(forKey: "k", orLoad: load) == 42)
      #expect(store["k"] == 42)
      #expect(try await store.value(forKey: "k", orLoad: load) == 42)
      #expect(loads.load(ordering: .relaxed) == 1)
    }

    @Test func aLoadCountsAsTheCallersOneLookup() async throws {
      // The load's own check that the key is still absent is not a lookup: statistics see
      // one miss for the call that loads, one hit for the call that finds the value.
      let store = MemoryStore<String, Int>()
      #expect(try await store.value(forKey: "k", orLoad: { 42 }) == 42)
      #expect(store.statistics.misses == 1)
      #expect(store.statistics.hits == 0)
      #expect(try await store.value(forKey: "k", orLoad: { 0 }) == 42)
      #expect(store.statistics.misses == 1)
      #expect(store.statistics.hits == 1)
    }

    @Test func concurrentMissesShareOneLoad() async throws {
      let store = MemoryStore<String, Int>()
      let load = ControlledLoad { 42 }
      let values = try await withThrowingTaskGroup(of: Int.self) { group in
        for _ in 0..<16 {
          group.addTask { try await store.value(forKey: "k") { try await load.run() } }
        }
        await load.waitUntilStarted()
        load.letThrough()
        return try await group.reduce(into: []) { $0.append($1) }
      }
      #expect(values == Array(repeating: 42, count: 16))
      #expect(load.calls.load(ordering: .relaxed) == 1)
      #expect(store["k"] == 42)
    }

    @Test func aCancelledCallerStopsWaitingAndTheLoadGoesOnForTheOthers() async throws {
      let store = MemoryStore<String, Int>()
      let load = ControlledLoad { 42 }
      let first = Task { try await store.value(forKey: "k") { try await load.run() } }
      await load.waitUntilStarted()
      let second = Task { try await store.value(forKey: "k") { try await load.run() } }
      first.cancel()
      await #expect(throws: CancellationError.self) { try await first.value }
      #expect(store["k"] == nil, "the load has not finished")
      load.letThrough()
      #expect(try await second.value == 42)
      #expect(store["k"] == 42)
      #expect(load.calls.load(ordering: .relaxed) == 1)
    }

    @Test func manyCallersOverFewKeysLoadEachKeyOnceEvenWithCancellations() async throws {
      let store = MemoryStore<Int, Int>()
      let loads = Locked([Int](repeating: 0, count: 8))
      let tasks = (0..<256).map { index in
        Task { () -> Int? in
          let key = index % 8
          return try? await store.value(forKey: key) {
            loads.withLock { $0[key] += 1 }
            await Task.yield()
            return key * 10
          }
        }
      }
      // Every third caller gives up; the loads go on for the others.
      for (index, task) in tasks.enumerated() where index % 3 == 0 { task.cancel() }
      for (index, task) in tasks.enumerated() {
        let value = await task.value
        if index % 3 != 0 { #expect(value == (index % 8) * 10) }
      }
      #expect(loads.value.allSatisfy { $0 == 1 }, "loads per key: \(loads.value)")
      // Loads whose callers all gave up still stored their values.
      #expect(store.count == 8)
    }

    @Test func aThrownErrorStoresNothingAndReachesEveryWaiter() async throws {
      let store = MemoryStore<String, Int>()
      let load = ControlledLoad { throw Failure() }
      let waiters = (0..<4).map { _ in
        Task { try await store.value(forKey: "k") { try await load.run() } }
      }
      await load.waitUntilStarted()
      load.letThrough()
      for waiter in waiters {
        await #expect(throws: (any Error).self) { try await waiter.value }
      }
      #expect(store["k"] == nil)
      // The next call loads again.
      #expect(try await store.value(forKey: "k", orLoad: { 7 }) == 7)
    }

    @Test func aWriteDuringTheLoadWins() async throws {
      let store = MemoryStore<String, Int>()
      let load = ControlledLoad { 42 }
      let caller = Task { try await store.value(forKey: "k") { try await load.run() } }
      await load.waitUntilStarted()
      store["k"] = 7
      load.letThrough()
      #expect(try await caller.value == 7)
      #expect(store["k"] == 7)
    }

    @Test func anExpiredEntryIsLoadedAgain() async throws {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "k", timeToLive: .seconds(1))
      #expect(try await store.value(forKey: "k", orLoad: { 2 }) == 1)
      clock.advance(by: .seconds(1))
      #expect(try await store.value(forKey: "k", orLoad: { 2 }) == 2)
    }

    @Test func theLoadMayReadAndWriteTheStore() async throws {
      let store = MemoryStore<String, Int>()
      store["base"] = 40
      let value = try await store.value(
        forKey: "k",
        orLoad: {
          store["log"] = 1
          return store["base"]! + 2
        })
      #expect(value == 42)
      #expect(store.allItems == ["base": 40, "log": 1, "k": 42])
    }
  }
}
