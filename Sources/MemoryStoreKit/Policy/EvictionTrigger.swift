/// What started a run of the eviction decider.
public enum EvictionTrigger: Sendable, CustomStringConvertible {
  /// A call to ``MemoryStore/purgeEvictableItems(trigger:)``, with the caller's payload,
  /// passed to the decider unchanged.
  case manual((any Sendable)?)
  /// The periodic purge (``MemoryStore/evictionInterval``).
  case interval
  /// ``MemoryStore/handleMemoryPressure(_:)``, with its level.
  case memoryPressure(MemoryPressureLevel)

  /// The payload of a ``manual(_:)`` trigger; `nil` for the others.
  public var userInfo: (any Sendable)? {
    if case .manual(let userInfo) = self { return userInfo }
    return nil
  }

  public var description: String {
    switch self {
    case .manual(let userInfo): userInfo.map { "manual(\($0))" } ?? "manual"
    case .interval: "interval"
    case .memoryPressure(let level): "memory pressure (\(level))"
    }
  }
}
