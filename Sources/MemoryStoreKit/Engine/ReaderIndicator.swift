import Synchronization
public import _MemoryStoreShims

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Bionic)
  import Bionic
#endif

/// Counts the readers of each reclamation epoch parity of a store's table (see
/// ``_ConcurrentTable``), spread over stripes of two cache lines so that concurrent readers on
/// different threads write to different cache lines.
///
/// Each stripe holds two blocks of counters, each laid out as ``countersPerBlock`` words: the
/// readers of even and of odd epochs, the lookups that hit and that missed, and a version
/// known to be published. The first thread that reads through a stripe becomes its owner
/// (threads are numbered by ``_ThreadSlot`` and numbers are never reused) and counts in the
/// owner block, on the stripe's second line; any other thread whose number picks the stripe
/// counts in the shared block, on the first. A reader increments the counter of the current
/// epoch's parity in its block and decrements it when it is done; the writer frees what it
/// retired in an epoch only when that parity's counters read zero in both blocks of every
/// stripe.
///
/// Only its owner writes the owner block, so there the decrement and the lookup counts are a
/// load and a store (the decrement a releasing one), not read-modify-writes: each of those
/// would be an atomic instruction that waits for the thread's earlier stores. The increment
/// stays a sequentially consistent read-modify-write in both blocks: it is what orders the
/// reader's announcement before its loads. The shared block uses read-modify-writes
/// throughout, so counts are exact whatever threads share a stripe: sharing only costs speed.
@usableFromInline
struct _ReaderIndicator {
  /// Bytes between stripes: two cache lines, because Intel's adjacent-line prefetcher
  /// pairs 64-byte lines.
  @usableFromInline static var stripeStride: Int { 128 }
  /// Words in a stripe.
  @usableFromInline static var wordsPerStripe: Int { 16 }
  /// The word where a stripe's owner block starts: the second cache line, so that a block's
  /// address tells which block it is (``isOwnerBlock(_:)``).
  @usableFromInline static var ownerBlock: Int { 8 }
  /// The word holding the ``_ThreadSlot`` number of a stripe's owner (0: none yet), beside
  /// the owner block.
  @usableFromInline static var ownerWord: Int { 13 }

  @usableFromInline let _base: UnsafeMutableRawPointer
  @usableFromInline let _stripeMask: Int

  @usableFromInline
  init() {
    let stripes = _ReaderIndicator.preferredStripeCount()
    _stripeMask = stripes - 1
    _base = UnsafeMutableRawPointer.allocate(
      byteCount: stripes * Self.stripeStride, alignment: Self.stripeStride)
    let words = _base.bindMemory(to: Atomic<Int>.self, capacity: stripes * Self.wordsPerStripe)
    for index in 0..<(stripes * Self.wordsPerStripe) { (words + index).initialize(to: Atomic(0)) }
  }

  /// A power of two, at least twice the number of online processors, between 8 and 128.
  static func preferredStripeCount() -> Int {
    let processors = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    var count = 8
    while count < 2 * processors && count < 128 { count <<= 1 }
    return count
  }

  @usableFromInline var stripeCount: Int { _stripeMask + 1 }

  /// Per block: readers of even and of odd epochs, lookups that hit and that missed, then a
  /// version known to be published.
  @usableFromInline static var countersPerBlock: Int { 5 }
  @usableFromInline static var hitCounter: Int { 2 }
  @usableFromInline static var missCounter: Int { 3 }
  /// Not a counter: a version its threads' reads have seen published (see
  /// ``_ConcurrentTable/_latestNode(forKey:hash:counters:)``).
  @usableFromInline static var knownVersion: Int { 4 }

  /// The words of stripe `stripe`.
  @inlinable @inline(__always)
  func _stripe(_ stripe: Int) -> UnsafeMutablePointer<Atomic<Int>> {
    UnsafeMutableRawPointer(_base + stripe &* Self.stripeStride)
      .assumingMemoryBound(to: Atomic<Int>.self)
  }

  /// The sum of counter `index` over both blocks of every stripe; each counter is read
  /// atomically, the sum is not a snapshot.
  @usableFromInline
  func total(ofCounter index: Int) -> Int {
    var sum = 0
    for stripe in 0...(_stripeMask) {
      let words = _stripe(stripe)
      sum &+= words[index].load(ordering: .relaxed)
      sum &+= words[Self.ownerBlock &+ index].load(ordering: .relaxed)
    }
    return sum
  }

