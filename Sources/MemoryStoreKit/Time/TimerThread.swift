import Dispatch

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Bionic)
  import Bionic
#endif

/// The process's timer for ``DispatchScheduler``: one thread of its own, started on first use,
/// that sleeps on a condition variable until the earliest deadline of a heap, and hands each
/// action that falls due to a thread of Dispatch's overcommitting pool (see ``_Overcommit``).
///
/// Why a thread of its own: on Linux, Dispatch's global queues and the Swift task pool share
/// one pool of threads, as many as there are cores. Tasks that keep every core busy without
/// suspending hold all of them, and work sent to a global queue (`asyncAfter` included) waits
/// until they let go, so change batches came seconds late. This thread only waits and
/// hands over, so a deadline is met as soon as the kernel runs it, whatever the pool does.
///
/// The thread never runs an action itself (an action may save a file, or run user code), and
/// never calls anything with its lock held.
final class _TimerThread: @unchecked Sendable {
  // Safe (`@unchecked Sendable`): `jobs` and `scheduled` are accessed only with `mutex`
  // held; the mutex and the condition are designed to be shared between threads and live as
  // long as the process (the one instance is never freed).

  /// The process's one timer thread, started on first use.
  static let shared = _TimerThread()

  private struct Job {
    let deadline: ContinuousClock.Instant
    /// Breaks ties between equal deadlines: first scheduled, first handed over.
    let order: UInt64
    let qos: DispatchQoS.QoSClass
    let action: @Sendable () -> Void

    func precedes(_ other: Job) -> Bool {
      (deadline, order) < (other.deadline, other.order)
    }
  }

  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
  /// A binary min-heap ordered by ``Job/precedes(_:)``.
  private var jobs: [Job] = []
  private var scheduled: UInt64 = 0

  private init() {
    mutex.initialize(to: pthread_mutex_t())
    condition.initialize(to: pthread_cond_t())
    precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
    var attributes = pthread_condattr_t()
    pthread_condattr_init(&attributes)
    #if !canImport(Darwin)
      // Timed waits measure the monotonic clock, so that setting the wall clock does not
      // move deadlines. (Apple platforms wait a relative time instead.)
      pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
    #endif
    precondition(pthread_cond_init(condition, &attributes) == 0, "pthread_cond_init failed")
    pthread_condattr_destroy(&attributes)
    Self.startThread()
  }

  private static func startThread() {
    #if canImport(Darwin)
      var thread: pthread_t?
    #else
      var thread = pthread_t()
    #endif
    // `shared` is being initialised on the calling thread: the new thread's first use of it
    // waits until the initialisation is done.
    let status = pthread_create(&thread, nil, { _ in _TimerThread.shared.run() }, nil)
    precondition(status == 0, "MemoryStore could not start its timer thread (error \(status))")
    #if canImport(Darwin)
      if let thread { pthread_detach(thread) }
    #else
      pthread_detach(thread)
    #endif
  }

  /// Hands `action` to a thread of Dispatch's overcommitting pool at quality of service `qos`,
  /// `delay` from now (at once if `delay` is not above zero).
  func schedule(
    after delay: Duration, qos: DispatchQoS.QoSClass, _ action: @escaping @Sendable () -> Void
  ) {
    // Due at once: straight to the pool, without waking the timer thread.
    guard delay > .zero else {
      _Overcommit.async(qos: qos, action)
      return
    }
    // Capped at a century: a longer delay never comes, as it should, rather than overflow.
    let deadline = ContinuousClock.Instant.now + min(max(delay, .zero), .seconds(3_155_760_000))
    pthread_mutex_lock(mutex)
    scheduled &+= 1
    let isEarliest = push(Job(deadline: deadline, order: scheduled, qos: qos, action: action))
    pthread_mutex_unlock(mutex)
    // Only a new earliest deadline changes how long the thread must sleep.
    if isEarliest { pthread_cond_signal(condition) }
  }

