/// The bookkeeping of a store with an eviction decider, limits or expiry, guarded by the
/// store's write lock: its components, each behind a narrow interface with its own
/// `_checkInvariants`, and the settings that are neither. What it knows of each entry lives
/// in the entry's node (see ``_EntryMetadata``); every write of a store with a policy updates
/// it in the same critical section.
///
/// - The eviction order: which entry a limit evicts next. ``_EvictionOrder``, the adaptive
///   order (`Policy/EvictionOrder.swift`), held as `order`; or the order an
///   ``EvictionPolicy`` chose instead, held as `chosenOrder` behind ``_EvictionOrdering``
///   (`Policy/EvictionOrdering.swift`). The policy reaches either through its own methods
///   below, so nothing else knows which is in use.
/// - ``_Expiry``: deadlines, what is due, when the timer fires (`Time/Expiry.swift`).
/// - ``_Limits``: the limits and the total cost (`Policy/Limits.swift`).
/// - `evictions`: the statistics of what the store removed on its own.
@usableFromInline
struct _Policy: Sendable {
  @usableFromInline var order = _EvictionOrder()
  /// The order in use in place of ``order``, if ``evictionPolicy`` is not the adaptive one:
  /// a reference the policy owns (retained by ``choose(_:)``, released by it and by
  /// ``releaseChosenOrder()``), held unmanaged so that the policy stays a plain value, which
  /// the write path reaches without any reference counting.
  @usableFromInline var chosenOrderBox: Unmanaged<_ChosenOrder>?
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
      if hasChosenOrder {
        chosenRecost(slot: new.slot, by: change)
      } else {
        order.recost(slot: new.slot, by: change)
      }
      expiry.track(slot: new.slot, deadline: new.deadline, replacing: old.deadline)
    } else {
      limits.totalCost += new.cost
      if hasChosenOrder {
        chosenAdmit(new, count: count)
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
    if hasChosenOrder { chosenUntrack(node) } else { order.untrack(node) }
    expiry.untrack(slot: node.slot, deadline: node.deadline)
  }

  /// Forgets every entry (the store was emptied).
  @inlinable
  mutating func removeAll() {
    if hasChosenOrder { chosenOrder.pointee.removeAll() } else { order.removeAll() }
    limits.totalCost = 0
    expiry.removeAll()
  }

  /// Whether the table's ring has holes enough to fill some (see ``fillRingHoles(_:_:)``). O(1).
  @inlinable @inline(__always)
  func hasRingHolesToFill<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> Bool {
    purgesRunning == 0
      && table.freeRingPositionCount(held) > Swift.max(16, table.ringCount(held) / 16)
  }

  /// Whether a write's end has anything to do: evicting to `fraction` of the limits (an
  /// entry whose cost alone exceeds the cost limit takes the total over it), the hill
  /// climber's look at the lookup counts, or ring holes to fill. O(1): a write within its
  /// limits does not call out of line to learn there is nothing to do.
  @inlinable @inline(__always)
  func hasWorkAtEnd<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld, fraction: Double
  ) -> Bool {
    if limits.isLimited
      && (limits.isOver(count: table.stagedCount(held), fraction: fraction) != nil
        || isAdaptationDue)
    {
      return true
    }
    return hasRingHolesToFill(table, held)
  }

  /// Fills up to four holes of the table's ring with its last entries once there are more
  /// than a sixteenth of the ring (and 16), unless a purge walks it (positions must then stay
  /// put); keeps the eviction order's lists and the expiry heap's positions in step. O(1).
  @inlinable @inline(__always)
  mutating func fillRingHoles<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {
    // A few holes are left for the next insertions to take (an evicting write leaves one for
    // the next): filling them would move an entry per eviction for nothing.
    guard hasRingHolesToFill(table, held) else { return }
    for _ in 0..<4 {
      guard let (from, to) = table.fillRingHole(held) else { return }
      if hasChosenOrder {
        chosenOrder.pointee.moveEntry(from: from, to: to)
      } else {
        order.moveEntry(from: from, to: to)
      }
      guard table.ringNode(at: to, held).unsafelyUnwrapped.deadline != .max else { continue }
      expiry.moveEntry(from: from, to: to)
    }
  }

  /// The first of the invariants of the policy and its components that does not hold in
  /// `table`, or `nil`. Write lock held.
  func _checkInvariants<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> String? {
    var entries = 0
    for position in 0..<table.ringCount(held) where table.ringNode(at: position, held) != nil {
      entries += 1
    }
    // Entries written before the policy was active may have no metadata, and no place.
    let withoutMetadata = table.entriesWithoutMetadata(held)
    if entries != table.stagedCount(held) - withoutMetadata {
      return
        "the store has \(table.stagedCount(held) - withoutMetadata) entries with metadata, the ring \(entries)"
    }
    return limits._checkInvariants(table, held) ?? expiry._checkInvariants(table, held)
      ?? (hasChosenOrder
        ? chosenOrder.pointee._checkInvariants(table, held) : order._checkInvariants(table, held))
  }
}

