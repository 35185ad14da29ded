import Synchronization

// MARK: - Reads

extension MemoryStore {
  /// Counts a lookup and, for a hit on an entry with metadata, notes the read for eviction.
  @inlinable @inline(__always)
  func _recordLookup(
    _ node: _Node<Key, Value>?, counters: UnsafeMutablePointer<Atomic<Int>>
  ) {
    counters[node != nil ? _ReaderIndicator.hitCounter : _ReaderIndicator.missCounter]
      .wrappingAdd(1, ordering: .relaxed)
    if let node, node.hasMetadata { _noteRead(node) }
  }

  /// Raises the entry's counter (to at most 3) and records the current second, storing
  /// only when that changes the word, so hot entries cost a load and no write.
  ///
  /// A read racing a rewrite of the entry may raise the node being replaced, after the writer
  /// copied its word: that read is not counted (the order is approximate by design, and the
  /// rewrite counts as a use).
  @inlinable @inline(__always)
  func _noteRead(_ node: _Node<Key, Value>) {
    let word = node.recency.pointee.load(ordering: .relaxed)
    let updated = _Recency.read(word, tick: _signals.readTick.load(ordering: .relaxed))
    if updated != word { node.recency.pointee.store(updated, ordering: .relaxed) }
  }

  /// Removes the entries that have expired by now, if any may have: what every read, save,
  /// purge and statistics call does first. One relaxed atomic load while no entry expires.
  ///
  /// With the system scheduler on Linux, a coarse upper bound of the clock (about 6 ns to read)
  /// rules out most reads before the clock itself is read (about 28 ns).
  @inlinable @inline(__always)
  func _expireDueEntries() {
    let deadline = _signals.nextExpiry.load(ordering: .relaxed)
    guard deadline != .max else { return }
    if _clock.coarseOffset != 0 && _SystemClock.coarse &+ _clock.coarseOffset < deadline { return }
    _expireBeforeRead()
  }

  /// Removes the entries that have expired by now (see ``_expireDueEntries()``).
  @inlinable @inline(never)
  func _expireBeforeRead() {
    let now = _clockNanos()
    while _signals.nextExpiry.load(ordering: .acquiring) <= now {
      _transact { _ in }
      _writer.yieldToWaiters()
    }
  }
}
