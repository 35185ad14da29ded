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

  /// Performs one write: every write of the store but the plain one of a store without a
  /// policy (``_performPlainKeyed(_:_:)``) goes through this function, which takes the write
  /// lock and releases it. Under the lock it decides the time the write runs at
  /// (``_writeTime(timeToLive:readBefore:_:)``), begins a ``_Transaction`` (removing the
  /// entries due to expire), runs `body` on it, ends it (evicting to `limits`) and commits it
  /// (``_commitStaged(_:logged:cleared:deliversRemovals:nextExpiry:)``: publishing the table's
  /// staged version, logging changes and removals). After unlocking it does what the write
  /// left to do (``_finish(_:now:freesHere:)``): free what it retired, schedule batches and
  /// removal deliveries, arm the expiry timer.
  ///
  /// - Parameters:
  ///   - reason: Why the write's changes happen, as change batches report them.
  ///   - timeToLive: A time to live the write gives: the write then reads the clock.
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
    // A scheduler of the user's is user code: its clock is read before locking.
    let readBefore = _clock.systemOrigin == 0 ? _clockNanos() : 0
    let access = _writer.lock()
    let now = _writeTime(timeToLive: timeToLive, readBefore: readBefore, access)
    var write = _Transaction(
      store: self, access: access, time: _WriteTime(now), reason: reason,
      collectsExpiredKeys: collectingExpiredKeys)
    if activatingPolicy { write.activatePolicy(in: self) }
    write.begin(in: self)
    let result = body(&write)
    write.close(limits, in: self)
    _writer.unlock(write.access)
    // Read from the transaction, not copied out of it: a copy of the effects, just written
    // field by field, costs a stalled load.
    _finish(write.effects, now: write.now, freesHere: freesHere)
    return result
  }

  /// Commits a write that changed the store: counts it for change batches, and publishes the
  /// table's staged version, around which it stores `nextExpiry`, the earliest deadline
  /// (`nil` without metadata: no entry expires). Every write that changes the store commits
  /// here: a transaction (``_Transaction/commit(in:)``), and the plain write
  /// (``_performPlainKeyed(_:_:)``). The write lock is held.
  ///
  /// - Parameters:
  ///   - logged: The change log's length when the write began.
  ///   - cleared: Whether the write emptied the store.
  ///   - deliversRemovals: Whether it logged removals whose delivery must be scheduled.
  /// - Returns: What the publication retired, and what to schedule for what the write logged,
  ///   both for after unlocking.
  @inlinable @inline(__always)
  func _commitStaged(
    _ access: borrowing _WriteAccess<Key, Value>, logged: Int, cleared: Bool,
    deliversRemovals: Bool,
    nextExpiry: Int64?
  ) -> (garbage: _TableGarbage?, followUp: _TrackingFollowUp?) {
    let followUp = access.changes.commit(
      logged: logged, cleared: cleared, deliversRemovals: deliversRemovals)
    guard let nextExpiry else { return (_table.publish(access.held), followUp) }
    // A read that sees this write must see an earlier expiry it brings; a later one only
    // once the expired entries are gone from what readers see. Stored only when it changes:
    // every read loads it.
    let current = _signals.nextExpiry.load(ordering: .relaxed)
    if nextExpiry < current { _signals.nextExpiry.store(nextExpiry, ordering: .relaxed) }
    let garbage = _table.publish(access.held)
    if nextExpiry > current { _signals.nextExpiry.store(nextExpiry, ordering: .releasing) }
    return (garbage, followUp)
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
  /// enough for its staging to be inlined (inlinable, so that it is specialised: see
  /// ``_followUp(_:)``).
  @inlinable @inline(never)
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

  /// The time a write runs at, decided under the write lock: 0 when no entry's time matters
  /// (no time to live given or by default, no decider, which reads write times, and no entry
  /// that expires), which nothing then reads; otherwise the clock. The system's clock is read
  /// here, under the lock, which runs no user code; a scheduler of the user's was read before
  /// locking, as `readBefore`.
  ///
  /// When only write times need it (a decider, no time to live given or by default, no entry
  /// that expires), the system's coarse clock does (see ``EvictionContext/writtenAt``): cheaper
  /// to read than the clock, for a write time at most a tick early.
  @inlinable @inline(__always)
  func _writeTime(
    timeToLive: Duration?, readBefore: Int64, _ access: borrowing _WriteAccess<Key, Value>
  ) -> Int64 {
    guard timeToLive != nil || _needsClock else { return 0 }
    return _timedWriteTime(timeToLive: timeToLive, readBefore: readBefore, access)
  }

  /// ``_writeTime(timeToLive:readBefore:_:)`` when the write reads a clock (out of line: see
  /// ``_finishRarely(_:now:)``; inlinable, so that it is specialised: unspecialised, each field
  /// of the store it reads costs a call for its offset).
  @inlinable @inline(never)
  func _timedWriteTime(
    timeToLive: Duration?, readBefore: Int64, _ access: borrowing _WriteAccess<Key, Value>
  ) -> Int64 {
    let systemOrigin = _clock.systemOrigin
    guard systemOrigin != 0 else { return readBefore }
    if timeToLive == nil && _clock.coarseOffset != 0
      && _signals.keepsWriteTimes.load(ordering: .relaxed)
      && _signals.nextExpiry.load(ordering: .relaxed) == .max
      && access.policy.expiry.defaultLifetime == nil
    {
      return _SystemClock.coarse &- systemOrigin
    }
    return _SystemClock.nanoseconds - systemOrigin
  }

  /// The time a keyed write that gives its entry `lifetime` and `idleLifetime` (`nil`: none)
  /// runs at, decided under the write lock: ``_writeTime(timeToLive:readBefore:_:)``, but for
  /// a time to live long enough (at least ``_StoreClock/coarseLifetimeFloor``, 64 margins of
  /// the coarse clock: about 2 s on a 250 Hz Linux kernel) while no entry can have expired by
  /// the coarse clock's upper bound. Such a write reads only the coarse clock, a fraction of
  /// the clock's cost: its deadline counts from the upper bound, so that the entry lives at
  /// least its time to live and at most one margin (1/64 of it) more, and it compares
  /// deadlines with the lower bound, by which, as by the clock, nothing has expired. A store
  /// with a time to idle (whose deadlines are never late) or a decider (which reads write
  /// times) reads the clock.
  @inlinable @inline(__always)
  func _keyedWriteTime(
    lifetime: Int64?, idleLifetime: Int64?, timeToLive: Duration?, readBefore: Int64,
    _ access: borrowing _WriteAccess<Key, Value>
  ) -> _WriteTime {
    guard timeToLive != nil || _needsClock else { return _WriteTime(0) }
    return _timedKeyedWriteTime(
      lifetime: lifetime, idleLifetime: idleLifetime, timeToLive: timeToLive,
      readBefore: readBefore, access)
  }

  /// ``_keyedWriteTime(lifetime:idleLifetime:timeToLive:readBefore:_:)`` when the write reads a
  /// clock (out of line, inlinable: see ``_timedWriteTime(timeToLive:readBefore:_:)``).
  @inlinable @inline(never)
  func _timedKeyedWriteTime(
    lifetime: Int64?, idleLifetime: Int64?, timeToLive: Duration?, readBefore: Int64,
    _ access: borrowing _WriteAccess<Key, Value>
  ) -> _WriteTime {
    // A decider reads write times, and an idle deadline is never late: such writes keep
    // reading the clock.
    if let lifetime, lifetime >= _clock.coarseLifetimeFloor, idleLifetime == nil,
      !_signals.keepsWriteTimes.load(ordering: .relaxed)
    {
      let coarse = _SystemClock.coarse
      let upper = coarse &+ _clock.coarseOffset
      if access.policy.expiry.next > upper {
        return _WriteTime(now: coarse &- _clock.systemOrigin, deadlineBase: upper)
      }
    }
    return _WriteTime(_timedWriteTime(timeToLive: timeToLive, readBefore: readBefore, access))
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

  /// The write of a key in a store without a policy, the one write that makes no
  /// ``_Transaction``: nothing but staging, logging and committing does anything in such a
  /// store (no clock, no expiry, no limits), and it shares those with every other write
  /// (``_WriterState/logWrite(_:_:previous:reason:hash:)``,
  /// ``_commitStaged(_:logged:cleared:deliversRemovals:nextExpiry:)`` and
  /// ``_finish(_:now:freesHere:)``). Spelt out, its logging and commit are inlined into it;
  /// the table's staging stays a call, as in every write.
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
      previous = _table.stageSet(key, newValue, hash: hash, access.held)
    } else {
      if _signals.loadsStarted.load(ordering: .relaxed) {
        // A load of the key that read its source before this removal must not store it.
        _recordRemovalForLoads(hash: hash, in: &access.state)
      }
      previous = _table.stageRemoveNode(key, hash: hash, access.held)?.value.pointee
      guard previous != nil else {
        // Nothing to log; the other instances may hold the key, though.
        var wakesFeed = false
        if access.changes.feedsLocalChanges { wakesFeed = access.changes.noteAbsentRemoval(key) }
        _writer.unlock(access)
        if wakesFeed { _wakeLocalChangeFeed() }
        return (true, nil)
      }
    }
    _finishKeyedWrite(key, newValue, previous: previous, hash: hash, logged: logged, access)
    return (true, previous)
  }

  /// The end of a keyed write that staged `key` → `newValue` (`nil`: removed) in place of
  /// `previous` without a transaction (a store without a policy, or a rewrite that changes no
  /// count, cost, deadline or order): logs it as every write does, commits it through the one
  /// commit, releases the lock, then does what the write left to do (as
  /// ``_finish(_:now:freesHere:)`` does, with no expiry timer to arm).
  @inlinable @inline(__always)
  func _finishKeyedWrite(
    _ key: Key, _ newValue: Value?, previous: Value?, hash: Int, logged: Int,
    _ access: consuming _WriteAccess<Key, Value>
  ) {
    let deliversRemovals = access.state.logWrite(
      key, newValue, previous: previous, reason: .write, hash: hash)
    let (garbage, followUp) = _commitStaged(
      access, logged: logged, cleared: false, deliversRemovals: deliversRemovals,
      nextExpiry: nil)
    _writer.unlock(access)
    _release(garbage)
    if let followUp { _followUp(followUp) }
  }

  /// The write of ``_performKeyed(_:_:cost:timeToLive:activatingPolicy:)`` that sets a value
  /// in a store with a policy: ``_transact(_:timeToLive:activatingPolicy:collectingExpiredKeys:limits:freesHere:_:)``
  /// spelt out, with one shortcut that shares its commit.
  ///
  /// A write into a store where nothing has expired by its time has nothing to remove at its
  /// beginning, so it stages the value first. A new value for a key present then changes no
  /// count, no total cost and no list of the eviction order when it has the same cost (or the
  /// store no cost limit), and leaves the expiry heap as it is when its deadline is pushed
  /// back or kept (the commonest rewrite, under a default time to live) or it has none, as
  /// the entry had none: it is logged and committed as every write is, without a
  /// transaction, its node keeping its ring position and, raised by the write, its counter.
  /// Any other such write is accounted for by a transaction begun after the staging
  /// (``_Transaction/noteStaged(_:_:replacing:node:hash:in:)``, the accounting every set
  /// shares).
  ///
  /// Out of line, so that the plain write beside it (``_performPlainKeyed(_:_:)``) stays
  /// small.
  @inlinable @inline(never)
  func _setKeyed(
    _ key: Key, _ value: Value, cost: Int, timeToLive: Duration?, activatingPolicy: Bool
  ) -> Value? {
    let hash = key.hashValue
    // A scheduler of the user's is user code: its clock is read before locking.
    let readBefore = _clock.systemOrigin == 0 ? _clockNanos() : 0
    let access = _writer.lock()
    let lifetime = timeToLive?.nanoseconds ?? access.policy.expiry.defaultLifetime
    let idleLifetime = access.policy.expiry.idleLifetime
    let time = _keyedWriteTime(
      lifetime: lifetime, idleLifetime: idleLifetime, timeToLive: timeToLive,
      readBefore: readBefore, access)
    var write: _Transaction<Key, Value>
    let previous: Value?
    // Nothing has expired by the write's time (by the clock's upper bound, if it counts from
    // it): the write's beginning would remove nothing.
    let nextExpiry = access.policy.expiry.next
    if !activatingPolicy && _signals.policyActive.load(ordering: .relaxed)
      && nextExpiry > time.deadlineBase
    {
      let logged = access.changes.appendCount
      let metadata = _Expiry.metadata(
        cost: cost, lifetime: lifetime, idleLifetime: idleLifetime, at: time,
        keepsWriteTime: _signals.keepsWriteTimes.load(ordering: .relaxed))
      let (old, node) = _table.stageSet(key, value, metadata: metadata, hash: hash, access.held)
      let costLimit = access.policy.limits.costLimit
      if let old, !old.isTombstone, old.hasMetadata, old.cost == cost || costLimit == 0,
        _Expiry.keepsHeap(
          replacing: old.deadline, with: Swift.min(metadata.expiresAt, metadata.idleExpiresAt))
      {
        // The cost's difference, if any; the entry keeps its place in the order and its item
        // in the expiry heap.
        if old.cost != cost {
          access.policy.track(node, replacing: old, count: _table.stagedCount(access.held))
        }
        let previous = old.value.pointee
        _finishKeyedWrite(key, value, previous: previous, hash: hash, logged: logged, access)
        return previous
      }
      write = _Transaction(
        store: self, access: access, time: time, reason: .write, collectsExpiredKeys: false)
      let applied = write.noteStaged(key, value, replacing: old, node: node, hash: hash, in: self)
      write.protected = applied.position
      previous = applied.previous
    } else {
      write = _Transaction(
        store: self, access: access, time: time, reason: .write, collectsExpiredKeys: false)
      if activatingPolicy { write.activatePolicy(in: self) }
      write.begin(in: self)
      previous = write.set(key, value, cost: cost, timeToLive: timeToLive, hash: hash, in: self)
    }
    write.close(.toLimits, in: self)
    _writer.unlock(write.access)
    _finish(write.effects, now: write.now, freesHere: false)
    return previous
  }

  /// The write of ``_performKeyed(_:_:cost:timeToLive:activatingPolicy:)`` that removes the
  /// key (see ``_setKeyed(_:_:cost:timeToLive:activatingPolicy:)``).
  @inlinable @inline(never)
  func _removeKeyed(_ key: Key) -> Value? {
    _transact { write in write.remove(key, reason: .write, in: self) }
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
        write.policy.orderAllEntries(of: _table, write.held)
        _table.startKeepingHashes(write.held)
      }
      write.policy.weighCosts(write.policy.limits.costLimit > 0, of: _table, write.held)
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
        return write.policy.limits.isOver(
          count: _table.stagedCount(write.held), fraction: fraction) == nil
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