// MARK: - The order in use

/// The box of an order chosen in place of the adaptive one.
@usableFromInline
final class _ChosenOrder: @unchecked Sendable {
  // Safe: reached only through the policy, under the store's write lock.
  @usableFromInline var pointee: any _EvictionOrdering

  init(_ order: any _EvictionOrdering) { pointee = order }
}

extension _Policy {
  // The calls of a chosen order that a write makes, out of line: inlined, they would make the
  // write path too large for the compiler to inline the rest of it.

  @inlinable @inline(never)
  mutating func chosenRecost(slot: Int, by change: Int) {
    chosenOrder.pointee.recost(slot: slot, by: change)
  }

  @inlinable @inline(never)
  mutating func chosenAdmit<Key, Value>(_ node: _Node<Key, Value>, count: Int) {
    chosenOrder.pointee.admit(node, count: count, limits: limits)
  }

  @inlinable @inline(never)
  mutating func chosenUntrack<Key, Value>(_ node: _Node<Key, Value>) {
    chosenOrder.pointee.untrack(node)
  }

  /// Whether an order is chosen in place of ``order``: what every call of the order tests (a
  /// pointer compared with nil).
  @inlinable
  var hasChosenOrder: Bool { chosenOrderBox != nil }

  /// The chosen order's box; only while ``hasChosenOrder``.
  @inlinable
  var chosenOrder: _ChosenOrder { chosenOrderBox.unsafelyUnwrapped.takeUnretainedValue() }

  /// Puts `policy` in use, with a new, empty order.
  mutating func choose(_ policy: EvictionPolicy) {
    releaseChosenOrder()
    evictionPolicy = policy
    order = _EvictionOrder()
    if let made = policy._makeOrder() {
      chosenOrderBox = Unmanaged.passRetained(_ChosenOrder(made))
    }
  }

  /// Releases the chosen order, if any: when another is chosen, and when the store goes.
  mutating func releaseChosenOrder() {
    chosenOrderBox?.release()
    chosenOrderBox = nil
  }

  /// Whether entries are kept in the order: from the first limit on.
  @inlinable
  var isOrdered: Bool { hasChosenOrder ? chosenOrder.pointee.isOrdered : order.isOrdered }

  /// See ``_EvictionOrdering/orderAllEntries(of:_:)``.
  @inlinable
  mutating func orderAllEntries<Key, Value>(
    of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {
    if hasChosenOrder {
      chosenOrder.pointee.orderAllEntries(of: table, held)
    } else {
      order.orderAllEntries(of: table, held)
    }
  }

  /// See ``_EvictionOrdering/weighCosts(_:of:_:)``.
  @inlinable
  mutating func weighCosts<Key, Value>(
    _ weighs: Bool, of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {
    if hasChosenOrder {
      chosenOrder.pointee.weighCosts(weighs, of: table, held)
    } else {
      order.weighCosts(weighs, of: table, held)
    }
  }

  /// See ``_EvictionOrdering/prepareForEvictions(_:)``.
  @inlinable @inline(__always)
  mutating func prepareForEvictions(_ entries: Int) {
    if hasChosenOrder {
      chosenOrder.pointee.prepareForEvictions(entries)
    } else {
      order.prepareForEvictions(entries)
    }
  }

  /// See ``_EvictionOrdering/nextVictim(in:_:protecting:costLimit:)``.
  @inlinable @inline(__always)
  mutating func nextVictim<Key, Value>(
    in table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld,
    protecting protectedSlot: Int, costLimit: Int
  ) -> _Node<Key, Value>? {
    if hasChosenOrder {
      return chosenOrder.pointee.nextVictim(
        in: table, held, protecting: protectedSlot, costLimit: costLimit)
    }
    return order.nextVictim(in: table, held, protecting: protectedSlot, costLimit: costLimit)
  }

  /// See ``_EvictionOrdering/endEvictions()``.
  @inlinable @inline(__always)
  mutating func endEvictions() {
    if hasChosenOrder { chosenOrder.pointee.endEvictions() } else { order.endEvictions() }
  }

  /// Whether the adaptive order's hill climber should look at the lookup counts (a chosen
  /// order does not adapt). Reads only fields of the policy, so that the check every write
  /// makes calls nothing opaque.
  @inlinable
  var isAdaptationDue: Bool { !hasChosenOrder && order.isAdaptationDue }

  /// Lets the adaptive order's hill climber look at the lookup counts.
  @inlinable
  mutating func adapt(hits: Int, misses: Int, cacheful: Int) {
    order.adapt(hits: hits, misses: misses, cacheful: cacheful)
  }

  /// See ``_EvictionOrdering/releaseMemory()``.
  @inlinable
  mutating func releaseEvictionMemory() -> (any Sendable)? {
    hasChosenOrder ? chosenOrder.pointee.releaseMemory() : order.releaseMemory()
  }
}
