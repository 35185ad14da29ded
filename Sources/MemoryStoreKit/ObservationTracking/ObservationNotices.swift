import Observation
import Synchronization

/// The changes one write made, for the store's read observers: logged under the write lock
/// while reads are tracked, handed over after unlocking.
///
/// A class, so that a write's follow-up holds one reference: what every write returns stays
/// small. Made only by writes of a store that tracks reads.
///
/// `@unchecked Sendable`, safe: it is mutated only under the store's write lock, then handed
/// to the one thread that delivers it, which only reads it.
@usableFromInline
final class _ObservationNotices: @unchecked Sendable {
  /// One key changed: its hash, and whether the change added or removed it.
  @usableFromInline typealias Change = (hash: Int, changesPresence: Bool)

  /// The first key changed (a write of one key allocates no array).
  @usableFromInline var first: Change?
  /// The keys changed after it.
  @usableFromInline var more: [Change] = []
  /// Whether the write emptied the store.
  @usableFromInline var cleared = false

  @usableFromInline init() {}

  @inlinable var isEmpty: Bool { first == nil && !cleared }

  @inlinable
  func append(_ change: Change) {
    if first == nil { first = change } else { more.append(change) }
  }

  func forEachChange(_ body: (Change) -> Void) {
    if let first { body(first) }
    for change in more { body(change) }
  }
}
