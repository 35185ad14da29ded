/// One write to a store, as a value: applied to the hidden copy, kept as pending, and replayed
/// on the other copy by the next write, so both copies converge without the writer waiting
/// right after it publishes.
@usableFromInline
enum _WriteOperation<Key: Hashable, Value> {
  case set(Key, Value)
  /// Stores the value only if the key is absent.
  case insert(Key, Value)
  case remove(Key)
  case merge([Key: Value])
  case removeKeys([Key])
  case removeAll
  /// Writes that were recorded in an overlay while the hidden copy was held by a reader.
  case overlay(_Overlay<Key, Value>)
  /// A write of a store with an eviction policy: the expired keys removed first, then the
  /// write itself, then the keys evicted to respect the limits, as one atomic write.
  indirect case compound(expired: [Key], _WriteOperation<Key, Value>?, evicted: [Key])

  /// Applies the write to `copy`.
  ///
  /// - Returns: Whether the copy changed; the value the key had before (`set`, `insert`,
  ///   `remove`); and what the write took out of the copy, which the caller releases after it
  ///   leaves the write lock (this copy may hold the last reference, and releasing it may run a
  ///   `deinit`).
  @inlinable
  func apply(
    to copy: UnsafeMutablePointer<[Key: Value]>
  ) -> (changed: Bool, previous: Value?, displaced: _Displaced<Key, Value>) {
    switch self {
    case .set(let key, let value):
      let old = copy.pointee.updateValue(value, forKey: key)
      return (true, old, .nothing)
    case .insert(let key, let value):
      if let existing = copy.pointee[key] { return (false, existing, .nothing) }
      copy.pointee[key] = value
      return (true, nil, .nothing)
    case .remove(let key):
      guard let index = copy.pointee.index(forKey: key) else { return (false, nil, .nothing) }
      let removed = copy.pointee.remove(at: index)
      return (true, removed.value, .key(removed.key))
    case .merge(let entries):
      var displaced: [(Key, Value)] = []
      for (key, value) in entries {
        if let old = copy.pointee.updateValue(value, forKey: key) { displaced.append((key, old)) }
      }
      return (!entries.isEmpty, nil, .entries(displaced))
    case .removeKeys(let keys):
      var displaced: [(Key, Value)] = []
      for key in keys {
        if let index = copy.pointee.index(forKey: key) {
          let removed = copy.pointee.remove(at: index)
          displaced.append((removed.key, removed.value))
        }
      }
      return (!displaced.isEmpty, nil, .entries(displaced))
    case .removeAll:
      if copy.pointee.isEmpty { return (false, nil, .nothing) }
      let old = copy.pointee
      copy.pointee = [:]
      return (true, nil, .dictionary(old))
    case .overlay(let overlay):
      var old: [Key: Value] = [:]
      if overlay.cleared {
        old = copy.pointee
        copy.pointee = [:]
      }
      var displaced: [(Key, Value)] = []
      for (key, change) in overlay.changes {
        if let value = change {
          if let previous = copy.pointee.updateValue(value, forKey: key) {
            displaced.append((key, previous))
          }
        } else if let index = copy.pointee.index(forKey: key) {
          let removed = copy.pointee.remove(at: index)
          displaced.append((removed.key, removed.value))
        }
      }
      return (true, nil, .overlay(old, displaced))
    case .compound(let expired, let operation, let evicted):
      var changed = false
      var previous: Value?
      var parts: [_Displaced<Key, Value>] = []
      if !expired.isEmpty {
        let result = _WriteOperation.removeKeys(expired).apply(to: copy)
        changed = result.changed
        parts.append(result.displaced)
      }
      if let operation {
        let result = operation.apply(to: copy)
        changed = changed || result.changed
        previous = result.previous
        parts.append(result.displaced)
      }
      if !evicted.isEmpty {
        let result = _WriteOperation.removeKeys(evicted).apply(to: copy)
        changed = changed || result.changed
        parts.append(result.displaced)
      }
      return (changed, previous, .parts(parts))
    }
  }
}

/// What a write took out of a copy, held until the write lock is released.
@usableFromInline
enum _Displaced<Key: Hashable, Value> {
  case nothing
  case key(Key)
  case entries([(Key, Value)])
  case dictionary([Key: Value])
  case overlay([Key: Value], [(Key, Value)])
  case overlayChanges([Key: Value?], [Value?])
  indirect case parts([_Displaced<Key, Value>])
}

/// The writes that have not reached either copy yet, because the hidden copy was held by a
/// reader (typically one that the scheduler preempted in the middle of a lookup) when they
/// were made.
///
/// Readers see the store as the published copy with the overlay on top. The overlay is the net
/// effect of its writes: the latest value (or `nil` for a removal) per key, and whether the
/// store was cleared first. Only writers holding the write lock modify it, under the backlog
/// lock; readers read it under the backlog lock.
@usableFromInline
struct _Overlay<Key: Hashable, Value> {
  /// Whether `removeAll()` ran since the overlay started: the published copy is then hidden.
  @usableFromInline var cleared = false
  /// The latest value per key written since the overlay started; `.some(nil)` is a removal.
  @usableFromInline var changes: [Key: Value?] = [:]
  /// The number of entries of the store as readers see it.
  @usableFromInline var count = 0

  @usableFromInline init() {}

  @usableFromInline var isEmpty: Bool { !cleared && changes.isEmpty }