  /// The calling thread's block of counters: `[even epochs, odd epochs, hits, misses, known
  /// version]`, in its stripe; the owner block if the thread owns the stripe or is the first
  /// to read through it, else the shared block. O(1): a thread-local load and a load of the
  /// owner (a compare-and-exchange the first time).
  @inlinable @inline(__always)
  func countersForCurrentThread() -> UnsafeMutablePointer<Atomic<Int>> {
    let slot = _ThreadSlot.current
    let words = _stripe(slot & _stripeMask)
    let owner = words[Self.ownerWord].load(ordering: .relaxed)
    if owner == slot || (owner == 0 && Self.claim(words, for: slot)) {
      return words + Self.ownerBlock
    }
    return words
  }

  /// The calling thread's shared block: for a read section that another thread may leave.
  @inlinable @inline(__always)
  func sharedCountersForCurrentThread() -> UnsafeMutablePointer<Atomic<Int>> {
    _stripe(_ThreadSlot.current & _stripeMask)
  }

  /// Makes the thread numbered `slot` the owner of the stripe `words`, unless another thread
  /// got there first; returns whether it is the owner.
  @usableFromInline @inline(never)
  static func claim(_ words: UnsafeMutablePointer<Atomic<Int>>, for slot: Int) -> Bool {
    words[ownerWord].compareExchange(expected: 0, desired: slot, ordering: .relaxed).exchanged
  }

  /// Whether `counters`, a block of a stripe, is an owner block: only its owner writes it.
  @inlinable @inline(__always)
  static func isOwnerBlock(_ counters: UnsafeMutablePointer<Atomic<Int>>) -> Bool {
    UInt(bitPattern: counters) & UInt(stripeStride / 2) != 0
  }

  /// Adds `delta` to counter `index` of `counters`: a load and a store in an owner block,
  /// which only its owner writes, else a read-modify-write. `releasing` for a reader leaving
  /// (its reads must come before); a lookup count needs no ordering (a constant where it is
  /// inlined, so each caller keeps only its branch).
  @inlinable @inline(__always)
  static func add(
    _ delta: Int, to index: Int, in counters: UnsafeMutablePointer<Atomic<Int>>, releasing: Bool
  ) {
    if isOwnerBlock(counters) {
      let value = counters[index].load(ordering: .relaxed) &+ delta
      if releasing {
        counters[index].store(value, ordering: .releasing)
      } else {
        counters[index].store(value, ordering: .relaxed)
      }
    } else if releasing {
      counters[index].wrappingAdd(delta, ordering: .releasing)
    } else {
      counters[index].wrappingAdd(delta, ordering: .relaxed)
    }
  }

  /// Whether any reader is counted in `parity`, looking at both blocks of every stripe.
  @inlinable
  func hasReaders(in parity: Int) -> Bool {
    var stripe = 0
    while stripe <= _stripeMask {
      let words = _stripe(stripe)
      if words[parity].load(ordering: .sequentiallyConsistent) != 0
        || words[Self.ownerBlock &+ parity].load(ordering: .sequentiallyConsistent) != 0
      {
        return true
      }
      stripe &+= 1
    }
    return false
  }

  @usableFromInline
  func deallocate() {
    _base.assumingMemoryBound(to: Atomic<Int>.self)
      .deinitialize(count: stripeCount * Self.wordsPerStripe)
    _base.deallocate()
  }
}

// Safe: the pointer is immutable after init and all access to the pointed-to memory goes
// through `Atomic` operations; the owner deallocates it once, after its last use.
extension _ReaderIndicator: @unchecked Sendable {}

/// A small per-thread number, handed out in the order threads first use any store. Numbers
/// are never reused, so one also identifies its thread for the life of the process.
///
/// Readers use it to pick their own stripe of a ``_ReaderIndicator`` so that two threads
/// reading at the same time touch different cache lines. Consecutive threads get consecutive
/// numbers, so the first `stripeCount` threads never share a stripe. The number lives in a
/// thread-local variable of the package's C target, read inline.
@usableFromInline
enum _ThreadSlot {
  @usableFromInline
  static let nextSlot = Atomic<Int>(0)

  /// The calling thread's slot number.
  @inlinable @inline(__always)
  static var current: Int {
    let stored = _memorystore_get_thread_slot()
    return stored != 0 ? stored : assign()
  }

  @usableFromInline @inline(never)
  static func assign() -> Int {
    // Slots start at 1, so that 0 means none yet.
    let slot = nextSlot.wrappingAdd(1, ordering: .relaxed).newValue
    _memorystore_set_thread_slot(slot)
    return slot
  }
}
