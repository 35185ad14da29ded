import Synchronization

/// Wakes one waiting task: a signal given while nobody waits is kept for the next wait.
final class AsyncSignal: Sendable {
  private struct State {
    var isPending = false
    var waiter: CheckedContinuation<Void, Never>?
  }

  private let state = Mutex(State())

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

/// Runs `operation`, and throws `timeoutError` if it has not finished after `limit`: then
/// calls `onTimeout` and cancels it, and waits for it to end.
///
/// An operation that does not end when cancelled (a query PostgreSQL holds: PostgresNIO does
/// not cancel a running query) keeps this waiting, unless `onTimeout` ends it, for example by
/// closing its connection.
func withTimeout<Result: Sendable>(
  _ limit: Duration, orThrow timeoutError: @autoclosure @escaping @Sendable () -> any Error,
  onTimeout: @escaping @Sendable () -> Void = {},
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
      onTimeout()
      throw timeoutError()
    }
    throw CancellationError()
  }
}
