import Dispatch

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
