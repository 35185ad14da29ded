import Synchronization
internal import _MemoryStoreShims

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
/// `os_unfair_lock` on Apple platforms. Elsewhere, a word of its own, taken with one
/// compare-and-exchange and released with a plain store (``unlock()``), with a condition
/// variable for the threads that wait long enough to sleep. `Synchronization.Mutex` is not
/// used: on Linux its contended path hands ownership over through PI futexes, which
/// ThreadSanitizer cannot see (false race reports), and it collapses under contention on
/// this toolchain. Nor is a `pthread_mutex_t`: it releases with an atomic read-modify-write,
/// which waits until every store of the critical section has reached the cache, so a write
/// whose stores miss (its change handed to another core, a node that a reader on another core
/// touched) would wait for them at every unlock. A sleeper makes sure that the plain store's
/// unlock wakes it (see ``_sleepUntilTaken()``).
///
/// A value type holding a pointer: copies share the lock. The owner calls ``deallocate()``
/// exactly once, when no thread can use the lock any more.
@usableFromInline
struct _Lock {
  #if canImport(Darwin)
    @usableFromInline typealias Primitive = os_unfair_lock
  #else
    /// 0: free; 1: held.
    @usableFromInline typealias Primitive = Atomic<UInt32>
  #endif

  @usableFromInline let _primitive: UnsafeMutablePointer<Primitive>
  /// The number of threads waiting in ``lock()``, awake or asleep (counted only when the lock
  /// is taken).
  @usableFromInline let _waiting: UnsafeMutablePointer<Atomic<Int>>
  #if !canImport(Darwin)
    /// The number of threads asleep in ``_sleepUntilTaken()``, or about to be.
    @usableFromInline let _sleepers: UnsafeMutablePointer<Atomic<Int>>
    /// What sleeping threads wait on: a mutex and a condition, used only by them and by an
    /// ``unlock()`` that sees sleepers.
    @usableFromInline let _parking: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline let _wakeUp: UnsafeMutablePointer<pthread_cond_t>
  #endif

  /// The bytes of the block that holds the lock: the primitive's cache lines, then the
  /// counts', then the parking place's.
  static var _blockSize: Int { 384 }

  @usableFromInline
  init() {
    // One block, aligned to two cache lines (against the adjacent-line prefetcher): the
    // primitive on the first two lines, each count on a line of the next two, so that nothing else
    // shares the line that waiting threads read while the owner writes it.
    let block = UnsafeMutableRawPointer.allocate(byteCount: Self._blockSize, alignment: 128)
    _primitive = block.bindMemory(to: Primitive.self, capacity: 1)
    _waiting = (block + 128).bindMemory(to: Atomic<Int>.self, capacity: 1)
    _waiting.initialize(to: Atomic(0))
    #if canImport(Darwin)
      _primitive.initialize(to: os_unfair_lock())
    #else
      _primitive.initialize(to: Atomic(0))
      _sleepers = (block + 192).bindMemory(to: Atomic<Int>.self, capacity: 1)
      _sleepers.initialize(to: Atomic(0))
      _parking = (block + 256).bindMemory(to: pthread_mutex_t.self, capacity: 1)
      _parking.initialize(to: pthread_mutex_t())
      _wakeUp = (block + 320).bindMemory(to: pthread_cond_t.self, capacity: 1)
      _wakeUp.initialize(to: pthread_cond_t())
      precondition(
        MemoryLayout<pthread_mutex_t>.size <= 64 && MemoryLayout<pthread_cond_t>.size <= 64,
        "the lock's parking place does not fit its block")
      var status = pthread_mutex_init(_parking, nil)
      precondition(status == 0, "pthread_mutex_init failed with \(status)")
      var attributes = pthread_condattr_t()
      pthread_condattr_init(&attributes)
      pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
      status = pthread_cond_init(_wakeUp, &attributes)
      pthread_condattr_destroy(&attributes)
      precondition(status == 0, "pthread_cond_init failed with \(status)")
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
      _sleepUntilTaken()
    #endif
    _waiting.pointee.wrappingSubtract(1, ordering: .relaxed)
  }

