import Foundation

/// A value behind a lock, reached only through ``withLock(_:)``.
///
/// `NSLock` (a `pthread_mutex_t` on Linux) rather than `Synchronization.Mutex`, whose contended
/// path on Linux hands ownership over through futexes that ThreadSanitizer cannot see: its
/// reports would be false, and this package's tests run under it.
final class Locked<State>: @unchecked Sendable {
  // Safe: `state` is read and written only inside `withLock`, which holds `lock` for the
  // access; `State` values leave only as copies returned by `body`, which must be Sendable
  // where the caller sends them.
  private let lock = NSLock()
  private var state: State

  init(_ state: State) { self.state = state }

  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }
}
