/// A read-only view of the store at one version: what one reader sees. An entry whose deadline
/// had passed when the read started is absent from it, whether or not it has been removed yet.
@usableFromInline
struct _ReadView<Key: Hashable, Value> {
  @usableFromInline let table: _ConcurrentTable<Key, Value>
  @usableFromInline let version: UInt64
  /// The time the read started at if an entry may have expired by then, so that entries whose
  /// deadline is at or before it are absent; `Int64.min` when none can have (no deadline is
  /// due), which spares every lookup the comparison.
  @usableFromInline let expiredBy: Int64

  @inlinable
  init(table: _ConcurrentTable<Key, Value>, version: UInt64, expiredBy: Int64 = .min) {
    self.table = table
    self.version = version
    self.expiredBy = expiredBy
  }

  /// Whether `node` is visible to this view: it has not expired by the read's start.
  @inlinable @inline(__always)
  func isLive(_ node: _Node<Key, Value>) -> Bool {
    expiredBy == .min || node.deadline > expiredBy
  }

  @inlinable @inline(__always)
  func value(forKey key: Key) -> Value? {
    node(forKey: key)?.value.pointee
  }

  /// The node holding `key`'s value in this view, or `nil`; valid while the view is.
  @inlinable @inline(__always)
  func node(forKey key: Key) -> _Node<Key, Value>? {
    node(forKey: key, hash: key.hashValue)
  }

  /// ``node(forKey:)`` for a key whose hash the caller has.
  @inlinable @inline(__always)
  func node(forKey key: Key, hash: Int) -> _Node<Key, Value>? {
    guard let node = table._lookup(key, hash: hash, at: version), isLive(node) else { return nil }
    return node
  }

  /// The number of entries at the view's version: O(1) unless writes were published since it
  /// started or an entry awaits removal after expiring, then O(*n*).
  @inlinable
  var count: Int {
    if expiredBy == .min, let count = table._count(at: version) { return count }
    var count = 0
    forEachNode { _ in count += 1 }
    return count
  }

  /// Calls `body` with the node of every live entry, in no particular order. O(*n*).
  @inlinable
  func forEachNode(_ body: (_Node<Key, Value>) -> Void) {
    if expiredBy == .min {
      table._forEachNode(at: version, body)
    } else {
      let expiredBy = self.expiredBy
      table._forEachNode(at: version) { node in
        if node.deadline > expiredBy { body(node) }
      }
    }
  }

  /// `transform` of every entry, in no particular order. O(*n*).
  @inlinable
  func map<T>(_ transform: (Key, Value) -> T) -> [T] {
    var result: [T] = []
    result.reserveCapacity(table._writerCountHint)
    forEachNode { node in result.append(transform(node.key.pointee, node.value.pointee)) }
    return result
  }

  /// Every entry. O(*n*).
  @inlinable
  var dictionary: [Key: Value] {
    var result: [Key: Value] = [:]
    result.reserveCapacity(table._writerCountHint)
    forEachNode { node in result[node.key.pointee] = node.value.pointee }
    return result
  }
}
