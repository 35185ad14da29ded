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

/// What a sink decides, under its lock, about a batch delivered to it.
enum _Placement<Key: Hashable & Sendable, Value: Sendable, Effect> {
  /// The batch was placed (or dropped); `Effect` says what to do after unlocking.
  case placed(Effect)
  /// A batch already waits; it was taken out, to be merged with the delivered one.
  case occupied(by: ChangeBatch<Key, Value>)
}

/// Delivers `batch` to a sink in which at most one batch waits: `place` either places it or
/// hands back the waiting batch, which is merged with it outside the lock (the consumer may
/// take the merge as soon as it is back) and offered again.
///
/// - Returns: The effect `place` asked for, the batch finally placed, and the batch the
///   delivery displaced, for the caller to release after every lock.
func _deliverMerging<State, Key, Value, Effect>(
  _ batch: ChangeBatch<Key, Value>, to state: _Protected<State>,
  place: (inout State, ChangeBatch<Key, Value>) -> _Placement<Key, Value, Effect>
) -> (effect: Effect, placed: ChangeBatch<Key, Value>, displaced: ChangeBatch<Key, Value>?) {
  var outgoing = batch
  var displaced: ChangeBatch<Key, Value>?
  while true {
    switch state.withLock({ place(&$0, outgoing) }) {
    case .placed(let effect):
      return (effect, outgoing, displaced)
    case .occupied(let waiting):
      outgoing = waiting.merged(with: outgoing)
      displaced = waiting
    }
  }
}

/// A subscriber's mailbox: at most one item waits for the consumer, who waits for it.
///
/// What a delivery does with the item already waiting (merge, replace) is its owner's
/// business, done through ``state``; this class has the consumer's side.
final class _Mailbox<Item: Sendable>: Sendable {
  typealias Waiter = CheckedContinuation<Item?, Never>

  struct State {
    var pending: Item?
    var waiter: Waiter?
    /// No more items will come: the store is gone, or the iteration was cancelled.
    var isFinished = false
    /// Whether a published item was placed (then an initial item is not needed).
    var hasDelivered = false
  }

  let state = _Protected(State())

  /// Places `item` for the consumer (it replaces one waiting), or hands it to a waiting
  /// consumer; with `isInitial`, only if nothing was delivered before.
  ///
  /// - Returns: The item it replaced, for the caller to release after every lock.
  func place(_ item: Item, isInitial: Bool = false) -> Item? {
    let (waiter, replaced) = state.withLock { state -> (Waiter?, Item?) in
      if state.isFinished || (isInitial && state.hasDelivered) { return (nil, nil) }
      if !isInitial { state.hasDelivered = true }
      if let waiter = state.waiter {
        state.waiter = nil
        return (waiter, nil)
      }
      defer { state.pending = item }
      return (nil, state.pending)
    }
    waiter?.resume(returning: item)
    return replaced
  }

  /// Takes the waiting item: `.some(item)`, `.some(nil)` once finished, or `nil` if the
  /// caller must wait, in which case `waiter`, if given, is registered to be resumed.
  ///
  /// An iterator is consumed by one task at a time (as `AsyncStream`'s): a second task that
  /// waits while one already does stops the program, rather than leave the first waiting
  /// forever.
  private func take(orRegister waiter: Waiter?) -> Item?? {
    state.withLock { state in
      if let pending = state.pending {
        state.pending = nil
        return .some(pending)
      }
      if state.isFinished { return .some(nil) }
      guard let waiter else { return nil }
      if state.waiter != nil {
        _preconditionFailure(
          "next() was called on a MemoryStore change sequence's iterator from two tasks at once")
      }
      state.waiter = waiter
      return nil
    }
  }

  /// The next item; `nil` once finished and every item was taken, or once the calling task is
  /// cancelled.
  func next(
    isolation actor: isolated (any Actor)?, onCancel: @escaping @Sendable () -> Void
  ) async -> Item? {
    if let ready = take(orRegister: nil) { return ready }
    return await withTaskCancellationHandler {
      await withCheckedContinuation(isolation: actor) { (continuation: Waiter) in
        if let ready = take(orRegister: continuation) { continuation.resume(returning: ready) }
      }
    } onCancel: {
      onCancel()
    }
  }

  /// Stops the iteration now; what waits is dropped.
  func cancel() {
    let (waiter, dropped) = state.withLock { state in
      state.isFinished = true
      defer {
        state.waiter = nil
        state.pending = nil
      }
      return (state.waiter, state.pending)
    }
    waiter?.resume(returning: nil)
    withExtendedLifetime(dropped) {}
  }

  /// Ends the iteration after what waits has been taken.
  func finish() {
    let waiter = state.withLock { state in
      state.isFinished = true
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume(returning: nil)
  }
}

/// One `changes` iteration's mailbox: at most one batch waits in it; a batch delivered while
/// another waits is merged into it, so a slow consumer costs memory bounded by the number of
/// distinct keys changed, not by the number of batches.
@usableFromInline
final class _StreamSink<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  let mailbox = _Mailbox<ChangeBatch<Key, Value>>()

