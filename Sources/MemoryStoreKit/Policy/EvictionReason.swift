/// Why the store removed an entry on its own.
///
/// Used by ``StoreStatistics/evictions`` to count evictions per cause, and by
/// ``ChangeReason/evicted(_:)`` and ``ChangeReason/evictionReason`` in change batches.
public enum EvictionReason: Hashable, Sendable, CaseIterable, CustomStringConvertible {
  /// The eviction decider returned `true` for the entry.
  case decider
  /// The store held more than ``MemoryStore/countLimit`` entries.
  case countLimit
  /// The entries' total cost exceeded ``MemoryStore/costLimit``.
  case costLimit
  /// The entry's time to live ran out.
  case expired
  /// ``MemoryStore/handleMemoryPressure(_:)`` trimmed the store.
  case memoryPressure

  public var description: String {
    switch self {
    case .decider: "decider"
    case .countLimit: "count limit"
    case .costLimit: "cost limit"
    case .expired: "expired"
    case .memoryPressure: "memory pressure"
    }
  }
}
