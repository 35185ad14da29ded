/// The limits and what counts toward them: a store's count limit, its cost limit and its
/// total cost. Guarded by the write lock, as part of ``_Policy``.
@usableFromInline
struct _Limits: Sendable {
  /// 0: no limit.
  @usableFromInline var countLimit = 0
  /// 0: no limit.
  @usableFromInline var costLimit = 0
  /// The sum of the entries' costs.
  @usableFromInline var totalCost = 0

  @usableFromInline init() {}

  /// Whether the store has a limit.
  @inlinable
  var isLimited: Bool { countLimit | costLimit != 0 }

  /// A cache-ful, in entries, for a store of `count` entries: what the eviction order's
  /// sketch is sized for and its hill climber's period measured in.
  @inlinable @inline(__always)
  func cacheful(count: Int) -> Int { Swift.max(countLimit, count) }

  /// Whether a store of `count` entries is above `fraction` of its limits.
  @inlinable
  func isOver(count: Int, fraction: Double = 1) -> EvictionReason? {
    if countLimit > 0 && Double(count) > Double(countLimit) * fraction {
      return .countLimit
    }
    if costLimit > 0 && Double(totalCost) > Double(costLimit) * fraction { return .costLimit }
    return nil
  }

  /// The first of its invariants that does not hold in `table`, or `nil`: the total cost is
  /// the sum of the entries' costs. Write lock held.
  func _checkInvariants<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> String? {
    var cost = 0
    for position in 0..<table.ringCount(held) {
      if let node = table.ringNode(at: position, held) { cost += node.cost }
    }
    return cost == totalCost ? nil : "total cost \(totalCost), entries sum to \(cost)"
  }
}
