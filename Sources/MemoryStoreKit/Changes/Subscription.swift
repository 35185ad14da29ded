/// A token that keeps a subscription to a store's changes alive.
///
/// Delivery stops when ``cancel()`` is called or when the last reference to the token goes
/// away, whichever comes first. Keep the token for as long as you want batches:
///
/// ```swift
/// let subscription = store.observe { batch in print(batch.updated) }
/// // …
/// subscription.cancel()   // or let it go out of scope
/// ```
///
/// Thread-safe: it may be cancelled from any thread, any number of times.
public final class Subscription: Sendable, Hashable {
  private let onCancel: _Protected<(@Sendable () -> Void)?>

  init(onCancel: @escaping @Sendable () -> Void) {
    self.onCancel = _Protected(onCancel)
  }

  /// Stops delivery. Idempotent.
  ///
  /// No batch published after this returns is delivered. A handler call that has already
  /// started, or whose batch its queue has already taken, still completes.
  public func cancel() {
    let action = onCancel.withLock { action in
      defer { action = nil }
      return action
    }
    action?()
  }

  /// Whether ``cancel()`` has been called.
  public var isCancelled: Bool {
    onCancel.withLock { $0 == nil }
  }

  deinit {
    cancel()
  }

  public static func == (lhs: Subscription, rhs: Subscription) -> Bool { lhs === rhs }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(ObjectIdentifier(self))
  }
}
