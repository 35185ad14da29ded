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
    if node.expiresWhenIdle { _renewIdle(node) }
  }

  /// Pushes the idle deadline of `node`, just read, back to a time to idle from now: from the
  /// coarse clock where there is one (a lower bound of the time, so the deadline is never
  /// later than it should be), else from the clock. Stores only if that moves it by at least
  /// 1/64 of the time to idle or a second, whichever is less, so that reads of a hot entry
  /// write its node about once per such step, not once per read.
  @inlinable @inline(never)
  func _renewIdle(_ node: _Node<Key, Value>) {
    let idle = _signals.idleLifetime.load(ordering: .relaxed)
    guard idle > 0 else { return }
    let now =
      _clock.coarseOffset != 0 ? _SystemClock.coarse &- _clock.systemOrigin : _clockNanos()
    node.renewIdle(
      until: now.addingSaturating(idle), granule: Swift.max(1, Swift.min(idle / 64, 1_000_000_000)))
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
      // A read may run under a lock of the store (get-or-create, a purge): observers of
      // tracked reads hear of these expiries on a background queue.
      _transact { $0.notifiesLater = true }
      _writer.yieldToWaiters()
    }
  }
}
