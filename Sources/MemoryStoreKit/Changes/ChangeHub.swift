import Dispatch

/// A store's change batches on their way out: the changes coalesced for the next batch, the
/// subscribers and the publication state.
///
/// Lock order: `accumulator`, then the write lock; `publication`, then the store's write lock or `sinks`, then a sink's own lock.
/// No user code runs under any of them: handlers run on their own queues, and what a
/// publication releases (values dropped from merged or recorded changes) is handed back to the
/// publisher to release after `publication` is unlocked.
@usableFromInline
final class _ChangeHub<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  @usableFromInline
  enum Sink: Sendable {
    case stream(_StreamSink<Key, Value>)
    case handler(_HandlerSink<Key, Value>)
    case key(_KeySink<Key, Value>)
  }

  /// What a delivery let go of: merged batches and replaced values, for the publisher to
  /// release after unlocking.
  @usableFromInline typealias Displaced = (batches: [ChangeBatch<Key, Value>], values: [Value?])

  struct Sinks {
    var nextID = 0
    var entries: [Int: Sink] = [:]
  }

  /// The sequence number of the last published batch; held for the whole of a publication,
  /// so that batches reach every sink in sequence order.
  /// The changes logged since the previous batch, coalesced per key; lock order:
  /// `accumulator`, then the write lock.
  @usableFromInline let accumulator = _Protected(_ChangeAccumulator<Key, Value>())
  @usableFromInline let publication = _Protected<UInt64>(0)
  let sinks = _Protected(Sinks())
  /// The batches the interval published and their delays, for ``MemoryStore/statistics``,
  /// and when a batch was last published early (by a flush or a new subscription); updated
  /// once per batch, under `publication`.
  let batchDelays = _Protected(
    (counted: StoreStatistics.ChangeBatches(), lastEarlyBatch: ContinuousClock.Instant?.none))
  /// The notification center `MemoryStore.notificationCenter` posts to, and its subscription.
  let notificationCenter = _Protected<
    (center: any AnyObject & Sendable, subscription: Subscription)?
  >(
    nil)

  /// Registers `sink`; the returned subscription removes it.
  @usableFromInline
  func add(_ sink: Sink) -> Subscription {
    let id = sinks.withLock { sinks in
      sinks.nextID += 1
      sinks.entries[sinks.nextID] = sink
      return sinks.nextID
    }
    return Subscription { [weak self] in
      let removed = self?.sinks.withLock { $0.entries.removeValue(forKey: id) }
      switch removed {
      case .stream(let sink): sink.cancel()
      case .handler(let sink): sink.cancel()
      case .key(let sink): sink.cancel()
      case nil: break
      }
    }
  }

  /// Delivers `batch` to every sink (caller holds `publication`).
  ///
  /// - Returns: What the delivery displaced, for the caller to release after unlocking.
  @usableFromInline
  func deliver(_ batch: ChangeBatch<Key, Value>) -> Displaced {
    let current = sinks.withLock { Array($0.entries.values) }
    var displaced: Displaced = ([], [])
    for sink in current {
      let old: ChangeBatch<Key, Value>?
      switch sink {
      case .stream(let sink): old = sink.deliver(batch)
      case .handler(let sink): old = sink.deliver(batch)
      case .key(let sink):
        old = nil
        if let value = sink.deliver(batch) { displaced.values.append(value) }
      }
      if let old { displaced.batches.append(old) }
    }
    return displaced
  }

  /// The current `observe` handlers, including the notification center's poster.
  func handlerSinks() -> [_HandlerSink<Key, Value>] {
    sinks.withLock { sinks in
      sinks.entries.values.compactMap { sink in
        if case .handler(let handler) = sink { handler } else { nil }
      }
    }
  }

  /// The number of subscribers.
  var count: Int { sinks.withLock { $0.entries.count } }

  /// Ends every `changes` iteration once it has taken what it was delivered.
  func finishAll() {
    let all = sinks.withLock { sinks in
      defer { sinks.entries = [:] }
      return Array(sinks.entries.values)
    }
    for sink in all {
      switch sink {
      case .stream(let sink): sink.finish()
      case .key(let sink): sink.finish()
      case .handler: break
      }
    }
  }
}
