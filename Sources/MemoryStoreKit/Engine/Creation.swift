/// One value being created by `MemoryStore.valueOrInsert(forKey:_:)`.
///
/// The creating thread holds ``lock`` from before the creation becomes visible to other
/// threads until ``outcome`` is set, so other callers for the same key wait by taking the lock.
@usableFromInline
final class _Creation<Value> {
  @usableFromInline let lock = _Lock()
  /// The creating thread's ``_ThreadSlot`` number, unique to it for the process's lifetime.
  @usableFromInline let owner = _ThreadSlot.current
  /// The stored value, or `nil` if `makeValue` threw. Written by the creating thread while it
  /// holds ``lock``; read by waiters only while they hold it.
  @usableFromInline var outcome: Value?

  @usableFromInline init() {}

  /// Whether the calling thread is the one creating the value.
  @usableFromInline var isOwnedByCurrentThread: Bool {
    owner == _ThreadSlot.current
  }

  deinit { lock.deallocate() }
}

// Safe: `outcome` is only accessed under `lock` (see above); the other properties are
// immutable.
extension _Creation: @unchecked Sendable where Value: Sendable {}

/// What `valueOrInsert(forKey:_:)` finds under the creations' lock.
@usableFromInline
enum _CreationLookup<Value> {
  /// The key has a value.
  case stored(Value)
  /// Another caller is creating the value: wait for it.
  case running(_Creation<Value>)
  /// This caller creates it: registered, its lock held.
  case started(_Creation<Value>)
}

/// The values being created by get-or-create and loaded by get-or-load, by key: one lock for
/// both, which no other store lock is ever taken under.
struct _InFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// Creations of `valueOrInsert(forKey:_:)`.
  var creations: [Key: _Creation<Value>] = [:]
  /// Loads of `value(forKey:orLoad:)` and `values(forKeys:orLoad:)`, and refreshes, one per
  /// key.
  var loads: [Key: _Load<Value>] = [:]
  /// Called when a reload of ``MemoryStore/timeToRefresh`` has ended, outside every lock: lets
  /// tests wait for one.
  var afterReload: (@Sendable () -> Void)?
}
