/// One write to a store, as a value: what `_perform` hands to the write path, which stages it
/// key by key and publishes it as one atomic step.
@usableFromInline
enum _WriteOperation<Key: Hashable, Value> {
  /// Stores the value only if the key is absent, with a cost and a time to live (`nil`: the
  /// default).
  case insert(Key, Value, cost: Int, timeToLive: Duration?)
  /// Sets every entry, each with its cost in `costs` (weighed outside the lock; `nil`: all 0)
  /// and the default time to live.
  case merge([Key: Value], costs: [Key: Int]?)
  case removeKeys([Key])
  case removeAll
  /// Sets (a non-`nil` value) or removes each key, all or none: only if every key's current
  /// entry is still the one read at `expected` (its node's version; `nil`: absent). Otherwise
  /// the write stages nothing and reports a conflict. What a read-modify-write commits. A key
  /// set over a live entry keeps its deadline and its cost (unless `cost` gives one, weighed
  /// outside the lock); a key that was absent gets the default time to live and `cost` or 0.
  case replace([(key: Key, value: Value?, expected: UInt64?, cost: Int?)])
  /// Renews the key's live entry without changing its value: its expiry to the time to live
  /// from now (`nil`: the default; with neither, unchanged), and a use for eviction.
  case renew(Key, timeToLive: Duration?)
  /// Removes each key whose current entry is still the one at `version` (judged outside the
  /// lock: by a purge's decider, or `removeAll(where:)`), with the write's reason; skips the
  /// others.
  case removeUnchanged([(key: Key, version: UInt64)])

  /// Whether the operation empties the store.
  @inlinable
  var isRemoveAll: Bool {
    if case .removeAll = self { return true }
    return false
  }
}

extension _WriteOperation: Sendable where Key: Sendable, Value: Sendable {}

/// A read-only view of the store at one version: what one reader sees, or, under the write
/// lock, the newest state.
@usableFromInline
struct _ReadView<Key: Hashable, Value> {
  @usableFromInline let table: _ConcurrentTable<Key, Value>
  @usableFromInline let version: UInt64
  /// Whether the view is read under the write lock (its count is then the writer's).
  @usableFromInline let isLocked: Bool

  @inlinable
  init(table: _ConcurrentTable<Key, Value>, version: UInt64, isLocked: Bool = false) {
    self.table = table
    self.version = version
    self.isLocked = isLocked
  }

  @inlinable @inline(__always)
  func value(forKey key: Key) -> Value? {
    table._value(forKey: key, hash: key.hashValue, at: version)
  }

  /// The node holding `key`'s value in this view, or `nil`; valid while the view is.
  @inlinable @inline(__always)
  func node(forKey key: Key) -> _Node<Key, Value>? {
    table._lookup(key, hash: key.hashValue, at: version)
  }

  /// The number of entries. O(1) under the write lock; a reader's view counts at its version,
  /// which is O(1) unless writes were published since it started, then O(*n*).
  @inlinable
  var count: Int {
    if isLocked { return table.stagedCount }
    return table._count(at: version) ?? dictionary.count
  }

  /// `transform` of every entry, in no particular order. O(*n*).
  @inlinable
  func map<T>(_ transform: (Key, Value) -> T) -> [T] {
    var result: [T] = []
    result.reserveCapacity(table._writerCountHint)
    table._forEach(at: version) { key, value in result.append(transform(key, value)) }
    return result
  }

  /// Every entry. O(*n*).
  @inlinable
  var dictionary: [Key: Value] {
    var result: [Key: Value] = [:]
    result.reserveCapacity(table._writerCountHint)
    table._forEach(at: version) { key, value in result[key] = value }
    return result
  }
}
