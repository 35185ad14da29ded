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

/// Zeroed 64-bit words of memory (from `calloc`, whose pages the system zeroes on first
/// touch), freed with the last reference: the memory of a ``_FrequencySketch`` or of an
/// ``_EvictionGhosts``, each of which keeps its address so that using it costs no reference
/// counting.
@usableFromInline
final class _ZeroedWords {
  @usableFromInline let base: UnsafeMutablePointer<UInt64>

  @usableFromInline
  init(count: Int) {
    guard let memory = calloc(Swift.max(count, 1), 8) else {
      fatalError("out of memory for \(count) words of the eviction order's tables")
    }
    base = memory.bindMemory(to: UInt64.self, capacity: count)
  }

  deinit { free(base) }
}
