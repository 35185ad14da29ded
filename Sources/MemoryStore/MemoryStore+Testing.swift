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
