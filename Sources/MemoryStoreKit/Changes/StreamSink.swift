import Dispatch

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
