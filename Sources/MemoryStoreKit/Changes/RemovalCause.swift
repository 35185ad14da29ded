import Dispatch
import Synchronization

/// Why a value left a store.
public enum RemovalCause: Hashable, Sendable, CustomStringConvertible {
  /// A write stored another value for the key: the subscript, ``MemoryStore/updateValue(_:forKey:)``,
  /// ``MemoryStore/setValue(_:forKey:cost:timeToLive:)``, ``MemoryStore/addEntries(_:)``,
  /// ``MemoryStore/update(forKey:_:)``, `merge(_:uniquingKeysWith:)` or a load.
  case replaced
  /// A write removed the key: assigning `nil`, ``MemoryStore/removeValue(forKey:)``,
  /// ``MemoryStore/removeValues(forKeys:)``, ``MemoryStore/removeAll()``,
  /// ``MemoryStore/removeAll(where:)`` or an update to `nil`.
  case removed
  /// The store removed the entry on its own: a limit, the decider, memory pressure, or its
  /// time to live (``EvictionReason/expired``), as ``StoreStatistics/evictions`` counts them.
  case evicted(EvictionReason)
  /// Another instance changed the key, or the link to the other instances was lost:
  /// ``MemoryStore/invalidateValues(forKeys:except:)`` or ``MemoryStore/invalidateAll(except:)``
  /// dropped it.
  case invalidated

  /// Whether the store removed the entry on its own, rather than a write.
  public var isEviction: Bool {
    if case .evicted = self { return true }
    return false
  }

  public var description: String {
    switch self {
    case .replaced: "replaced"
    case .removed: "removed"
    case .evicted(let reason): "evicted (\(reason))"
    case .invalidated: "invalidated"
    }
  }

  /// The cause of a removal logged with `reason`.
  @usableFromInline
  static func removal(_ reason: ChangeReason) -> RemovalCause {
    if reason == .invalidated { return .invalidated }
    return reason.evictionReason.map(RemovalCause.evicted) ?? .removed
  }
}
