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

  @usableFromInline
  init() {
    _primitive = UnsafeMutablePointer<Primitive>.allocate(capacity: 1)
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
    #if canImport(Darwin)
      os_unfair_lock_lock(_primitive)
    #else
      pthread_mutex_lock(_primitive)
    #endif
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
    _primitive.deallocate()
  }
}

// Safe: the lock primitive is designed to be shared between threads; the pointer itself is
// immutable, and its memory lives until the owner calls `deallocate()` after its last use.
extension _Lock: @unchecked Sendable {}
