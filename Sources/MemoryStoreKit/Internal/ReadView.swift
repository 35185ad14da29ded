/// A read-only view of the store at one version: what one reader sees.
@usableFromInline
struct _ReadView<Key: Hashable, Value> {
  @usableFromInline let table: _ConcurrentTable<Key, Value>
  @usableFromInline let version: UInt64
  @inlinable
  init(table: _ConcurrentTable<Key, Value>, version: UInt64) {
    self.table = table
    self.version = version
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

  /// ``node(forKey:)`` for a key whose hash the caller has.
  @inlinable @inline(__always)
  func node(forKey key: Key, hash: Int) -> _Node<Key, Value>? {
    table._lookup(key, hash: hash, at: version)
  }

  /// The number of entries at the view's version: O(1) unless writes were published since it
  /// started, then O(*n*).
  @inlinable
  var count: Int {
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
