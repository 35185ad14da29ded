/// The links of the eviction order: per ring position, the next newer and the next older
/// entry, side by side (one cache line serves both), in memory of its own, so that using it
/// costs no reference counting, no exclusivity check and no uniqueness check of an array.
///
/// Memory: 8 bytes per ring position. A position's links are meaningful only while its
/// entry is in the order.
@usableFromInline
struct _OrderLinks: @unchecked Sendable {
  // Safe: a store's links live in its `_Policy`, which only the write lock holder reads or
  // writes; copies taken out of it (by a check for tests) only read it under the same lock.

  /// Newer in the low 32 bits, older in the high ones, per position.
  @usableFromInline var base: UnsafeMutablePointer<UInt64>?
  @usableFromInline private(set) var capacity = 0
  /// Owns `base`.
  @usableFromInline var storage: _ZeroedWords?

  @inlinable init() {}

  @inlinable @inline(__always)
  func newer(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: base.unsafelyUnwrapped[position])
  }

  @inlinable @inline(__always)
  func older(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: base.unsafelyUnwrapped[position] >> 32)
  }

  @inlinable @inline(__always)
  func setNewer(_ position: Int, _ newer: Int32) {
    let word = base.unsafelyUnwrapped[position]
    base.unsafelyUnwrapped[position] =
      word & 0xFFFF_FFFF_0000_0000 | UInt64(UInt32(bitPattern: newer))
  }

  @inlinable @inline(__always)
  func setOlder(_ position: Int, _ older: Int32) {
    let word = base.unsafelyUnwrapped[position]
    base.unsafelyUnwrapped[position] =
      word & 0xFFFF_FFFF | UInt64(UInt32(bitPattern: older)) << 32
  }

  /// Grows to hold position `position` at least, keeping the links. O(capacity), amortised
  /// O(1) per position (it grows by half at least).
  @inlinable
  mutating func grow(toHold position: Int) {
    let newCapacity = Swift.max(position + 1, capacity + capacity / 2, 64)
    let storage = _ZeroedWords(count: newCapacity)
    if let base { storage.base.update(from: base, count: capacity) }
    self.storage = storage
    base = storage.base
    capacity = newCapacity
  }
}
