import MemoryStoreKit
import Synchronization
import Testing

/// Every batch an `observe` handler received, in order.
final class BatchCollector<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private let received = Locked<[ChangeBatch<Key, Value>]>([])

  func append(_ batch: ChangeBatch<Key, Value>) {
    received.withLock { $0.append(batch) }
  }

  var batches: [ChangeBatch<Key, Value>] { received.withLock { $0 } }

  /// Whether the batches' sequence numbers follow each other with no gap or overlap.
  var isContiguous: Bool {
    let batches = self.batches
    return zip(batches, batches.dropFirst()).allSatisfy {
      $1.sequenceNumbers.lowerBound == $0.sequenceNumbers.upperBound + 1
    }
  }
}

/// A store with batches every 100 ms of a manual scheduler's time, and a collecting handler.
struct ObservedStore<Key: Hashable & Sendable, Value: Sendable> {
  static var interval: Duration { .milliseconds(100) }

  let scheduler = ManualScheduler()
  let store: MemoryStore<Key, Value>
  let collector = BatchCollector<Key, Value>()
  let subscription: Subscription

  init() {
    store = MemoryStore(scheduler: scheduler)
    store.notificationInterval = Self.interval
    subscription = store.observe { [collector] in collector.append($0) }
  }

  /// Publishes now and returns every batch received so far.
  func flushedBatches() async -> [ChangeBatch<Key, Value>] {
    await store.flush()
    return collector.batches
  }

  /// Publishes now and returns the one batch received so far.
  func onlyBatch(
    sourceLocation: SourceLocation = #_sourceLocation
  ) async throws -> ChangeBatch<Key, Value> {
    let batches = await flushedBatches()
    try #require(
      batches.count == 1, "expected one batch, got \(batches)", sourceLocation: sourceLocation)
    return batches[0]
  }
}

/// The next batch of `iterator`, or `nil` if none comes within `limit` (a failure bound only;
/// passing tests never wait for it).
func nextBatch<Key, Value>(
  _ iterator: MemoryStore<Key, Value>.Changes.Iterator, within limit: Duration = .seconds(30)
) async -> ChangeBatch<Key, Value>? {
  await withTaskGroup(of: ChangeBatch<Key, Value>?.self) { group in
    group.addTask {
      var iterator = iterator
      return await iterator.next()
    }
    group.addTask {
      try? await Task.sleep(for: limit)
      return nil
    }
    let first = await group.next() ?? nil
    group.cancelAll()
    return first
  }
}
