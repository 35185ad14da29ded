import Synchronization

// MARK: - Statistics

extension MemoryStore {
  /// Hits, misses, evictions per reason, count, total cost, and the change batches published
  /// with their delays.
  ///
  /// Hits and misses are counted by every read in the reading thread's own stripe of
  /// counters, next to the counters reads already update, so counting costs about one
  /// uncontended atomic increment per read; this property adds the stripes up, so under
  /// concurrent reads the two numbers are each exact but not from one instant. The rest is
  /// read under the write lock.
  public var statistics: StoreStatistics {
    // The count and the evictions include the entries that have expired by now.
    _removeExpiredEntries()
    let hits = _readers.total(ofCounter: _ReaderIndicator.hitCounter)
    let misses = _readers.total(ofCounter: _ReaderIndicator.missCounter)
    let batches = _hub.batchDelays.withLock { $0.counted }
    return _writer.withAccess { access in
      StoreStatistics(
        hits: UInt64(truncatingIfNeeded: hits), misses: UInt64(truncatingIfNeeded: misses),
        evictions: access.policy.evictions, count: _table.stagedCount(access.held),
        totalCost: access.policy.limits.totalCost, changeBatches: batches)
    }
  }
}
