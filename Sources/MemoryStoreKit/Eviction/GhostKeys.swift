/// Fingerprints of the keys the limits evicted most recently, each with the number of its
/// eviction, in a two-way set-associative table: a fingerprint goes to one bucket of two slots
/// (its fraction of the bucket count), in place of the older of the two. A lookup asks for the
/// keys evicted within the last *n* evictions, *n* up to `capacity`: a store whose count
/// varies (a cost limit) asks for the last cache-ful exactly. With 1.25 slots per
/// fingerprint of `capacity`, a fingerprint may be pushed out early by two later ones of
/// its bucket: the record forgets a little, at random, which measured no worse than an exact
/// one, and it costs one bucket, in one cache line, per insertion and per lookup, with nothing
/// to remove. Two keys may share a fingerprint (a chance of about one in 2³¹ per pair); the
/// cost is one key kept longer.
///
/// Memory: 8 bytes per slot (1.25 slots per fingerprint of capacity by default), allocated
/// at the first eviction, zeroed by the system (`calloc`), so that making room costs no write
/// to all of it under the write lock: its pages are touched one at a time, by the insertions
/// that reach them. The memory
/// belongs to a ``_ZeroedWords``; the record keeps its address, so that using it costs no
/// reference counting and no exclusivity check.
@usableFromInline
struct _GhostKeys: @unchecked Sendable {
  // Safe: a store's record lives in its `_Policy`, which only the write lock holder reads or
  // writes; the one copy taken out of it (by `handleMemoryPressure`, to free the memory after
  // the lock is released) is only released, never used.

  /// Two slots per bucket; 0 is an empty slot, else the insertion's number in the high 32
  /// bits and the fingerprint in the low ones.
  @usableFromInline var slots: UnsafeMutablePointer<UInt64>?
  @usableFromInline var bucketCount = 0
  /// The most recent insertions a lookup may ask about.
  @usableFromInline private(set) var capacity = 0
  /// The number of the next insertion (wrapping).
  @usableFromInline var insertions: UInt32 = 0
  /// Insertions since the memory was made, for tests.
  @usableFromInline var inserted = 0
  /// Owns `slots`.
  @usableFromInline var storage: _ZeroedWords?

  @inlinable init() {}

  /// A key's fingerprint: never 0.
  @inlinable
  static func fingerprint(_ hash: Int) -> UInt32 {
    UInt32(truncatingIfNeeded: hash ^ (hash >> 32)) | 1
  }

  /// The first slot of the bucket of `fingerprint`: its fraction of the bucket count.
  @inlinable @inline(__always)
  func bucket(_ fingerprint: UInt32) -> Int {
    Int(truncatingIfNeeded: (UInt64(fingerprint) &* UInt64(bucketCount)) >> 32) &* 2
  }

  /// How many insertions ago the slot's fingerprint was inserted (1: the last one).
  @inlinable @inline(__always)
  func age(_ slot: UInt64) -> Int {
    Int(insertions &- UInt32(truncatingIfNeeded: slot >> 32))
  }

  /// The fingerprints remembered (within `capacity`), for tests. O(capacity).
  var rememberedCount: Int {
    guard let slots else { return 0 }
    return (0..<(2 * bucketCount)).reduce(0) {
      $0 + (slots[$1] != 0 && age(slots[$1]) <= capacity ? 1 : 0)
    }
  }

  /// Makes room for `wanted` fingerprints, `slotsPerFourFingerprints` slots for every four
  /// (5: 1.25 slots per fingerprint), forgetting those remembered if it must grow (at least
  /// twofold, so that a store limited only by cost, whose count varies, rarely forgets). O(1)
  /// apart from the allocation, whose pages the system zeroes on first touch.
  @inlinable
  mutating func ensureCapacity(_ wanted: Int, slotsPerFourFingerprints: Int = 5) {
    guard capacity < wanted else { return }
    capacity = capacity == 0 ? Swift.max(wanted, 16) : Swift.max(wanted, 2 * capacity)
    bucketCount = capacity * slotsPerFourFingerprints / 8 + 1
    let storage = _ZeroedWords(count: 2 * bucketCount)
    self.storage = storage
    slots = storage.base
    inserted = 0
  }

  /// Whether `fingerprint` is among the last `window` inserted and still remembered.
  @inlinable @inline(__always)
  func contains(_ fingerprint: UInt32, within window: Int) -> Bool {
    insertionNumber(of: fingerprint, within: window) != nil
  }

  /// The number of the insertion of `fingerprint` (wrapping), if it is among the last `window`
  /// inserted and still remembered.
  @inlinable @inline(__always)
  func insertionNumber(of fingerprint: UInt32, within window: Int) -> UInt32? {
    guard let slots else { return nil }
    let first = bucket(fingerprint)
    let slot =
      remembers(slots[first], fingerprint, within: window)
      ? slots[first]
      : remembers(slots[first + 1], fingerprint, within: window) ? slots[first + 1] : 0
    return slot == 0 ? nil : UInt32(truncatingIfNeeded: slot >> 32)
  }

  /// Whether `slot` holds `fingerprint`, inserted within the last `window` insertions.
  @inlinable @inline(__always)
  func remembers(_ slot: UInt64, _ fingerprint: UInt32, within window: Int) -> Bool {
    slot != 0 && UInt32(truncatingIfNeeded: slot) == fingerprint && age(slot) <= window
  }

  /// Remembers `fingerprint` in its bucket, in place of its previous copy there, else of the
  /// older slot; room must have been made. O(1).
  @inlinable
  mutating func insert(_ fingerprint: UInt32) {
    guard let slots else { return }
    let first = bucket(fingerprint)
    let a = slots[first]
    let b = slots[first + 1]
    let target: Int
    if UInt32(truncatingIfNeeded: a) == fingerprint || a == 0 {
      target = first
    } else if UInt32(truncatingIfNeeded: b) == fingerprint || b == 0 {
      target = first + 1
    } else {
      target = age(a) >= age(b) ? first : first + 1
    }
    slots[target] = UInt64(insertions) << 32 | UInt64(fingerprint)
    insertions &+= 1
    inserted += 1
  }
}
