/// The links of the eviction order: per ring position, one word holding the next newer and
/// the next older entry and the list the entry is in (its *tag*), so that placing, moving or
/// judging an entry touches one cache line of them; in memory of its own (a
/// ``_ChunkedArray``), so that using it costs no reference counting, no exclusivity check and
/// no uniqueness check of an array.
///
/// A word holds the newer entry's position plus one in bits 0 to 29 (0: none), the older
/// entry's in bits 30 to 59, and the tag in bits 60 to 63 (``_EvictionOrder/windowList`` and
/// the others, and ``_EvictionOrder/uncountedWrite``). So positions go up to
/// ``maximumPosition``, over a billion entries.
///
/// Memory: 8 bytes per ring position. A position's word is meaningful only while its entry is
/// in the order.
@usableFromInline
struct _OrderLinks: Sendable {
  /// One word per position; in chunks, so that growing never copies them all inside one write.
  @usableFromInline var words = _ChunkedArray<UInt64>()

  @inlinable init() {}

  /// The largest position a word can name.
  @inlinable static var maximumPosition: Int { (1 << 30) - 2 }

  /// The bits of one link field.
  @inlinable static var linkMask: UInt64 { (1 << 30) - 1 }

  /// The number of positions that have links.
  @inlinable @inline(__always)
  var capacity: Int { words.count }

  @inlinable @inline(__always)
  func newer(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: words[position] & Self.linkMask) &- 1
  }

  @inlinable @inline(__always)
  func older(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: (words[position] &>> 30) & Self.linkMask) &- 1
  }

  /// The tag of `position`: the list its entry is in, and whether its write is counted.
  @inlinable @inline(__always)
  func tag(_ position: Int) -> UInt8 {
    UInt8(truncatingIfNeeded: words[position] &>> 60)
  }

  @inlinable @inline(__always)
  func setNewer(_ position: Int, _ newer: Int32) {
    words[position] =
      words[position] & ~Self.linkMask | UInt64(UInt32(bitPattern: newer &+ 1)) & Self.linkMask
  }

  @inlinable @inline(__always)
  func setOlder(_ position: Int, _ older: Int32) {
    words[position] =
      words[position] & ~(Self.linkMask &<< 30)
      | (UInt64(UInt32(bitPattern: older &+ 1)) & Self.linkMask) &<< 30
  }

  @inlinable @inline(__always)
  func setTag(_ position: Int, _ tag: UInt8) {
    words[position] = words[position] & ((1 &<< 60) - 1) | UInt64(tag) &<< 60
  }

  /// Makes the entry at `newer` follow the one at `older` in `segment`; -1 for either end
  /// (`newer` becomes the oldest, or `older` the newest).
  @inlinable @inline(__always)
  func connect(_ older: Int, _ newer: Int, in segment: inout _OrderSegment) {
    if older >= 0 {
      setNewer(older, Int32(truncatingIfNeeded: newer))
    } else {
      segment.oldest = newer
    }
    if newer >= 0 {
      setOlder(newer, Int32(truncatingIfNeeded: older))
    } else {
      segment.newest = older
    }
  }

  /// Sets every field of `position` at once.
  @inlinable @inline(__always)
  func set(_ position: Int, newer: Int32, older: Int32, tag: UInt8) {
    words[position] =
      UInt64(UInt32(bitPattern: newer &+ 1)) & Self.linkMask
      | (UInt64(UInt32(bitPattern: older &+ 1)) & Self.linkMask) &<< 30 | UInt64(tag) &<< 60
  }

  /// Grows to hold position `position` at least, with zero links. O(1) amortised per
  /// position, and never a copy of the links.
  @inlinable
  mutating func grow(toHold position: Int) {
    precondition(
      position <= Self.maximumPosition,
      "MemoryStore: a store with a limit holds at most \(Self.maximumPosition + 1) entries")
    words.append(0, upTo: position + 1)
  }
}
