import Observation
import Synchronization

/// Who holds a store's delivery role (see ``_ReadObservers``), guarded by its lock.
struct _DeliveryRole: Sendable {
  /// Whether a delivery holds the role.
  var isHeld = false
  /// Calls of ``_ReadObservers/sendPending()`` waiting for the role: resumed (with `false`,
  /// to try again) when it is let go.
  var waiters: [CheckedContinuation<Bool, Never>] = []

  /// Takes the role if no one holds it; returns whether it did.
  mutating func claim() -> Bool {
    guard !isHeld else { return false }
    isHeld = true
    return true
  }

  /// Lets the role go; returns the waiters to resume (after unlocking).
  mutating func release() -> [CheckedContinuation<Bool, Never>] {
    isHeld = false
    defer { waiters = [] }
    return waiters
  }
}
