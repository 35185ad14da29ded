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
  /// The generation of the latest removal by a write of a key, by a slot of its hash: empty
  /// until the first (see ``recordRemoval(hash:)``).
  private var removals: [UInt64] = []

  /// The slots of ``removals``: two keys that share one overtake each other's loads, which
  /// then store nothing (the next read loads again).
  static var removalSlots: Int { 1_024 }

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

  /// Notes a removal of the key whose hash is `hash` by a write of this store: a load or a
  /// get-or-create of that key that started before read its source before the removal, and
  /// must not store what it read. O(1).
  mutating func recordRemoval(hash: Int) {
    if removals.isEmpty { removals = Array(repeating: 0, count: Self.removalSlots) }
    generation += 1
    removals[hash & (Self.removalSlots - 1)] = generation
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
      || (!removals.isEmpty && removals[hash & (Self.removalSlots - 1)] > start)
  }
}
