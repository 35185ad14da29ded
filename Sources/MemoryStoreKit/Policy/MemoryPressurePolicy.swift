/// What ``MemoryStore/handleMemoryPressure(_:)`` frees.
///
/// ```swift
/// store.memoryPressurePolicy = MemoryPressurePolicy(warningFraction: 0.75)
/// ```
public struct MemoryPressurePolicy: Hashable, Sendable {
  /// On a warning, a store with a ``MemoryStore/countLimit`` or ``MemoryStore/costLimit`` is
  /// trimmed, least recently used first, to this fraction of each limit. Default 0.5.
  public var warningFraction: Double
  /// On a critical event, the same with this fraction. Default 0, which empties a limited
  /// store.
  public var criticalFraction: Double
  /// Whether a critical event also empties a store without limits. Default `false`: a store
  /// without limits holds state, not a cache, unless this says otherwise.
  public var removesAllOnCritical: Bool

  /// Creates a policy; fractions are clamped to 0...1.
  public init(
    warningFraction: Double = 0.5, criticalFraction: Double = 0, removesAllOnCritical: Bool = false
  ) {
    self.warningFraction = min(max(warningFraction, 0), 1)
    self.criticalFraction = min(max(criticalFraction, 0), 1)
    self.removesAllOnCritical = removesAllOnCritical
  }
}
