/// State at a stable heap address that a lock its owner does not hold guards: the table's
/// writer state, which the store's write lock guards. It is reached only through
/// ``pointer(_:)``, which asks for the non-copyable proof that the lock is held
/// (``_WriteLockHeld``), so every method of the table that reaches it takes that proof too.
/// Access costs no exclusivity check, as a class's stored `var` would. The owner calls
/// ``deallocate()`` exactly once, after its last use.
@usableFromInline
struct _ExternallyLocked<Wrapped> {
  /// The state; reached only through ``pointer(_:)`` and, once no one else can, by the owner's
  /// deinit (``pointerAtDeinit``).
  @usableFromInline let _guarded: UnsafeMutablePointer<Wrapped>

  @usableFromInline
  init(_ initialValue: Wrapped) {
    _guarded = UnsafeMutablePointer<Wrapped>.allocate(capacity: 1)
    _guarded.initialize(to: initialValue)
  }

  /// The state, for the holder of the write lock.
  @inlinable @inline(__always)
  func pointer(_ held: borrowing _WriteLockHeld) -> UnsafeMutablePointer<Wrapped> { _guarded }

  /// The state, for its owner's deinit: no other reference to the owner exists, so no lock
  /// is needed.
  @usableFromInline
  var pointerAtDeinit: UnsafeMutablePointer<Wrapped> { _guarded }

  @usableFromInline
  func deallocate() {
    _guarded.deinitialize(count: 1)
    _guarded.deallocate()
  }
}

// Safe: the state is reached only with the write lock held (``pointer(_:)`` asks for its proof)
// or by the owner's deinit; this is only a stable address for it.
extension _ExternallyLocked: @unchecked Sendable where Wrapped: Sendable {}
