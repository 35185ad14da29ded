import Foundation

/// A value behind a lock, reached only through ``withLock(_:)``: what the package uses in
/// place of `Synchronization.Mutex`.
///
/// `NSLock` (a `pthread_mutex_t` on Linux), because `Mutex`'s contended path on Linux hands
/// ownership over through futexes that ThreadSanitizer cannot see: under it, every access
/// that a `Mutex` guards is reported as a race. The library's own locks avoid `Mutex` for the
/// same reason.
package final class Locked<State>: @unchecked Sendable {
  // Safe: `state` is read and written only inside `withLock`, which holds `lock` for the
  // access.
  private let lock = NSLock()
  private var state: State

  package init(_ state: State) { self.state = state }

  /// Runs `body` with the value, holding the lock.
  package func withLock<Result, Failure: Error>(
    _ body: (inout State) throws(Failure) -> Result
  ) throws(Failure) -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }
}
