import MemoryStoreKit
import Testing

extension StoreContractTests {
  /// What a batch reports: the net difference between the store at the previous batch and now.
  @Suite("Change batches: coalescing") struct ChangeCoalescing {
    typealias Observed = ObservedStore<String, Int>

    @Test func aKeySetTwiceAppearsOnceWithItsLatestValue() async throws {
      let observed = Observed()
      observed.store["a"] = 1
      observed.store["a"] = 2
      let batch = try await observed.onlyBatch()
      #expect(batch.updated == ["a": 2])
      #expect(batch.addedKeys == ["a"])
      #expect(batch.removed.isEmpty)
      #expect(batch.sequenceNumbers == 1...1)
      #expect(batch.reason(forKey: "a") == .write)
      #expect(batch.reason(forKey: "b") == nil)
    }

    @Test func aNewKeySetThenRemovedAppearsNowhereAndMakesNoBatch() async {
      let observed = Observed()
      observed.store["a"] = 1
      observed.store["a"] = nil
      observed.store.addEntries(["b": 1])
      observed.store.removeValues(forKeys: ["b"])
      #expect(await observed.flushedBatches().isEmpty)
      // The empty interval did not use up a sequence number.
      observed.store["c"] = 3
      #expect(await observed.flushedBatches().map(\.sequenceNumbers) == [1...1])
    }

