/// A write, kept so that it can be replayed on the second copy of the store.
///
/// The writer applies each write to the copy readers do not see, publishes that copy, and
/// keeps the write as the store's pending operation; the next write first replays it on the
/// other copy, so both copies converge without the writer ever waiting right after publishing.
@usableFromInline
enum _WriteOperation<Key: Hashable, Value> {
  case set(Key, Value)
  case remove(Key)
  case merge([Key: Value])
  case removeKeys([Key])
  case removeAll

  /// Applies the write to `copy` and returns what it displaced, so that the caller can release
  /// it after leaving the write lock: this copy may hold the last reference to a replaced
  /// value, and releasing it may run a `deinit`.
  @inlinable
  func replay(on copy: UnsafeMutablePointer<[Key: Value]>) -> _Displaced<Key, Value> {
    switch self {
    case .set(let key, let value):
      if let old = copy.pointee.updateValue(value, forKey: key) { return .value(old) }
      return .nothing
    case .remove(let key):
      guard let index = copy.pointee.index(forKey: key) else { return .nothing }
      let removed = copy.pointee.remove(at: index)
      return .entry(removed.key, removed.value)
    case .merge(let entries):
      var displaced: [Value] = []
      for (key, value) in entries {
        if let old = copy.pointee.updateValue(value, forKey: key) { displaced.append(old) }
      }
      return .values(displaced)
    case .removeKeys(let keys):
      var displaced: [(Key, Value)] = []
      displaced.reserveCapacity(keys.count)
      for key in keys {
        if let index = copy.pointee.index(forKey: key) {
          let removed = copy.pointee.remove(at: index)
          displaced.append((removed.key, removed.value))
        }
      }
      return .entries(displaced)
    case .removeAll:
      let old = copy.pointee
      copy.pointee = [:]
      return .dictionary(old)
    }
  }
}

/// What a replayed write took out of a copy, held until the write lock is released.
@usableFromInline
enum _Displaced<Key: Hashable, Value> {
  case nothing
  case value(Value)
  case entry(Key, Value)
  case values([Value])
  case entries([(Key, Value)])
  case dictionary([Key: Value])
}

extension _WriteOperation: Sendable where Key: Sendable, Value: Sendable {}
