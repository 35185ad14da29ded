/// The links of the eviction order: per ring position, the next newer and the next older
/// entry, side by side (one cache line serves both), in memory of its own (a
/// ``_ChunkedArray``), so that using it costs no reference counting, no exclusivity check and
/// no uniqueness check of an array.
///
/// Memory: 8 bytes per ring position. A position's links are meaningful only while its
/// entry is in the order.
@usableFromInline
struct _OrderLinks: Sendable {
  /// Newer in the low 32 bits, older in the high ones, per position; in chunks, so that
  /// growing never copies them all inside one write.
  @usableFromInline var words = _ChunkedArray<UInt64>()

  @inlinable init() {}

  /// The number of positions that have links.
  @inlinable @inline(__always)
  var capacity: Int { words.count }

  @inlinable @inline(__always)
  func newer(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: words[position])
  }

  @inlinable @inline(__always)
  func older(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: words[position] >> 32)
  }

  @inlinable @inline(__always)
  func setNewer(_ position: Int, _ newer: Int32) {
    words[position] = words[position] & 0xFFFF_FFFF_0000_0000 | UInt64(UInt32(bitPattern: newer))
  }

  @inlinable @inline(__always)
  func setOlder(_ position: Int, _ older: Int32) {
    words[position] = words[position] & 0xFFFF_FFFF | UInt64(UInt32(bitPattern: older)) << 32
  }

  /// Grows to hold position `position` at least, with zero links. O(1) amortised per
  /// position, and never a copy of the links.
  @inlinable
  mutating func grow(toHold position: Int) {
    words.append(0, upTo: position + 1)
  }
}
