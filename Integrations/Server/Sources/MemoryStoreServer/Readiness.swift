/// A result given once, and awaited by any number of tasks before or after.
final class Readiness: Sendable {
  typealias Outcome = Result<Int, any Error>

  private enum State {
    case waiting(next: Int, waiters: [Int: CheckedContinuation<Outcome, any Error>])
    case resolved(Outcome)
  }

  private let state = Locked(State.waiting(next: 0, waiters: [:]))

  /// Gives the outcome to every waiter, now and later; the first call only counts.
  func resolve(_ outcome: Outcome) {
    let waiters = state.withLock { state -> [CheckedContinuation<Outcome, any Error>] in
      guard case .waiting(_, let waiters) = state else { return [] }
      state = .resolved(outcome)
      return Array(waiters.values)
    }
    for waiter in waiters { waiter.resume(returning: outcome) }
  }

  /// The number of tasks waiting: for tests.
  var waiterCount: Int {
    state.withLock { state in
      if case .waiting(_, let waiters) = state { waiters.count } else { 0 }
    }
  }

  /// The outcome, once given.
  ///
  /// - Throws: `CancellationError` if the calling task is cancelled first.
  func wait() async throws -> Outcome {
    // The waiter's key, taken before it waits, so that the cancellation handler knows it.
    let key = state.withLock { state -> Int in
      guard case .waiting(let next, let waiters) = state else { return 0 }
      state = .waiting(next: next + 1, waiters: waiters)
      return next
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        // Registered under the lock that the cancellation handler takes: a handler that ran
        // first left the task cancelled, which is checked here.
        let resolved = state.withLock { state -> Result<Outcome, CancellationError>? in
          switch state {
          case .resolved(let outcome):
            return .success(outcome)
          case .waiting where Task.isCancelled:
            return .failure(CancellationError())
          case .waiting(let next, var waiters):
            waiters[key] = continuation
            state = .waiting(next: next, waiters: waiters)
            return nil
          }
        }
        if let resolved { continuation.resume(with: resolved) }
      }
    } onCancel: {
      let waiter = state.withLock { state -> CheckedContinuation<Outcome, any Error>? in
        guard case .waiting(let next, var waiters) = state else { return nil }
        let waiter = waiters.removeValue(forKey: key)
        state = .waiting(next: next, waiters: waiters)
        return waiter
      }
      waiter?.resume(throwing: CancellationError())
    }
  }
}
