import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// The store's cost function, costs given where a loader stores, and what a
  /// read-modify-write keeps.
  @Suite("Eviction: entry costs") struct EntryCosts {
    /// A thumbnail of `kibibytes` KiB.
    static func thumbnail(_ kibibytes: Int) -> [UInt8] {
      [UInt8](repeating: 0, count: kibibytes << 10)
    }

    /// The sum of the costs of the entries present, by their sizes.
    static func sizes(_ store: MemoryStore<Int, [UInt8]>) -> Int {
      store.values.reduce(0) { $0 + $1.count }
    }

    @Test func aCostLimitedCacheThatLoadsThroughGetOrLoadStaysWithinItsLimit() async throws {
      let limit = 4 << 20
      let thumbnails = MemoryStore<Int, [UInt8]>(name: "thumbnails")
      thumbnails.entryCost = { _, data in data.count }
      thumbnails.costLimit = limit
      for id in 0..<50 {
        let data = try await thumbnails.value(forKey: id) { Self.thumbnail(150) }
        #expect(data.count == 150 << 10)
        #expect(thumbnails.statistics.totalCost <= limit)
      }
      let statistics = thumbnails.statistics
      #expect(statistics.totalCost == Self.sizes(thumbnails))
      #expect(statistics.totalCost > limit - (150 << 10))
      #expect(statistics.evictions[.costLimit] == UInt64(50 - thumbnails.count))
      #expect(thumbnails.count == limit / (150 << 10))
      #expect(thumbnails._policyMismatch() == nil)
    }

    @Test func everyWriteWithoutACostOfItsOwnIsWeighed() async throws {
      let store = MemoryStore<Int, [UInt8]>()
      store.entryCost = { _, data in data.count }
      store[1] = [1]
      store.updateValue([1, 2], forKey: 2)
      store.addEntries([3: [1, 2, 3], 4: [1, 2, 3, 4]])
      store.setValue([1, 2, 3, 4, 5], forKey: 5)
      _ = store.valueOrInsert(forKey: 6) { [UInt8](repeating: 0, count: 6) }
      _ = try await store.value(forKey: 7) { [UInt8](repeating: 0, count: 7) }
      store.update(forKey: 8) { $0 = [UInt8](repeating: 0, count: 8) }
      store.merge([(9, [UInt8](repeating: 0, count: 9))]) { old, _ in old }
      #expect(store.count == 9)
      #expect(store.statistics.totalCost == 45)
      // A cost given to the write wins.
      store.setValue([0], forKey: 1, cost: 100)
      #expect(store.statistics.totalCost == 144)
      #expect(store._policyMismatch() == nil)
    }

    @Test func aCostGivenToAGetOrCreateWinsOverTheStoreFunction() async throws {
      let store = MemoryStore<Int, [UInt8]>()
      #expect(store.valueOrInsert(forKey: 1, cost: \.count) { [1, 2, 3] } == [1, 2, 3])
      #expect(store.statistics.totalCost == 3)
      store.entryCost = { _, _ in 1_000 }
      let seven: @Sendable ([UInt8]) -> Int = { _ in 7 }
      _ = try await store.value(forKey: 2, cost: seven) { [1] }
      #expect(store.statistics.totalCost == 10)
      // A hit stores nothing and weighs nothing.
      _ = try await store.value(forKey: 2, cost: \.count) { [1, 2, 3, 4, 5] }
      #expect(store.statistics.totalCost == 10)
    }

    @Test func aValueAboveTheLimitLoadedIsReturnedToItsCallersAndNotKept() async throws {
      let store = MemoryStore<Int, [UInt8]>()
      store.entryCost = { _, data in data.count }
      store.costLimit = 100
      store[1] = [UInt8](repeating: 1, count: 60)
      let loaded = try await store.value(forKey: 2) { [UInt8](repeating: 2, count: 200) }
      #expect(loaded.count == 200)
      #expect(store[2] == nil)
      // It evicted only itself.
      #expect(store[1]?.count == 60)
      #expect(store.statistics.evictions[.costLimit] == 1)
      #expect(store.statistics.totalCost == 60)
      // The same with a synchronous get-or-create.
      let made = store.valueOrInsert(forKey: 3) { [UInt8](repeating: 3, count: 101) }
      #expect(made.count == 101)
      #expect(store[3] == nil)
      #expect(store[1]?.count == 60)
      #expect(store.statistics.evictions[.costLimit] == 2)
    }

    @Test func updateAndMergeKeepTheEntrysCostAndTimeToLive() {
      let scheduler = ManualScheduler()
      let codes = MemoryStore<String, String>(scheduler: scheduler)
      codes.setValue("123456", forKey: "otp", cost: 5, timeToLive: .seconds(60))
      codes.setValue("a", forKey: "merged", cost: 3, timeToLive: .seconds(60))
      scheduler.advance(by: .seconds(30))
      codes.update(forKey: "otp") { $0 = "654321" }
      codes.merge([("merged", "b")]) { old, new in old + new }
      #expect(codes.statistics.totalCost == 8)
      scheduler.advance(by: .seconds(29))
      #expect(codes["otp"] == "654321")
      #expect(codes["merged"] == "ab")
      // Sixty seconds after they were set, not after they were updated.
      scheduler.advance(by: .seconds(2))
      #expect(codes["otp"] == nil)
      #expect(codes["merged"] == nil)
      #expect(codes.statistics.totalCost == 0)
      #expect(codes.statistics.evictions[.expired] == 2)
    }

    @Test func anUpdateUnderACostFunctionWeighsTheNewValue() {
      let store = MemoryStore<Int, [UInt8]>()
      store.entryCost = { _, data in data.count }
      store.costLimit = 10
      store[1] = [1, 2]
      store[2] = [1, 2, 3]
      store.update(forKey: 1) { $0?.append(contentsOf: [3, 4, 5, 6]) }
      #expect(store.statistics.totalCost == 9)
      // Growing past the limit evicts another entry, never the one updated.
      store.update(forKey: 1) { $0?.append(contentsOf: [7, 8]) }
      #expect(store[1]?.count == 8)
      #expect(store[2] == nil)
      #expect(store.statistics.totalCost == 8)
      #expect(store._policyMismatch() == nil)
    }

    @Test func aNewKeyCreatedByAnUpdateGetsTheDefaultTimeToLive() {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.defaultTimeToLive = .seconds(10)
      store.update(forKey: "n", default: 0) { $0 += 1 }
      scheduler.advance(by: .seconds(5))
      store.update(forKey: "n", default: 0) { $0 += 1 }
      #expect(store["n"] == 2)
      scheduler.advance(by: .seconds(6))
      #expect(store["n"] == nil)
    }

    @Test func entriesWrittenBeforeTheCostFunctionKeepTheirCosts() {
      let store = MemoryStore<String, [UInt8]>()
      store["before"] = [1, 2, 3]
      store.setValue([1], forKey: "given", cost: 2)
      store.entryCost = { _, data in data.count }
      #expect(store.statistics.totalCost == 2)
      store["after"] = [1, 2, 3, 4]
      #expect(store.statistics.totalCost == 6)
      store.entryCost = nil
      store["later"] = [1, 2, 3, 4]
      #expect(store.statistics.totalCost == 6)
      #expect(store.entryCost == nil)
      // A negative cost counts as 0.
      store.setValue([1], forKey: "negative", cost: -5)
      #expect(store.statistics.totalCost == 6)
    }

    @Test func theCostFunctionRunsOutsideEveryLockAndMayUseTheStore() async throws {
      let store = MemoryStore<Int, [UInt8]>()
      let calls = Atomic(0)
      store.entryCost = { [weak store] _, data in
        calls.wrappingAdd(1, ordering: .relaxed)
        // Both take the store's write lock: they would never return under it.
        _ = store?.costLimit
        _ = store?.statistics
        return data.count
      }
      store.costLimit = 1_000
      store[1] = [1]
      store.addEntries([2: [1, 2]])
      store.update(forKey: 1) { $0 = [1, 2, 3] }
      _ = try await store.value(forKey: 3) { [1, 2, 3, 4] }
      #expect(store.statistics.totalCost == 9)
      #expect(calls.load(ordering: .relaxed) == 4)
    }

    @Test func aHugeCostCountsAsTheMaximumAndNeverOverflowsTheTotal() {
      let store = MemoryStore<Int, [UInt8]>()
      store.entryCost = { _, data in data.isEmpty ? Int.max : data.count }
      store.costLimit = 100
      store[1] = [1]
      store[2] = []  // over the limit by itself: evicted by its own write
      #expect(store[2] == nil)
      #expect(store.statistics.totalCost == 1)
      store.costLimit = nil
      for key in 10..<14 { store[key] = [] }
      store.setValue([1], forKey: 20, cost: .max)
      #expect(store.statistics.totalCost == 1 + 5 << 48)
      #expect(store._policyMismatch() == nil)
    }

    @Test func concurrentSettersOfTheCostFunctionLeaveItAndWeighingAgreeing() throws {
      for round in 0..<20 {
        let store = MemoryStore<Int, [UInt8]>()
        let weigh: MemoryStore<Int, [UInt8]>.EntryCost = { _, data in data.count }
        let done = try #require(
          runOnThreads(2) { thread in
            for step in 0..<500 { store.entryCost = (step + thread) % 2 == 0 ? weigh : nil }
            return true
          })
        #expect(done == [true, true])
        store[round] = [1, 2, 3]
        let weighs = store.entryCost != nil
        #expect(store.statistics.totalCost == (weighs ? 3 : 0), "round \(round)")
      }
    }

    @Test func theStoresFunctionsStayCallableAfterManyReads() {
      // Each read of a function kept as a generic lock's own state used to wrap it in two
      // more conversion thunks, until calling it overflowed the stack.
      let store = MemoryStore<Int, [UInt8]> { _, value, _ in value.isEmpty }
      store.entryCost = { _, data in data.count }
      for _ in 0..<300_000 {
        _ = store.evictionDecider
        _ = store.entryCost
      }
      store[1] = []
      store[2] = [1, 2]
      #expect(store.purgeEvictableItems() == [1: []])
      #expect(store.statistics.totalCost == 2)
    }

    @Test func aTrailingClosureInAsyncCodeLoadsInATaskOfItsOwn() async throws {
      let store = MemoryStore<String, Int>()
      // A cancelled caller stops waiting at once, while the load goes on; creating on the
      // calling task would return the value instead.
      let cancelled = Task {
        withUnsafeCurrentTask { $0?.cancel() }
        return try await store.value(forKey: "k") { 42 }
      }
      await #expect(throws: CancellationError.self) { try await cancelled.value }
      // The load stored its value for the next caller.
      #expect(try await store.value(forKey: "k") { 0 } == 42)
    }
  }
}
