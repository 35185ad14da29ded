import Synchronization

@_spi(Testing)
extension MemoryStore {
  /// Runs `body` while the calling thread stays inside a read section opened before it, exactly
  /// as a reader preempted in the middle of a lookup would: writes made meanwhile go on, and
  /// the values they replace stay allocated until the section is left.
  ///
  /// For tests of writes racing a reader that does not leave. Not part of the supported API.
  public func _withReaderParked<R>(_ body: () throws -> R) rethrows -> R {
    let (_, token) = _table.enterReadSection()
    defer {
      _table.leaveReadSection(token)
      _settle()
    }
    return try body()
  }

  /// Frees the values that writes replaced or removed, if no reader still needs them (what
  /// `flush()` does), without suspending. Not part of the supported API.
  public func _freeReplacedValues() { _settle() }

  /// Whether values replaced or removed by writes are still allocated, waiting for readers
  /// to leave. Not part of the supported API.
  public var _retainsReplacedValues: Bool { _writer.withLock { _ in _table.retainedCount > 0 } }
}

@_spi(Testing)
extension MemoryStore {
  /// The number of live subscriptions (`changes` iterations, `observe` handlers and the
  /// notification center's poster). Not part of the supported API.
  public var _subscriberCount: Int { _hub.count }
}

@_spi(Testing)
extension MemoryStore {
  /// The number of changes logged by writers and not yet coalesced. Not part of the
  /// supported API.
  public var _loggedChangeCount: Int {
    _writer.withLock { state in
      state.changes.segments.reduce(state.changes.log.count) { $0 + $1.count }
    }
  }

  /// The most changes the log holds before a writer coalesces them itself.
  public static var _loggedChangeBound: Int {
    _ChangeTracker<Key, Value>.segmentCapacity * (_ChangeTracker<Key, Value>.maximumSegments + 1)
  }
}

@_spi(Testing)
extension MemoryStore {
  /// Checks that the eviction policy's bookkeeping matches the entries exactly: the ring holds
  /// as many entries as the store, and the total cost and the expiry heap agree with them;
  /// returns a description of the first difference. Not part of the supported API.
  public func _policyMismatch() -> String? {
    _writer.withLock { state in
      guard _signals.policyActive.load(ordering: .relaxed) else { return nil }
      let policy = state.policy
      let count = _table.stagedCount
      var inRing = 0
      var cost = 0
      var expiring = 0
      for position in 0..<_table.ringCount {
        guard let node = _table.ringNode(at: position) else { continue }
        // That the ring holds each entry's current node once, at its own position, is the
        // table's invariant (`_ConcurrentTable._checkInvariants()`).
        inRing += 1
        cost += node.cost
        if node.expiresAt != .max {
          expiring += 1
          let index = Int(policy.heapIndex[position])
          if index < 0 || index >= policy.expiries.count
            || policy.expiries[index].slot != position
            || policy.expiries[index].deadline > node.expiresAt
          {
            return "the expiry heap has no item for \(node.key.pointee)"
          }
        }
      }
      if inRing != count { return "the store has \(count) entries, the ring \(inRing)" }
      if cost != policy.totalCost {
        return "total cost \(policy.totalCost), entries sum to \(cost)"
      }
      if expiring != policy.expiries.count {
        return "\(expiring) entries expire, the heap has \(policy.expiries.count) items"
      }
      for index in policy.expiries.indices.dropFirst()
      where policy.expiries[index].deadline < policy.expiries[(index - 1) / 2].deadline {
        return "the expiry heap is out of order at \(index)"
      }
      // The eviction order: every entry once, oldest to newest, each link matched.
      if policy.pendingAtHand >= 0 { return "an entry waits to be placed at the hand" }
      if !policy.isOrdered {
        return policy.oldest < 0 && policy.newest < 0 ? nil : "an order kept without a limit"
      }
      var ordered = 0
      var position = policy.oldest
      var previous = -1
      var handSeen = policy.hand < 0
      while position >= 0 {
        guard ordered < inRing, _table.ringNode(at: position) != nil,
          Int(policy.links.older(position)) == previous
        else { return "the eviction order is broken at ring position \(position)" }
        if position == policy.hand { handSeen = true }
        ordered += 1
        previous = position
        position = Int(policy.links.newer(position))
      }
      if previous != policy.newest { return "the eviction order does not end at its newest" }
      if ordered != inRing {
        return "the eviction order has \(ordered) entries, the ring \(inRing)"
      }
      if !handSeen { return "the hand is not on an entry" }
      return nil
    }
  }
}

@_spi(Testing)
extension MemoryStore {
  /// Checks the store's internal invariants and stops the program with a message at the first
  /// one that does not hold; does nothing in release builds. Not part of the supported API.
  ///
  /// - The table: every node in the bucket of its key's hash, no key twice, nothing left
  ///   staged, the counts (entries, tombstones, the published count) exact; with metadata,
  ///   the ring holds every entry's current node once, at the position the node names.
  /// - The eviction policy, if active: its totals and expiry heap agree with the entries (see
  ///   ``_policyMismatch()``), and the limits hold.
  ///
  /// Call it when no write is in progress (after a run), as the stress and mirror tests do.
  public func _checkInvariants() {
    #if DEBUG
      _writer.withLock { state in
        _table._checkInvariants()
        guard _signals.policyActive.load(ordering: .relaxed) else { return }
        let policy = state.policy
        let count = _table.stagedCount
        precondition(
          policy.countLimit == 0 || count <= policy.countLimit,
          "Internal inconsistency: \(count) entries over the limit of \(policy.countLimit)"
        )
        precondition(
          policy.costLimit == 0 || policy.totalCost <= policy.costLimit,
          "Internal inconsistency: a total cost of \(policy.totalCost) over the limit of \(policy.costLimit)"
        )
      }
      if let mismatch = _policyMismatch() {
        preconditionFailure("Internal inconsistency: \(mismatch)")
      }
    #endif
  }
}

@_spi(Testing)
extension MemoryStore {
  /// How many of the last evictions the limits' record covers (the keys noted, up to its
  /// capacity; a few may have been pushed out early), and how many it can cover. Not part of
  /// the supported API.
  public var _rememberedEvictions: (count: Int, capacity: Int) {
    _writer.withLock { state in
      let ghosts = state.policy.ghosts
      return (Swift.min(ghosts.inserted, ghosts.capacity), ghosts.capacity)
    }
  }
}
