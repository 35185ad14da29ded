import Foundation
import Observation
import Synchronization
import Testing

@testable import MemoryStoreKit

extension StoreContractTests {
  /// `tracksReads`: reads inside an Observation tracking scope register what they read, and a
  /// later change of it fires the observation once, after the write, on the store's scheduler,
  /// outside every lock.
  @Suite("Observation: tracked reads") struct TrackedReads {
    /// Counts the times an observation fired.
    final class Fired: Sendable {
      let count = Atomic(0)
      var value: Int { count.load(ordering: .relaxed) }
      func callAsFunction() { count.wrappingAdd(1, ordering: .relaxed) }
    }

    /// Tracks `read` once; returns the counter its `onChange` raises.
    static func track(_ read: () -> Void) -> Fired {
      let fired = Fired()
      withObservationTracking(read) { fired() }
      return fired
    }

    /// Two keys whose buckets differ, so that neither's change may fire the other's observers.
    static let keys: (String, String) = {
      var other = 0
      while _ReadObservers.bucket("a".hashValue, presence: false)
        == _ReadObservers.bucket("b\(other)".hashValue, presence: false)
      {
        other += 1
      }
      return ("a", "b\(other)")
    }()

    static func trackingStore(scheduler: some StoreScheduler = .dispatch) -> MemoryStore<
      String, Int
    > {
      MemoryStore<String, Int>(scheduler: scheduler, tracksReads: true)
    }

    /// A write hands its notices to the store's scheduler and returns; `flush()` waits for them.
    @Test func aKeyReadFiresOnItsWriteOnceAndNotOnAnotherKeys() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      #expect(store.tracksReads)
      store[key] = 1
      let fired = Self.track { _ = store[key] }
      store[other] = 1
      store[other] = nil
      await store.flush()
      #expect(fired.value == 0)
      store[key] = 2
      await store.flush()
      #expect(fired.value == 1)
      // One registration fires once, whatever follows.
      store[key] = 3
      await store.flush()
      #expect(fired.value == 1)
    }

