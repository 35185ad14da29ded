/// The keys the eviction order evicted lately, and how: what moves the window's size the
/// moment a key comes back, as ARC's ghost lists move its target (see ``_EvictionOrder``).
///
/// A key evicted as a **candidate** (it left the window, and admission kept probation's
/// victim) that is written again soon, within twice the window's size in evictions, would
/// have been a hit in a larger window: the window grows. A key evicted as probation's
/// **victim** that comes back as soon would have been a hit in a larger main region: the window
/// shrinks. Each step is four entries times the ratio of the other kind's evictions to this
/// kind's (at least one), so that the kind evicted far more often, whose returns are the more
/// frequent by chance alone, moves the window no faster than the other: the window settles
/// where a return of either kind is as likely. The hill climber moves the window too, by the
/// hit ratio; the ghosts move it between its periods, when a burst of keys used twice close
/// together needs a larger window at once.
///
/// Each evicted key takes one 32-bit cell of a table of a quarter of the store's entries
/// (rounded up to a power of two; about a byte per entry): 16 bits of its hash, to tell it from
/// the other keys of its cell, the time of its eviction (15 bits, in 1/4 096 of the entries'
/// evictions), and its kind. A later eviction in the same cell overwrites it: the table
/// forgets, but a key is only ever taken for itself when 16 bits of its hash match, one chance
/// in 65 536. The table is made with the frequency sketch, at the first eviction, and only
/// the write lock holder uses it.
@usableFromInline
struct _EvictionGhosts: @unchecked Sendable {
  // Safe: the ghosts live in the store's `_Policy`, which only the write lock holder reads or
  // writes; the one copy taken out of it (by `handleMemoryPressure`, to free the memory after
  // the lock is released) is only released, never used.

  /// Two cells per word; `nil` until the first eviction.
  @usableFromInline var words: UnsafeMutablePointer<UInt64>?
  /// The number of cells, less one (a power of two, less one).
  @usableFromInline var cellMask = 0
  /// Owns `words`.
  @usableFromInline var storage: _ZeroedWords?
  /// The evictions per tick of the time kept in a cell, and those since the last tick.
  @usableFromInline var evictionsPerTick = 1
  @usableFromInline var evictionsSinceTick = 0
  @usableFromInline var tick: UInt32 = 0
  /// Recent evictions of each kind, halved every store-full of evictions.
  @usableFromInline var rejections = 0.0
  @usableFromInline var victims = 0.0
  @usableFromInline var evictionsSinceHalving = 0
  @usableFromInline var halvingPeriod = 1

  @inlinable init() {}

  /// How far the window moves for one return, in entries, before the ratio of the kinds.
  @inlinable static var step: Double { 4 }

  /// The most the ratio of the kinds' evictions multiplies a step by.
  @inlinable static var maximumRatio: Double { 64 }

  /// Makes room for a store of `entries` entries: grows (forgetting every eviction) only when
  /// the table is less than an eighth of the entries. O(1) apart from the allocation.
  @inlinable @inline(__always)
  mutating func ensureCapacity(_ entries: Int) {
    halvingPeriod = Swift.max(entries, 1)
    evictionsPerTick = Swift.max(1, entries >> 12)
    guard cellMask < Swift.max(entries, 512) >> 3 else { return }
    grow(toHold: entries)
  }

  /// Makes a table of at least a quarter of `entries` cells, forgetting every eviction.
  @inlinable @inline(never)
  mutating func grow(toHold entries: Int) {
    var cells = 128
    while cells < entries / 4 { cells <<= 1 }
    let storage = _ZeroedWords(count: cells / 2)
    self.storage = storage
    words = storage.base
    cellMask = cells - 1
  }

  /// The cell of the key whose hash is `hash`: its index and the 16 bits of the hash that tell
  /// it from the other keys of the cell (never 0, so that an empty cell matches no key).
  @inlinable @inline(__always)
  func cell(of hash: Int) -> (index: Int, tag: UInt32) {
    let bits = _FrequencySketch.spread(hash)
    return (Int(truncatingIfNeeded: bits) & cellMask, UInt32(truncatingIfNeeded: bits >> 48) | 1)
  }

  /// Records that the key whose hash is `hash` was evicted, as a rejected candidate or as a
  /// victim. O(1).
  @inlinable @inline(__always)
  mutating func record(_ hash: Int, rejected: Bool) {
    guard let words else { return }
    let (index, tag) = cell(of: hash)
    let shift = UInt64(index & 1) << 5
    let value = tag << 16 | (tick & 0x7FFF) << 1 | (rejected ? 1 : 0)
    words[index >> 1] =
      words[index >> 1] & ~(0xFFFF_FFFF << shift) | UInt64(value) << shift
    if rejected { rejections += 1 } else { victims += 1 }
    evictionsSinceTick += 1
    if evictionsSinceTick >= evictionsPerTick {
      evictionsSinceTick = 0
      tick &+= 1
    }
    evictionsSinceHalving += 1
    if evictionsSinceHalving >= halvingPeriod {
      evictionsSinceHalving = 0
      rejections /= 2
      victims /= 2
    }
  }

  /// How many entries the window should grow (or, negative, shrink) by now that the key whose
  /// hash is `hash` is written again, if it was evicted within twice `window` evictions (its
  /// record is then forgotten); 0 otherwise. O(1).
  @inlinable @inline(__always)
  mutating func windowChange(returning hash: Int, window: Int) -> Double {
    guard let words else { return 0 }
    let (index, tag) = cell(of: hash)
    let shift = UInt64(index & 1) << 5
    let value = UInt32(truncatingIfNeeded: words[index >> 1] >> shift)
    guard value >> 16 == tag else { return 0 }
    words[index >> 1] &= ~(0xFFFF_FFFF << shift)
    let age = Int((tick &- (value >> 1)) & 0x7FFF)
    guard age <= 2 * window / evictionsPerTick + 1 else { return 0 }
    return value & 1 != 0
      ? Self.step * Swift.min(Swift.max(1, victims / Swift.max(rejections, 1)), Self.maximumRatio)
      : -Self.step * Swift.min(Swift.max(1, rejections / Swift.max(victims, 1)), Self.maximumRatio)
  }
}
