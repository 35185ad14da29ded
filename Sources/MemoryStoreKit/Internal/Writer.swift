/// What the writers of a store share besides the table: the eviction policy, the change log
/// and the removal log. Reachable only through a ``_Writer``'s lock.
@usableFromInline
struct _WriterState<Key: Hashable & Sendable, Value: Sendable> {
  /// Limits, expiry, the eviction order and settings (see ``_Policy``).
  @usableFromInline var policy = _Policy()
  /// The changes since the previous batch, and whether writes log them.
  @usableFromInline var changes = _ChangeTracker<Key, Value>()
  /// The removals not yet delivered, and their subscribers.
  @usableFromInline var removals = _RemovalLog<Key, Value>()
  /// Which keys invalidations dropped, for the loads they overtake.
  var invalidations = _InvalidationRecord()

  @usableFromInline init() {}

  /// Logs that `key` now holds `value` (`nil`: it was removed) in place of `previous`, for
  /// change batches and removals, whichever are on: the logging of every write of a key.
  ///
  /// - Returns: Whether removals were logged whose delivery must be scheduled.
  @inlinable @inline(__always)
  mutating func logWrite(
    _ key: Key, _ value: Value?, previous: Value?, reason: ChangeReason,
    hash: @autoclosure () -> Int? = nil
  ) -> Bool {
    guard changes.isReporting else { return false }
    var deliversRemovals = false
    if changes.recordsRemovals, let previous {
      deliversRemovals = removals.append(
        key, previous, value != nil ? .replaced : .removal(reason))
    }
    if changes.isLogging {
      changes.appendKey(key, value, wasPresent: previous != nil, reason, hash: hash())
    }
    return deliversRemovals
  }
}

/// The store's write lock and the state it guards, in one box: the state is reachable only
/// through ``withLock(_:)``, or through the ``_WriteAccess`` that ``lock()`` returns and
/// ``unlock(_:)`` takes back, so no state is guarded by a comment.
///
/// A value type holding two pointers (so that using the state costs no exclusivity check, as a
/// class's stored `var` would): the owner calls ``deallocate()`` exactly once, after its last
/// use.
@usableFromInline
struct _Writer<Key: Hashable & Sendable, Value: Sendable> {
  @usableFromInline let _lock: _Lock
  @usableFromInline let _state: UnsafeMutablePointer<_WriterState<Key, Value>>

  @usableFromInline
  init() {
    _lock = _Lock()
    _state = .allocate(capacity: 1)
    _state.initialize(to: _WriterState())
  }

  /// Runs `body` with the lock held and the state in hand. `body` must not call user code.
  @inlinable @inline(__always)
  func withLock<R, E: Error>(_ body: (inout _WriterState<Key, Value>) throws(E) -> R) throws(E)
    -> R
  {
    _lock.lock()
    defer { _lock.unlock() }
    return try body(&_state.pointee)
  }

  /// Takes the lock, and returns the proof of it: the only way to the state outside
  /// ``withLock(_:)``, for a write whose lock is taken and released in different functions.
  @inlinable @inline(__always)
  func lock() -> _WriteAccess<Key, Value> {
    _lock.lock()
    return _WriteAccess(_state: _state)
  }

  /// Releases the lock that `access` proves; `access` must not be used afterwards.
  @inlinable @inline(__always)
  func unlock(_ access: _WriteAccess<Key, Value>) {
    _lock.unlock()
  }

  /// See ``_Lock/yieldToWaiters()``: between chunks of long work.
  @inlinable
  func yieldToWaiters() { _lock.yieldToWaiters() }

  @usableFromInline
  func deallocate() {
    _state.pointee.policy.releaseChosenOrder()
    _state.deinitialize(count: 1)
    _state.deallocate()
    _lock.deallocate()
  }
}

// Safe: the state is reached only with the lock held (through `withLock` or a `_WriteAccess`,
// which only `lock()` makes), the pointers are immutable, and the state is Sendable but for
// the change log, whose values are Sendable.
extension _Writer: @unchecked Sendable {}

/// Proof that the write lock is held, and the way to the state it guards: made only by
/// ``_Writer/lock()``, and dropped after ``_Writer/unlock(_:)``.
///
/// Copyable, though a token that must not outlive the lock would better not be: a
/// noncopyable local is kept in a heap box by this compiler where it is borrowed on several
/// paths, which costs an allocation per write. ``_Transaction``, which holds it, is not
/// copyable.
@usableFromInline
struct _WriteAccess<Key: Hashable & Sendable, Value: Sendable> {
  @usableFromInline let _state: UnsafeMutablePointer<_WriterState<Key, Value>>

  @inlinable @inline(__always)
  init(_state: UnsafeMutablePointer<_WriterState<Key, Value>>) { self._state = _state }

  /// The writers' state, for the holder of the lock.
  @inlinable
  var state: _WriterState<Key, Value> {
    @inline(__always) unsafeAddress { UnsafePointer(_state) }
    @inline(__always) nonmutating unsafeMutableAddress { _state }
  }

  /// The policy's part of the state.
  @inlinable
  var policy: _Policy {
    @inline(__always) unsafeAddress { UnsafePointer(_state.pointer(to: \.policy)!) }
    @inline(__always) nonmutating unsafeMutableAddress { _state.pointer(to: \.policy)! }
  }

  /// The change log's part of the state.
  @inlinable
  var changes: _ChangeTracker<Key, Value> {
    @inline(__always) unsafeAddress { UnsafePointer(_state.pointer(to: \.changes)!) }
    @inline(__always) nonmutating unsafeMutableAddress { _state.pointer(to: \.changes)! }
  }

  /// The removal log's part of the state.
  @inlinable
  var removals: _RemovalLog<Key, Value> {
    @inline(__always) unsafeAddress { UnsafePointer(_state.pointer(to: \.removals)!) }
    @inline(__always) nonmutating unsafeMutableAddress { _state.pointer(to: \.removals)! }
  }
}
