/// How often each key was used lately, estimated: a count-min sketch of 4-bit counters, four
/// per key, all in one 64-byte block of the table (one cache line per update and per
/// estimate). A key's estimate is the least of its four counters, so it is never below its
/// true count since the last halving, unless that count is over 15. Once the counters have
/// been raised ten times per entry of the store, every counter is halved: the estimate forgets
/// old popularity, and a key popular once gives way to one popular now.
///
/// Memory: one 64-bit word (16 counters) per entry of the store, rounded up to a power of two,
/// allocated zeroed (`calloc`) at the first eviction of the limits, so that a store within its
/// limits pays nothing for it and making room costs no write to all of it under the write
/// lock. The memory belongs to a ``_ZeroedWords``;
/// the sketch keeps its address, so that using it costs no reference counting.
@usableFromInline
struct _FrequencySketch: @unchecked Sendable {
  // Safe: a store's sketch lives in its `_Policy`, which only the write lock holder reads or
  // writes; the one copy taken out of it (by `handleMemoryPressure`, to free the memory after
  // the lock is released) is only released, never used.

  @usableFromInline var words: UnsafeMutablePointer<UInt64>?
  /// The number of 8-word blocks, less one (a power of two, less one).
  @usableFromInline var blockMask = 0
  /// The number of words.
  @usableFromInline private(set) var wordCount = 0
  /// Raises since the last halving.
  @usableFromInline var additions = 0
  /// The raises after which every counter is halved: ten per entry of the store.
  @usableFromInline var period = 0
  /// Owns `words`.
  @usableFromInline var storage: _ZeroedWords?

  @inlinable init() {}

  /// Makes room for a store of `entries` entries: grows (forgetting every count) only when
  /// the table is less than half of one word per entry, so that a store whose count varies (a
  /// cost limit) rarely forgets. O(1) apart from the allocation.
  @inlinable @inline(__always)
  mutating func ensureCapacity(_ entries: Int) {
    period = 10 * Swift.max(entries, 8)
    guard wordCount < Swift.max(entries, 16) / 2 else { return }
    grow(toHold: entries)
  }

  /// Makes a table of at least one word per entry for `entries` entries, forgetting every
  /// count (see ``ensureCapacity(_:)``).
  @inlinable @inline(never)
  mutating func grow(toHold entries: Int) {
    var count = 8
    while count < entries { count <<= 1 }
    let storage = _ZeroedWords(count: count)
    self.storage = storage
    words = storage.base
    wordCount = count
    blockMask = count / 8 - 1
    additions = 0
  }

  /// The bits that pick a key's block and counters: the hash, mixed (SplitMix64's finaliser),
  /// so that keys whose hashes differ only in a few bits spread over the table.
  @inlinable @inline(__always)
  static func spread(_ hash: Int) -> UInt64 {
    var z = UInt64(bitPattern: Int64(hash)) &+ 0x9E37_79B9_7F4A_7C15
    z = (z ^ (z &>> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z &>> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z &>> 31)
  }

  /// The word and the bit shift of counter `row` (0 to 3) of the key whose spread hash is `bits`:
  /// each row has two words of the key's block, a bit of the hash picking one and four more the
  /// counter in it.
  @inlinable @inline(__always)
  func counter(_ bits: UInt64, row: Int) -> (word: Int, shift: UInt64) {
    let block = Int(truncatingIfNeeded: bits &>> 40) & blockMask
    let choice = bits &>> UInt64(row &* 8)
    return (block &* 8 &+ row &* 2 &+ Int(choice & 1), ((choice &>> 1) & 15) &* 4)
  }

  /// The estimated number of uses of the key whose hash is `hash`, 0 to 15. O(1).
  @inlinable
  func frequency(_ hash: Int) -> Int {
    guard let words else { return 0 }
    let bits = Self.spread(hash)
    var least: UInt64 = 15
    for row in 0..<4 {
      let (word, shift) = counter(bits, row: row)
      least = Swift.min(least, (words[word] &>> shift) & 15)
    }
    return Int(least)
  }

  /// Counts `uses` more uses of the key whose hash is `hash` (each counter at most 15); halves
  /// every counter once the period is over (O(*n*) then, once per ten raises per entry). O(1)
  /// amortised.
  @inlinable
  mutating func increment(_ hash: Int, by uses: Int = 1) {
    guard let words, uses > 0 else { return }
    let bits = Self.spread(hash)
    for row in 0..<4 {
      let (word, shift) = counter(bits, row: row)
      let current = (words[word] &>> shift) & 15
      words[word] &+= Swift.min(UInt64(uses), 15 - current) &<< shift
    }
    additions &+= uses
    if additions >= period { halve() }
  }

  /// Halves every counter (rounding down). O(*n*).
  @inlinable
  mutating func halve() {
    guard let words else { return }
    for index in 0..<wordCount {
      words[index] = (words[index] &>> 1) & 0x7777_7777_7777_7777
    }
    additions /= 2
  }
}
