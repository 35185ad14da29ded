/// The keys the eviction order evicted lately, and how: what tells, between two periods of the
/// hill climber, whether a larger window or a larger main region would have kept more of the
/// keys that come back (see ``_EvictionOrder``).
///
/// Each eviction is of one of two kinds: a **rejected candidate** (it left the window, and
/// admission kept probation's victim) or a **victim** of probation. Each kind keeps its own
/// clock:
/// - the window's clock counts the entries that leave the window (every candidate, admitted or
///   not), so a rejected candidate written again less than *m* ticks after it left would still
///   have been in a window larger by *m* entries: a **gain** of growing the window;
/// - the victims' clock counts victims, so a victim written again less than *m* ticks after it
///   left would still have been in a main region larger by *m* entries: a **loss** of growing
///   the window, which takes those entries from the main region.
///
/// *m*, the margin, is a sixteenth of the entries: both sides are measured for the same number
/// of entries moved, so they compare without weights. Every ``returnsPerDecision`` returns
/// within the margin, the window moves by ``move`` (1/128 of the entries) towards the side
/// with at least twice as many of them as the other; otherwise it stays. No single return
/// moves the window, and a burst of returns moves it by one step per 16.
///
/// Each kind has its own half of every word of a table of an eighth of the store's entries
/// (rounded up to a power of two; about a byte per entry), so that the evictions of one kind
/// never overwrite the other's, and each forgets at the pace of its own clock. A cell holds 20
/// bits of the key's hash, to tell it from the other keys of its cell, and its kind's clock when
/// it left (11 bits, in 1/256 of the margin); the half it is in is its kind. A later eviction of
/// the same kind in
/// the same word overwrites it; a key is taken for another only when 20 bits of their hashes
/// match. The table is made with the frequency sketch, at the first eviction, and only the
/// write lock holder uses it.
@usableFromInline
struct _EvictionGhosts: @unchecked Sendable {
  // Safe: the ghosts live in the store's `_Policy`, which only the write lock holder reads or
  // writes; the one copy taken out of it (by `handleMemoryPressure`, to free the memory after
  // the lock is released) is only released, never used.

  /// Two cells per word, rejected candidates in the low half and victims in the high half;
  /// `nil` until the first eviction.
  @usableFromInline var words: UnsafeMutablePointer<UInt64>?
  /// The number of words, less one (a power of two, less one).
  @usableFromInline var wordMask = 0
  /// Owns `words`.
  @usableFromInline var storage: _ZeroedWords?
  /// The events of either clock per tick, and the margin in ticks (at most 256).
  @usableFromInline var eventsPerTick = 1
  @usableFromInline var marginTicks: UInt32 = 1
  /// The entries the margin and the table were last sized for.
  @usableFromInline var sizedFor = 0
  /// The window's clock (entries that left the window) and the victims' clock.
  @usableFromInline var windowClock = Clock()
  @usableFromInline var victimClock = Clock()
  /// Returns within the margin since the last decision: rejected candidates (gains of a larger
  /// window) and victims (its losses).
  @usableFromInline var gains = 0
  @usableFromInline var losses = 0

  @inlinable init() {}

  /// A count of events in ticks of ``_EvictionGhosts/eventsPerTick`` events, modulo 2^11 where
  /// it is compared.
  @usableFromInline
  struct Clock: Sendable {
    @usableFromInline var tick: UInt32 = 0
    /// The events since the last tick.
    @usableFromInline var events = 0

    @inlinable init() {}

    /// Counts one event.
    @inlinable @inline(__always)
    mutating func advance(eventsPerTick: Int) {
      events &+= 1
      guard events >= eventsPerTick else { return }
      events = 0
      tick &+= 1
    }
  }

  /// The returns within the margin that make one decision.
  @inlinable static var returnsPerDecision: Int { 16 }

  /// How far one decision moves the window, in 65 536ths of the entries (1/128 of them).
  @inlinable static var move: Int { 512 }

  /// Sets the margin for a store of `entries` entries, and makes the table, forgetting every
  /// eviction, when it is less than a sixteenth of the entries. O(1) apart from the allocation.
  @inlinable @inline(__always)
  mutating func ensureCapacity(_ entries: Int) {
    guard entries != sizedFor else { return }
    sizedFor = entries
    let margin = Swift.max(1, entries >> 4)
    eventsPerTick = Swift.max(1, margin >> 8)
    marginTicks = UInt32(truncatingIfNeeded: margin / eventsPerTick)
    guard wordMask < Swift.max(entries, 512) >> 4 else { return }
    grow(toHold: entries)
  }

  /// Makes a table of at least an eighth of `entries` words, forgetting every eviction.
  @inlinable @inline(never)
  mutating func grow(toHold entries: Int) {
    var count = 64
    while count < entries >> 3 { count <<= 1 }
    let storage = _ZeroedWords(count: count)
    self.storage = storage
    words = storage.base
    wordMask = count - 1
  }

  /// The word of the key whose hash is `hash`, and the 20 bits of the hash that tell it from
  /// the other keys of its word (never 0, so that an empty cell matches no key).
  @inlinable @inline(__always)
  func cell(of hash: Int) -> (index: Int, tag: UInt32) {
    let bits = _FrequencySketch.spread(hash)
    return (Int(truncatingIfNeeded: bits) & wordMask, UInt32(truncatingIfNeeded: bits >> 44) | 1)
  }

  /// Counts an entry leaving the window (a candidate, admitted or not). O(1).
  @inlinable @inline(__always)
  mutating func countWindowExit() {
    windowClock.advance(eventsPerTick: eventsPerTick)
  }

  /// Records that the key whose hash is `hash` was evicted, as a rejected candidate or as a
  /// victim. O(1).
  @inlinable @inline(__always)
  mutating func record(_ hash: Int, rejected: Bool) {
    guard let words else { return }
    let tick = rejected ? windowClock.tick : victimClock.tick
    if !rejected { victimClock.advance(eventsPerTick: eventsPerTick) }
    let (index, tag) = cell(of: hash)
    let shift: UInt64 = rejected ? 0 : 32
    let value = tag << 11 | tick & 0x7FF
    words[index] = words[index] & ~(0xFFFF_FFFF << shift) | UInt64(value) << shift
  }

  /// How far the window should move (in 65 536ths of the entries, negative to shrink) now that
  /// the key whose hash is `hash` is written again: 0 unless its return completes a decision
  /// that favours one side. Forgets the key's record. O(1).
  @inlinable @inline(__always)
  mutating func windowChange(returning hash: Int) -> Int {
    guard let words else { return 0 }
    let (index, tag) = cell(of: hash)
    let word = words[index]
    var shift: UInt64 = 0
    var value = UInt32(truncatingIfNeeded: word)
    if value >> 11 != tag {
      shift = 32
      value = UInt32(truncatingIfNeeded: word >> 32)
      guard value >> 11 == tag else { return 0 }
    }
    words[index] = word & ~(0xFFFF_FFFF << shift)
    let rejected = shift == 0
    let age = ((rejected ? windowClock.tick : victimClock.tick) &- value) & 0x7FF
    guard age < marginTicks else { return 0 }
    if rejected { gains += 1 } else { losses += 1 }
    guard gains + losses >= Self.returnsPerDecision else { return 0 }
    defer { (gains, losses) = (0, 0) }
    if gains >= 2 * losses { return Self.move }
    if losses >= 2 * gains { return -Self.move }
    return 0
  }
}
