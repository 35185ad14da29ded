/// State that only one thread at a time may access: a ``_Lock`` and the value it guards.
///
/// Used for the store's bookkeeping off the hot paths (subscribers, schedulers, tokens) in
/// place of `Synchronization.Mutex`, for the reasons given on ``_Lock``.
@usableFromInline
final class _Protected<State> {
  @usableFromInline let lock = _Lock()
  @usableFromInline var state: State

  @usableFromInline
  init(_ initialState: State) {
    state = initialState
  }

  deinit {
    lock.deallocate()
  }

  /// Runs `body` with exclusive access to the state. `body` must not call user code.
  @inlinable
  func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }
}

// Safe: `state` is accessed only inside `withLock`, which holds `lock` for the whole access,
// and the state itself is Sendable.
extension _Protected: @unchecked Sendable where State: Sendable {}