  #if !canImport(Darwin)
    /// Sleeps until the lock is taken: on the condition, woken by the ``unlock()`` that sees
    /// this thread counted among the sleepers.
    ///
    /// ``unlock()`` releases with a plain store, then reads the count of sleepers, and the
    /// processor may read the count before its store is seen: by itself, an unlock could miss
    /// a thread that counted itself and found the lock still held just then. So a sleeper,
    /// once counted, has every running thread of the process execute a full memory barrier
    /// (`membarrier`) before it looks at the lock. An unlock whose store it then does not see
    /// reads a count that includes it, and wakes it: the unlock waits for the parking mutex,
    /// which the sleeper holds until it waits. The barrier costs microseconds, as the sleep
    /// itself does; the unlock pays nothing for it.
    ///
    /// Where `membarrier` is not available (not Linux 4.14 or later, or refused by a sandbox),
    /// each sleep has a time limit instead, 50 µs then 100 µs, so that a missed wake-up costs
    /// at most that.
    @usableFromInline @inline(never)
    func _sleepUntilTaken() {
      pthread_mutex_lock(_parking)
      _sleepers.pointee.wrappingAdd(1, ordering: .sequentiallyConsistent)
      let isWokenSurely = Self._hasMembarrier && _memorystore_membarrier() == 0
      var limit: Int64 = 50_000
      while !tryLock() {
        if isWokenSurely {
          pthread_cond_wait(_wakeUp, _parking)
          continue
        }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int64(deadline.tv_nsec) + limit
        deadline.tv_sec += numericCast(nanoseconds / 1_000_000_000)
        deadline.tv_nsec = numericCast(nanoseconds % 1_000_000_000)
        pthread_cond_timedwait(_wakeUp, _parking, &deadline)
        limit = Swift.min(limit * 2, 100_000)
      }
      _sleepers.pointee.wrappingSubtract(1, ordering: .relaxed)
      pthread_mutex_unlock(_parking)
    }

    /// Whether the process could register for `membarrier`: done once, at the first sleep.
    static let _hasMembarrier = _memorystore_membarrier_register() == 0

    /// Wakes one sleeping thread.
    @usableFromInline @inline(never)
    func _wakeSleeper() {
      pthread_mutex_lock(_parking)
      pthread_cond_signal(_wakeUp)
      pthread_mutex_unlock(_parking)
    }
  #endif

  /// How many times a contended ``lock()`` looks at the lock before it sleeps: where the lock
  /// has a word to read, a relaxed read of it, about as long as a long write; elsewhere, where
  /// each look is a try to take it, far fewer.
  @usableFromInline static var _spinLimit: Int {
    #if canImport(Darwin)
      1_000
    #else
      40_000
    #endif
  }

  /// Whether the lock looks held (a relaxed read of its word, where it has one to read): a
  /// hint for a thread that waits awake.
  @inlinable @inline(__always)
  var _looksHeld: Bool {
    #if canImport(Darwin)
      false
    #else
      _primitive.pointee.load(ordering: .relaxed) != 0
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
      return _primitive.pointee.compareExchange(
        expected: 0, desired: 1, successOrdering: .acquiring, failureOrdering: .relaxed
      ).exchanged
    #endif
  }

  @inlinable @inline(__always)
  func unlock() {
    #if canImport(Darwin)
      os_unfair_lock_unlock(_primitive)
    #else
      _primitive.pointee.store(0, ordering: .releasing)
      if _sleepers.pointee.load(ordering: .relaxed) != 0 { _wakeSleeper() }
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
      pthread_cond_destroy(_wakeUp)
      pthread_mutex_destroy(_parking)
      _wakeUp.deinitialize(count: 1)
      _parking.deinitialize(count: 1)
      _sleepers.deinitialize(count: 1)
    #endif
    _primitive.deinitialize(count: 1)
    _waiting.deinitialize(count: 1)
    UnsafeMutableRawPointer(_primitive).deallocate()
  }
}

// Safe: the lock primitive is designed to be shared between threads; the pointer itself is
// immutable, and its memory lives until the owner calls `deallocate()` after its last use.
extension _Lock: @unchecked Sendable {}