    @Test func aKeyRemovedThenSetAgainIsUpdatedNotAdded() async throws {
      let observed = Observed()
      observed.store["a"] = 1
      await observed.store.flush()
      observed.store["a"] = nil
      observed.store["a"] = 5
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].updated == ["a": 5])
      #expect(batches[1].addedKeys.isEmpty)
      #expect(batches[1].removed.isEmpty)
    }

    @Test func aKeyPresentAtThePreviousBatchAndRemovedIsRemoved() async throws {
      let observed = Observed()
      observed.store.addEntries(["a": 1, "b": 2])
      await observed.store.flush()
      observed.store["a"] = 10
      observed.store["a"] = nil
      observed.store.removeValues(forKeys: ["b", "b", "zz"])
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].updated.isEmpty)
      #expect(batches[1].removed == ["a", "b"])
    }

    @Test func removeAllReportsExactlyTheKeysPresentAtThePreviousBatch() async throws {
      let observed = Observed()
      observed.store.addEntries(["kept": 1, "removedEarlier": 2, "replaced": 3])
      await observed.store.flush()
      observed.store["removedEarlier"] = nil
      observed.store["replaced"] = 30
      observed.store["new"] = 4
      observed.store.removeAll()
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].removed == ["kept", "removedEarlier", "replaced"])
      #expect(batches[1].updated.isEmpty)
    }

    @Test func writesAfterRemoveAllAreReportedAgainstThePreviousBatch() async throws {
      let observed = Observed()
      observed.store.addEntries(["a": 1, "b": 2, "c": 3])
      await observed.store.flush()
      observed.store["d"] = 4
      observed.store.removeAll()
      observed.store["a"] = 10  // present at the previous batch: replaced
      observed.store["e"] = 5  // new
      observed.store["d"] = 40  // new again after being cleared
      observed.store.removeAll()
      observed.store["b"] = 20
      observed.store["f"] = 6
      observed.store["f"] = nil
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].updated == ["b": 20])
      #expect(batches[1].addedKeys.isEmpty)
      #expect(batches[1].removed == ["a", "c"])
    }

    @Test func addedKeysTellInsertionsFromReplacements() async throws {
      let observed = Observed()
      observed.store["old"] = 1
      await observed.store.flush()
      observed.store.addEntries(["old": 2, "new": 3])
      _ = observed.store.valueOrInsert(forKey: "created") { 4 }
      _ = observed.store.valueOrInsert(forKey: "old") { 99 }  // a hit: not a change
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].updated == ["old": 2, "new": 3, "created": 4])
      #expect(batches[1].addedKeys == ["new", "created"])
    }

    @Test func writesThatChangeNothingMakeNoBatch() async {
      let observed = Observed()
      observed.store["absent"] = nil
      observed.store.removeValues(forKeys: ["x", "y"])
      observed.store.removeAll()
      #expect(await observed.flushedBatches().isEmpty)
      #expect(observed.scheduler.pendingCount == 0)
    }

    @Test func changesWhileTheIntervalIsZeroAreNeverReported() async {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      // Set explicitly: a subscriber does not turn batches on.
      store.notificationInterval = .zero
      let collector = BatchCollector<String, Int>()
      let subscription = store.observe { collector.append($0) }
      store["before"] = 1
      store.removeAll()
      store["also before"] = 2
      #expect(scheduler.pendingCount == 0, "no timer while batches are off")
      await store.flush()
      #expect(collector.batches.isEmpty)
      store.notificationInterval = .milliseconds(10)
      store["after"] = 3
      await store.flush()
      #expect(collector.batches.map(\.updated) == [["after": 3]])
      #expect(collector.batches.map(\.addedKeys) == [["after"]])
      subscription.cancel()
    }

    @Test func aFirstSubscriberTurnsBatchesOnAtTheDefaultIntervalUnlessItWasSet() async throws {
      typealias Store = MemoryStore<String, Int>
      // Each kind of subscriber.
      let subscribers: [(Store) -> Any] = [
        { store in store.observe { _ in } },
        { store in store.changes.makeAsyncIterator() },
        { store in store.changes(includingInitialSnapshot: true).makeAsyncIterator() },
      ]
      for subscribe in subscribers {
        let scheduler = ManualScheduler()
        let store = Store(scheduler: scheduler)
        store["unreported"] = 0
        #expect(store.notificationInterval == .zero)
        let subscription = subscribe(store)
        #expect(store.notificationInterval == Store.defaultNotificationInterval)
        store["a"] = 1
        #expect(scheduler.nextDeadline == scheduler.now + Store.defaultNotificationInterval)
        withExtendedLifetime(subscription) {}
      }
      // An interval that was set, to anything, stays.
      let store = Store(scheduler: ManualScheduler())
      store.notificationInterval = .seconds(5)
      let subscription = store.observe { _ in }
      #expect(store.notificationInterval == .seconds(5))
      subscription.cancel()
      #expect(Store.defaultNotificationInterval == .milliseconds(100))
    }

    @Test func turningBatchesOffPublishesWhatWasRecorded() async {
      let observed = Observed()
      observed.store["a"] = 1
      observed.store.notificationInterval = .zero
      observed.store["b"] = 2
      #expect(await observed.flushedBatches().map(\.updated) == [["a": 1]])
      #expect(observed.store.notificationInterval == .zero)
    }

    @Test func aBurstOfWritesToFewKeysMakesOneBatchOfAtMostThatManyKeys() async throws {
      let observed = Observed()
      let keys = (0..<1_000).map { "key\($0)" }
      var largestLog = 0
      for write in 0..<1_000_000 {
        observed.store[keys[write % 1_000]] = write
        if write % 5_000 == 0 { largestLog = max(largestLog, observed.store._loggedChangeCount) }
      }
      // Pending memory stays bounded: the log is coalesced as it grows.
      #expect(largestLog <= MemoryStore<String, Int>._loggedChangeBound)
      #expect(largestLog > 0)
      observed.scheduler.advance(by: Observed.interval)
      let batch = try await observed.onlyBatch()
      #expect(batch.updated.count == 1_000)
      #expect(batch.updated["key999"] == 999_999)
    }
  }

  /// When batches are published: at most one per interval, driven by the store's scheduler.
  @Suite("Change batches: timing") struct ChangeTiming {
    typealias Observed = ObservedStore<String, Int>

    @Test func theFirstChangeSchedulesOnePublicationOneIntervalLater() async {
      let observed = Observed()
      #expect(observed.scheduler.pendingCount == 0)
      let start = observed.scheduler.now
      observed.store["a"] = 1
      observed.store["b"] = 2
      #expect(observed.scheduler.pendingCount == 1)
      #expect(observed.scheduler.nextDeadline == start + Observed.interval)

      observed.scheduler.advance(by: .milliseconds(99))
      #expect(observed.scheduler.pendingCount == 1, "not published before the interval")
      observed.scheduler.advance(by: .milliseconds(1))
      #expect(observed.scheduler.pendingCount == 0)
      let batches = await observed.flushedBatches()
      #expect(batches.map(\.updated) == [["a": 1, "b": 2]])
    }

    @Test func theTimerPublishesAtTheIntervalAndNotBefore() async throws {
      let observed = Observed()
      let changes = observed.store.changes.makeAsyncIterator()
      observed.store["a"] = 1
      observed.scheduler.advance(by: .milliseconds(99))
      #expect(observed.scheduler.pendingCount == 1)
      observed.scheduler.advance(by: .milliseconds(1))
      let batch = try #require(await nextBatch(changes))
      #expect(batch.updated == ["a": 1])
      #expect(observed.scheduler.pendingCount == 0, "no timer runs while nothing changes")

      // The next change schedules the next batch, one interval after that change.
      observed.scheduler.advance(by: .seconds(5))
      observed.store["b"] = 2
      #expect(observed.scheduler.pendingCount == 1)
      observed.scheduler.advance(by: Observed.interval)
      let second = try #require(await nextBatch(changes))
      #expect(second.updated == ["b": 2])
      #expect(second.sequenceNumbers == 2...2)
    }

    @Test func thereIsAtMostOneBatchPerInterval() async throws {
      let observed = Observed()
      let changes = observed.store.changes.makeAsyncIterator()
      var published: [ContinuousClock.Instant] = []
      for step in 0..<50 {
        observed.store["k\(step % 7)"] = step
        observed.scheduler.advance(by: .milliseconds(30))
        if observed.scheduler.pendingCount == 0 {
          // Published during this step.
          _ = try #require(await nextBatch(changes))
          published.append(observed.scheduler.now)
        }
      }
      #expect(published.count >= 10)
      for (earlier, later) in zip(published, published.dropFirst()) {
        #expect(later - earlier >= Observed.interval)
      }
    }

    @Test func aNewIntervalAppliesFromTheNextWrite() async {
      let observed = Observed()
      observed.store.notificationInterval = .seconds(2)
      #expect(observed.store.notificationInterval == .seconds(2))
      let start = observed.scheduler.now
      observed.store["a"] = 1
      #expect(observed.scheduler.nextDeadline == start + .seconds(2))
    }

    @Test func realTimeBatchesArriveInOrder() async throws {
      // The default scheduler, real time: only order and a generous bound are asserted.
      let store = MemoryStore<Int, Int>()
      store.notificationInterval = .milliseconds(10)
      let changes = store.changes.makeAsyncIterator()
      var mirror: [Int: Int] = [:]
      var last: UInt64 = 0
      for round in 1...3 {
        store[round] = round
        let batch = try #require(await nextBatch(changes, within: .seconds(30)))
        #expect(batch.sequenceNumbers.lowerBound == last + 1)
        last = batch.sequenceNumbers.upperBound
        batch.apply(to: &mirror)
      }
      #expect(mirror == [1: 1, 2: 2, 3: 3])
    }
  }
}
