import Dispatch

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
