import Synchronization

#if canImport(Darwin)
  public import Darwin
#elseif canImport(Glibc)
  public import Glibc
#elseif canImport(Musl)
  public import Musl
#elseif canImport(Bionic)
  public import Bionic
#else
  #error("MemoryStore needs a platform lock (Darwin, Glibc, Musl or Bionic)")
#endif

/// A non-recursive mutual-exclusion lock at a stable heap address.
///
/// `os_unfair_lock` on Apple platforms; an adaptive `pthread_mutex_t` (spins briefly before it
/// sleeps) on Linux. `Synchronization.Mutex` is not used: on Linux its contended path hands
/// ownership over through PI futexes, which ThreadSanitizer cannot see (false race reports),
/// and it collapses under contention on this toolchain.
///
/// A value type holding a pointer: copies share the lock. The owner calls ``deallocate()``
/// exactly once, when no thread can use the lock any more.
@usableFromInline
struct _Lock {
  #if canImport(Darwin)
    @usableFromInline typealias Primitive = os_unfair_lock
  #else
    @usableFromInline typealias Primitive = pthread_mutex_t
  #endif

  @usableFromInline let _primitive: UnsafeMutablePointer<Primitive>
  /// The number of threads waiting in ``lock()``, awake or asleep (counted only when the lock
  /// is taken).
  @usableFromInline let _waiting: UnsafeMutablePointer<Atomic<Int>>

  @usableFromInline
  init() {
    // One block of two cache lines (and aligned to two, against the adjacent-line
    // prefetcher): the primitive on the first, the count of waiters on the second, so that
    // nothing else shares the line that waiting threads read while the owner writes it.
    let block = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 128)
    _primitive = block.bindMemory(to: Primitive.self, capacity: 1)
    _waiting = (block + 128).bindMemory(to: Atomic<Int>.self, capacity: 1)
    _waiting.initialize(to: Atomic(0))
    #if canImport(Darwin)
      _primitive.initialize(to: os_unfair_lock())
    #else
      _primitive.initialize(to: pthread_mutex_t())
      var attributes = pthread_mutexattr_t()
      pthread_mutexattr_init(&attributes)
      #if canImport(Glibc)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
      #endif
      let status = pthread_mutex_init(_primitive, &attributes)
      pthread_mutexattr_destroy(&attributes)
      precondition(status == 0, "pthread_mutex_init failed with \(status)")
    #endif
  }

  @inlinable @inline(__always)
  func lock() {
    if tryLock() { return }
    _lockContended()
  }

  @usableFromInline @inline(never)
  func _lockContended() {
    // Critical sections are short (a write's), and a thread put to sleep costs both the
    // waiter and the owner, who must wake it, microseconds: wait awake first, reading the
    // lock's word (not trying to take it, which would pull its line away from the owner at
    // every try), about as long as a long write holds the lock.
    // Counted from the start, so that chunked work lets a thread waiting awake go first too.
    _waiting.pointee.wrappingAdd(1, ordering: .relaxed)
    for _ in 0..<Self._spinLimit where !_looksHeld && tryLock() {
      _waiting.pointee.wrappingSubtract(1, ordering: .relaxed)
      return
    }
    #if canImport(Darwin)
      os_unfair_lock_lock(_primitive)
    #else
      pthread_mutex_lock(_primitive)
    #endif
    _waiting.pointee.wrappingSubtract(1, ordering: .relaxed)
  }

  /// How many times a contended ``lock()`` looks at the lock before it sleeps: on Linux, a
  /// relaxed read of its word, about as long as a long write; elsewhere, where each look is a
  /// try to take it, far fewer.
  @usableFromInline static var _spinLimit: Int {
    #if canImport(Glibc)
      40_000
    #else
      1_000
    #endif
  }

  /// Whether the lock looks held (a relaxed read of its word, where the platform has one to
  /// read): a hint for a thread that waits awake.
  @inlinable @inline(__always)
  var _looksHeld: Bool {
    #if canImport(Glibc)
      // The word is glibc's `__data.__lock`, at offset 0, which glibc changes only
      // atomically: read atomically, it is a hint, never a decision (`tryLock` decides).
      UnsafeMutableRawPointer(_primitive).withMemoryRebound(to: Atomic<Int32>.self, capacity: 1) {
        $0.pointee.load(ordering: .relaxed) != 0
      }
    #else
      false
    #endif
  }

  /// For a thread that does long work in chunks, each under the lock: call it after unlocking,
  /// before locking for the next chunk. If other threads are blocked on the lock, it waits
  /// until they have had it (up to about a millisecond), so that the lock, which is not fair,
  /// does not go back to the chunked work first again and again while a writer waits.
  @usableFromInline
  func yieldToWaiters() {
    guard _waiting.pointee.load(ordering: .relaxed) > 0 else { return }
    var rounds = 0
    while _waiting.pointee.load(ordering: .relaxed) > 0 && rounds < 1_000 {
      sched_yield()
      rounds += 1
    }
  }

  /// Takes the lock if it is free; returns whether it did.
  @inlinable @inline(__always)
  func tryLock() -> Bool {
    #if canImport(Darwin)
      return os_unfair_lock_trylock(_primitive)
    #else
      return pthread_mutex_trylock(_primitive) == 0
    #endif
  }

  @inlinable @inline(__always)
  func unlock() {
    #if canImport(Darwin)
      os_unfair_lock_unlock(_primitive)
    #else
      pthread_mutex_unlock(_primitive)
    #endif
  }

  @inlinable @inline(__always)
  func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
    lock()
    defer { unlock() }
    return try body()
  }

  @usableFromInline
  func deallocate() {
    #if !canImport(Darwin)
      pthread_mutex_destroy(_primitive)
    #endif
    _primitive.deinitialize(count: 1)
    _waiting.deinitialize(count: 1)
    UnsafeMutableRawPointer(_primitive).deallocate()
  }
}

// Safe: the lock primitive is designed to be shared between threads; the pointer itself is
// immutable, and its memory lives until the owner calls `deallocate()` after its last use.
extension _Lock: @unchecked Sendable {}
