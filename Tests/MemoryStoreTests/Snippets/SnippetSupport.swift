import Foundation

// What the snippet files need to run the documents' code as written, in a test.

/// What the snippets of one file print, recorded instead of written to the standard output,
/// so that a test can check it. Each snippet file declares a `private func print` that records
/// here; its suite is serialized and clears the record at the start of each test.
final class SnippetOutput: Sendable {
  private let lines = Locked<[String]>([])

  func record(_ items: [Any], separator: String) {
    let line = items.map { "\($0)" }.joined(separator: separator)
    lines.withLock { $0.append(line) }
  }

  /// The lines printed so far.
  var printed: [String] { lines.value }

  func clear() { lines.withLock { $0 = [] } }
}

/// Stands in for `URL` where a snippet saves to `URL.temporaryDirectory`: a test declares
/// `let URL = SnippetDirectory()`, so that the snippet's files go to a fresh directory of
/// their own, removed after the test, and test runs never share a file.
struct SnippetDirectory: Sendable {
  private let directory = TemporaryDirectory()

  var temporaryDirectory: Foundation.URL { directory.url }
}

/// Stands in for `Task` where a snippet starts an iteration that never ends: a test declares
/// `let Task = SnippetTasks()`, so that `Task { … }` starts a real task and keeps it, and
/// ``cancelAll()`` ends every one of them before the test returns.
final class SnippetTasks: Sendable {
  private let tasks = Locked<[_Concurrency.Task<Void, Never>]>([])

  @discardableResult
  func callAsFunction(
    _ operation: @escaping @Sendable () async -> Void
  ) -> _Concurrency.Task<Void, Never> {
    let task = _Concurrency.Task { await operation() }
    tasks.withLock { $0.append(task) }
    return task
  }

  /// Cancels the tasks started, and returns whether they all ended within `seconds`.
  func cancelAll(within seconds: Double = 30) async -> Bool {
    let started = tasks.value
    for task in started { task.cancel() }
    return await finishes(within: seconds) {
      for task in started { await task.value }
    }
  }
}
