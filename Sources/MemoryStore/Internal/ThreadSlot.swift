#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Bionic)
  import Bionic
#endif
import Synchronization

/// A small per-thread number, handed out in the order threads first read any store.
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
