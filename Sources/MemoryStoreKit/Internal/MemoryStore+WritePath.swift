import Synchronization

// MARK: - The write transaction

extension MemoryStore {
  /// The most expired entries one write removes; the rest go with the next writes or
  /// the expiry timer.
  @inlinable static var _expiryChunk: Int { 4_096 }
  /// The most entries a purge judges per critical section: small enough that a writer racing
  /// a purge of a large store waits about as long as the scheduler's own time slice (see the
  /// Eviction article's measurements).
  @inlinable static var _purgeChunk: Int { 128 }
  /// The most entries a trim (a limit lowered, memory pressure) evicts per critical section:
  /// each eviction links a tombstone, and after a trim has freed many nodes the allocator's
  /// slow path can make one allocation cost microseconds.
  @inlinable static var _trimChunk: Int { 128 }

  /// Performs one write: ``_openWrite(_:timeToLive:activatingPolicy:collectingExpiredKeys:)``,
  /// `body`, then ``_closeWrite(_:limits:freesHere:)``. Every write of the store goes through
  /// those two functions: they take the lock, begin a ``_Transaction`` (removing the entries
  /// due to expire), and, after the write's changes, end it (evicting to `limits`), commit it
  /// (publishing the table's staged version, logging changes and removals), release the lock,
  /// and then do what the write left to do: free what it retired, schedule batches and
  /// removal deliveries, arm the expiry timer.
  ///
  /// - Parameters:
  ///   - reason: Why the write's changes happen, as change batches report them.
  ///   - timeToLive: A time to live the write gives: the write then reads the clock (see
  ///     ``_lockForWrite(timeToLive:now:)``).
  ///   - activatingPolicy: Whether entries must carry metadata from this write on (a cost or
  ///     a time to live, a setting of the policy).
  ///   - collectingExpiredKeys: Whether the write keeps the keys of the entries it finds
  ///     expired (a clear logs the contents without them).
  ///   - limits: What the end evicts to.
  ///   - freesHere: Whether what the write retired is freed on the calling thread whatever
  ///     its size (bulk work its caller asked for), rather than in the background when large.
  ///   - body: The write's changes: it must not call user code.
  @inlinable @inline(__always)
  func _transact<R>(
    _ reason: ChangeReason = .write, timeToLive: Duration? = nil, activatingPolicy: Bool = false,
    collectingExpiredKeys: Bool = false, limits: _LimitsPass = .toLimits,
    freesHere: Bool = false, _ body: (inout _Transaction<Key, Value>) -> R
  ) -> R {
    var write = _openWrite(
      reason, timeToLive: timeToLive, activatingPolicy: activatingPolicy,
      collectingExpiredKeys: collectingExpiredKeys)
    let result = body(&write)
    _closeWrite(write, limits: limits, freesHere: freesHere)
    return result
  }

  /// Takes the write lock and begins a write (see ``_transact(_:timeToLive:activatingPolicy:collectingExpiredKeys:limits:freesHere:_:)``).
  @inlinable @inline(__always)
  func _openWrite(
    _ reason: ChangeReason = .write, timeToLive: Duration? = nil, activatingPolicy: Bool = false,
    collectingExpiredKeys: Bool = false
  ) -> _Transaction<Key, Value> {
    var now: Int64 = 0
    let access = _lockForWrite(timeToLive: timeToLive, now: &now)
    var write = _Transaction(
      store: self, access: access, now: now, reason: reason,
      collectsExpiredKeys: collectingExpiredKeys)
    if activatingPolicy { write.activatePolicy(in: self) }
    write.begin(in: self)
    return write
  }

  /// Ends, commits and closes `write`: releases the write lock, then does what the write left
  /// to do (see ``_transact(_:timeToLive:activatingPolicy:collectingExpiredKeys:limits:freesHere:_:)``).
  @inlinable @inline(__always)
  func _closeWrite(
    _ write: consuming _Transaction<Key, Value>, limits: _LimitsPass = .toLimits,
    freesHere: Bool = false
  ) {
    write.end(limits, in: self)
    write.commit(in: self)
    _writer.unlock(write.access)
    _finish(write.effects, now: write.now, freesHere: freesHere)
  }

  /// Does what a write left to do after unlocking; with `freesHere`, frees what it retired on
  /// the calling thread whatever its size.
  @inlinable @inline(__always)
  func _finish(_ effects: _WriteEffects, now: Int64, freesHere: Bool) {
    // Released only now: a value's deinit may use the store.
    if freesHere, let garbage = effects.garbage {
      _table._free(garbage)
    } else {
      _release(effects.garbage)
    }
    if effects.followUp != nil || effects.armSweepAt != nil { _finishRarely(effects, now: now) }
  }

