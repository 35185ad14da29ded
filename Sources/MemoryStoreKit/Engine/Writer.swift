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

  /// Runs `body` with the lock held and its proof in hand: the way to the table's writer
  /// state as well as this state. `body` must not call user code.
  @inlinable @inline(__always)
  func withAccess<R, E: Error>(_ body: (borrowing _WriteAccess<Key, Value>) throws(E) -> R)
    throws(E) -> R
  {
    let access = lock()
    do {
      let result = try body(access)
      unlock(access)
      return result
    } catch {
      unlock(access)
      throw error
    }
  }

  /// Takes the lock, and returns the proof of it, which ``unlock(_:)`` takes back: for a write
  /// that releases the lock in the same function, on more than one path.
  @inlinable @inline(__always)
  func lock() -> _WriteAccess<Key, Value> {
    _lock.lock()
    return _WriteAccess(_state: _state, held: _WriteLockHeld(lockTaken: ()))
  }

  /// Releases the lock that `access` proves, consuming the proof.
  @inlinable @inline(__always)
  func unlock(_ access: consuming _WriteAccess<Key, Value>) {
    _ = consume access
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
/// ``_Writer/lock()`` (or ``_Writer/withAccess(_:)``), and consumed by ``_Writer/unlock(_:)``.
/// Not copyable, so that it cannot outlive the lock: it holds the ``_WriteLockHeld`` that the
/// table's writer state asks for (see ``_ExternallyLocked``).
@usableFromInline
struct _WriteAccess<Key: Hashable & Sendable, Value: Sendable>: ~Copyable {
  @usableFromInline let _state: UnsafeMutablePointer<_WriterState<Key, Value>>
  /// The proof that the table's writer methods take.
  @usableFromInline let held: _WriteLockHeld

  @inlinable @inline(__always)
  init(_state: UnsafeMutablePointer<_WriterState<Key, Value>>, held: consuming _WriteLockHeld) {
    self._state = _state
    self.held = held
  }

  /// The writers' state, for the holder of the lock.
  @inlinable
  var state: _WriterState<Key, Value> {
    @inline(__always) _read { yield _state.pointee }
    @inline(__always) nonmutating _modify { yield &_state.pointee }
  }

  /// The policy's part of the state.
  @inlinable
  var policy: _Policy {
    @inline(__always) _read { yield _state.pointee.policy }
    @inline(__always) nonmutating _modify { yield &_state.pointee.policy }
  }

  /// The change log's part of the state.
  @inlinable
  var changes: _ChangeTracker<Key, Value> {
    @inline(__always) _read { yield _state.pointee.changes }
    @inline(__always) nonmutating _modify { yield &_state.pointee.changes }
  }

  /// The removal log's part of the state.
  @inlinable
  var removals: _RemovalLog<Key, Value> {
    @inline(__always) _read { yield _state.pointee.removals }
    @inline(__always) nonmutating _modify { yield &_state.pointee.removals }
  }
}

/// Proof that the store's write lock is held, for the table's writer state
/// (``_ExternallyLocked/pointer(_:)``) and every method that reaches it. Not copyable, and
/// carried by the ``_WriteAccess`` that ``_Writer/lock()`` makes and ``_Writer/unlock(_:)``
/// consumes: a method that takes it borrowed cannot run after the lock is released. Takes no
/// space.
@usableFromInline
struct _WriteLockHeld: ~Copyable {
  /// Made by ``_Writer/lock()`` once it holds the lock; by nothing else in the library.
  @inlinable @inline(__always)
  init(lockTaken: ()) {}

  /// A proof for a table that no store owns, written from one thread at a time: the engine
  /// probe's, under a lock of its own, and the table's tests.
  @inlinable @inline(__always)
  static var forATableOfItsOwn: _WriteLockHeld { _WriteLockHeld(lockTaken: ()) }
}
