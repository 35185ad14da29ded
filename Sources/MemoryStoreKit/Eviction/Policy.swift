/// The bookkeeping of a store with an eviction decider, limits or expiry, guarded by the
/// store's write lock: its components, each behind a narrow interface with its own
/// `_checkInvariants`, and the settings that are neither. What it knows of each entry lives
/// in the entry's node (see ``_EntryMetadata``); every write of a store with a policy updates
/// it in the same critical section.
///
/// - The eviction order: which entry a limit evicts next. ``_EvictionOrder``, the adaptive
///   order (`Eviction/EvictionOrder.swift`), held as `order`; or the order an
///   ``EvictionPolicy`` chose instead, held as `chosenOrder` behind ``_EvictionOrdering``
///   (`Eviction/EvictionOrdering.swift`). The policy reaches either through its own methods
///   below, so nothing else knows which is in use.
/// - ``_Expiry``: deadlines, what is due, when the timer fires (`Eviction/Expiry.swift`).
/// - ``_Limits``: the limits and the total cost (`Eviction/Limits.swift`).
/// - `evictions`: the statistics of what the store removed on its own.
@usableFromInline
struct _Policy: Sendable {
  @usableFromInline var order = _EvictionOrder()
  /// The order in use in place of ``order``, if ``evictionPolicy`` is not the adaptive one.
  @usableFromInline var chosenOrder: (any _EvictionOrdering)?
  /// The policy the store's user chose.
  @usableFromInline var evictionPolicy = EvictionPolicy.adaptive
  @usableFromInline var expiry = _Expiry()
  @usableFromInline var limits = _Limits()
  @usableFromInline var evictions = StoreStatistics.Evictions()
  /// Purges in progress: the ring is not packed while one walks it.
  @usableFromInline var purgesRunning = 0
  @usableFromInline var memoryPressure = MemoryPressurePolicy()
  @usableFromInline var evictionInterval: Duration = .zero
  /// When entries started keeping their write time (the first decider was set), in policy
  /// nanoseconds: the write time a decider is given for an entry written before.
  @usableFromInline var writeTimesSince: Int64 = 0
  /// Bumped when the interval changes, so a superseded timer does nothing.
  @usableFromInline var intervalGeneration: UInt64 = 0

  @usableFromInline init() {}

  /// Counts `new`, which the write lock holder just staged in place of `old` (`nil`, a
  /// tombstone, or the entry's previous node, at the same ring position), in a store now of
  /// `count` entries; a new entry is placed in the eviction order.
  ///
  /// - Complexity: O(1), unless a deadline is added, removed or brought forward (O(log *n*)).
  @inlinable @inline(__always)
  mutating func track<Key, Value>(
    _ new: _Node<Key, Value>, replacing old: _Node<Key, Value>?, count: Int
  ) {
    if let old, !old.isTombstone, old.hasMetadata {
      let change = new.cost - old.cost
      limits.totalCost += change
      if chosenOrder != nil {
        chosenOrder!.recost(slot: new.slot, by: change)
      } else {
        order.recost(slot: new.slot, by: change)
      }
      expiry.track(slot: new.slot, deadline: new.deadline, replacing: old.deadline)
    } else {
      limits.totalCost += new.cost
      if chosenOrder != nil {
        chosenOrder!.admit(new, count: count, limits: limits)
      } else {
        order.admit(new, count: count, limits: limits)
      }
      expiry.track(slot: new.slot, deadline: new.deadline, replacing: nil)
    }
  }

  /// Uncounts an entry the write lock holder just removed.
  @inlinable @inline(__always)
  mutating func untrack<Key, Value>(_ node: _Node<Key, Value>) {
    limits.totalCost -= node.cost
    if chosenOrder != nil { chosenOrder!.untrack(node) } else { order.untrack(node) }
    expiry.untrack(slot: node.slot, deadline: node.deadline)
  }

  /// Forgets every entry (the store was emptied).
  @inlinable
  mutating func removeAll() {
    if chosenOrder != nil { chosenOrder!.removeAll() } else { order.removeAll() }
    limits.totalCost = 0
    expiry.removeAll()
  }

  /// Whether the table's ring has holes enough to fill some (see ``fillRingHoles(_:)``). O(1).
  @inlinable @inline(__always)
  func hasRingHolesToFill<Key, Value>(_ table: _ConcurrentTable<Key, Value>) -> Bool {
    purgesRunning == 0 && table.freeRingPositionCount > Swift.max(16, table.ringCount / 16)
  }

  /// Whether a write's end has anything to do: evicting to `fraction` of the limits (an
  /// entry whose cost alone exceeds the cost limit takes the total over it), the hill
  /// climber's look at the lookup counts, or ring holes to fill. O(1): a write within its
  /// limits does not call out of line to learn there is nothing to do.
  @inlinable @inline(__always)
  func hasWorkAtEnd<Key, Value>(_ table: _ConcurrentTable<Key, Value>, fraction: Double) -> Bool {
    if limits.isLimited
      && (limits.isOver(count: table.stagedCount, fraction: fraction) != nil
        || isAdaptationDue)
    {
      return true
    }
    return hasRingHolesToFill(table)
  }

