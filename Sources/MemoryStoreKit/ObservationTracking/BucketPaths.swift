import Observation
import Synchronization

/// The key path of every bucket of ``_ObservedSubject``, made on first use and kept for the
/// life of the process: at most ``_ReadObservers/pathCount`` of them, shared by every store.
///
/// `@unchecked Sendable`, safe: `slots` is written only by `init`, and the memory it points
/// to only through its atomics; a key path stored there is immutable and never released.
final class _BucketPaths: @unchecked Sendable {
  static let shared = _BucketPaths()

  /// `nil` until made; never replaced once stored.
  private let slots: UnsafeMutablePointer<Atomic<Unmanaged<KeyPath<_ObservedSubject, Int>>?>>

  private init() {
    slots = .allocate(capacity: _ReadObservers.pathCount)
    for index in 0..<_ReadObservers.pathCount { (slots + index).initialize(to: Atomic(nil)) }
  }

  /// The key path of bucket `index`, made if it is the first use. The reference is kept by
  /// the table, for ever.
  func path(_ index: Int) -> Unmanaged<KeyPath<_ObservedSubject, Int>> {
    if let path = slots[index].load(ordering: .acquiring) { return path }
    let path: KeyPath<_ObservedSubject, Int> = \_ObservedSubject.[bucket: index]
    let made = Unmanaged.passRetained(path)
    let (stored, current) = slots[index].compareExchange(
      expected: nil, desired: made, ordering: .acquiringAndReleasing)
    if stored { return made }
    made.release()
    return current!
  }
}
