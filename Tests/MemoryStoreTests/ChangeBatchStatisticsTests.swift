import MemoryStoreKit
import Synchronization
import Testing

/// ``StoreStatistics/changeBatches``: the batches the interval publishes, and how late.
@Suite struct ChangeBatchStatisticsTests {
  @Test func theIntervalsBatchesAreCountedWithTheirDelays() async {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.notificationInterval = .milliseconds(100)
    #expect(store.statistics.changeBatches == StoreStatistics.ChangeBatches())
    let collector = BatchCollector<String, Int>()
    let subscription = store.observe { collector.append($0) }

    // The first change schedules the batch; the second joins it.
    store["a"] = 1
    scheduler.advance(by: .milliseconds(40))
    store["b"] = 2
    scheduler.advance(by: .milliseconds(60))
    var batches = store.statistics.changeBatches
    #expect(batches.published == 1)
    #expect(batches.totalDelay == .milliseconds(100))
    #expect(batches.longestDelay == .milliseconds(100))

    store["c"] = 3
    scheduler.advance(by: .milliseconds(100))
    batches = store.statistics.changeBatches
    #expect(batches.published == 2)
    #expect(batches.totalDelay == .milliseconds(200))
    #expect(batches.averageDelay == .milliseconds(100))

    // A batch published early by flush() has no delay to count.
    store["d"] = 4
    scheduler.advance(by: .milliseconds(30))
    await store.flush()
    #expect(store.statistics.changeBatches.published == 2)
    #expect(collector.batches.last?.sequenceNumbers.upperBound == 3, "three batches, merged or not")
    // A change after the flush joins the publication that "d" scheduled: its delay counts
    // from the flush, not from the scheduling.
    scheduler.advance(by: .milliseconds(20))
    store["e"] = 5
    scheduler.advance(by: .milliseconds(50))
    batches = store.statistics.changeBatches
    #expect(batches.published == 3)
    #expect(batches.totalDelay == .milliseconds(270))
    subscription.cancel()
  }

  @Test func aSchedulerThatRunsLateShowsAsLongerDelays() {
    let scheduler = LateScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.notificationInterval = .milliseconds(100)
    let subscription = store.observe { _ in }
    store["a"] = 1
    scheduler.runScheduled(after: .milliseconds(350))
    store["b"] = 2
    scheduler.runScheduled(after: .milliseconds(150))
    let batches = store.statistics.changeBatches
    #expect(batches.published == 2)
    #expect(batches.totalDelay == .milliseconds(500))
    #expect(batches.longestDelay == .milliseconds(350))
    #expect(batches.averageDelay == .milliseconds(250))
    subscription.cancel()
  }
}

/// A scheduler whose actions run only when the test says, however late.
private final class LateScheduler: StoreScheduler {
  private let state = Mutex<(now: ContinuousClock.Instant, jobs: [@Sendable () -> Void])>(
    (.now, []))

  var now: ContinuousClock.Instant { state.withLock { $0.now } }

  func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
    state.withLock { $0.jobs.append(action) }
  }

  /// Moves time by `elapsed`, then runs every action scheduled so far.
  func runScheduled(after elapsed: Duration) {
    let jobs = state.withLock { state in
      state.now += elapsed
      defer { state.jobs = [] }
      return state.jobs
    }
    for job in jobs { job() }
  }
}