  /// The rarer part of ``_finish(_:now:freesHere:)``, out of line so that a write stays small
  /// enough for its staging to be inlined.
  @usableFromInline @inline(never)
  func _finishRarely(_ effects: _WriteEffects, now: Int64) {
    if let followUp = effects.followUp { _followUp(followUp) }
    if let deadline = effects.armSweepAt { _armExpiryTimer(for: deadline, now: now) }
  }

  /// Arms the expiry timer for `deadline`.
  @usableFromInline
  func _armExpiryTimer(for deadline: Int64, now: Int64) {
    _clock.scheduler.schedule(after: .nanoseconds(max(deadline - now, 0))) { [weak self] in
      self?._expiryTimerFired(deadline)
    }
  }

  /// Takes the write lock for a write, and sets `now` to the time it runs at: the clock, read
  /// before locking (the scheduler may be user code), or 0 when no entry's time matters (no
  /// time to live given or by default, no decider, which reads write times, and no entry that
  /// expires), which nothing then reads. If the store started timing entries between the look
  /// and the lock, it unlocks, reads the clock and locks again.
  ///
  /// When only write times need it (a decider, no time to live given or by default, no entry
  /// that expires), the system's coarse clock does (see ``EvictionContext/writtenAt``): cheaper
  /// to read than the clock, for a write time at most a tick early.
  @inlinable @inline(__always)
  func _lockForWrite(timeToLive: Duration?, now: inout Int64) -> _WriteAccess<Key, Value> {
    if timeToLive == nil && !_needsClock {
      let access = _writer.lock()
      guard _needsClock else { return access }
      _writer.unlock(access)
    }
    return _lockForTimedWrite(timeToLive: timeToLive, now: &now)
  }

  /// ``_lockForWrite(timeToLive:now:)`` when the write reads a clock (out of line: see
  /// ``_finishRarely(_:now:)``).
  @usableFromInline @inline(never)
  func _lockForTimedWrite(timeToLive: Duration?, now: inout Int64) -> _WriteAccess<Key, Value> {
    if timeToLive == nil && _signals.keepsWriteTimes.load(ordering: .relaxed)
      && _clock.coarseOffset != 0
      && _signals.nextExpiry.load(ordering: .relaxed) == .max
    {
      let coarse = _SystemClock.coarse &- _clock.systemOrigin
      let access = _writer.lock()
      if _signals.nextExpiry.load(ordering: .relaxed) == .max
        && access.policy.expiry.defaultLifetime == nil
      {
        now = coarse
        return access
      }
      _writer.unlock(access)
    }
    now = _clockNanos()
    return _writer.lock()
  }

  /// Whether writes must read the clock: the store times entries (a decider or a default time
  /// to live), or an entry expires.
  @inlinable @inline(__always)
  var _needsClock: Bool {
    _signals.timesEntries.load(ordering: .relaxed)
      || _signals.nextExpiry.load(ordering: .relaxed) != .max
  }
}

// MARK: - Writes

extension MemoryStore {
  /// Sets (`newValue` non-`nil`) or removes `key`, and returns the value it replaced or
  /// removed: the subscript's, `updateValue`'s, `removeValue`'s and `setValue`'s write.
  ///
  /// `cost` and `timeToLive` `nil` take what ``entryCost`` and ``entryTimeToLive`` give
  /// (before locking), or the defaults.
  @inlinable @inline(__always)
  func _performKeyed(
    _ key: Key, _ newValue: Value?, cost: Int? = nil, timeToLive: Duration? = nil,
    activatingPolicy: Bool = false
  ) -> Value? {
    if cost == nil && timeToLive == nil && !activatingPolicy
      && !_signals.policyActive.load(ordering: .relaxed)
    {
      let plain = _performPlainKeyed(key, newValue)
      if plain.isDone { return plain.previous }
    }
    guard let newValue else { return _removeKeyed(key) }
    // The store's functions of the entry, for what the caller did not give: one relaxed load
    // without any.
    let terms = _terms(key, newValue, cost: cost, timeToLive: timeToLive)
    return _setKeyed(
      key, newValue, cost: terms.cost ?? 0, timeToLive: terms.timeToLive,
      activatingPolicy: activatingPolicy)
  }

