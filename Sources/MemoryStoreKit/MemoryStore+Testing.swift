import Synchronization

extension MemoryStore {
  /// Runs `body` while the calling thread stays inside a read section opened before it, exactly
  /// as a reader preempted in the middle of a lookup would: writes made meanwhile go on, and
  /// the values they replace stay allocated until the section is left.
  ///
  /// For tests of writes racing a reader that does not leave. Not part of the supported API.
  package func _withReaderParked<R>(_ body: () throws -> R) rethrows -> R {
    let (_, token) = _table.enterReadSection()
    defer {
      _table.leaveReadSection(token)
      _settle()
    }
    return try body()
  }

  /// Frees the values that writes replaced or removed, if no reader still needs them (what
  /// `flush()` does), without suspending. Not part of the supported API.
  package func _freeReplacedValues() { _settle() }

  /// Whether values replaced or removed by writes are still allocated, waiting for readers
  /// to leave. Not part of the supported API.
  package var _retainsReplacedValues: Bool {
    _writer.withAccess { _table.retainedCount($0.held) > 0 }
  }

  /// The number of entries whose nodes carry no metadata: those written before the store's
  /// first write with a cost or a time to live, and not since. Not part of the supported API.
  ///
  /// - Complexity: O(*n*).
  package var _entriesWithoutMetadata: Int {
    _writer.withAccess { _table.entriesWithoutMetadata($0.held) }
  }

  /// When `key`'s entry expires (the earlier of its time to live and its time to idle), or
  /// `nil` if it is absent or never expires. Not part of the supported API.
  package func _deadline(forKey key: Key) -> ContinuousClock.Instant? {
    let deadline = _writer.withAccess { access in
      _table.stagedNode(forKey: key, access.held)?.deadline
    }
    guard let deadline, deadline != .max else { return nil }
    return _clock.origin + .nanoseconds(deadline)
  }
}

extension MemoryStore {
  /// The number of live subscriptions (`changes` iterations, `observe` handlers and the
  /// notification center's poster). Not part of the supported API.
  package var _subscriberCount: Int { _hub.count }
}

extension MemoryStore {
  /// The number of changes logged by writers and not yet coalesced. Not part of the
  /// supported API.
  package var _loggedChangeCount: Int {
    _writer.withLock { state in
      state.changes.segments.reduce(state.changes.log.loggedCount) { $0 + $1.loggedCount }
    }
  }

  /// The most changes the log holds before a writer coalesces them itself.
  package static var _loggedChangeBound: Int {
    _ChangeTracker<Key, Value>.segmentCapacity * (_ChangeTracker<Key, Value>.maximumSegments + 1)
  }
}

extension MemoryStore {
  /// Checks that the eviction policy's bookkeeping matches the entries exactly: the ring holds
  /// as many entries as the store, and the total cost and the expiry heap agree with them;
  /// returns a description of the first difference. Not part of the supported API.
  package func _policyMismatch() -> String? {
    _writer.withAccess { access in
      guard _signals.policyActive.load(ordering: .relaxed) else { return nil }
      // That the ring holds each entry's current node once, at its own position, is the
      // table's invariant (`_ConcurrentTable._checkInvariants(_:)`).
      return access.policy._checkInvariants(_table, access.held)
    }
  }
}

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
  package func _checkInvariants() {
    #if DEBUG
      _writer.withAccess { access in
        _table._checkInvariants(access.held)
        let state = access.state
        if let broken = state.changes._checkInvariants() ?? state.removals._checkInvariants() {
          preconditionFailure("Internal inconsistency: \(broken)")
        }
        guard _signals.policyActive.load(ordering: .relaxed) else { return }
        let policy = state.policy
        let count = _table.stagedCount(access.held)
        precondition(
          policy.limits.countLimit == 0 || count <= policy.limits.countLimit,
          "Internal inconsistency: \(count) entries over the limit of \(policy.limits.countLimit)"
        )
        precondition(
          policy.limits.costLimit == 0 || policy.limits.totalCost <= policy.limits.costLimit,
          "Internal inconsistency: a total cost of \(policy.limits.totalCost) over the limit of \(policy.limits.costLimit)"
        )
      }
      if let mismatch = _policyMismatch() {
        preconditionFailure("Internal inconsistency: \(mismatch)")
      }
    #endif
  }
}

extension MemoryStore {
  /// The eviction order's state: the sizes of its window, probation and protected lists, the
  /// window's share of the entries (in 65 536ths), the words of its frequency sketch, and the
  /// total cost of each list (0 without a cost limit). Not part of the supported API.
  package var _evictionOrderState:
    (
      window: Int, probation: Int, protected: Int, windowShare: Int, sketchWords: Int,
      windowCost: Int, probationCost: Int, protectedCost: Int
    )
  {
    _writer.withLock { state in
      let order = state.policy.order
      return (
        order.window.count, order.probation.count, order.protected.count, order.windowShare,
        order.sketch.wordCount, order.costs.window, order.costs.probation, order.costs.protected
      )
    }
  }

  /// The words of the eviction order's record of the keys evicted lately (0 until it is made).
  /// Not part of the supported API.
  package var _evictedKeyRecordWords: Int {
    _writer.withLock { state in
      let ghosts = state.policy.order.ghosts
      return ghosts.words == nil ? 0 : ghosts.wordMask + 1
    }
  }

  /// The estimated uses of `key` in the eviction order's frequency sketch. Not part of the
  /// supported API.
  package func _estimatedUses(of key: Key) -> Int {
    let hash = key.hashValue
    return _writer.withLock { $0.policy.order.sketch.frequency(hash) }
  }
}
