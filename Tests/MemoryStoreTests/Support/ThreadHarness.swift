import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

// Helpers for running work on real OS threads with bounded waits.
//
// Every wait here takes a timeout, so that a deadlock in the code under test fails the test
// instead of hanging the suite. Synchronisation uses pthread-based primitives (`NSLock`,
// `NSCondition`) and atomics, whose ordering ThreadSanitizer understands.

/// Nanoseconds of the system-wide monotonic clock (`CLOCK_MONOTONIC`).
///
/// Timestamps from different threads are comparable: if one thread reads `a` and, later in
/// real time, another reads `b`, then `a <= b`.
@inline(__always)
func monotonicNanoseconds() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// Spins, yielding the processor, until `condition` holds or `timeout` seconds have passed.
/// Returns whether the condition held. Not a sleep: it returns as soon as the condition holds.
func spinWait(timeout: Double, until condition: () -> Bool) -> Bool {
  let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
  while !condition() {
    if monotonicNanoseconds() > deadline { return condition() }
    sched_yield()
  }
  return true
}

/// State guarded by a lock.
final class Locked<State: Sendable>: @unchecked Sendable {
  // Safe: `state` is only accessed inside `withLock`, which holds `lock` for the access.
  private let lock = NSLock()
  private var state: State

  init(_ state: State) { self.state = state }

  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }

  var value: State { withLock { $0 } }
}

/// A counting semaphore whose waits give up after a timeout.
final class TimedSemaphore: @unchecked Sendable {
  // Safe: `count` is only accessed while `condition` is locked.
  private let condition = NSCondition()
  private var count = 0

  func signal() {
    condition.lock()
    count += 1
    condition.signal()
    condition.unlock()
  }

  /// Waits at most `seconds` for a signal; returns whether one came.
  func wait(timeout seconds: Double) -> Bool {
    wait(until: Date(timeIntervalSinceNow: seconds))
  }

  /// Waits until `deadline` at most for a signal; returns whether one came.
  func wait(until deadline: Date) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    while count == 0 {
      if !condition.wait(until: deadline) && count == 0 { return false }
    }
    count -= 1
    return true
  }
}

/// Releases a fixed number of threads together: each calls `arriveAndWait()`, and none
/// returns before all have arrived.
final class SpinBarrier: Sendable {
  private let parties: Int
  private let arrived = Atomic<Int>(0)

  init(parties: Int) { self.parties = parties }

  func arriveAndWait() {
    arrived.wrappingAdd(1, ordering: .acquiringAndReleasing)
    while arrived.load(ordering: .acquiring) < parties { sched_yield() }
  }
}

/// The work of one thread, released as soon as it has run.
private final class ThreadWork: @unchecked Sendable {
  // Safe: `body` is set before the thread starts (thread creation orders that write before
  // everything the thread does) and then only read and cleared by that one thread.
  private var body: (@Sendable () -> Void)?

  init(_ body: @escaping @Sendable () -> Void) { self.body = body }

  func run() {
    let body = self.body
    self.body = nil
    body?()
  }
}

/// Starts `body` on a new OS thread, not on a task of the cooperative pool. The returned
/// semaphore is signalled once `body` has returned and everything it captured is released.
@discardableResult
func startThread(_ body: @escaping @Sendable () -> Void) -> TimedSemaphore {
  let finished = TimedSemaphore()
  let work = ThreadWork(body)
  let thread = Thread {
    work.run()
    finished.signal()
  }
  thread.stackSize = 1 << 20
  thread.start()
  return finished
}

/// Runs `body(index)` for each index in `0..<count`, each on its own new OS thread; the
/// threads start together through a barrier.
///
/// - Returns: The results in index order, or `nil` if some thread had not finished within
///   `timeout` seconds (a deadlock fails the test instead of hanging it). Once this returns
///   non-`nil`, everything the threads captured has been released.
func runOnThreads<Result: Sendable>(
  _ count: Int, timeout: Double = 120, _ body: @escaping @Sendable (Int) -> Result
) -> [Result]? {
  let barrier = SpinBarrier(parties: count)
  let results = Locked([Result?](repeating: nil, count: count))
  let finished = (0..<count).map { index in
    startThread {
      barrier.arriveAndWait()
      let result = body(index)
      results.withLock { $0[index] = result }
    }
  }
  let deadline = Date(timeIntervalSinceNow: timeout)
  for thread in finished where !thread.wait(until: deadline) { return nil }
  return results.value.compactMap { $0 }
}

/// Whether `operation` finishes within `seconds`. It runs as a task; the timeout is kept by an
/// OS thread, so a task that never finishes fails the test instead of hanging it.
func finishes(
  within seconds: Double, _ operation: @escaping @Sendable () async -> Void
) async -> Bool {
  let finished = TimedSemaphore()
  Task(executorPreference: ThreadExecutor.shared) {
    await operation()
    finished.signal()
  }
  return await withCheckedContinuation { continuation in
    startThread { continuation.resume(returning: finished.wait(timeout: seconds)) }
  }
}

/// SplitMix64: a small, fast, seeded generator, so that every workload is reproducible.
struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A number in `0..<bound`.
  mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

  /// `count` distinct numbers in `0..<bound`.
  mutating func distinct(_ count: Int, below bound: Int) -> [Int] {
    var chosen: [Int] = []
    while chosen.count < count {
      let candidate = below(bound)
      if !chosen.contains(candidate) { chosen.append(candidate) }
    }
    return chosen
  }
}

/// A task executor with one thread of its own. Tasks that prefer it run even while every
/// thread of the cooperative pool is held: the synchronous stress tests of other suites hold
/// them for seconds at a time (minutes under ThreadSanitizer), and a test that waits for a task
/// must not fail for want of a thread.
final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
  // @unchecked Sendable: `jobs` is read and written only with `condition` locked.
  private let condition = NSCondition()
  private var jobs: [UnownedJob] = []

  /// The one instance; its thread runs for the rest of the test process.
  static let shared = ThreadExecutor()

  private init() {
    let thread = Thread { [unowned self] in self.run() }
    thread.name = "ThreadExecutor"
    thread.start()
  }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    condition.lock()
    jobs.append(job)
    condition.signal()
    condition.unlock()
  }

  private func run() {
    while true {
      condition.lock()
      while jobs.isEmpty { condition.wait() }
      let job = jobs.removeFirst()
      condition.unlock()
      job.runSynchronously(on: asUnownedTaskExecutor())
    }
  }
}
