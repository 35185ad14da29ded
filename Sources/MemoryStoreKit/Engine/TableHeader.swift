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

/// One hash table of a ``_ConcurrentTable``: a power-of-two array of bucket heads, each the
/// bits of the first node of a chain, 0 for an empty bucket, or ``forwarded`` once the
/// bucket's entries have moved to ``nextTable`` during growth.
///
/// Allocated once and never resized: growth allocates a table twice as large and moves the
/// buckets one at a time; `removeAll()` starts a new, empty *generation*. Every field but
/// ``nextTable`` is immutable once the table is published; ``nextTable`` is written once,
/// before the first bucket is marked forwarded, and readers read it only after they load a
/// forwarded mark with an acquiring load.
@usableFromInline
struct _TableHeader {
  /// The mark a bucket holds once its entries live in ``nextTable``.
  @inlinable @inline(__always)
  static var forwarded: Int { 1 }

  @usableFromInline let buckets: UnsafeMutablePointer<Atomic<Int>>
  @usableFromInline let mask: Int
  /// The version of the `removeAll()` that started this generation (0 for the first): readers
  /// at an earlier version read ``previousGeneration``.
  @usableFromInline let baseVersion: UInt64
  /// The generation that this one replaced; followed only by readers at a version below
  /// ``baseVersion``, which keep it alive.
  @usableFromInline let previousGeneration: UnsafeMutablePointer<_TableHeader>?
  /// The table this one is growing into, once growth started.
  @usableFromInline var nextTable: UnsafeMutablePointer<_TableHeader>?

  @inlinable
  var capacity: Int { mask + 1 }

  /// A new table of `capacity` empty buckets (a power of two).
  @usableFromInline
  static func make(
    capacity: Int, baseVersion: UInt64, previousGeneration: UnsafeMutablePointer<_TableHeader>?
  ) -> UnsafeMutablePointer<_TableHeader> {
    precondition(capacity > 0 && capacity & (capacity - 1) == 0)
    // Zeroed memory from calloc, whose large blocks come straight from the kernel's zero
    // pages: no write pays for initialising a large array (its pages fault in as growth moves
    // buckets into them). An `Atomic<Int>` holding 0 is all zero bits.
    guard let memory = calloc(capacity, MemoryLayout<Atomic<Int>>.stride) else {
      fatalError("MemoryStore: out of memory allocating \(capacity) buckets")
    }
    let buckets = memory.bindMemory(to: Atomic<Int>.self, capacity: capacity)
    let header = UnsafeMutablePointer<_TableHeader>.allocate(capacity: 1)
    header.initialize(
      to: _TableHeader(
        buckets: buckets, mask: capacity - 1, baseVersion: baseVersion,
        previousGeneration: previousGeneration, nextTable: nil))
    return header
  }

  /// Frees the bucket array and the header, not the nodes.
  @usableFromInline
  static func freeShell(_ table: UnsafeMutablePointer<_TableHeader>) {
    free(table.pointee.buckets)
    table.deinitialize(count: 1)
    table.deallocate()
  }
}
