/// How severe a memory-pressure event is, as in `DispatchSource.MemoryPressureEvent`.
public enum MemoryPressureLevel: Hashable, Sendable, CustomStringConvertible {
  /// Memory is getting scarce: free what is cheap to recreate.
  case warning
  /// Memory is critically low: free everything the policy allows.
  case critical

  public var description: String {
    switch self {
    case .warning: "warning"
    case .critical: "critical"
    }
  }
}
