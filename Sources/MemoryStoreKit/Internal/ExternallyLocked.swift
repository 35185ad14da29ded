/// State at a stable heap address that a lock its owner does not hold guards: the escape
/// hatch for a component whose every mutating method runs under its caller's lock.
///
/// The table's writer state is the one use: the store's write lock guards it, and every table
/// method that reaches it says "Write lock held". Access costs no exclusivity check, as a
/// class's stored `var` would. The owner calls ``deallocate()`` exactly once, after its last
/// use.
@usableFromInline
struct _ExternallyLocked<Wrapped> {
  /// The state; dereference only with the owner's documented lock held.
  @usableFromInline let underWriteLock: UnsafeMutablePointer<Wrapped>

  @usableFromInline
  init(_ initialValue: Wrapped) {
    underWriteLock = UnsafeMutablePointer<Wrapped>.allocate(capacity: 1)
    underWriteLock.initialize(to: initialValue)
  }

  @usableFromInline
  func deallocate() {
    underWriteLock.deinitialize(count: 1)
    underWriteLock.deallocate()
  }
}

// Safe: the owner documents which lock serialises access to the state; this is only a stable
// address for it.
extension _ExternallyLocked: @unchecked Sendable where Wrapped: Sendable {}
