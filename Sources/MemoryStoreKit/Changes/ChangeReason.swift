/// Why a key appears in a ``ChangeBatch``.
///
/// Every change made through the store's writing API is a ``write``; features that change the
/// store on their own (eviction, expiry, loading a snapshot) report their own reasons.
public struct ChangeReason: Hashable, Sendable, CustomStringConvertible {
  @usableFromInline let rawValue: UInt8

  @inlinable init(rawValue: UInt8) { self.rawValue = rawValue }

  /// The key was written (set, replaced, removed or cleared) by a call to the store.
  @inlinable public static var write: ChangeReason { ChangeReason(rawValue: 0) }

  /// The key was set by ``PersistenceManager/load()`` from a snapshot file.
  @inlinable public static var loaded: ChangeReason { ChangeReason(rawValue: 1) }

  /// The key's time to live ran out (see ``MemoryStore/defaultTimeToLive``).
  @inlinable public static var expired: ChangeReason { ChangeReason(rawValue: 2) }

  /// The eviction decider chose the key, in ``MemoryStore/purgeEvictableItems(trigger:)`` or a
  /// periodic or memory-pressure purge.
  @inlinable public static var evictedByDecider: ChangeReason { ChangeReason(rawValue: 3) }

  /// The key was evicted to keep the store within ``MemoryStore/countLimit``.
  @inlinable public static var evictedByCountLimit: ChangeReason { ChangeReason(rawValue: 4) }

  /// The key was evicted to keep the store within ``MemoryStore/costLimit``.
  @inlinable public static var evictedByCostLimit: ChangeReason { ChangeReason(rawValue: 5) }

  /// The key was evicted by ``MemoryStore/handleMemoryPressure(_:)`` trimming the store.
  @inlinable public static var evictedByMemoryPressure: ChangeReason { ChangeReason(rawValue: 6) }

  /// The key was dropped by ``MemoryStore/invalidateValues(forKeys:except:)`` or
  /// ``MemoryStore/invalidateAll(except:)``: another instance changed it, or the link that
  /// keeps this store coherent with the others was lost. Never reported to a
  /// ``LocalChangeFeed``, so an invalidation does not echo back to the instance that sent it.
  @inlinable public static var invalidated: ChangeReason { ChangeReason(rawValue: 7) }

  /// The change reason that reports an eviction for `reason`.
  @inlinable
  public static func evicted(_ reason: EvictionReason) -> ChangeReason {
    switch reason {
    case .decider: .evictedByDecider
    case .countLimit: .evictedByCountLimit
    case .costLimit: .evictedByCostLimit
    case .expired: .expired
    case .memoryPressure: .evictedByMemoryPressure
    }
  }

  /// Why the store removed the key on its own, or `nil` for ``write``, ``loaded`` and
  /// ``invalidated``.
  @inlinable
  public var evictionReason: EvictionReason? {
    switch rawValue {
    case 2: .expired
    case 3: .decider
    case 4: .countLimit
    case 5: .costLimit
    case 6: .memoryPressure
    default: nil
    }
  }

  public var description: String {
    switch rawValue {
    case 0: "write"
    case 1: "loaded"
    case 2: "expired"
    case 3: "evicted by decider"
    case 4: "evicted by count limit"
    case 5: "evicted by cost limit"
    case 6: "evicted by memory pressure"
    case 7: "invalidated"
    default: "reason(\(rawValue))"
    }
  }
}
