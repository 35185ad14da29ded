import Dispatch

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