    @Test func theObserverRunsAfterTheWriteAndMayReadAndWriteTheStore() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      let seen = Mutex<Int?>(nil)
      withObservationTracking {
        _ = store[key]
      } onChange: {
        // The write is visible, and no lock of the store is held.
        seen.withLock { $0 = store[key] }
        store[other] = 7
      }
      store[key] = 5
      await store.flush()
      #expect(seen.withLock { $0 } == 5)
      #expect(store[other] == 7)
    }

    @Test func removalsExpiryEvictionAndRemoveAllFireLikeWrites() async {
      let (key, other) = Self.keys
      let clock = ManualScheduler()
      let store = Self.trackingStore(scheduler: clock)

      store[key] = 1
      var fired = Self.track { _ = store[key] }
      store.removeValue(forKey: key)
      #expect(fired.value == 0)  // delivered by the scheduler
      clock.runDue()
      #expect(fired.value == 1)

      store.setValue(1, forKey: key, timeToLive: .seconds(10))
      clock.runDue()
      fired = Self.track { _ = store[key] }
      // The expiry timer removes it, and the delivery it schedules runs in the same advance.
      clock.advance(by: .seconds(11))
      #expect(fired.value == 1)

      store.countLimit = 1
      store[key] = 1
      clock.runDue()
      fired = Self.track { _ = store[key] }
      store[other] = 2  // evicts `key`
      #expect(store[key] == nil)
      clock.runDue()
      #expect(fired.value == 1)

      fired = Self.track { _ = store[other] }
      store.removeAll()
      await store.flush()
      #expect(fired.value == 1)
    }

    @Test func aMissIsTrackedAndFiresWhenTheKeyArrives() async {
      let (key, _) = Self.keys
      let store = Self.trackingStore()
      let fired = Self.track { #expect(store[key] == nil) }
      store[key] = 1
      await store.flush()
      #expect(fired.value == 1)
    }

    @Test func countFiresOnInsertionsAndRemovalsButNotOnANewValue() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      store[key] = 1
      for read in [{ _ = store.count }, { _ = store.isEmpty }, { _ = store.keys }] {
        let fired = Self.track(read)
        store[key] = 2
        await store.flush()
        #expect(fired.value == 0)
        store[other] = 1
        await store.flush()
        #expect(fired.value == 1)
        let again = Self.track(read)
        store[other] = nil
        await store.flush()
        #expect(again.value == 1)
      }
    }

    @Test func containsFiresOnPresenceButNotOnANewValue() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      store[key] = 1
      let fired = Self.track { _ = store.contains(key) }
      store[key] = 2
      store[other] = 2
      await store.flush()
      #expect(fired.value == 0)
      store[key] = nil
      await store.flush()
      #expect(fired.value == 1)
    }

    @Test func valuesAndAllItemsFireOnAnyChange() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      store[key] = 1
      for read in [{ _ = store.values }, { _ = store.allItems }] {
        let fired = Self.track(read)
        store[other] = 3
        await store.flush()
        #expect(fired.value == 1)
      }
      let bulk = Self.track { _ = store.values(forKeys: [key]) }
      store[other] = 4
      await store.flush()
      #expect(bulk.value == 0)
      store[key] = 4
      await store.flush()
      #expect(bulk.value == 1)
    }

    /// What SwiftUI's `environment(_:)` and `@Environment` take: an `Observable` class.
    @Test func aStoreIsObservable() {
      func passedDown<Model: Observable & AnyObject>(_ model: Model) -> Model { model }
      let store = Self.trackingStore()
      #expect(passedDown(store) === store)
    }

    @Test func aStoreThatDoesNotTrackReadsFiresNothing() async {
      let store = MemoryStore<String, Int>()
      #expect(!store.tracksReads)
      let fired = Self.track {
        _ = store["a"]
        _ = store.count
        _ = store.allItems
      }
      store["a"] = 1
      store.removeAll()
      await store.flush()
      #expect(fired.value == 0)
    }

    @Test func turningTrackingOffFiresEveryRegisteredObservation() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      let perKey = Self.track { _ = store[key] }
      let whole = Self.track { _ = store.count }
      store.tracksReads = false
      await store.flush()
      #expect(perKey.value == 1)
      #expect(whole.value == 1)
      // Off: reads register nothing.
      let untracked = Self.track { _ = store[other] }
      store[other] = 1
      await store.flush()
      #expect(untracked.value == 0)
      // On again: tracked again.
      store.tracksReads = true
      let again = Self.track { _ = store[other] }
      store[other] = 2
      await store.flush()
      #expect(again.value == 1)
    }

    /// Observation registers what a scope read when the scope ends. Notices are delivered on
    /// the store's scheduler, so a write made inside the scope, on the thread that delivers,
    /// is delivered after the registration.
    @Test func aWriteDuringTheRegistrationOnTheDeliveringThreadIsNotified() {
      let (key, _) = Self.keys
      let clock = ManualScheduler()
      let store = Self.trackingStore(scheduler: clock)
      let fired = Self.track {
        _ = store[key]
        store[key] = 1  // before the observation is registered
      }
      #expect(fired.value == 0)
      clock.runDue()
      #expect(fired.value == 1)
    }

    /// One write, one notice: an observer that registers again at once, as a SwiftUI view does
    /// when it renders, is told of the next change, and of nothing else.
    @Test func anObserverThatRegistersAgainIsToldOncePerChange() async {
      let (key, _) = Self.keys
      let clock = ManualScheduler()
      let store = Self.trackingStore(scheduler: clock)
      let fires = Atomic(0)
      @Sendable func register() {
        withObservationTracking {
          _ = store[key]
        } onChange: {
          fires.wrappingAdd(1, ordering: .relaxed)
          register()
        }
      }
      register()
      store[key] = 1
      clock.runDue()
      #expect(fires.load(ordering: .relaxed) == 1)
      // Nothing is sent again: not later, not by a flush.
      clock.advance(by: .seconds(1))
      await store.flush()
      #expect(fires.load(ordering: .relaxed) == 1)
      #expect(clock.pendingCount == 0)
      // Writes coalesce until the delivery: three writes, one notice.
      store[key] = 2
      store[key] = 3
      store[key] = 4
      clock.runDue()
      #expect(fires.load(ordering: .relaxed) == 2)
    }

    /// An expiry removed by a write that runs under a lock of the store (get-or-create's)
    /// reaches observers after that lock is released: an observer that uses the store there,
    /// get-or-create included, never meets a lock its thread holds.
    @Test func anExpiryRemovedUnderALockOfTheStoreIsNotifiedOutsideIt() async {
      let (key, other) = Self.keys
      let clock = HeldScheduler()
      let store = Self.trackingStore(scheduler: clock)
      store.setValue(1, forKey: key, timeToLive: .seconds(10))
      let seen = Mutex<Int?>(-1)
      withObservationTracking {
        _ = store[key]
      } onChange: {
        // Get-or-create, from the observer: it takes the lock that the first read held.
        let created = store.valueOrInsert(forKey: other + "-made") { 5 }
        seen.withLock { $0 = created }
      }
      clock.move(by: .seconds(11))
      // A miss of get-or-create writes under its lock; the write removes the expired entry.
      let finished = await finishes(within: 30) {
        #expect(store.valueOrInsert(forKey: other) { 7 } == 7)
        await store.flush()
      }
      #expect(finished)
      #expect(seen.withLock { $0 } == 5)
      #expect(store[key] == nil)
    }

    /// A purge holds the store's purge gate while it removes what the decider chose: its
    /// observers run on the scheduler, so that one that purges again is not turned away.
    @Test func anObserverOfAPurgeMayPurgeAgain() async {
      let (key, other) = Self.keys
      let store = Self.trackingStore()
      store.evictionDecider = { _, value, _ in value < 0 }
      store.evictionInterval = .zero
      store[key] = -1
      let purgedByObserver = Mutex<[String: Int]?>(nil)
      withObservationTracking {
        _ = store[key]
      } onChange: {
        store[other] = -2
        let purged = store.purgeEvictableItems()
        purgedByObserver.withLock { $0 = purged }
      }
      #expect(store.purgeEvictableItems() == [key: -1])
      await store.flush()
      #expect(purgedByObserver.withLock { $0 } == [other: -2])
    }

    /// Settings of `tracksReads` racing from several threads end in one of them: the flag and
    /// whether writes notify agree.
    @Test func concurrentSettingsOfTracksReadsAgree() async {
      let (key, _) = Self.keys
      let store = MemoryStore<String, Int>()
      let finished = runOnThreads(8) { thread in
        for step in 0..<500 { store.tracksReads = (thread + step) % 2 == 0 }
        return true
      }
      #expect(finished?.count == 8)
      let fired = Self.track { _ = store[key] }
      store[key] = 1
      await store.flush()
      #expect(fired.value == (store.tracksReads ? 1 : 0))
      store.tracksReads = true
      let again = Self.track { _ = store[key] }
      store[key] = 2
      await store.flush()
      #expect(again.value == 1)
    }

    @Test func anObservationsSequenceSeesTheFinalValueAfterABurst() async throws {
      guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) else {
        return
      }
      let store = Self.trackingStore()
      store["q"] = 0
      let finished = await finishes(within: 60) {
        var iterator = Observations { store["q"] }.makeAsyncIterator()
        #expect(await iterator.next() == 0)
        for value in 1...500 { store["q"] = value }
        await store.flush()
        var last: Int?? = nil
        while let value = await iterator.next() {
          last = value
          if value == 500 { break }
        }
        #expect(last == 500)
      }
      #expect(finished)
    }

    /// Eight writers on four keys; an observer per key re-registers each time it fires, from
    /// the writer's thread. No deadlock, and after the writers and a flush every observer has
    /// seen its key's final value.
    @Test func eightWritersAndReregisteringObserversNeverDeadlockOrMissTheLastChange() async {
      let store = Self.trackingStore()
      let keys = (0..<4).map { "k\($0)" }
      for key in keys { store[key] = -1 }
      let seen = Locked([String: Int?]())
      let fires = Atomic(0)

      @Sendable func register(_ key: String) {
        withObservationTracking {
          let value = store[key]
          seen.withLock { $0[key] = value }
        } onChange: {
          fires.wrappingAdd(1, ordering: .relaxed)
          register(key)
        }
      }
      for key in keys { register(key) }

      let finished = runOnThreads(8, timeout: 20) { thread in
        var random = SplitMix64(seed: UInt64(thread))
        for step in 0..<2_000 {
          store[keys[Int(random.next() % 4)]] = thread * 10_000 + step
        }
        return true
      }
      #expect(finished?.count == 8)
      await store.flush()
      for key in keys {
        #expect(seen.withLock { $0[key] } == store[key], "\(key)")
      }
      #expect(fires.load(ordering: .relaxed) > 0)
    }
  }
}