  /// The value readers see for `key`, given the published copy `base`.
  @inlinable
  func value(forKey key: Key, base: UnsafeMutablePointer<[Key: Value]>) -> Value? {
    if let change = changes[key] { return change }
    return cleared ? nil : base.pointee[key]
  }

  /// Every entry readers see, given the published copy `base`. O(n).
  @inlinable
  func dictionary(base: UnsafeMutablePointer<[Key: Value]>) -> [Key: Value] {
    var result = cleared ? [:] : base.pointee
    for (key, change) in changes { result[key] = change }
    return result
  }

  /// Records `operation` on top of `base`, with the same result as applying it to a copy.
  ///
  /// - Returns: Also what the write took out of the overlay, which the caller releases after it
  ///   leaves the write lock (the overlay may hold the last reference to a value).
  @usableFromInline
  mutating func record(
    _ operation: _WriteOperation<Key, Value>, base: UnsafeMutablePointer<[Key: Value]>
  ) -> (changed: Bool, previous: Value?, displaced: _Displaced<Key, Value>) {
    switch operation {
    case .set(let key, let value):
      let previous = self.value(forKey: key, base: base)
      if previous == nil { count += 1 }
      let old = changes.updateValue(.some(value), forKey: key)
      return (true, previous, .overlayChanges([:], old.map { [$0] } ?? []))
    case .insert(let key, let value):
      if let existing = self.value(forKey: key, base: base) { return (false, existing, .nothing) }
      count += 1
      let old = changes.updateValue(.some(value), forKey: key)
      return (true, nil, .overlayChanges([:], old.map { [$0] } ?? []))
    case .remove(let key):
      guard let previous = self.value(forKey: key, base: base) else {
        return (false, nil, .nothing)
      }
      count -= 1
      let old = changes.updateValue(Value?.none, forKey: key)
      return (true, previous, .overlayChanges([:], old.map { [$0] } ?? []))
    case .merge(let entries):
      var old: [Value?] = []
      for (key, value) in entries {
        if self.value(forKey: key, base: base) == nil { count += 1 }
        if let replaced = changes.updateValue(.some(value), forKey: key) { old.append(replaced) }
      }
      return (!entries.isEmpty, nil, .overlayChanges([:], old))
    case .removeKeys(let keys):
      var changed = false
      var old: [Value?] = []
      for key in keys where self.value(forKey: key, base: base) != nil {
        count -= 1
        if let replaced = changes.updateValue(Value?.none, forKey: key) { old.append(replaced) }
        changed = true
      }
      return (changed, nil, .overlayChanges([:], old))
    case .removeAll:
      if count == 0 { return (false, nil, .nothing) }
      cleared = true
      let old = changes
      changes = [:]
      count = 0
      return (true, nil, .overlayChanges(old, []))
    case .compound(let expired, let operation, let evicted):
      var changed = false
      var previous: Value?
      var parts: [_Displaced<Key, Value>] = []
      if !expired.isEmpty {
        let result = record(.removeKeys(expired), base: base)
        changed = result.changed
        parts.append(result.displaced)
      }
      if let operation {
        let result = record(operation, base: base)
        changed = changed || result.changed
        previous = result.previous
        parts.append(result.displaced)
      }
      if !evicted.isEmpty {
        let result = record(.removeKeys(evicted), base: base)
        changed = changed || result.changed
        parts.append(result.displaced)
      }
      return (changed, previous, .parts(parts))
    case .overlay:
      preconditionFailure("an overlay is never recorded in another overlay")
    }
  }
}

extension _WriteOperation: Sendable where Key: Sendable, Value: Sendable {}
extension _Overlay: Sendable where Key: Sendable, Value: Sendable {}

/// The writes applied to the published copy but not yet to the hidden one, oldest first.
@usableFromInline
struct _Pending<Key: Hashable, Value> {
  @usableFromInline var first: _WriteOperation<Key, Value>?
  @usableFromInline var second: _WriteOperation<Key, Value>?

  @inlinable init(
    _ first: _WriteOperation<Key, Value>? = nil, _ second: _WriteOperation<Key, Value>? = nil
  ) {
    self.first = first
    self.second = second
  }
}

extension _Pending: Sendable where Key: Sendable, Value: Sendable {}

/// A read-only view of the store as one reader sees it: the published copy, plus the overlay
/// when one is active.
@usableFromInline
struct _ReadView<Key: Hashable, Value> {
  @usableFromInline let copy: UnsafeMutablePointer<[Key: Value]>
  @usableFromInline let overlay: UnsafeMutablePointer<_Overlay<Key, Value>>?

  @inlinable
  init(
    copy: UnsafeMutablePointer<[Key: Value]>, overlay: UnsafeMutablePointer<_Overlay<Key, Value>>?
  ) {
    self.copy = copy
    self.overlay = overlay
  }

  @inlinable @inline(__always)
  func value(forKey key: Key) -> Value? {
    if let overlay { return overlay.pointee.value(forKey: key, base: copy) }
    return copy.pointee[key]
  }

  @inlinable
  var count: Int {
    if let overlay { return overlay.pointee.count }
    return copy.pointee.count
  }

  @inlinable
  var dictionary: [Key: Value] {
    if let overlay { return overlay.pointee.dictionary(base: copy) }
    return copy.pointee
  }
}
