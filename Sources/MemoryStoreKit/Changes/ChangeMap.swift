/// The net change per key since the previous batch, keyed by the hash the table computed when
/// the change was written: coalescing a logged change probes with that hash and compares keys,
/// and never hashes a key again.
///
/// An open-addressing index (linear probing, at most half full) over an array of entries in
/// the order their keys were first changed. Entries are never removed one by one: a clear or a
/// batch starts a new map.
@usableFromInline
struct _ChangeMap<Key: Hashable, Value> {
  @usableFromInline
  struct Entry {
    @usableFromInline var key: Key
    @usableFromInline var hash: Int
    @usableFromInline var change: _KeyChange<Value>

    @inlinable
    init(key: Key, hash: Int, change: _KeyChange<Value>) {
      self.key = key
      self.hash = hash
      self.change = change
    }
  }

  /// The entries, in the order their keys were first changed.
  @usableFromInline private(set) var entries: [Entry] = []
  /// For each bucket, 1 + the index of the entry whose hash probes to it, or 0 if empty; a
  /// power of two in size, at least twice ``entries``' count (or empty).
  @usableFromInline var buckets: [Int32] = []

  @inlinable
  init() {}

  /// The number of keys changed.
  @inlinable
  var count: Int { entries.count }

  @inlinable
  var isEmpty: Bool { entries.isEmpty }

  /// Runs `body` on `key`'s change, inserting `makeChange()` first if the key has none; `hash`
  /// is `key.hashValue`.
  ///
  /// - Complexity: O(1) on average; hashes nothing.
  @inlinable @inline(__always)
  mutating func withChange<Result>(
    for key: Key, hash: Int, orInsert makeChange: () -> _KeyChange<Value>,
    _ body: (inout _KeyChange<Value>) -> Result
  ) -> Result {
    if entries.count &* 2 >= buckets.count { grow() }
    let (found, position) = probe(for: key, hash: hash)
    if found { return body(&entries[position].change) }
    buckets[position] = Int32(truncatingIfNeeded: entries.count &+ 1)
    entries.append(Entry(key: key, hash: hash, change: makeChange()))
    return body(&entries[entries.count &- 1].change)
  }

  /// `key`'s change, or `nil` if it has none.
  ///
  /// - Complexity: O(1) on average: one hash of `key`.
  @inlinable
  subscript(key: Key) -> _KeyChange<Value>? {
    guard !buckets.isEmpty else { return nil }
    let (found, position) = probe(for: key, hash: key.hashValue)
    return found ? entries[position].change : nil
  }

  /// The index of `key`'s entry if it has one, or else the empty bucket where it goes; `hash`
  /// is `key.hashValue`, and the index has at least one empty bucket.
  @inlinable @inline(__always)
  func probe(for key: Key, hash: Int) -> (found: Bool, position: Int) {
    buckets.withUnsafeBufferPointer { buckets in
      entries.withUnsafeBufferPointer { entries in
        // In bounds: the mask keeps a bucket inside the index, and a bucket holds 1 + the
        // index of an entry.
        let mask = buckets.count &- 1
        var bucket = hash & mask
        while true {
          let stored = Int(buckets[bucket])
          if stored == 0 { return (false, bucket) }
          let entry = entries.baseAddress.unsafelyUnwrapped + (stored &- 1)
          if entry.pointee.hash == hash && entry.pointee.key == key { return (true, stored &- 1) }
          bucket = (bucket &+ 1) & mask
        }
      }
    }
  }

  /// Doubles the index (from 16 buckets), placing every entry again by its stored hash.
  @usableFromInline
  mutating func grow() {
    precondition(entries.count < Int(Int32.max), "more keys changed than one batch can hold")
    let size = Swift.max(16, buckets.count &* 2)
    var buckets = [Int32](repeating: 0, count: size)
    let mask = size &- 1
    for index in entries.indices {
      var bucket = entries[index].hash & mask
      while buckets[bucket] != 0 { bucket = (bucket &+ 1) & mask }
      buckets[bucket] = Int32(truncatingIfNeeded: index &+ 1)
    }
    self.buckets = buckets
  }
}

extension _ChangeMap.Entry: Sendable where Key: Sendable, Value: Sendable {}
extension _ChangeMap: Sendable where Key: Sendable, Value: Sendable {}
