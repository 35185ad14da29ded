/// The net change per key since the previous batch, coalesced from the log in write order;
/// guarded by its own lock, never by the write lock. One entry per distinct key changed.
///
/// Inlinable, like the write path, so that coalescing runs specialised for the client's types.
@usableFromInline
struct _ChangeAccumulator<Key: Hashable, Value> {
  /// The keys touched since the previous batch, or since the last `removeAll()` if `cleared`.
  @usableFromInline var changes = _ChangeMap<Key, Value>()
  /// Set by the first `removeAll()` since the previous batch.
  @usableFromInline var cleared: _Cleared<Key, Value>?

  @usableFromInline init() {}

  /// Applies the changes `segment` logged, in write order, moving each one's value out.
  ///
  /// - Parameter displaced: What the accumulator let go of is appended to it, for the caller
  ///   to release after unlocking.
  /// - Complexity: O(*c*) for *c* changes logged, hashing nothing, but for keys changed after
  ///   a clear, and O(*n*) for the *n* entries of the store at the first clear.
  @inlinable
  mutating func apply(_ segment: _LogSegment<Key, Value>, displaced: inout [Value]) {
    let clears = segment.clears
    var nextClear = 0
    for index in 0..<segment.count {
      while nextClear < clears.count && clears[nextClear].position == index {
        apply(clears[nextClear], displaced: &displaced)
        nextClear &+= 1
      }
      apply(segment.keys[index], segment.takeRecord(at: index), displaced: &displaced)
    }
    segment.recordsTaken = true
    while nextClear < clears.count {
      apply(clears[nextClear], displaced: &displaced)
      nextClear &+= 1
    }
  }

  /// Applies one logged change of `key`.
  @inlinable @inline(__always)
  mutating func apply(
    _ key: Key, _ logged: _LoggedValue<Value>, displaced: inout [Value]
  ) {
    let removes = logged.value == nil && logged.wasPresent
    let old = changes.withChange(
      for: key, hash: logged.hash,
      orInsert: {
        guard let cleared else {
          return _KeyChange(wasPresent: logged.wasPresent, current: nil, reason: logged.reason)
        }
        return _KeyChange(
          wasPresent: cleared.wasPresent(key), current: nil, reason: logged.reason,
          removalReason: cleared.firstRemovalReason(key))
      },
      { Self.update(&$0, to: logged.value, reason: logged.reason, removes: removes) })
    // A value whose release does nothing is not kept for later.
    if let old, !_isPOD(Value.self) { displaced.append(old) }
  }

  /// Applies one logged `removeAll()`.
  @inlinable
  mutating func apply(_ clear: _LoggedClear<Key, Value>, displaced: inout [Value]) {
    if cleared == nil {
      cleared = _Cleared(contents: clear.contents.dictionary, before: changes, reason: clear.reason)
    } else {
      // A second clear: every key touched since the first is absent again, and whether it
      // was present at the previous batch is known from the first clear.
      for entry in changes.entries {
        if let value = entry.change.current { displaced.append(value) }
      }
    }
    changes = _ChangeMap()
  }

  /// Sets `entry`'s current value and reason in place, and its removal reason if `removes`
  /// (the change removes a present key) is its first removal since the previous batch;
  /// returns the value it held.
  @inlinable @inline(__always)
  static func update(
    _ entry: inout _KeyChange<Value>, to value: Value?, reason: ChangeReason, removes: Bool
  ) -> Value? {
    let old = entry.current
    entry.current = value
    entry.reason = reason
    if removes && entry.wasPresent && entry.removalReason == nil { entry.removalReason = reason }
    return old
  }
}

extension _ChangeAccumulator where Key: Sendable, Value: Sendable {
  /// Takes the changes accumulated so far, leaving none.
  @inlinable
  mutating func take() -> _RecordedChanges<Key, Value> {
    let taken = _RecordedChanges(changes: changes, cleared: cleared)
    changes = _ChangeMap()
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
  @usableFromInline let before: _ChangeMap<Key, Value>
  @usableFromInline let reason: ChangeReason

  @inlinable
  init(contents: [Key: Value], before: _ChangeMap<Key, Value>, reason: ChangeReason) {
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

  /// The reason of the change that first removed `key` since the previous batch, up to and
  /// including the clear; `nil` if `key` was absent at the previous batch.
  @inlinable
  func firstRemovalReason(_ key: Key) -> ChangeReason? {
    guard let change = before[key] else { return contents[key] != nil ? reason : nil }
    guard change.wasPresent else { return nil }
    // Removed before the clear, or present until the clear removed it.
    return change.removalReason ?? reason
  }
}

/// Changes taken from the tracker, resolved into a batch outside every lock.
@usableFromInline
struct _RecordedChanges<Key: Hashable & Sendable, Value: Sendable> {
  @usableFromInline let changes: _ChangeMap<Key, Value>
  @usableFromInline let cleared: _Cleared<Key, Value>?

  @inlinable
  init(changes: _ChangeMap<Key, Value>, cleared: _Cleared<Key, Value>?) {
    self.changes = changes
    self.cleared = cleared
  }

  @inlinable var isEmpty: Bool { changes.isEmpty && cleared == nil }

  /// The batch these changes make, or `nil` if they cancel out.
  ///
  /// Inlinable, so that it runs specialised for the client's types: unspecialised, every
  /// dictionary and set operation looks up its type's metadata.
  ///
  /// - Complexity: O(k) for k keys touched; after a `removeAll()`, O(n) for the n entries the
  ///   store had then.
  @inlinable
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
      let reason = change.reportedReason
      if reason != .write { reasons[key] = reason }
    }
    if let cleared {
      // Every key present before the clear and not written since is now absent.
      // Its reason is that of its first removal: an expiry or an eviction before the clear
      // is not overwritten by the clear's.
      for entry in cleared.before.entries where changes[entry.key] == nil {
        add(
          entry.key,
          _KeyChange(
            wasPresent: entry.change.wasPresent, current: nil, reason: cleared.reason,
            removalReason: cleared.firstRemovalReason(entry.key)))
      }
      for key in cleared.contents.keys where changes[key] == nil && cleared.before[key] == nil {
        add(key, _KeyChange(wasPresent: true, current: nil, reason: cleared.reason))
      }
    }
    updated.reserveCapacity(changes.count)
    for entry in changes.entries { add(entry.key, entry.change) }
    if updated.isEmpty && removed.isEmpty { return nil }
    return ChangeBatch(
      updated: updated, addedKeys: addedKeys, removed: removed,
      sequenceNumbers: sequenceNumber...sequenceNumber, reasons: reasons)
  }
}

extension _Cleared: Sendable where Key: Sendable, Value: Sendable {}
extension _ChangeAccumulator: Sendable where Key: Sendable, Value: Sendable {}
