import Synchronization

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
/// ``_ConcurrentTable``), spread over cache-line-sized stripes so that concurrent readers on
/// different threads write to different cache lines.
///
/// Each stripe holds two counters, one per epoch parity, then the hit and miss counters of
/// statistics. A reader increments the counter of the current epoch's parity in its own stripe
/// (chosen by ``_ThreadSlot``) and decrements it when it is done; the writer frees what it
/// retired in an epoch only when that parity's counters read zero in every stripe. Counts are
/// exact whatever threads share a stripe: sharing only costs speed.
@usableFromInline
struct _ReaderIndicator {
  /// Bytes between stripes: two cache lines, because Intel's adjacent-line prefetcher
  /// pairs 64-byte lines.
  @usableFromInline static var stripeStride: Int { 128 }

  @usableFromInline let _base: UnsafeMutableRawPointer
  @usableFromInline let _stripeMask: Int

  @usableFromInline
  init() {
    let stripes = _ReaderIndicator.preferredStripeCount()
    _stripeMask = stripes - 1
    _base = UnsafeMutableRawPointer.allocate(
      byteCount: stripes * Self.stripeStride, alignment: Self.stripeStride)
    for stripe in 0..<stripes {
      let counters = (_base + stripe * Self.stripeStride).bindMemory(
        to: Atomic<Int>.self, capacity: Self.countersPerStripe)
      for index in 0..<Self.countersPerStripe { (counters + index).initialize(to: Atomic(0)) }
    }
  }

  /// A power of two, at least twice the number of online processors, between 8 and 128.
  static func preferredStripeCount() -> Int {
    let processors = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    var count = 8
    while count < 2 * processors && count < 128 { count <<= 1 }
    return count
  }

  @usableFromInline var stripeCount: Int { _stripeMask + 1 }

  /// Per stripe: readers of even and of odd epochs, lookups that hit and that missed, then a
  /// version known to be published.
  @usableFromInline static var countersPerStripe: Int { 5 }
  @usableFromInline static var hitCounter: Int { 2 }
  @usableFromInline static var missCounter: Int { 3 }
  /// Not a counter: a version its threads' reads have seen published (see
  /// ``_ConcurrentTable/_latestNode(forKey:hash:counters:)``).
  @usableFromInline static var knownVersion: Int { 4 }

  /// The sum of counter `index` over every stripe; each stripe is read atomically, the sum is
  /// not a snapshot.
  @usableFromInline
  func total(ofCounter index: Int) -> Int {
    var sum = 0
    for stripe in 0...(_stripeMask) {
      let counters = UnsafeMutableRawPointer(_base + stripe &* Self.stripeStride)
        .assumingMemoryBound(to: Atomic<Int>.self)
      sum &+= counters[index].load(ordering: .relaxed)
    }
    return sum
  }

  /// The counters of the calling thread's stripe: `[even epochs, odd epochs, hits, misses]`.
  @inlinable @inline(__always)
  func countersForCurrentThread() -> UnsafeMutablePointer<Atomic<Int>> {
    let stripe = _ThreadSlot.current & _stripeMask
    return UnsafeMutableRawPointer(_base + stripe &* Self.stripeStride)
      .assumingMemoryBound(to: Atomic<Int>.self)
  }

  /// Whether any reader is counted in `parity`, looking at every stripe.
  @inlinable
  func hasReaders(in parity: Int) -> Bool {
    var stripe = 0
    while stripe <= _stripeMask {
      let counters = UnsafeMutableRawPointer(_base + stripe &* Self.stripeStride)
        .assumingMemoryBound(to: Atomic<Int>.self)
      if counters[parity].load(ordering: .sequentiallyConsistent) != 0 { return true }
      stripe &+= 1
    }
    return false
  }

  @usableFromInline
  func deallocate() {
    for stripe in 0...(_stripeMask) {
      let counters = (_base + stripe * Self.stripeStride).assumingMemoryBound(
        to: Atomic<Int>.self)
      counters.deinitialize(count: Self.countersPerStripe)
    }
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
/// pthread key (one per process), which costs a couple of nanoseconds to read.
@usableFromInline
enum _ThreadSlot {
  @usableFromInline
  static let key: pthread_key_t = {
    var key = pthread_key_t()
    let status = pthread_key_create(&key, nil)
    precondition(status == 0, "pthread_key_create failed with \(status)")
    return key
  }()

  @usableFromInline
  static let nextSlot = Atomic<Int>(0)

  /// The calling thread's slot number.
  @inlinable @inline(__always)
  static var current: Int {
    if let stored = pthread_getspecific(key) {
      return Int(bitPattern: stored)
    }
    return assign()
  }

  @usableFromInline @inline(never)
  static func assign() -> Int {
    // Slots start at 1 so a stored slot is never a null pointer.
    let slot = nextSlot.wrappingAdd(1, ordering: .relaxed).newValue
    pthread_setspecific(key, UnsafeRawPointer(bitPattern: slot))
    return slot
  }
}