  /// Hands `batch` over (publication lock held; deliveries are serialised).
  ///
  /// - Returns: A batch that the delivery displaced, for the caller to release later.
  func deliver(_ batch: ChangeBatch<Key, Value>) -> ChangeBatch<Key, Value>? {
    let delivery = _deliverMerging(batch, to: mailbox.state) {
      state, batch -> _Placement<Key, Value, _Mailbox<ChangeBatch<Key, Value>>.Waiter?> in
      if state.isFinished { return .placed(nil) }
      if let waiter = state.waiter {
        state.waiter = nil
        return .placed(waiter)
      }
      if let waiting = state.pending {
        state.pending = nil
        return .occupied(by: waiting)
      }
      state.pending = batch
      return .placed(nil)
    }
    delivery.effect?.resume(returning: delivery.placed)
    return delivery.displaced
  }

  /// Places `snapshot` before whatever was delivered so far (the subscriber's first batch);
  /// call with the publication lock held, so that no delivery runs meanwhile.
  ///
  /// - Returns: What it displaced, for the caller to release after every lock.
  func preload(_ snapshot: ChangeBatch<Key, Value>) -> ChangeBatch<Key, Value>? {
    mailbox.state.withLock { state -> ChangeBatch<Key, Value>? in
      guard !state.isFinished else { return snapshot }
      let delivered = state.pending
      state.pending = delivered.map { snapshot.merged(with: $0) } ?? snapshot
      return delivered
    }
  }

  /// The next batch; `nil` once the store is gone and every delivered batch was taken, or
  /// once the calling task is cancelled.
  func next(
    isolation actor: isolated (any Actor)?, onCancel: @escaping @Sendable () -> Void
  ) async -> ChangeBatch<Key, Value>? {
    await mailbox.next(isolation: actor, onCancel: onCancel)
  }

  /// Stops the iteration now; what waits is dropped.
  func cancel() { mailbox.cancel() }

  /// Ends the iteration after what waits has been taken.
  func finish() { mailbox.finish() }
}

/// One `observe` handler's delivery state: batches run through `handler` one at a time, in
/// order, on a serial queue; a batch delivered while another waits to run is merged into it.
@usableFromInline
final class _HandlerSink<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  private struct State {
    var pending: ChangeBatch<Key, Value>?
    var isDrainScheduled = false
    var isCancelled = false
  }

  let queue: DispatchQueue
  private let handler: @Sendable (ChangeBatch<Key, Value>) -> Void
  private let state = _Protected(State())

  init(queue: DispatchQueue, handler: @escaping @Sendable (ChangeBatch<Key, Value>) -> Void) {
    self.queue = queue
    self.handler = handler
  }

  /// Hands `batch` over (publication lock held; deliveries are serialised).
  ///
  /// - Returns: A batch that the delivery displaced, for the caller to release later.
  func deliver(_ batch: ChangeBatch<Key, Value>) -> ChangeBatch<Key, Value>? {
    let delivery = _deliverMerging(batch, to: state) {
      state, batch -> _Placement<Key, Value, Bool> in
      if state.isCancelled { return .placed(false) }
      if let waiting = state.pending {
        state.pending = nil
        return .occupied(by: waiting)
      }
      state.pending = batch
      defer { state.isDrainScheduled = true }
      return .placed(!state.isDrainScheduled)
    }
    if delivery.effect { queue.async { self.drain() } }
    return delivery.displaced
  }

  private func drain() {
    let batch = state.withLock { state -> ChangeBatch<Key, Value>? in
      state.isDrainScheduled = false
      defer { state.pending = nil }
      return state.isCancelled ? nil : state.pending
    }
    if let batch { handler(batch) }
  }

  /// Returns once every batch delivered so far has gone through the handler.
  func drained() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      queue.async { continuation.resume() }
    }
  }

  /// Stops delivery: no handler call starts after this returns, except one whose batch was
  /// already taken by the queue.
  func cancel() {
    let dropped = state.withLock { state in
      state.isCancelled = true
      defer { state.pending = nil }
      return state.pending
    }
    withExtendedLifetime(dropped) {}
  }
}

/// One `updates(of:)` iteration's mailbox: the key's latest value not yet taken, if any.
@usableFromInline
final class _KeySink<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  let key: Key
  /// Its items are the key's values (`nil`: absent).
  let mailbox = _Mailbox<Value?>()

  init(key: Key) {
    self.key = key
  }

  /// Places the key's value from `batch`, if the batch changes it (publication lock held).
  ///
  /// - Returns: The value it replaced, for the caller to release later.
  func deliver(_ batch: ChangeBatch<Key, Value>) -> Value?? {
    if let updated = batch.updated[key] { return mailbox.place(updated) }
    if batch.removed.contains(key) { return mailbox.place(nil) }
    return nil
  }

  /// Places the key's value at subscription, unless a published one came first.
  func preload(_ value: Value?) {
    withExtendedLifetime(mailbox.place(value, isInitial: true)) {}
  }

  /// The next value; `nil` once the store is gone and the last value was taken, or once the
  /// calling task is cancelled.
  func next(
    isolation actor: isolated (any Actor)?, onCancel: @escaping @Sendable () -> Void
  ) async -> Value?? {
    await mailbox.next(isolation: actor, onCancel: onCancel)
  }

  /// Stops the iteration now; a waiting value is dropped.
  func cancel() { mailbox.cancel() }

  /// Ends the iteration after a waiting value has been taken.
  func finish() { mailbox.finish() }
}