  /// Fills up to four holes of the table's ring with its last entries once there are more
  /// than a sixteenth of the ring (and 16), unless a purge walks it (positions must then stay
  /// put); keeps the eviction order's lists and the expiry heap's positions in step. O(1).
  @inlinable @inline(__always)
  mutating func fillRingHoles<Key, Value>(_ table: _ConcurrentTable<Key, Value>) {
    // A few holes are left for the next insertions to take (an evicting write leaves one for
    // the next): filling them would move an entry per eviction for nothing.
    guard hasRingHolesToFill(table) else { return }
    for _ in 0..<4 {
      guard let (from, to) = table.fillRingHole() else { return }
      if chosenOrder != nil {
        chosenOrder!.moveEntry(from: from, to: to)
      } else {
        order.moveEntry(from: from, to: to)
      }
      guard table.ringNode(at: to).unsafelyUnwrapped.deadline != .max else { continue }
      expiry.moveEntry(from: from, to: to)
    }
  }

  /// The first of the invariants of the policy and its components that does not hold in
  /// `table`, or `nil`. Write lock held.
  func _checkInvariants<Key, Value>(_ table: _ConcurrentTable<Key, Value>) -> String? {
    var entries = 0
    for position in 0..<table.ringCount where table.ringNode(at: position) != nil {
      entries += 1
    }
    // Entries written before the policy was active may have no metadata, and no place.
    var withoutMetadata = 0
    table._forEachNode(at: table.publishedVersion) { node in
      if !node.hasMetadata { withoutMetadata += 1 }
    }
    if entries != table.stagedCount - withoutMetadata {
      return
        "the store has \(table.stagedCount - withoutMetadata) entries with metadata, the ring \(entries)"
    }
    return limits._checkInvariants(table) ?? expiry._checkInvariants(table)
      ?? (chosenOrder?._checkInvariants(table) ?? order._checkInvariants(table))
  }
}

// MARK: - The order in use

extension _Policy {
  /// Whether entries are kept in the order: from the first limit on.
  @inlinable
  var isOrdered: Bool { chosenOrder?.isOrdered ?? order.isOrdered }

  /// See ``_EvictionOrdering/orderAllEntries(of:)``.
  @inlinable
  mutating func orderAllEntries<Key, Value>(of table: _ConcurrentTable<Key, Value>) {
    if chosenOrder != nil {
      chosenOrder!.orderAllEntries(of: table)
    } else {
      order.orderAllEntries(of: table)
    }
  }

  /// See ``_EvictionOrdering/weighCosts(_:of:)``.
  @inlinable
  mutating func weighCosts<Key, Value>(_ weighs: Bool, of table: _ConcurrentTable<Key, Value>) {
    if chosenOrder != nil {
      chosenOrder!.weighCosts(weighs, of: table)
    } else {
      order.weighCosts(weighs, of: table)
    }
  }

  /// See ``_EvictionOrdering/prepareForEvictions(_:)``.
  @inlinable @inline(__always)
  mutating func prepareForEvictions(_ entries: Int) {
    if chosenOrder != nil {
      chosenOrder!.prepareForEvictions(entries)
    } else {
      order.prepareForEvictions(entries)
    }
  }

  /// See ``_EvictionOrdering/nextVictim(in:protecting:costLimit:)``.
  @inlinable @inline(__always)
  mutating func nextVictim<Key, Value>(
    in table: _ConcurrentTable<Key, Value>, protecting protectedSlot: Int, costLimit: Int
  ) -> _Node<Key, Value>? {
    if chosenOrder != nil {
      return chosenOrder!.nextVictim(in: table, protecting: protectedSlot, costLimit: costLimit)
    }
    return order.nextVictim(in: table, protecting: protectedSlot, costLimit: costLimit)
  }

  /// See ``_EvictionOrdering/endEvictions()``.
  @inlinable @inline(__always)
  mutating func endEvictions() {
    if chosenOrder != nil { chosenOrder!.endEvictions() } else { order.endEvictions() }
  }

  /// See ``_EvictionOrdering/isAdaptationDue``.
  @inlinable
  var isAdaptationDue: Bool { chosenOrder?.isAdaptationDue ?? order.isAdaptationDue }

  /// See ``_EvictionOrdering/adapt(hits:misses:cacheful:)``.
  @inlinable
  mutating func adapt(hits: Int, misses: Int, cacheful: Int) {
    if chosenOrder != nil {
      chosenOrder!.adapt(hits: hits, misses: misses, cacheful: cacheful)
    } else {
      order.adapt(hits: hits, misses: misses, cacheful: cacheful)
    }
  }

  /// See ``_EvictionOrdering/releaseMemory()``.
  @inlinable
  mutating func releaseEvictionMemory() -> (any Sendable)? {
    chosenOrder != nil ? chosenOrder!.releaseMemory() : order.releaseMemory()
  }
}