  /// The write of a key in a store without a policy: the one write that does not make a
  /// ``_Transaction``, because it pays. Nothing but staging, logging and publishing does
  /// anything in such a store (no clock, no expiry, no limits), and the logging and the
  /// commit are the transaction's own: ``_WriterState/logWrite(_:_:previous:reason:)`` and
  /// ``_ChangeTracker/commit(logged:cleared:deliversRemovals:)``. Spelt out, the table's
  /// staging inlines into it, which it does not through a transaction.
  ///
  /// - Returns: Whether it wrote (`false`: the store got a policy meanwhile, and the caller
  ///   writes through a transaction), and the value replaced or removed.
  @inlinable @inline(__always)
  func _performPlainKeyed(_ key: Key, _ newValue: Value?) -> (isDone: Bool, previous: Value?) {
    // Hashed before locking: the table and the change log use it.
    let hash = key.hashValue
    let access = _writer.lock()
    guard !_signals.policyActive.load(ordering: .relaxed) else {
      _writer.unlock(access)
      return (false, nil)
    }
    let logged = access.changes.appendCount
    let previous: Value?
    if let newValue {
      previous = _table.stageSet(key, newValue, hash: hash)
    } else {
      if _signals.loadsStarted.load(ordering: .relaxed) {
        // A load of the key that read its source before this removal must not store it.
        _recordRemovalForLoads(hash: hash, in: &access.state)
      }
      previous = _table.stageRemoveNode(key, hash: hash)?.value.pointee
      guard previous != nil else {
        // Nothing to log; the other instances may hold the key, though.
        let wakesFeed = access.changes.feedsLocalChanges && access.changes.noteAbsentRemoval(key)
        _writer.unlock(access)
        if wakesFeed { _wakeLocalChangeFeed() }
        return (true, nil)
      }
    }
    _commitUntransacted(key, newValue, previous: previous, hash: hash, logged: logged, access)
    return (true, previous)
  }

  /// The end of a write that makes no transaction (``_performPlainKeyed(_:_:)``, and the
  /// rewrite of ``_setKeyed(_:_:cost:timeToLive:activatingPolicy:)``), with what the transaction's own logging and commit
  /// do: logs `key` → `newValue` in place of `previous` (whose hash is `hash`; the log was
  /// `logged` long when the write began), commits and publishes, releases the lock, then frees
  /// what the write retired and schedules what it left to do.
  @inlinable @inline(__always)
  func _commitUntransacted(
    _ key: Key, _ newValue: Value?, previous: Value?, hash: Int, logged: Int,
    _ access: _WriteAccess<Key, Value>
  ) {
    let deliversRemovals = access.state.logWrite(
      key, newValue, previous: previous, reason: .write, hash: hash)
    let followUp = access.changes.commit(
      logged: logged, cleared: false, deliversRemovals: deliversRemovals)
    let garbage = _table.publish()
    _writer.unlock(access)
    // What `_finish(_:now:freesHere:)` does with these, with nothing else to do.
    _release(garbage)
    if let followUp { _followUp(followUp) }
  }

  /// The write of ``_performKeyed(_:_:cost:timeToLive:activatingPolicy:)`` that sets a value
  /// through a transaction.
  ///
  /// Out of line: inlined beside ``_performPlainKeyed(_:_:)``, it makes the function too large
  /// for the compiler to inline the table's staging into either.
  ///
  /// A store with a policy that times no entry, and where no entry expires, needs no clock:
  /// the write hashes the key, locks and stages the value at once. A new value for a key
  /// present (of the same cost, or in a store without a cost limit) changes no count, no total
  /// cost, no deadline and no list of the eviction order, so a transaction's beginning and end
  /// have nothing to do: it is logged and published as in ``_performPlainKeyed(_:_:)``, the
  /// entry's node keeping its ring position and, raised by the write, its counter. Any other
  /// write of that store is accounted for by a transaction begun under the same lock
  /// (``_finishStagedSet(_:_:replacing:node:hash:access:)``).
  @inlinable @inline(never)
  func _setKeyed(
    _ key: Key, _ value: Value, cost: Int, timeToLive: Duration?, activatingPolicy: Bool
  ) -> Value? {
    // Set once, never cleared: true before the lock, true under it.
    if timeToLive == nil && !activatingPolicy && !_needsClock
      && _signals.policyActive.load(ordering: .relaxed)
    {
      let hash = key.hashValue
      let access = _writer.lock()
      if !_needsClock {
        let logged = access.changes.appendCount
        // The metadata a transaction gives a write that needs no clock (no write time, no
        // deadline, no idle deadline).
        let (old, node) = _table.stageSet(
          key, value, metadata: _EntryMetadata(writtenAt: 0, expiresAt: .max, cost: cost),
          idleExpiresAt: .max, hash: hash)
        guard let old, !old.isTombstone, old.hasMetadata, old.deadline == .max,
          old.cost == cost || access.policy.limits.costLimit == 0
        else { return _finishStagedSet(key, value, replacing: old, node: node, hash: hash, access) }
        // The cost's difference, if any; the entry keeps its place in the order.
        access.policy.track(node, replacing: old, count: _table.stagedCount)
        let previous = old.value.pointee
        _commitUntransacted(key, value, previous: previous, hash: hash, logged: logged, access)
        return previous
      }
      _writer.unlock(access)
    }
    var write = _openWrite(timeToLive: timeToLive, activatingPolicy: activatingPolicy)
    let previous = write.set(key, value, cost: cost, timeToLive: timeToLive, in: self)
    _closeWrite(write)
    return previous
  }

