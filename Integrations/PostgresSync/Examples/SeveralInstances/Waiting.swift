import MemoryStorePostgres

/// A wait that ran out.
struct TimedOut: Error, CustomStringConvertible {
  /// What was waited for.
  let what: String
  /// How long.
  let limit: Duration

  var description: String { "timed out after \(limit.readable) waiting for \(what)" }
}

/// Calls `probe` every `interval` until it returns a value, and returns that value.
///
/// - Throws: ``TimedOut`` if `probe` still returns `nil` after `limit`; `CancellationError` if
///   the task is cancelled.
func poll<Found>(
  within limit: Duration, every interval: Duration = .milliseconds(1), _ what: String,
  _ probe: () -> Found?
) async throws -> Found {
  let deadline = ContinuousClock.now + limit
  while true {
    if let found = probe() { return found }
    guard ContinuousClock.now < deadline else { throw TimedOut(what: what, limit: limit) }
    try await Task.sleep(for: interval)
  }
}

/// Waits for `task` to finish, for up to `limit`: returns whether it did. A task that does not
/// finish in time is left running.
///
/// (`await task.value` alone does not end when the waiting task is cancelled, so a task group
/// cannot bound it: the wait and a timer race for one continuation instead.)
func finished<Success, Failure>(_ task: Task<Success, Failure>, within limit: Duration) async
  -> Bool
{
  await withCheckedContinuation { continuation in
    let outcome = FirstOutcome(continuation)
    Task {
      _ = await task.result
      outcome.resume(returning: true)
    }
    Task {
      try? await Task.sleep(for: limit)
      outcome.resume(returning: false)
    }
  }
}

/// A continuation that the first of several racers resumes; the others' outcomes are dropped.
private final class FirstOutcome: Sendable {
  private let continuation: Locked<CheckedContinuation<Bool, Never>?>

  init(_ continuation: CheckedContinuation<Bool, Never>) {
    self.continuation = Locked(continuation)
  }

  func resume(returning value: Bool) {
    continuation.withLock { $0.take() }?.resume(returning: value)
  }
}
