import Synchronization

@_spi(Testing)
extension MemoryStore {
  /// Runs `body` while the calling thread stays announced as a reader of the copy that is
  /// published now, exactly as a reader preempted in the middle of a lookup would.
  ///
  /// For tests of the path where a writer finds its copy held by a reader: from the second
  /// write made while parked, writes go to the overlay. Not part of the supported API.
  public func _withReaderParked<R>(_ body: () throws -> R) rethrows -> R {
    let counters = _readers.countersForCurrentThread()
    var state = _state.load(ordering: .relaxed)
    while true {
      counters[state & 1].wrappingAdd(1, ordering: .sequentiallyConsistent)
      let current = _state.load(ordering: .sequentiallyConsistent)
      if current & 1 == state & 1 { break }
      counters[state & 1].wrappingSubtract(1, ordering: .releasing)
      state = current
    }
    defer {
      counters[state & 1].wrappingSubtract(1, ordering: .releasing)
      _helpFoldOverlay()
    }
    return try body()
  }

  /// Whether writes are currently held in the overlay. Not part of the supported API.
  public var _hasOverlay: Bool { _state.load(ordering: .sequentiallyConsistent) & 2 != 0 }
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
