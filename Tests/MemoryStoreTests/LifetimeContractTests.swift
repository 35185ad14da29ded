import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  @Suite("Lifetime and flush") struct Lifetime {
    @Test func theStoreIsFreedAfterABurstOfWrites() {
      weak var weakStore: MemoryStore<Int, Int>?
      do {
        let store = MemoryStore<Int, Int>()
        weakStore = store
        #expect(
          runOnThreads(4) { thread in
            for index in 0..<5_000 { store[index % 100] = thread * index }
          } != nil)
        #expect(store.count == 100)
      }
      #expect(weakStore == nil)
    }

    @Test func flushReturnsAndEveryWriteIsVisible() async {
      let store = MemoryStore<Int, Int>()
      #expect(
        runOnThreads(8) { thread in
          for index in 0..<1_000 { store[thread * 1_000 + index] = index }
        } != nil)
      await store.flush()
      #expect(store.count == 8_000)
      #expect(store[7_999] == 999)
    }

    /// With change batches on, `removeAll()` takes the contents it clears for the batch without
    /// copying them under the write lock; once the batch is published, they are freed like any
    /// other removed values.
    @Test func valuesClearedWithBatchesOnAreFreedOnceTheBatchIsPublished() async {
      let scheduler = ManualScheduler()
      let store = MemoryStore<Int, Reentrant>(scheduler: scheduler)
      store.notificationInterval = .seconds(1)
      let deinits = Counter()
      var batches = store.changes.makeAsyncIterator()
      store.addEntries(
        Dictionary(uniqueKeysWithValues: (0..<500).map { ($0, Reentrant(store, deinits)) }))
      scheduler.advance(by: .seconds(1))
      #expect(await batches.next()?.updated.count == 500)
      store.removeAll()
      for key in 0..<10 { store[key] = Reentrant(store, deinits) }
      // Published: the cleared contents are copied out for the batch, and released.
      scheduler.advance(by: .seconds(1))
      do {
        let batch = await batches.next()
        #expect(batch?.removed.count == 490)
        #expect(batch?.updated.count == 10)
      }
      await store.flush()
      #expect(deinits.count == 500)
      #expect(!store._retainsReplacedValues)
      // The values left hold the store: remove them, so that neither outlives the test (the
      // clear's contents are kept for its batch until that is published).
      store.removeAll()
      scheduler.advance(by: .seconds(1))
      #expect(await batches.next()?.removed.count == 10)
      await store.flush()
      #expect(deinits.count == 510)
    }

    /// A value whose `deinit` writes to the store: it would deadlock if the store released a
    /// replaced or removed value while holding its write lock.
    final class Reentrant: Sendable {
      let store: MemoryStore<Int, Reentrant>
      let deinits: Counter
      init(_ store: MemoryStore<Int, Reentrant>, _ deinits: Counter) {
        self.store = store
        self.deinits = deinits
      }
      deinit {
        store[-1] = nil
        deinits.increment()
      }
    }

    final class Counter: Sendable {
      private let value = Atomic<Int>(0)
      func increment() { value.wrappingAdd(1, ordering: .relaxed) }
      var count: Int { value.load(ordering: .relaxed) }
    }

    @Test func aReplacedValuesDeinitMayUseTheStore() async {
      let store = MemoryStore<Int, Reentrant>()
      let deinits = Counter()
      let finished: [Void]? = runOnThreads(1, timeout: 20) { _ in
        for index in 0..<100 {
          store[index % 3] = Reentrant(store, deinits)
          if index % 2 == 0 { store[index % 3] = nil }
          if index % 10 == 0 { store.addEntries([0: Reentrant(store, deinits)]) }
          if index % 25 == 0 { store.removeValues(forKeys: [0, 1]) }
        }
        store.removeAll()
      }
      #expect(finished != nil)
      #expect(store.isEmpty)
      await store.flush()  // Frees the values replaced or removed that are not freed yet.
      #expect(deinits.count == 110)
    }

    /// The same while a reader is parked, so that everything the writes replace stays
    /// allocated until the reader leaves, and is freed then.
    @Test func aDeinitMayUseTheStoreWhileAReaderIsParked() async {
      let store = MemoryStore<Int, Reentrant>()
      let deinits = Counter()
      let finished: [Void]? = runOnThreads(1, timeout: 20) { _ in
        store._withReaderParked {
          for index in 0..<100 {
            store[index % 3] = Reentrant(store, deinits)
            if index % 2 == 0 { store[index % 3] = nil }
            if index % 10 == 0 { store.addEntries([0: Reentrant(store, deinits)]) }
            if index % 25 == 0 { store.removeValues(forKeys: [0, 1]) }
          }
          store[7] = Reentrant(store, deinits)
          store.removeAll()
        }
      }
      #expect(finished != nil)
      #expect(store.isEmpty)
      await store.flush()  // Frees the values replaced or removed that are not freed yet.
      #expect(deinits.count == 111)
    }
  }

  @Suite("Stress") struct Stress {
    @Test func mixedOperationsOnEightThreadsKeepInvariants() {
      let store = MemoryStore<Int, Int>()
      let finished: [Void]? = runOnThreads(8) { thread in
        var random = SplitMix64(seed: UInt64(thread) + 99)
        let own = (thread + 1) * 1_000  // Clear of the shared keys 0...65.
        for step in 0..<10_000 {
          let shared = Int(random.below(64))
          switch random.below(8) {
          case 0: store[shared] = step
          case 1: store[shared] = nil
          case 2: store.addEntries([shared: step, shared + 1: step])
          case 3: store.removeValues(forKeys: [shared, shared + 2])
          case 4: _ = store.values(forKeys: [shared, shared + 1])
          case 5: _ = store.count
          case 6 where step % 500 == 0: _ = store.allItems
          default: _ = store[shared]
          }
          store[own + step % 100] = step  // Each thread also owns a key range.
        }
      }
      #expect(finished != nil)
      let items = store.allItems
      #expect(store.count == items.count)
      for thread in 0..<8 {
        for slot in 0..<100 { #expect(items[(thread + 1) * 1_000 + slot] == 9_900 + slot) }
      }
      store._checkInvariants()
    }
  }
}
