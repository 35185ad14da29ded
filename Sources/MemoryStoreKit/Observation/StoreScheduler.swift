import Dispatch

/// The source of time for a store: when it is now, and running work later.
///
/// A store uses its scheduler for everything that happens on an interval or depends on time:
/// publishing change batches, the periodic eviction purge, the expiry timer, the clock that
/// times entries (their write time, their time to live, and, with a decider, the once-a-second
/// tick that reads record), and a persistence manager's auto-save. The default,
/// ``DispatchScheduler``, uses the system's monotonic clock and a timer thread of its own, so
/// that intervals hold while Swift tasks keep every core busy. Tests inject a
/// ``ManualScheduler`` and move time forward by hand, so interval behaviour is checked without
/// sleeping:
///
/// ```swift
/// let scheduler = ManualScheduler()
/// let store = MemoryStore<String, Int>(scheduler: scheduler)
/// store.notificationInterval = .milliseconds(100)
/// store["a"] = 1
/// scheduler.advance(by: .milliseconds(100))   // publishes the batch now
/// ```
///
/// Implementations must be thread-safe: a store calls them from any thread, never while it
/// holds a lock. The work a store schedules is short (publishing a batch, a purge) except a
/// persistence manager's auto-save, which encodes and writes the whole store: an
/// implementation should not run one action on the thread that times the others, and should
/// not run actions on threads that the Swift task pool can keep busy (see
/// ``DispatchScheduler``), or the store's intervals stretch while tasks hold every core.
public protocol StoreScheduler: Sendable {
  /// The current instant of the scheduler's clock.
  var now: ContinuousClock.Instant { get }

  /// Runs `action` once, `delay` after now, on a thread of the scheduler's choosing; never
  /// synchronously inside this call.
  ///
  /// - Parameters:
  ///   - delay: How long from now; a delay that is not above zero means as soon as possible.
  ///   - action: The work; it may call the store, and schedule more work.
  func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void)
}

extension StoreScheduler where Self == DispatchScheduler {
  /// The system scheduler: `ContinuousClock` time, a timer thread of its own, and Dispatch
  /// threads that the Swift task pool cannot hold (see ``DispatchScheduler``).
  public static var dispatch: DispatchScheduler { DispatchScheduler() }
}

/// Real time: `ContinuousClock` for *now*, and a timer thread of its own for scheduled work.
///
/// Scheduled work is timed by one thread per process, started on first use, that sleeps until
/// the earliest deadline and then hands the work, at the scheduler's ``qos``, to a thread of
/// Dispatch's *overcommitting* pool (a serial queue of its own that targets no other queue).
/// Neither can be held by the Swift task pool: on Linux the task pool and Dispatch's global
/// queues share one pool of threads, as many as there are cores, so tasks that keep every core
/// busy without suspending would otherwise delay change batches, purges and auto-saves until
/// they stop. The work of one store does not wait for another's: each action gets a thread.
///
/// A store with this scheduler times its entries (write times, times to live) by reading the
/// system clock directly, which costs less than `ContinuousClock`: `CLOCK_MONOTONIC_RAW` on
/// Apple platforms, the clock `ContinuousClock` reads, and `CLOCK_MONOTONIC` on Linux, whose
/// coarse variant lets most reads of a store with expiring entries skip reading the clock.
/// On Linux, time spent suspended therefore does not count toward a time to live.
///
/// Thread-safe; stateless (the timer thread is shared by every instance).
public struct DispatchScheduler: StoreScheduler {
  /// The quality of service that scheduled work runs at.
  public let qos: DispatchQoS.QoSClass

  /// Creates a scheduler that runs work at quality of service `qos`.
  public init(qos: DispatchQoS.QoSClass = .utility) {
    self.qos = qos
  }

  /// The current instant of `ContinuousClock`.
  public var now: ContinuousClock.Instant { .now }

  /// Runs `action` once, `delay` after now, on a Dispatch thread that the Swift task pool
  /// cannot hold; thread-safe.
  ///
  /// The process's timer thread hands the action over at its deadline (a delay longer than a
  /// century is cut to one); actions due at the same instant are handed over in the order they
  /// were scheduled, each to a thread of its own, so a long one (an auto-save) delays no other.
  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
    _TimerThread.shared.schedule(after: delay, qos: qos, action)
  }
}

/// A scheduler whose time moves only when ``advance(by:)`` is called: for deterministic tests
/// of interval behaviour.
///
/// Scheduled work runs synchronously inside ``advance(by:)`` or ``runDue()``, on the calling
/// thread, in deadline order (ties in the order they were scheduled), outside the scheduler's
/// own lock, so the work may schedule more work; work that falls due within the same advance
/// runs in the same call.
///
/// Thread-safe: it may be advanced from one thread while stores schedule work from others.
public final class ManualScheduler: StoreScheduler {
  private struct Job {
    let deadline: ContinuousClock.Instant
    let order: UInt64
    let action: @Sendable () -> Void
  }

  private struct State {
    var now: ContinuousClock.Instant
    var jobs: [Job] = []
    var scheduled: UInt64 = 0
  }

  private let state: _Protected<State>

  /// Creates a scheduler whose clock starts at `start`.
  public init(start: ContinuousClock.Instant = .now) {
    state = _Protected(State(now: start))
  }

  public var now: ContinuousClock.Instant {
    state.withLock { $0.now }
  }

  public func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
    state.withLock { state in
      state.scheduled += 1
      state.jobs.append(
        Job(deadline: state.now + max(delay, .zero), order: state.scheduled, action: action))
    }
  }

  /// The number of scheduled actions that have not run yet.
  public var pendingCount: Int {
    state.withLock { $0.jobs.count }
  }

  /// The deadline of the earliest scheduled action, if any.
  public var nextDeadline: ContinuousClock.Instant? {
    state.withLock { state in state.jobs.map(\.deadline).min() }
  }

  /// Moves time forward by `duration`, running every action that falls due, each at its own
  /// deadline.
  public func advance(by duration: Duration) {
    let target = state.withLock { $0.now } + max(duration, .zero)
    while let job = takeFirstJob(dueBy: target) {
      job.action()
    }
    state.withLock { state in
      if state.now < target { state.now = target }
    }
  }

  /// Runs every action that is due now, without moving time.
  public func runDue() {
    advance(by: .zero)
  }

  private func takeFirstJob(dueBy target: ContinuousClock.Instant) -> Job? {
    state.withLock { state in
      guard
        let index = state.jobs.indices.min(by: {
          (state.jobs[$0].deadline, state.jobs[$0].order)
            < (state.jobs[$1].deadline, state.jobs[$1].order)
        }), state.jobs[index].deadline <= target
      else { return nil }
      let job = state.jobs.remove(at: index)
      if state.now < job.deadline { state.now = job.deadline }
      return job
    }
  }
}
