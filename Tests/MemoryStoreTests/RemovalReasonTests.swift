import MemoryStoreKit
import Testing

extension StoreContractTests {
  /// A key removed from the contents the previous batch showed is reported with the reason of
  /// the change that removed it first, whatever removes or rewrites it afterwards.
  @Suite("Change batches: removal reasons") struct RemovalReasons {
    /// Something that removes entries on the store's own account.
    enum Cause: String, CaseIterable, CustomTestStringConvertible {
      case expiry, countLimit, costLimit, decider, memoryPressure, memoryPressureRemovingAll

      var testDescription: String { rawValue }

      /// The reason a batch gives for what this cause removes.
      var reason: ChangeReason {
        switch self {
        case .expiry: .expired
        case .countLimit: .evictedByCountLimit
        case .costLimit: .evictedByCostLimit
        case .decider: .evictedByDecider
        case .memoryPressure, .memoryPressureRemovingAll: .evictedByMemoryPressure
        }
      }
    }

    /// A store holding keys 0 to 3 (cost 1 each; key 0 expires after one second), whose first
    /// batch is published, and that will not publish again before `flush()`.
    static func store(
      for cause: Cause, scheduler: ManualScheduler, collector: BatchCollector<Int, Int>
    ) async -> (MemoryStore<Int, Int>, Subscription) {
      let store =
        cause == .decider
        ? MemoryStore<Int, Int>(scheduler: scheduler) { key, _, _ in key == 0 }
        : MemoryStore<Int, Int>(scheduler: scheduler)
      store.notificationInterval = .seconds(100)
      let subscription = store.observe { collector.append($0) }
      store.setValue(0, forKey: 0, cost: 1, timeToLive: .seconds(1))
      for key in 1...3 { store.setValue(key, forKey: key, cost: 1) }
      await store.flush()
      return (store, subscription)
    }

    /// Makes `cause` remove some of the keys.
    static func trigger(
      _ cause: Cause, on store: MemoryStore<Int, Int>, _ scheduler: ManualScheduler
    ) {
      switch cause {
      case .expiry:
        scheduler.advance(by: .seconds(1))
      case .countLimit:
        store.countLimit = 4
        store.setValue(4, forKey: 4, cost: 1)
      case .costLimit:
        store.costLimit = 4
        store.setValue(4, forKey: 4, cost: 1)
      case .decider:
        store.purgeEvictableItems()
      case .memoryPressure:
        store.countLimit = 4
        store.handleMemoryPressure(.warning)
      case .memoryPressureRemovingAll:
        store.memoryPressurePolicy = MemoryPressurePolicy(removesAllOnCritical: true)
        store.handleMemoryPressure(.critical)
        store[5] = 5  // Something for removeAll() to remove.
      }
    }

    @Test(arguments: Cause.allCases)
    func removeAllKeepsTheReasonOfAnEarlierRemoval(_ cause: Cause) async throws {
      let scheduler = ManualScheduler()
      let collector = BatchCollector<Int, Int>()
      let (store, subscription) = await Self.store(
        for: cause, scheduler: scheduler, collector: collector)
      defer { subscription.cancel() }
      Self.trigger(cause, on: store, scheduler)
      let survivors = Set(store.allItems.keys).intersection(0...3)
      #expect(survivors.count < 4, "\(cause) removed nothing")
      #expect(collector.batches.count == 1, "no batch was published before removeAll()")
      store.removeAll()
      await store.flush()
      let batches = collector.batches
      try #require(batches.count == 2)
      #expect(batches[1].removed == [0, 1, 2, 3])
      #expect(batches[1].updated.isEmpty)
      for key in 0...3 {
        let expected = survivors.contains(key) ? ChangeReason.write : cause.reason
        #expect(batches[1].reason(forKey: key) == expected, "key \(key)")
      }
    }

    @Test func aKeyThatExpiredIsReportedExpiredThoughItWasRewrittenAndRemoved() async throws {
      let scheduler = ManualScheduler()
      let collector = BatchCollector<Int, Int>()
      let (store, subscription) = await Self.store(
        for: .expiry, scheduler: scheduler, collector: collector)
      defer { subscription.cancel() }
      scheduler.advance(by: .seconds(1))
      #expect(store[0] == nil)
      store[0] = 10
      store[0] = nil
      store[1] = 11
      store[1] = nil
      store.setValue(2, forKey: 2, timeToLive: .seconds(1))
      store[2] = 20
      await store.flush()
      let batches = collector.batches
      try #require(batches.count == 2)
      #expect(batches[1].removed == [0, 1])
      #expect(batches[1].reason(forKey: 0) == .expired)
      #expect(batches[1].reason(forKey: 1) == .write)
      #expect(batches[1].updated == [2: 20])
      #expect(batches[1].reason(forKey: 2) == .write)
    }

    @Test func aKeyThatExpiredAndWasSetAgainIsReportedWithItsLatestWrite() async throws {
      let scheduler = ManualScheduler()
      let collector = BatchCollector<Int, Int>()
      let (store, subscription) = await Self.store(
        for: .expiry, scheduler: scheduler, collector: collector)
      defer { subscription.cancel() }
      scheduler.advance(by: .seconds(1))
      store.removeAll()
      store[0] = 100
      await store.flush()
      let batches = collector.batches
      try #require(batches.count == 2)
      #expect(batches[1].updated == [0: 100])
      #expect(batches[1].addedKeys.isEmpty)
      #expect(batches[1].reason(forKey: 0) == .write)
      #expect(batches[1].removed == [1, 2, 3])
    }
  }
}
