/// Which keys invalidations dropped, and when, for a load to tell whether one overtook it:
/// guarded by the store's write lock.
///
/// Each invalidation takes the next generation; a load notes the generation when it starts
/// and, when it stores its value under the write lock, asks ``overtook(hash:since:)``. The
/// record of keys is bounded: when it is full it is forgotten, and every load started before
/// then counts as overtaken (it stores nothing; the next read loads again).
struct _InvalidationRecord: Sendable {
  /// The most key hashes kept.
  static var capacity: Int { 65_536 }

  /// The generation of the latest invalidation; 0 before the first.
  private(set) var generation: UInt64 = 0
  /// The generation at which the record of keys was last forgotten: full, or every key
  /// invalidated.
  private var forgottenAt: UInt64 = 0
  /// The generation of the latest invalidation of each key hash.
  private var keys: [Int: UInt64] = [:]

  /// Notes an invalidation of the keys whose hashes are `hashes`.
  mutating func record(_ hashes: some Sequence<Int>) {
    generation += 1
    for hash in hashes {
      if keys.count == Self.capacity {
        keys.removeAll()
        forgottenAt = generation
      }
      keys[hash] = generation
    }
  }

  /// Notes an invalidation of every key.
  mutating func recordAll() {
    generation += 1
    keys.removeAll()
    forgottenAt = generation
  }

  /// Whether an invalidation of the key whose hash is `hash` (or of every key) came after
  /// the generation `start`: a load started then must not store its value.
  func overtook(hash: Int, since start: UInt64) -> Bool {
    guard generation > start else { return false }
    return forgottenAt > start || (keys[hash] ?? 0) > start
  }
}
