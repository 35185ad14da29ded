/// A value at a stable heap address, accessed without exclusivity checks.
///
/// Used for state that a lock already serialises, where a class's
/// stored `var` would pay a dynamic exclusivity check on every access. The owner calls
/// ``deallocate()`` exactly once, after its last use.
@usableFromInline
struct _UnsafeBox<Wrapped> {
  @usableFromInline let pointer: UnsafeMutablePointer<Wrapped>

  @usableFromInline
  init(_ initialValue: Wrapped) {
    pointer = UnsafeMutablePointer<Wrapped>.allocate(capacity: 1)
    pointer.initialize(to: initialValue)
  }

  @usableFromInline
  func deallocate() {
    pointer.deinitialize(count: 1)
    pointer.deallocate()
  }
}

// Safe: every owner of a box documents which lock serialises access to it; the box is only
// a stable address for that state.
extension _UnsafeBox: @unchecked Sendable where Wrapped: Sendable {}