  /// The thread's loop: sleeps until the earliest deadline, then hands over what is due.
  private func run() -> UnsafeMutableRawPointer? {
    setThreadName()
    pthread_mutex_lock(mutex)
    while true {
      guard let first = jobs.first else {
        pthread_cond_wait(condition, mutex)
        continue
      }
      let now = ContinuousClock.Instant.now
      if first.deadline > now {
        wait(for: now.duration(to: first.deadline))
        continue
      }
      var due: [Job] = []
      while let job = jobs.first, job.deadline <= now { due.append(popFirst()) }
      pthread_mutex_unlock(mutex)
      for job in due { _Overcommit.async(qos: job.qos, job.action) }
      due = []  // Released without the lock: an action's captures may have a deinit.
      pthread_mutex_lock(mutex)
    }
  }

  /// Sleeps for at most `duration`, or until signalled (mutex held).
  private func wait(for duration: Duration) {
    let nanoseconds = min(max(duration.nanoseconds, 0), 3_600_000_000_000)
    #if canImport(Darwin)
      var relative = timespec(
        tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
      _ = pthread_cond_timedwait_relative_np(condition, mutex, &relative)
    #else
      var deadline = timespec()
      clock_gettime(CLOCK_MONOTONIC, &deadline)
      let total = Int64(deadline.tv_nsec) + nanoseconds % 1_000_000_000
      deadline.tv_sec += Int(nanoseconds / 1_000_000_000 + total / 1_000_000_000)
      deadline.tv_nsec = Int(total % 1_000_000_000)
      _ = pthread_cond_timedwait(condition, mutex, &deadline)
    #endif
  }

  /// Names the thread, where the platform's headers let Swift do it (Glibc's declaration
  /// needs `_GNU_SOURCE`).
  private func setThreadName() {
    #if canImport(Darwin)
      pthread_setname_np("MemoryStore timer")
    #endif
  }

  // MARK: The heap (mutex held)

  /// Adds `job`; returns whether it is now the earliest.
  private func push(_ job: Job) -> Bool {
    jobs.append(job)
    var child = jobs.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard jobs[child].precedes(jobs[parent]) else { break }
      jobs.swapAt(child, parent)
      child = parent
    }
    return child == 0
  }

  /// Removes and returns the earliest job; the heap must not be empty.
  private func popFirst() -> Job {
    jobs.swapAt(0, jobs.count - 1)
    let first = jobs.removeLast()
    var parent = 0
    while true {
      let left = 2 * parent + 1
      guard left < jobs.count else { break }
      var earliest = left
      if left + 1 < jobs.count && jobs[left + 1].precedes(jobs[left]) { earliest = left + 1 }
      guard jobs[earliest].precedes(jobs[parent]) else { break }
      jobs.swapAt(parent, earliest)
      parent = earliest
    }
    return first
  }
}

/// Runs work on Dispatch's *overcommitting* pool: on a new serial queue that targets no other
/// queue, so that Dispatch gives it a thread even while every thread of the global queues (and,
/// on Linux, of the Swift task pool, which is the same pool) is busy.
///
/// With CPU-bound tasks on every core, work sent to a global queue waits until they let go;
/// sent to a serial queue of its own, it starts at once (the delivery-under-load tests check
/// it).
@usableFromInline
enum _Overcommit {
  /// One serial queue of the overcommitting pool, for work that is frequent and short (the
  /// background coalescing of logged changes): made once, so that such work costs an `async`
  /// and not a new queue each time.
  @usableFromInline static let serial: DispatchQueue = {
    let queue = DispatchQueue(label: "MemoryStore.background", qos: .utility)
    queue.setSpecific(key: serialKey, value: ())
    return queue
  }()

  /// Marks ``serial``, so that work can tell it runs there.
  static let serialKey = DispatchSpecificKey<Void>()

  /// Returns once the work queued on ``serial`` before the call has run, without blocking a
  /// thread meanwhile; at once when called from that queue.
  static func afterQueuedWork() async {
    guard DispatchQueue.getSpecific(key: serialKey) == nil else { return }
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
      serial.async { done.resume() }
    }
  }

  /// Runs `work` once, soon, on a thread of the overcommitting pool.
  @usableFromInline
  static func async(qos: DispatchQoS.QoSClass, _ work: @escaping @Sendable () -> Void) {
    DispatchQueue(
      label: "MemoryStore.scheduled", qos: DispatchQoS(qosClass: qos, relativePriority: 0)
    )
    .async(execute: work)
  }
}
