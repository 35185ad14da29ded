import Dispatch

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
