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
