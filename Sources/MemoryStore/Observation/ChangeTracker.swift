/// The net change of one key since the previous batch.
@usableFromInline
struct _KeyChange<Value> {
  /// Whether the key was present when the previous batch was published.
  @usableFromInline var wasPresent: Bool
  /// Its value now; `nil` if absent.
  @usableFromInline var current: Value?
  @usableFromInline var reason: ChangeReason

  @inlinable
  init(wasPresent: Bool, current: Value?, reason: ChangeReason) {
    self.wasPresent = wasPresent
    self.current = current
    self.reason = reason
  }
}

/// The changes made since the previous batch, recorded by writers in write order.
///
/// Guarded by the store's write lock. It holds one entry per distinct key touched, so its
/// memory is bounded by the number of distinct keys, whatever the number of writes. A
/// `removeAll()` is recorded in O(1): it keeps the store's contents at that instant (shared
/// copy-on-write with the table it discards) and the entries recorded before it, and the
/// publisher resolves them outside the lock.
@usableFromInline
struct _ChangeTracker<Key: Hashable, Value> {
  /// Whether writes are recorded: the notification interval is above zero.
  @usableFromInline var isTracking = false
  /// The notification interval.
  @usableFromInline var interval: Duration = .zero
  /// Whether a publication is scheduled.
  @usableFromInline var isArmed = false
  /// The keys touched since the previous batch, or since the last `removeAll()` if `cleared`.
  @usableFromInline var changes: [Key: _KeyChange<Value>] = [:]
  /// Set by the first `removeAll()` since the previous batch.
  @usableFromInline var cleared: _Cleared<Key, Value>?

  @usableFromInline init() {}

  /// Records that `key` now has `value` (`nil`: absent); `wasPresent` says whether it was
  /// present just before this write.
  ///
  /// - Returns: The value the entry held before, for the caller to release after unlocking.
  @inlinable
  mutating func record(
    _ key: Key, _ value: Value?, wasPresent: Bool, reason: ChangeReason = .write
  ) -> Value? {
    let base = cleared?.wasPresent(key) ?? wasPresent
    return Self.update(
      &changes[key, default: _KeyChange(wasPresent: base, current: nil, reason: reason)],
      to: value, reason: reason)
  }

  /// Sets `entry`'s current value and reason in place; returns the value it held.
  @inlinable @inline(__always)
  static func update(
    _ entry: inout _KeyChange<Value>, to value: Value?, reason: ChangeReason
  ) -> Value? {
    let old = entry.current
    entry.current = value
    entry.reason = reason
    return old
  }

  /// Whether `key` is present in the store now, if the tracker knows; `nil` if the key has
  /// not been touched since the previous batch (the store's contents tell).
  @inlinable
  func isPresent(_ key: Key) -> Bool? {
    if let change = changes[key] { return change.current != nil }
    return cleared == nil ? nil : false
  }

  /// Records `removeAll()`; `contents` are the store's entries just before it.
  ///
  /// - Returns: What the tracker no longer needs, for the caller to release after unlocking.
  @inlinable
  mutating func recordClear(
    contents: [Key: Value], reason: ChangeReason = .write
  ) -> [Key: _KeyChange<Value>] {
    let displaced = changes
    if cleared == nil {
      cleared = _Cleared(contents: contents, before: changes, reason: reason)
      changes = [:]
      return [:]
    }
    // A second clear: every key touched since the first is absent again, and whether it was
    // present at the previous batch is already known from the first clear.
    changes = [:]
    return displaced
  }

  /// Arms the publication timer if it is not armed.
  ///
  /// - Returns: The delay to schedule the publication after, or `nil` if it was armed already.
  @inlinable
  mutating func arm() -> Duration? {
    if isArmed { return nil }
    isArmed = true
    return interval
  }
}

extension _ChangeTracker where Key: Sendable, Value: Sendable {
  /// Takes the changes recorded so far, leaving none.
  mutating func take() -> _RecordedChanges<Key, Value> {
    let taken = _RecordedChanges(changes: changes, cleared: cleared)
    changes = [:]
    cleared = nil
    return taken
  }
}

/// The state of a `removeAll()` since the previous batch.
@usableFromInline
struct _Cleared<Key: Hashable, Value> {
  /// The store's entries just before the clear.
  @usableFromInline let contents: [Key: Value]
  /// The changes recorded before the clear.
  @usableFromInline let before: [Key: _KeyChange<Value>]
  @usableFromInline let reason: ChangeReason

  @inlinable
  init(contents: [Key: Value], before: [Key: _KeyChange<Value>], reason: ChangeReason) {
    self.contents = contents
    self.before = before
    self.reason = reason
  }

  /// Whether `key` was present when the previous batch was published.
  @inlinable
  func wasPresent(_ key: Key) -> Bool {
    if let change = before[key] { return change.wasPresent }
    return contents[key] != nil
  }
}

/// Changes taken from the tracker, resolved into a batch outside every lock.
struct _RecordedChanges<Key: Hashable & Sendable, Value: Sendable> {
  let changes: [Key: _KeyChange<Value>]
  let cleared: _Cleared<Key, Value>?

  var isEmpty: Bool { changes.isEmpty && cleared == nil }

  /// The batch these changes make, or `nil` if they cancel out.
  ///
  /// - Complexity: O(k) for k keys touched; after a `removeAll()`, O(n) for the n entries the
  ///   store had then.
  func batch(sequenceNumber: UInt64) -> ChangeBatch<Key, Value>? {
    var updated: [Key: Value] = [:]
    var addedKeys: Set<Key> = []
    var removed: Set<Key> = []
    var reasons: [Key: ChangeReason] = [:]
    func add(_ key: Key, _ change: _KeyChange<Value>) {
      if let value = change.current {
        updated[key] = value
        if !change.wasPresent { addedKeys.insert(key) }
      } else if change.wasPresent {
        removed.insert(key)
      } else {
        return
      }
      if change.reason != .write { reasons[key] = change.reason }
    }
    if let cleared {
      // Every key present before the clear and not written since is now absent.
      for (key, change) in cleared.before where changes[key] == nil {
        add(key, _KeyChange(wasPresent: change.wasPresent, current: nil, reason: cleared.reason))
      }
      for key in cleared.contents.keys where changes[key] == nil && cleared.before[key] == nil {
        add(key, _KeyChange(wasPresent: true, current: nil, reason: cleared.reason))
      }
    }
    updated.reserveCapacity(changes.count)
    for (key, change) in changes { add(key, change) }
    if updated.isEmpty && removed.isEmpty { return nil }
    return ChangeBatch(
      updated: updated, addedKeys: addedKeys, removed: removed,
      sequenceNumbers: sequenceNumber...sequenceNumber, reasons: reasons)
  }
}

extension _KeyChange: Sendable where Value: Sendable {}
extension _Cleared: Sendable where Key: Sendable, Value: Sendable {}
extension _ChangeTracker: Sendable where Key: Sendable, Value: Sendable {}
