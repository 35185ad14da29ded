import Observation
import Synchronization

/// A store's ``_ReadObservers``, made when tracking is first turned on and kept until the
/// store goes: reached without reference counting (a read that tracks pays no retain).
@usableFromInline
struct _ReadObserversSlot: ~Copyable, Sendable {
  /// Set once, by ``make()``; released by `deinit`.
  private let observers = Atomic<Unmanaged<_ReadObservers>?>(nil)

  @usableFromInline init() {}

  deinit { observers.load(ordering: .acquiring)?.release() }

  /// The observers, made if they were not.
  func make() {
    guard observers.load(ordering: .acquiring) == nil else { return }
    let made = Unmanaged.passRetained(_ReadObservers())
    let (stored, _) = observers.compareExchange(
      expected: nil, desired: made, ordering: .acquiringAndReleasing)
    if !stored { made.release() }
  }

  /// The observers, if they were made.
  var current: _ReadObservers? { observers.load(ordering: .acquiring)?.takeUnretainedValue() }

  /// Runs `body` with the observers, if they were made; the slot keeps them alive meanwhile.
  @usableFromInline
  func with<R>(_ body: (_ReadObservers) -> R) -> R? {
    observers.load(ordering: .acquiring)?._withUnsafeGuaranteedRef(body)
  }
}
