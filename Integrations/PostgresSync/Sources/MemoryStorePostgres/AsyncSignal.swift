/// Wakes one waiting task: a signal given while nobody waits is kept for the next wait.
final class AsyncSignal: Sendable {
  private struct State {
    var isPending = false
    var waiter: CheckedContinuation<Void, Never>?
  }

  private let state = Locked(State())

  /// Resumes the waiting task, or lets the next wait return at once.
  func signal() {
    let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
      guard let waiter = state.waiter else {
        state.isPending = true
        return nil
      }
      state.waiter = nil
      return waiter
    }
    waiter?.resume()
  }

  /// Returns once signalled (at once if a signal is pending), or when the task is cancelled.
  func wait() async {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumesNow = state.withLock { state -> Bool in
          if state.isPending || Task.isCancelled {
            state.isPending = false
            return true
          }
          state.waiter = continuation
          return false
        }
        if resumesNow { continuation.resume() }
      }
    } onCancel: {
      signal()
    }
  }
}

/// Runs `operation`, and throws `timeoutError` if it has not finished after `limit` (then
/// cancels it, and waits for it to end: for operations that end when cancelled; see
/// ``withDeadline(_:orThrow:endsWhenCancelled:onTimeout:_:)`` for those that may not).
func withTimeout<Result: Sendable>(
  _ limit: Duration, orThrow timeoutError: @autoclosure @escaping @Sendable () -> any Error,
  _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
  try await withThrowingTaskGroup(of: Result?.self) { group in
    group.addTask { try await operation() }
    group.addTask {
      try? await Task.sleep(for: limit)
      return nil
    }
    defer { group.cancelAll() }
    while let next = try await group.next() {
      if let result = next { return result }
      throw timeoutError()
    }
    throw CancellationError()
  }
}

/// Runs `operation` and returns its result, or throws `timeoutError` once `limit` has passed
/// (calling `onTimeout` first and cancelling the operation), without waiting for the
/// operation to end: it is left to finish on its own. For work on the database, where a
/// connection that died at the wrong moment may leave a query that never completes.
///
/// Cancelling the caller cancels the operation; the wait still ends by `limit`, or at once
/// (throwing `CancellationError`) if `endsWhenCancelled`.
func withDeadline<Result: Sendable>(
  _ limit: Duration, orThrow timeoutError: @autoclosure @escaping @Sendable () -> any Error,
  endsWhenCancelled: Bool = false,
  onTimeout: @escaping @Sendable () -> Void = {},
  _ operation: @escaping @Sendable () async throws -> Result
) async throws -> Result {
  let race = DeadlineRace<Result>()
  let work = Task {
    do {
      race.finish(.success(try await operation()))
    } catch {
      race.finish(.failure(error))
    }
  }
  let timer = Task {
    try? await Task.sleep(for: limit)
    guard !Task.isCancelled, race.finish(.failure(timeoutError())) else { return }
    onTimeout()
    work.cancel()
  }
  defer { timer.cancel() }
  return try await withTaskCancellationHandler {
    try await race.outcome()
  } onCancel: {
    work.cancel()
    if endsWhenCancelled { race.finish(.failure(CancellationError())) }
  }
}

/// The first of an operation's outcome and its deadline, handed to the one waiting task.
private final class DeadlineRace<Result: Sendable>: Sendable {
  private struct State {
    var outcome: Swift.Result<Result, any Error>?
    var waiter: CheckedContinuation<Result, any Error>?
  }

  private let state = Locked(State())

  /// Records `outcome` if none is yet, and resumes the waiter; returns whether it was first.
  @discardableResult
  func finish(_ outcome: Swift.Result<Result, any Error>) -> Bool {
    let (isFirst, waiter) = state.withLock { state in
      guard state.outcome == nil else {
        return (false, nil as CheckedContinuation<Result, any Error>?)
      }
      state.outcome = outcome
      defer { state.waiter = nil }
      return (true, state.waiter)
    }
    waiter?.resume(with: outcome)
    return isFirst
  }

  /// Waits for the first outcome.
  func outcome() async throws -> Result {
    try await withCheckedThrowingContinuation { continuation in
      let outcome = state.withLock { state in
        if state.outcome == nil { state.waiter = continuation }
        return state.outcome
      }
      if let outcome { continuation.resume(with: outcome) }
    }
  }
}
