import Synchronization
import Testing

@testable import MemoryStoreKit

extension StoreContractTests {
  /// `timeToRefresh`: a get-or-load that hits an entry written long enough ago returns it at
  /// once and starts one background reload, which replaces the entry unless a write or a
  /// removal came first; a failure keeps the entry and is reported.
  @Suite("Refresh after write") struct RefreshAfterWrite {
    typealias ControlledBulkLoad = StoreContractTests.BulkGetOrLoad.ControlledBulkLoad
    struct Failure: Error, Equatable {}

    /// A store refreshing entries 10 s after their write, on a clock the test moves, and the
    /// ends of its reloads, as they happen.
    static func refreshingStore() -> (MemoryStore<String, Int>, HeldScheduler, AsyncStream<Void>) {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.timeToRefresh = .seconds(10)
      let (reloads, continuation) = AsyncStream.makeStream(of: Void.self)
      store._inFlight.withLock { $0.afterReload = { continuation.yield() } }
      return (store, clock, reloads)
    }

    static func next(_ reloads: AsyncStream<Void>) async {
      for await _ in reloads { break }
    }

    @Test func aDueHitReturnsAtOnceAndOneReloadReplacesTheEntry() async throws {
      let (store, clock, reloads) = Self.refreshingStore()
      #expect(store.timeToRefresh == .seconds(10))
      store["q"] = 1
      let load = ControlledBulkLoad { _ in ["q": 2] }
      clock.move(by: .seconds(9))
      #expect(try await store.value(forKey: "q") { -1 } == 1)
      #expect(load.allRequests.isEmpty)
      clock.move(by: .seconds(1))
      // Three hits while the reload waits: each returns the stored value at once, one reload.
      for _ in 0..<3 {
        #expect(try await store.value(forKey: "q") { try await load.run(["q"])["q"]! } == 1)
      }
      await load.waitUntilStarted()
      #expect(store["q"] == 1)
      load.letThrough()
      await Self.next(reloads)
      #expect(store["q"] == 2)
      #expect(load.allRequests == [["q"]])
      // Written by the reload just now: not due again for 10 s.
      clock.move(by: .seconds(9))
      #expect(try await store.value(forKey: "q") { -1 } == 2)
      #expect(store._policyMismatch() == nil)
    }

    @Test func readsWithoutALoaderNeverRefresh() async throws {
      let (store, clock, _) = Self.refreshingStore()
      store["q"] = 1
      clock.move(by: .seconds(60))
      let calls = Mutex(0)
      #expect(store["q"] == 1)
      #expect(store.values(forKeys: ["q"]) == ["q": 1])
      #expect(store.valueOrInsert(forKey: "q") { 5 } == 1)
      store.timeToRefresh = nil
      #expect(
        try await store.value(forKey: "q") {
          calls.withLock { $0 += 1 }
          return 3
        } == 1)
      #expect(calls.withLock { $0 } == 0)
    }

    @Test func aFailedReloadKeepsTheEntryAndIsReported() async throws {
      let (store, clock, reloads) = Self.refreshingStore()
      let reported = Mutex<[String]>([])
      store.onRefreshFailure = { key, error in
        #expect(error is Failure)
        reported.withLock { $0.append(key) }
      }
      store["q"] = 1
      clock.move(by: .seconds(10))
      #expect(try await store.value(forKey: "q") { throw Failure() } == 1)
      await Self.next(reloads)
      #expect(reported.withLock { $0 } == ["q"])
      #expect(store["q"] == 1)
      // Still due: the next hit tries again.
      #expect(try await store.value(forKey: "q") { 2 } == 1)
      await Self.next(reloads)
      #expect(store["q"] == 2)
      #expect(reported.withLock { $0 } == ["q"])
    }

    @Test func aWriteOrARemovalDuringTheReloadWins() async throws {
      let (store, clock, reloads) = Self.refreshingStore()
      store.addEntries(["a": 1, "b": 1, "c": 1, "fresh": 1])
      clock.move(by: .seconds(5))
      store["fresh"] = 2
      clock.move(by: .seconds(5))
      let load = ControlledBulkLoad { keys in
        Dictionary(uniqueKeysWithValues: keys.map { ($0, 10) })
      }
      let found = try await store.values(forKeys: ["a", "b", "c", "fresh", "missing"]) { keys in
        keys == ["missing"] ? [:] : try await load.run(keys)
      }
      #expect(found == ["a": 1, "b": 1, "c": 1, "fresh": 2])
      await load.waitUntilStarted()
      #expect(load.allRequests.map { Set($0) } == [["a", "b", "c"]], "one call, due keys only")
      store["a"] = 5
      store["c"] = nil
      load.letThrough()
      await Self.next(reloads)
      #expect(store.allItems == ["a": 5, "b": 10, "fresh": 2], "c never comes back")
    }

    @Test func aReloadedValueLivesItsOwnTimeToLiveAndExpiryStillApplies() async throws {
      let (store, clock, reloads) = Self.refreshingStore()
      store.defaultTimeToLive = .seconds(15)
      store["read"] = 1
      store["unread"] = 1
      clock.move(by: .seconds(12))
      #expect(try await store.value(forKey: "read") { 2 } == 1)
      await Self.next(reloads)
      clock.move(by: .seconds(4))
      #expect(store.allItems == ["read": 2], "the unread entry expired at 15 s, unrefreshed")
      clock.move(by: .seconds(10))
      #expect(store["read"] == 2)
      clock.move(by: .seconds(1))
      #expect(store["read"] == nil, "reloaded at 12 s, it lives until 27 s")
    }

    @Test func anEntryWrittenBeforeRefreshWasSetIsDueFromThatMoment() async throws {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store["old"] = 1
      clock.move(by: .seconds(100))
      let (reloads, continuation) = AsyncStream.makeStream(of: Void.self)
      store._inFlight.withLock { $0.afterReload = { continuation.yield() } }
      store.timeToRefresh = .seconds(10)
      clock.move(by: .seconds(9))
      #expect(try await store.value(forKey: "old") { 2 } == 1)
      clock.move(by: .seconds(1))
      #expect(try await store.value(forKey: "old") { 2 } == 1)
      await Self.next(reloads)
      #expect(store["old"] == 2)
    }

    @Test func aMissDuringAReloadWaitsForIt() async throws {
      let (store, clock, reloads) = Self.refreshingStore()
      store["q"] = 1
      clock.move(by: .seconds(10))
      let load = ControlledBulkLoad { _ in ["q": 2] }
      #expect(try await store.value(forKey: "q") { try await load.run(["q"])["q"]! } == 1)
      await load.waitUntilStarted()
      store["q"] = nil
      let otherLoads = Mutex(0)
      async let missed = store.value(forKey: "q") {
        otherLoads.withLock { $0 += 1 }
        return 3
      }
      // The caller that missed waits for the reload rather than loading.
      while store._inFlight.withLock({ $0.loads["q"] })?.state.withLock({ $0.waiters.count }) != 1 {
        await Task.yield()
      }
      #expect(otherLoads.withLock { $0 } == 0)
      load.letThrough()
      await Self.next(reloads)
      // The removal won over the reload: nothing is stored, but the caller that waited gets
      // the value reloaded, with no second load.
      #expect(try await missed == 2)
      #expect(otherLoads.withLock { $0 } == 0)
      #expect(load.allRequests.count == 1)
      #expect(store["q"] == nil)
    }
  }
}