  /// The rest of ``_setKeyed(_:_:cost:timeToLive:activatingPolicy:)`` for a value it staged,
  /// as `node` in place of `old`, that is not a plain rewrite: a transaction begun under the
  /// lock the caller holds, at the time 0 that a write needing no clock runs at, accounts for
  /// it and ends (evicting to the limits). Nothing is due to expire, so beginning it after the
  /// staging removes nothing. Out of line, so that each function has one transaction to
  /// inline.
  @inlinable @inline(never)
  func _finishStagedSet(
    _ key: Key, _ value: Value, replacing old: _Node<Key, Value>?, node: _Node<Key, Value>,
    hash: Int, _ access: _WriteAccess<Key, Value>
  ) -> Value? {
    var write = _Transaction(
      store: self, access: access, now: 0, reason: .write, collectsExpiredKeys: false)
    let applied = write.noteStaged(key, value, replacing: old, node: node, hash: hash, in: self)
    write.protected = applied.position
    _closeWrite(write)
    return applied.previous
  }

  /// The write of ``_performKeyed(_:_:cost:timeToLive:activatingPolicy:)`` that removes the
  /// key (see ``_setKeyed(_:_:cost:timeToLive:activatingPolicy:)``).
  @inlinable @inline(never)
  func _removeKeyed(_ key: Key) -> Value? {
    var write = _openWrite()
    let previous = write.remove(key, reason: .write, in: self)
    _closeWrite(write)
    return previous
  }

  /// Removes every entry that has expired by now, a chunk per write, yielding the lock between
  /// chunks: the expiry timer's work, and that of a caller that reports on or judges the
  /// entries (statistics, a purge); never a read's.
  func _removeExpiredEntries() {
    guard _signals.nextExpiry.load(ordering: .acquiring) != .max else { return }
    let now = _clockNanos()
    while _signals.nextExpiry.load(ordering: .acquiring) <= now {
      _transact { _ in }
      _writer.yieldToWaiters()
    }
  }

  /// The expiry timer: removes what has expired and arms the timer for the next expiry.
  @usableFromInline
  func _expiryTimerFired(_ deadline: Int64) {
    _transact { write in
      if write.policy.expiry.sweepArmedFor == deadline { write.policy.expiry.sweepArmedFor = nil }
    }
    _removeExpiredEntries()
  }

  /// Sets a limit and evicts down to it.
  func _setLimit(_ limit: WritableKeyPath<_Policy, Int>, to newValue: Int?) {
    let value = max(newValue ?? 0, 0)
    _transact(activatingPolicy: true, limits: Self._trimPass(fraction: 1, reason: nil)) { write in
      write.policy[keyPath: limit] = value
      // The first limit puts the entries in the eviction order, which is kept from then on.
      if value > 0 && !write.policy.isOrdered {
        write.giveEveryEntryMetadata(in: self)
        write.policy.orderAllEntries(of: _table)
        _table.startKeepingHashes()
      }
      write.policy.weighCosts(write.policy.limits.costLimit > 0, of: _table)
    }
    _enforceLimits(fraction: 1, reason: nil)
  }

  /// A trim's end: one chunk of evictions, to `fraction` of the limits.
  @inlinable
  static func _trimPass(fraction: Double, reason: EvictionReason?) -> _LimitsPass {
    _LimitsPass(fraction: fraction, reason: reason, maximumEvictions: _trimChunk)
  }

  /// Evicts, one chunk per critical section, until the store is within `fraction` of its
  /// limits.
  func _enforceLimits(fraction: Double, reason: EvictionReason?) {
    guard _signals.policyActive.load(ordering: .relaxed) else { return }
    let pass = Self._trimPass(fraction: fraction, reason: reason)
    while true {
      _writer.yieldToWaiters()
      // Freed here, whatever its size: this is bulk work its caller asked for, and a thread
      // freeing it beside would compete for the cores with the writers this work must not
      // hold up.
      let isDone = _transact(limits: pass, freesHere: true) { write in
        write.end(pass, in: self)
        return write.policy.limits.isOver(count: _table.stagedCount, fraction: fraction) == nil
      }
      if isDone { return }
    }
  }

  /// Empties the store on a critical memory-pressure event, counting the evictions.
  func _removeAllUnderPressure() {
    _transact(.evictedByMemoryPressure, activatingPolicy: true, collectingExpiredKeys: true) {
      $0.removeAll(in: self)
    }
  }
}
