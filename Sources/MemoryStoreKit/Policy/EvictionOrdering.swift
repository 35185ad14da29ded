/// What an eviction order does: the seam between the store's policy (``_Policy``) and the
/// order that decides which entry a count or cost limit evicts next.
///
/// The policy calls an order only under the write lock, and only once the store has a limit
/// (``orderAllEntries(of:_:)``, when the first limit is set, starts it): it hands the order each
/// entry admitted and removed, by the entry's ring position (``_Node/slot``), asks it for
/// victims, and tells it when the table moves an entry. Reads never call it: a read records
/// its use in the entry's recency word (``_Recency``) without a lock, and an order reads and
/// clears that word when it looks at the entry.
///
/// **Adding an order** takes a type conforming to this protocol, in a file of its own, and a
/// case of ``EvictionPolicy`` that makes it, in ``EvictionPolicy/_makeOrder()``: nothing else
/// changes. The adaptive order (``_EvictionOrder``), the default, is also held without this
/// protocol, so that its calls are specialised and inlined, and only it adapts to the store's
/// hit ratio (its hill climber); any other order is called through this protocol.
@usableFromInline
protocol _EvictionOrdering: Sendable {
  /// Whether entries are kept in the order: from the first limit on.
  var isOrdered: Bool { get }
  /// Puts every entry of `table` (each has a ring position) in the order, and keeps the order
  /// from now on. O(*n*), once.
  mutating func orderAllEntries<Key, Value>(
    of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld)
  /// Starts or stops weighing entries by cost (the store gained or lost its cost limit).
  mutating func weighCosts<Key, Value>(
    _ weighs: Bool, of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld)
  /// Places `node`, an entry just inserted, in the order (the store now holds `count`).
  mutating func admit<Key, Value>(_ node: _Node<Key, Value>, count: Int, limits: _Limits)
  /// Takes `node`, an entry just removed, out of the order.
  mutating func untrack<Key, Value>(_ node: _Node<Key, Value>)
  /// Records that the entry at ring position `slot` now costs `change` more.
  mutating func recost(slot: Int, by change: Int)
  /// Records that the entry at ring position `from` moved to `to`.
  mutating func moveEntry(from: Int, to: Int)
  /// Forgets every entry (the store was emptied).
  mutating func removeAll()
  /// Makes what evictions need ready for a store of `entries` entries: at each eviction for a
  /// limit.
  mutating func prepareForEvictions(_ entries: Int)
  /// The next entry to evict, never the entry at ring position `protecting` unless nothing
  /// else is left; with a `costLimit` above 0 (the cost limit is what evicts), an entry that
  /// has a cost. The caller removes it. O(1) per call (bounded work).
  mutating func nextVictim<Key, Value>(
    in table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld, protecting: Int,
    costLimit: Int
  ) -> _Node<Key, Value>?
  /// Ends a write's evictions.
  mutating func endEvictions()
  /// Drops what the order can make again (under memory pressure), returning it so that the
  /// caller frees it after releasing the write lock.
  mutating func releaseMemory() -> (any Sendable)?
  /// The first of the order's invariants that does not hold in `table`, or `nil`.
  func _checkInvariants<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> String?
}

extension _EvictionOrder: _EvictionOrdering {
  @usableFromInline
  mutating func releaseMemory() -> (any Sendable)? { releaseEvictionMemory() }
}
