import Synchronization

// MARK: - Reads

extension MemoryStore {
  /// Counts a lookup and, for a hit on an entry with metadata, notes the read for eviction.
  @inlinable @inline(__always)
  func _recordLookup(
    _ node: _Node<Key, Value>?, counters: UnsafeMutablePointer<Atomic<Int>>
  ) {
    _ReaderIndicator.add(
      1, to: node != nil ? _ReaderIndicator.hitCounter : _ReaderIndicator.missCounter,
      in: counters, releasing: false)
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

  /// Whether `node`, an entry with metadata that a read of one key found, has not expired by
  /// now: its own deadline judged as a read judges the earliest one
  /// (``_expiryCutoff(early:late:)``), so it needs none of the store's signals.
  @inlinable @inline(__always)
  func _isLive(_ node: _Node<Key, Value>) -> Bool {
    let deadline = node.deadline
    return deadline > _expiryCutoff(early: deadline, late: deadline)
  }

  /// What a read at `version`, inside a read section, sees: the table at that version, less
  /// the entries expired by the time it starts. `early` is the earliest expiry loaded before
  /// the version was (see ``_expiryCutoff(early:late:)``).
  @inlinable @inline(__always)
  func _readView(at version: UInt64, earlyExpiry early: Int64) -> _ReadView<Key, Value> {
    let late = _signals.nextExpiry.load(ordering: .acquiring)
    return _ReadView(
      table: _table, version: version, expiredBy: _expiryCutoff(early: early, late: late))
  }

  /// The time a read starts at if an entry visible to it may have expired by then, else
  /// `Int64.min` (see ``_ReadView/expiredBy``): what a read compares the deadlines it finds
  /// with. `early` is the earliest expiry loaded before the read's version, `late` the one
  /// loaded after it: a write publishes an earlier deadline before its version and a later
  /// one only after its version removed what expired, so the lesser of the two is at or
  /// before the deadline of every entry the version holds.
  ///
  /// One comparison while no entry has a deadline. With the system scheduler on Linux, a
  /// coarse upper bound of the clock rules out most others before the clock itself is read.
  /// It never waits and never removes anything: that is the expiry timer's and the writes'
  /// work.
  @inlinable @inline(__always)
  func _expiryCutoff(early: Int64, late: Int64) -> Int64 {
    let deadline = Swift.min(early, late)
    guard deadline != .max else { return .min }
    if _clock.coarseOffset != 0 && _SystemClock.coarse &+ _clock.coarseOffset < deadline {
      return .min
    }
    return _expiryCutoff(deadline)
  }

  /// ``_expiryCutoff(early:late:)`` once the clock must be read: out of line.
  @inlinable @inline(never)
  func _expiryCutoff(_ deadline: Int64) -> Int64 {
    let now = _clockNanos()
    return now >= deadline ? now : .min
  }
}
