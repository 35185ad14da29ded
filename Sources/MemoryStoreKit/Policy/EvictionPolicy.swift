/// Which entry a ``MemoryStore/countLimit`` or ``MemoryStore/costLimit`` evicts first: the
/// store's eviction order (see <doc:Eviction>).
///
/// ```swift
/// let recent = MemoryStore<String, Quote>(name: "recent")
/// recent.evictionPolicy = .lru      // recency alone: the workload rereads what it just read
/// recent.countLimit = 10_000
/// ```
///
/// The default, ``adaptive``, had the best mean hit rate on the real and synthetic traces the
/// benchmark replays; ``lru`` wins on a few where recency is all that predicts the next
/// read, and costs less per eviction. Measure with your own workload before leaving the
/// default.
public enum EvictionPolicy: Sendable, Hashable, CaseIterable {
  /// W-TinyLFU with an adaptive window: a new key stays only if its key was used more often
  /// lately than the entry it would push out; the share of the store kept for new keys moves
  /// toward what raises the hit rate. Resists scans and loops over more keys than the store
  /// holds. The default.
  case adaptive
  /// Least recently used, as CLOCK approximates it: the entry evicted is the one admitted
  /// longest ago that was neither read nor rewritten since the order last looked at it (an
  /// entry used gets a second chance, at the newest end). Every new key is admitted.
  case lru

  /// The order that carries out this policy, or `nil` for the adaptive order, which the
  /// store's policy holds itself. The one place that selects an order.
  func _makeOrder() -> (any _EvictionOrdering)? {
    switch self {
    case .adaptive: nil
    case .lru: _LRUOrder()
    }
  }
}

extension MemoryStore {
  /// Which entry a limit evicts first; ``EvictionPolicy/adaptive`` by default.
  ///
  /// Set it before the first limit: changing it on a store that has a limit puts every entry
  /// in the new order, O(*n*) once, oldest first by where the entries sit in the store, and
  /// what the old order learned (how often keys were used) is dropped. Thread-safe.
  public var evictionPolicy: EvictionPolicy {
    get { _writer.withLock { $0.policy.evictionPolicy } }
    set {
      _transact { write in
        guard write.policy.evictionPolicy != newValue else { return }
        let wasOrdered = write.policy.isOrdered
        write.policy.choose(newValue)
        if wasOrdered {
          write.policy.orderAllEntries(of: _table, write.held)
          write.policy.weighCosts(write.policy.limits.costLimit > 0, of: _table, write.held)
        }
      }
    }
  }
}
