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
  public var _retainsReplacedValues: Bool { _writeLock.withLock { _table.retainedCount > 0 } }
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
    _writeLock.withLock {
      _tracker.pointer.pointee.segments.reduce(_tracker.pointer.pointee.log.count) {
        $0 + $1.count
      }
    }
  }

  /// The most changes the log holds before a writer coalesces them itself.
  public static var _loggedChangeBound: Int {
    _ChangeTracker<Key, Value>.segmentCapacity * (_ChangeTracker<Key, Value>.maximumSegments + 1)
  }
}

@_spi(Testing)
extension MemoryStore {
  /// The recency-table slot `key` maps to, or `nil` while reads note no recency, so that tests
  /// of eviction order can choose keys that do not share a slot. Not part of the supported API.
  public func _recencySlot(of key: Key) -> Int? {
    _writeLock.withLock {
      let table = _policy.pointer.pointee.table
      return table.base == nil ? nil : key.hashValue & (table.slotCount - 1)
    }
  }

  /// Checks that the eviction policy's records mirror the store exactly (keys, count and
  /// total cost); returns a description of the first difference. Not part of the supported
  /// API.
  public func _policyMismatch() -> String? {
    _writeLock.withLock {
      guard _policyActive.load(ordering: .relaxed) else { return nil }
      let policy = _policy.pointer.pointee
      let contents = _lockedView().dictionary
      if contents.count != policy.records.count {
        return "store has \(contents.count) entries, the policy \(policy.records.count)"
      }
      for key in contents.keys where policy.records[key] == nil {
        return "the policy has no record of \(key)"
      }
      let cost = policy.records.values.reduce(0) { $0 + $1.cost }
      if cost != policy.totalCost {
        return "total cost \(policy.totalCost), records sum to \(cost)"
      }
      let ringKeys = policy.ring.compactMap { $0 }
      if ringKeys.count != policy.records.count {
        return "the ring holds \(ringKeys.count) keys for \(policy.records.count) records"
      }
      for (key, record) in policy.records where policy.ring[record.slot] != key {
        return "the ring slot of \(key) holds another key"
      }
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
  ///   staged, the counts (entries, tombstones, the published count) exact.
  /// - The eviction policy, if active: its records mirror the contents (keys, count, total
  ///   cost, ring slots; see ``_policyMismatch()``), the count of expiring entries is exact,
  ///   and the limits hold.
  ///
  /// Call it when no write is in progress (after a run), as the stress and mirror tests do.
  public func _checkInvariants() {
    #if DEBUG
      _writeLock.withLock {
        _table._checkInvariants()
        guard _policyActive.load(ordering: .relaxed) else { return }
        let policy = _policy.pointer.pointee
        let expiring = policy.records.values.reduce(0) { $0 + ($1.expiresAt == .max ? 0 : 1) }
        precondition(
          expiring == policy.expiringCount,
          "Internal inconsistency: \(policy.expiringCount) expiring entries counted, \(expiring) recorded"
        )
        precondition(
          policy.countLimit == 0 || policy.records.count <= policy.countLimit,
          "Internal inconsistency: \(policy.records.count) entries over the limit of \(policy.countLimit)"
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
