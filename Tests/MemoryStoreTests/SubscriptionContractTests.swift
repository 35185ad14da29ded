import Dispatch
import Foundation
import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// The three ways to subscribe: `changes`, `observe`, and `NotificationCenter`.
  @Suite("Change batches: subscribers") struct Subscribers {
    typealias Observed = ObservedStore<String, Int>

    // MARK: flush

    @Test func flushPublishesTheBatchAndHandsOverTheRemovals() async throws {
      let observed = Observed()
      observed.store["a"] = 0
      await observed.store.flush()
      var removals = observed.store.removals.makeAsyncIterator()
      observed.store["a"] = 1
      // One call: no interval passes, and the handler has run and the removal waits when it
      // returns.
      await observed.store.flush()
      #expect(observed.collector.batches.map(\.updated) == [["a": 0], ["a": 1]])
      let removal = try #require(await removals.next())
      #expect(
        "\(removal.key)=\(removal.value) \(removal.cause)" == "a=0 replaced")
    }

    // MARK: changes

    @Test func eachIterationIsItsOwnSubscriber() async throws {
      let observed = Observed()
      let first = observed.store.changes.makeAsyncIterator()
      observed.store["a"] = 1
      await observed.store.flush()
      let second = observed.store.changes.makeAsyncIterator()
      observed.store["b"] = 2
      await observed.store.flush()
      // The first iteration has not read yet: its two batches wait merged into one.
      let merged = try #require(await nextBatch(first))
      #expect(merged.updated == ["a": 1, "b": 2])
      #expect(merged.sequenceNumbers == 1...2)
      // The second iteration started after the first batch.
      let latest = try #require(await nextBatch(second))
      #expect(latest.updated == ["b": 2])
      #expect(latest.sequenceNumbers == 2...2)
      #expect(observed.store._subscriberCount == 3)
    }

    @Test func aSlowConsumerReceivesWaitingBatchesMergedIntoOne() async throws {
      let observed = Observed()
      observed.store.addEntries(["keep": 0, "drop": 0, "flip": 0])
      await observed.store.flush()
      let changes = observed.store.changes.makeAsyncIterator()
      var mirror = observed.store.allItems

      observed.store["new"] = 1
      observed.store["drop"] = nil
      observed.scheduler.advance(by: Observed.interval)  // batch 2
      observed.store["new"] = nil  // added, then removed: nowhere in the merge
      observed.store["flip"] = nil
      observed.scheduler.advance(by: Observed.interval)  // batch 3
      observed.store["flip"] = 5  // removed, then back: updated, not added
      observed.store["later"] = 7
      observed.scheduler.advance(by: Observed.interval)  // batch 4

      let merged = try #require(await nextBatch(changes))
      #expect(merged.sequenceNumbers == 2...4)
      #expect(merged.updated == ["flip": 5, "later": 7])
      #expect(merged.addedKeys == ["later"])
      #expect(merged.removed == ["drop"])
      merged.apply(to: &mirror)
      #expect(mirror == observed.store.allItems)
      // The handler runs on its own queue at its own pace: whatever it received, merged or not,
      // covers batches 1 to 4 with no gap, and rebuilds the store.
      let handled = await observed.flushedBatches()
      #expect(observed.collector.isContiguous)
      #expect(handled.first?.sequenceNumbers.lowerBound == 1)
      #expect(handled.last?.sequenceNumbers.upperBound == 4)
      var handlerMirror: [String: Int] = [:]
      for batch in handled { batch.apply(to: &handlerMirror) }
      #expect(handlerMirror == observed.store.allItems)
    }

    @Test func cancellingTheIteratingTaskEndsTheIterationAndUnsubscribes() async {
      let observed = Observed()
      let changes = observed.store.changes
      let started = Locked(false)
      let task = Task {
        var iterator = changes.makeAsyncIterator()
        started.withLock { $0 = true }
        return await iterator.next()
      }
      #expect(spinWait(timeout: 30) { started.withLock { $0 } })
      #expect(spinWait(timeout: 30) { observed.store._subscriberCount == 2 })
      task.cancel()
      #expect(await task.value == nil)
      #expect(spinWait(timeout: 30) { observed.store._subscriberCount == 1 })
    }

    @Test func leavingTheLoopUnsubscribes() async {
      let observed = Observed()
      observed.store["a"] = 1
      let consumer = Task {
        for await batch in observed.store.changes where batch.updated["stop"] != nil {
          break
        }
      }
      #expect(spinWait(timeout: 30) { observed.store._subscriberCount == 2 })
      observed.store["stop"] = 1
      await observed.store.flush()
      await consumer.value
      #expect(observed.store._subscriberCount == 1)
    }

    @Test func theIterationEndsWhenTheStoreIsFreedAfterItsLastChanges() async throws {
      var store: MemoryStore<String, Int>? = MemoryStore(scheduler: ManualScheduler())
      store?.notificationInterval = .seconds(1)
      let changes = try #require(store?.changes.makeAsyncIterator())
      store?["last"] = 1
      weak let weakStore = store
      store = nil
      #expect(weakStore == nil, "an iteration does not keep the store alive")
      let final = try #require(await nextBatch(changes))
      #expect(final.updated == ["last": 1])
      var iterator = changes
      #expect(await iterator.next() == nil)
    }

    // MARK: observe

    @Test func handlersRunSeriallyInOrderOnTheQueueTheyName() async {
      let observed = Observed()
      let queue = DispatchQueue(label: "test.concurrent", attributes: .concurrent)
      let key = DispatchSpecificKey<Int>()
      queue.setSpecific(key: key, value: 42)
      let running = Atomic(0)
      let overlapped = Atomic(false)
      let onQueue = Atomic(true)
      let order = BatchCollector<String, Int>()
      let subscription = observed.store.observe(on: queue) { batch in
        if running.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue > 1 {
          overlapped.store(true, ordering: .relaxed)
        }
        if DispatchQueue.getSpecific(key: key) != 42 { onQueue.store(false, ordering: .relaxed) }
        order.append(batch)
        running.wrappingSubtract(1, ordering: .sequentiallyConsistent)
      }
      for round in 0..<200 {
        observed.store["k\(round % 5)"] = round
        observed.scheduler.advance(by: Observed.interval)
      }
      await observed.store.flush()
      let didOverlap = overlapped.load(ordering: .relaxed)
      let ranOnQueue = onQueue.load(ordering: .relaxed)
      #expect(!didOverlap)
      #expect(ranOnQueue)
      #expect(order.isContiguous)
      #expect(order.batches.first?.sequenceNumbers.lowerBound == 1)
      #expect(order.batches.last?.sequenceNumbers.upperBound == 200)
      subscription.cancel()
    }

    @Test func cancellingOrDroppingTheSubscriptionStopsDelivery() async {
      let observed = Observed()
      let cancelled = BatchCollector<String, Int>()
      let dropped = BatchCollector<String, Int>()
      let subscription = observed.store.observe { cancelled.append($0) }
      var token: Subscription? = observed.store.observe { dropped.append($0) }
      observed.store["a"] = 1
      await observed.store.flush()
      #expect(observed.store._subscriberCount == 3)

      subscription.cancel()
      subscription.cancel()  // idempotent
      #expect(subscription.isCancelled)
      #expect(token?.isCancelled == false)
      token = nil
      #expect(observed.store._subscriberCount == 1)
      observed.store["b"] = 2
      await observed.store.flush()
      #expect(cancelled.batches.map(\.updated) == [["a": 1]])
      #expect(dropped.batches.map(\.updated) == [["a": 1]])
      #expect(observed.collector.batches.map(\.updated) == [["a": 1], ["b": 2]])
    }

    @Test func aHandlerMayReadAndWriteTheStore() async throws {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.notificationInterval = .milliseconds(50)
      let seen = BatchCollector<String, Int>()
      let subscription = store.observe { batch in
        seen.append(batch)
        if let value = batch.updated["ping"] {
          // Reads and writes from inside the handler, including a batch write and a
          // subscription of its own.
          store["pong"] = (store["ping"] ?? 0) + value
          store.addEntries(["echo": store.count])
          store.observe { _ in }.cancel()
          store.notificationInterval = .milliseconds(50)
        }
      }
      store["ping"] = 1
      await store.flush()
      await store.flush()
      let batches = seen.batches
      try #require(batches.count == 2)
      #expect(batches[0].updated == ["ping": 1])
      #expect(batches[1].updated == ["pong": 2, "echo": 2])
      subscription.cancel()
    }

    /// A value whose deinit turns batches off and on again, which publishes: it would deadlock
    /// if a publication released it while holding its own lock.
    final class Republisher: Sendable {
      weak let store: MemoryStore<Int, Republisher>?
      let deinits: Lifetime.Counter
      init(_ store: MemoryStore<Int, Republisher>, _ deinits: Lifetime.Counter) {
        self.store = store
        self.deinits = deinits
      }
      deinit {
        guard let store else { return }
        let interval = store.notificationInterval
        store.notificationInterval = .zero
        store.notificationInterval = interval
        deinits.increment()
      }
    }

    @Test func aValueReleasedByAPublicationMayUseTheStore() async {
      let scheduler = ManualScheduler()
      let store = MemoryStore<Int, Republisher>(scheduler: scheduler)
      store.notificationInterval = .seconds(1)
      let deinits = Lifetime.Counter()
      // A consumer that never reads: every batch merges into the one waiting for it.
      let changes = store.changes.makeAsyncIterator()
      let finished: [Void]? = runOnThreads(1, timeout: 30) { _ in
        for round in 0..<60 {
          store[round % 3] = Republisher(store, deinits)
          if round % 7 == 0 { store.removeAll() }
          if round % 4 == 0 {
            // The store frees the values it replaced first, so that the batch's are the last
            // references, released by the publication.
            store._freeReplacedValues()
            scheduler.advance(by: .seconds(1))
          }
        }
        store.removeAll()
        store._freeReplacedValues()
        scheduler.advance(by: .seconds(1))
      }
      #expect(finished != nil)
      #expect(deinits.count > 0)
      withExtendedLifetime(changes) {}
    }

    // MARK: NotificationCenter

    /// What a posted notification carried.
    struct Posted: Sendable {
      typealias Store = MemoryStore<String, Int>
      let object: ObjectIdentifier?
      let updated: [String: Int]?
      let removed: Set<String>?
      let batch: ChangeBatch<String, Int>?

      init(_ note: Notification) {
        object = (note.object as AnyObject?).map(ObjectIdentifier.init)
        updated = note.userInfo?[Store.updatedItemsKey] as? [String: Int]
        removed = note.userInfo?[Store.removedKeysKey] as? Set<String>
        batch = note.userInfo?[Store.changeBatchKey] as? ChangeBatch<String, Int>
      }
    }

    @Test func notificationsCarryTheStoreAndBothKeysEvenWhenOneSideIsEmpty() async throws {
      let observed = Observed()
      let center = NotificationCenter()
      let received = Locked<[Posted]>([])
      let token = center.addObserver(
        forName: MemoryStore<String, Int>.didChangeNotification, object: observed.store,
        queue: nil
      ) { note in
        let posted = Posted(note)
        received.withLock { $0.append(posted) }
      }
      defer { center.removeObserver(token) }
      observed.store.notificationCenter = center
      #expect(observed.store.notificationCenter === center)

      observed.store["a"] = 1
      await observed.store.flush()
      observed.store["a"] = nil
      await observed.store.flush()

      let notes = received.value
      try #require(notes.count == 2)
      #expect(notes[0].object == ObjectIdentifier(observed.store))
      #expect(notes[0].updated == ["a": 1])
      #expect(notes[0].removed == [])
      #expect(notes[1].updated == [:])
      #expect(notes[1].removed == ["a"])
      #expect(notes[1].batch?.sequenceNumbers == 2...2)

      observed.store.notificationCenter = nil
      observed.store["b"] = 2
      await observed.store.flush()
      #expect(received.value.count == 2)
      #expect(observed.store._subscriberCount == 1)
    }

    @Test func postingNeedsNoRunLoopAndDoesNotKeepTheStoreAlive() async {
      weak var weakStore: MemoryStore<String, Int>?
      let center = NotificationCenter()
      let posted = Atomic(0)
      let token = center.addObserver(
        forName: MemoryStore<String, Int>.didChangeNotification, object: nil, queue: nil
      ) { _ in posted.wrappingAdd(1, ordering: .relaxed) }
      defer { center.removeObserver(token) }
      do {
        let store = MemoryStore<String, Int>(scheduler: ManualScheduler())
        weakStore = store
        store.notificationInterval = .seconds(1)
        store.notificationCenter = center
        store["a"] = 1
        await store.flush()
      }
      #expect(posted.load(ordering: .relaxed) == 1)
      #expect(weakStore == nil)
    }

    // MARK: Lifetime

    @Test func subscribersAndTimersDoNotKeepTheStoreAlive() async {
      weak var weakStore: MemoryStore<String, Int>?
      let scheduler = ManualScheduler()
      let collector = BatchCollector<String, Int>()
      var subscription: Subscription?
      var iterator: MemoryStore<String, Int>.Changes.Iterator?
      do {
        let store = MemoryStore<String, Int>(scheduler: scheduler)
        weakStore = store
        store.notificationInterval = .seconds(1)
        subscription = store.observe { collector.append($0) }
        iterator = store.changes.makeAsyncIterator()
        store["a"] = 1  // schedules a publication
      }
      #expect(weakStore == nil)
      #expect(scheduler.pendingCount == 1)
      scheduler.advance(by: .seconds(1))  // the timer finds the store gone
      // The last changes were delivered when the store was freed.
      #expect(await nextBatch(iterator!)?.updated == ["a": 1])
      #expect(spinWait(timeout: 30) { collector.batches.count == 1 })
      subscription?.cancel()
    }

    @Test func aCancelledSubscriberIsFreed() async {
      let observed = Observed()
      final class Witness: Sendable {}
      weak var weakWitness: Witness?
      do {
        let witness = Witness()
        weakWitness = witness
        let subscription = observed.store.observe { _ in withExtendedLifetime(witness) {} }
        observed.store["a"] = 1
        await observed.store.flush()
        subscription.cancel()
      }
      #expect(spinWait(timeout: 30) { weakWitness == nil })
    }
  }
}
