import Dispatch

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
