import Synchronization

// MARK: - Writes through the policy

extension MemoryStore {
  /// The most expired entries one write removes; the rest go with the next reads or writes.
  @inlinable static var _expiryChunk: Int { 4_096 }
  /// The most entries a purge judges per critical section.
  @inlinable static var _purgeChunk: Int { 512 }
  /// The most entries a trim (a limit lowered, memory pressure) evicts per critical section:
  /// each eviction links a tombstone, and after a trim has freed many nodes the allocator's
  /// slow path can make one allocation cost microseconds.
  @inlinable static var _trimChunk: Int { 128 }

  /// What a write through the policy leaves for the caller to do after unlocking.
  @usableFromInline
  struct _PolicyOutcome: ~Copyable {
    @usableFromInline var changed = false
    @usableFromInline var previous: Value?
    @usableFromInline var garbage: _TableGarbage?
    @usableFromInline var followUp: _TrackingFollowUp?
    /// Arm the expiry timer for this deadline.
    @usableFromInline var armSweepAt: Int64?
    /// The entries a ``_WriteOperation/removeUnchanged(_:)`` removed (a purge returns them).
    @usableFromInline var removed: [Key: Value]?
    /// A ``_WriteOperation/replace(_:)`` found an entry changed since it was read, and staged
    /// nothing.
    @usableFromInline var conflicted = false

    @inlinable init() {}
  }

  /// Performs one write and returns whether it changed the store and the previous value of the
  /// key it names (for `set`, `insert` and `remove`): the write path of every store, with or
  /// without a policy (see ``_policyWriteLocked(now:operation:reason:trimFraction:trimReason:maximumEvictions:)``).
  /// Only the commonest writes have shortcuts through the same steps: a subscript set or
  /// removal, ``_performKeyed(_:_:)``, and its policy form, ``_performKeyedWithPolicy(_:_:cost:timeToLive:)``.
  ///
  /// With `timeToLive`, the write reads the clock (see ``_lockForWrite(timeToLive:)``); with
  /// `activatingPolicy`, it first makes entries carry metadata.
  @inlinable
  func _perform(
    _ operation: _WriteOperation<Key, Value>, reason: ChangeReason = .write,
    timeToLive: Duration? = nil, activatingPolicy: Bool = false
  ) -> (changed: Bool, previous: Value?) {
    let now = _lockForWrite(timeToLive: timeToLive)
    let activation = activatingPolicy ? _activatePolicyLocked(now: now) : nil
    let outcome = _policyWriteLocked(now: now, operation: operation, reason: reason)
    _writeLock.unlock()
    _release(activation)
    let result = (outcome.changed, outcome.previous)
    _finishPolicyWrite(outcome, now: now)
    return result
  }

  /// Sets (`newValue` non-`nil`) or removes `key` through the policy: the policy store's
  /// commonest write, without wrapping it in an operation.
  ///
  /// `cost` `nil` weighs the value with ``entryCost`` (before locking), or gives 0.
  @inlinable
  func _performKeyedWithPolicy(
    _ key: Key, _ newValue: Value?, cost: Int? = nil, timeToLive: Duration? = nil
  ) -> (changed: Bool, previous: Value?) {
    // Weighed only with a cost function: one relaxed load otherwise.
    var entryCost = cost ?? 0
    if cost == nil && _weighs.load(ordering: .relaxed), let newValue {
      entryCost = _weighSlow(key, newValue) ?? 0
    }
    let now = _lockForWrite(timeToLive: timeToLive)
    let activation = _activatePolicyLocked(now: now)
    var write = _PolicyWrite(store: self, now: now, reason: .write, collectsExpiredKeys: false)
    _beginPolicyWriteLocked(&write)
    var protected = -1
    if let newValue {
      let applied = write.set(
        key, newValue, _entryMetadataLocked(now: now, cost: entryCost, timeToLive: timeToLive),
        in: self)
      write.outcome.previous = applied.previous
      protected = applied.position
    } else {
      write.outcome.previous = write.remove(key, reason: .write, in: self)
    }
    _endPolicyWriteLocked(&write, protecting: protected)
    _writeLock.unlock()
    _release(activation)
    _finishPolicyWrite(write.outcome, now: now)
    return (write.outcome.changed, write.outcome.previous)
  }

  /// Takes the write lock for a write, and returns the time it runs at: the clock, read
  /// before locking (the scheduler may be user code), or 0 when no entry's time matters (no
  /// time to live given or by default, no decider, which reads write times, and no entry that
  /// expires), which nothing then reads. If the store started timing entries between the look
  /// and the lock, it unlocks, reads the clock and locks again.
  ///
  /// When only write times need it (a decider, no time to live given or by default, no entry
  /// that expires), the system's coarse clock does (see ``EvictionContext/writtenAt``): about
  /// 6 ns to read instead of 28, for a write time at most a tick early.
  @inlinable @inline(__always)
  func _lockForWrite(timeToLive: Duration?) -> Int64 {
    if timeToLive == nil && !_needsClock {
      _writeLock.lock()
      guard _needsClock else { return 0 }
      _writeLock.unlock()
    }
    if timeToLive == nil && _keepsWriteTimes.load(ordering: .relaxed) && _coarseOffset != 0
      && _nextExpiry.load(ordering: .relaxed) == .max
    {
      let now = _SystemClock.coarse &- _systemOrigin
      _writeLock.lock()
      if _nextExpiry.load(ordering: .relaxed) == .max
        && _policy.pointer.pointee.defaultLifetime == nil
      {
        return now
      }
      _writeLock.unlock()
    }
    let now = _clockNanos()
    _writeLock.lock()
    return now
  }

  /// Whether writes must read the clock: the store times entries (a decider or a default time
  /// to live), or an entry expires.
  @inlinable @inline(__always)
  var _needsClock: Bool {
    _timesEntries.load(ordering: .relaxed) || _nextExpiry.load(ordering: .relaxed) != .max
  }

  /// The metadata of an entry written at `now` (write lock held). The write time is kept
  /// only for a decider, the one reader of it.
  @inlinable @inline(__always)
  func _entryMetadataLocked(now: Int64, cost: Int, timeToLive: Duration?) -> _EntryMetadata {
    let lifetime = timeToLive?.nanoseconds ?? _policy.pointer.pointee.defaultLifetime
    return _EntryMetadata(
      writtenAt: _keepsWriteTimes.load(ordering: .relaxed) ? now : 0,
      expiresAt: lifetime.map { now.addingSaturating($0) } ?? .max,
      cost: cost)
  }

  /// Makes every entry carry metadata from now on (write lock held). O(*n*) the first time:
  /// the entries present are copied with metadata, in a write that changes no value.
  ///
  /// - Returns: What the write retired, for the caller to ``_release(_:)`` after unlocking.
  @inlinable
  func _activatePolicyLocked(now: Int64) -> _TableGarbage? {
    guard !_policyActive.load(ordering: .relaxed) else { return nil }
    _table.startCarryingMetadata(
      _EntryMetadata(
        writtenAt: _keepsWriteTimes.load(ordering: .relaxed) ? now : 0, expiresAt: .max, cost: 0
      ))
    _policyActive.store(true, ordering: .relaxed)
    return _table.publish()
  }

  /// The heart of every write of a store with a policy (write lock held): removes due expired
  /// entries, applies `operation`, and evicts to stay within the limits (times `trimFraction`), all staged on
  /// the table (one hash per key) and published as one atomic write, logged for change
  /// batches with each key's reason as it is staged.
  @inlinable
  func _policyWriteLocked(
    now: Int64, operation: _WriteOperation<Key, Value>?, reason: ChangeReason = .write,
    trimFraction: Double = 1, trimReason: EvictionReason? = nil, maximumEvictions: Int = .max
  ) -> _PolicyOutcome {
    var write = _PolicyWrite(
      store: self, now: now, reason: reason, collectsExpiredKeys: operation?.isRemoveAll ?? false)
    _beginPolicyWriteLocked(&write)
    let metadata = _entryMetadataLocked(now: now, cost: 0, timeToLive: nil)
    var protected = -1
    switch operation {
    case .insert(let key, let value, let cost, let timeToLive):
      if let existing = write.liveNode(key, in: self) {
        write.outcome.previous = existing.value.pointee
      } else {
        let metadata =
          cost == 0 && timeToLive == nil
          ? metadata : _entryMetadataLocked(now: now, cost: cost, timeToLive: timeToLive)
        protected = write.set(key, value, metadata, in: self).position
      }
    case .merge(let entries, let costs):
      if let costs {
        var costed = metadata
        for (key, value) in entries {
          costed.cost = costs[key] ?? 0
          _ = write.set(key, value, costed, in: self)
        }
      } else {
        for (key, value) in entries { _ = write.set(key, value, metadata, in: self) }
      }
    case .removeKeys(let keys):
      for key in keys { _ = write.remove(key, reason: reason, in: self) }
    case .removeAll:
      write.removeAll(in: self)
    case .replace(let entries):
      // All or none: every key must still hold the entry it was read with.
      for entry in entries where write.liveNode(entry.key, in: self)?.version != entry.expected {
        write.outcome.conflicted = true
        break
      }
      guard !write.outcome.conflicted else { break }
      for (key, value, expected, cost) in entries {
        if let value {
          // A live entry keeps its deadline and, unless weighed again, its cost.
          var kept = metadata
          if expected != nil, write.carriesMetadata, let node = _table.stagedNode(forKey: key) {
            kept.expiresAt = node.expiresAt
            kept.cost = node.cost
          }
          if let cost { kept.cost = cost }
          let applied = write.set(key, value, kept, in: self)
          if entries.count == 1 { protected = applied.position }
        } else {
          _ = write.remove(key, reason: reason, in: self)
        }
      }
    case .renew(let key, let timeToLive):
      let lifetime = timeToLive?.nanoseconds ?? _policy.pointer.pointee.defaultLifetime
      if let renewed = write.renew(key, lifetime: lifetime, in: self) {
        write.outcome.previous = renewed.value
        protected = renewed.position
      }
    case .removeUnchanged(let entries):
      // Entries judged outside the lock (by a purge's decider, or `removeAll(where:)`), each if
      // it still holds the value judged; one that has expired since goes as expired.
      var removed: [Key: Value] = [:]
      for (key, version) in entries {
        guard let node = _table.stagedNode(forKey: key), node.version == version,
          let value = write.remove(key, hash: node.storedHash, reason: reason, in: self)
        else { continue }
        removed[key] = value
        if let evictionReason = reason.evictionReason {
          _policy.pointer.pointee.evictions[evictionReason] += 1
        }
      }
      write.outcome.removed = removed
    case nil:
      break
    }
    _endPolicyWriteLocked(
      &write, protecting: protected, trimFraction: trimFraction, trimReason: trimReason,
      maximumEvictions: maximumEvictions)
    return write.outcome
  }

  /// Starts `write`, a write through the policy just made (write lock held): removes the
  /// entries that have expired by its time, earliest first, a bounded number per write. The
  /// write is made by the caller and passed in place: returning it would copy its ~150 bytes.
  @inlinable @inline(__always)
  func _beginPolicyWriteLocked(_ write: inout _PolicyWrite<Key, Value>) {
    let policy = _policy.pointer
    guard policy.pointee.nextExpiry <= write.now else { return }
    while write.expiredCount < Self._expiryChunk,
      let node = policy.pointee.takeExpired(_table, now: write.now)
    {
      write.removeEntry(at: node.slot, reason: .expired, in: self)
    }
  }

  /// Ends a write through the policy (write lock held): evicts to stay within the limits
  /// (times `trimFraction`), never the entry at ring position `protected` (the one the write
  /// set; -1 for none) unless it is the only entry, and publishes. The entry is named by its
  /// position, which it keeps until holes are filled, because growth may copy its node.
  @inlinable @inline(__always)
  func _endPolicyWriteLocked(
    _ write: inout _PolicyWrite<Key, Value>, protecting protected: Int,
    trimFraction: Double = 1, trimReason: EvictionReason? = nil, maximumEvictions: Int = .max
  ) {
    let policy = _policy.pointer
    var evictions = 0
    var protected = protected
    // An entry whose cost alone exceeds the cost limit is removed by its own write, and evicts
    // nothing else.
    if protected >= 0, policy.pointee.costLimit > 0,
      let node = _table.ringNode(at: protected), node.cost > policy.pointee.costLimit
    {
      write.removeEntry(at: protected, reason: .evictedByCostLimit, in: self)
      policy.pointee.evictions[.costLimit] += 1
      evictions += 1
      protected = -1
    }
    while evictions < maximumEvictions,
      let over = policy.pointee.isOverLimits(count: _table.stagedCount, fraction: trimFraction),
      let victim = policy.pointee.nextVictim(
        in: _table, protecting: protected, costOnly: over == .costLimit)
    {
      let evictionReason = trimReason ?? over
      if victim.slot == protected { protected = -1 }  // It was the only entry.
      write.removeEntry(at: victim.slot, reason: .evicted(evictionReason), in: self)
      // Only what the limits evict is remembered: a memory-pressure trim forgets instead. The
      // victim's node stays readable until the lock is released.
      if trimReason == nil {
        policy.pointee.noteEvicted(
          hash: victim.storedHash.unsafelyUnwrapped, count: _table.stagedCount)
      }
      policy.pointee.evictions[evictionReason] += 1
      evictions += 1
    }
    if write.expiredCount > 0 {
      policy.pointee.evictions[.expired] += UInt64(write.expiredCount)
    }
    policy.pointee.placePendingEntry()
    policy.pointee.fillRingHoles(_table)
    write.finish(in: self)
  }

  /// Logs a write through the policy for change batches, if they are on (write lock held).
  @inlinable @inline(__always)
  func _logPolicyChange(_ key: Key, _ value: Value?, wasPresent: Bool, _ reason: ChangeReason) {
    guard _tracker.pointer.pointee.isTracking else { return }
    _tracker.pointer.pointee.log.append(.key(key, value, wasPresent: wasPresent, reason))
  }

  /// Does, after unlocking, what a write through the policy left to do; with `freesHere`, frees
  /// what the write retired on the calling thread whatever its size.
  @inlinable @inline(__always)
  func _finishPolicyWrite(
    _ outcome: borrowing _PolicyOutcome, now: Int64, freesHere: Bool = false
  ) {
    // Released only now: a value's deinit may use the store.
    if freesHere, let garbage = outcome.garbage {
      _table._free(garbage)
    } else {
      _release(outcome.garbage)
    }
    if let followUp = outcome.followUp { _followUp(followUp) }
    if let deadline = outcome.armSweepAt {
      _scheduler.schedule(after: .nanoseconds(max(deadline - now, 0))) { [weak self] in
        self?._expiryTimerFired(deadline)
      }
    }
  }

  /// The expiry timer: removes what has expired and arms the timer for the next expiry.
  @usableFromInline
  func _expiryTimerFired(_ deadline: Int64) {
    _writeLock.withLock {
      if _policy.pointer.pointee.sweepArmedFor == deadline {
        _policy.pointer.pointee.sweepArmedFor = nil
      }
    }
    let now = _clockNanos()
    repeat {
      _writeLock.yieldToWaiters()
      _writeLock.lock()
      let outcome = _policyWriteLocked(now: now, operation: nil)
      _writeLock.unlock()
      _finishPolicyWrite(outcome, now: now)
    } while _nextExpiry.load(ordering: .acquiring) <= now
  }

  /// Sets a limit and evicts down to it.
  func _setLimit(_ limit: WritableKeyPath<_Policy, Int>, to newValue: Int?) {
    let value = max(newValue ?? 0, 0)
    let now = _clockNanos()
    let activation = _writeLock.withLock {
      let policy = _policy.pointer
      policy.pointee[keyPath: limit] = value
      let garbage = _activatePolicyLocked(now: now)
      // The first limit puts the entries in the eviction order, which is kept from then on.
      if value > 0 && !policy.pointee.isOrdered { policy.pointee.orderAllEntries(of: _table) }
      return garbage
    }
    _release(activation)
    _enforceLimits(fraction: 1, reason: nil)
  }

  /// Evicts, one chunk per critical section, until the store is within `fraction` of its
  /// limits.
  func _enforceLimits(fraction: Double, reason: EvictionReason?) {
    guard _policyActive.load(ordering: .relaxed) else { return }
    while true {
      _writeLock.yieldToWaiters()
      let now = _clockNanos()
      _writeLock.lock()
      let outcome = _policyWriteLocked(
        now: now, operation: nil, trimFraction: fraction, trimReason: reason,
        maximumEvictions: Self._trimChunk)
      let isDone =
        _policy.pointer.pointee.isOverLimits(count: _table.stagedCount, fraction: fraction) == nil
      _writeLock.unlock()
      // Freed here, whatever its size: this is bulk work its caller asked for, and a thread
      // freeing it beside would compete for the cores with the writers this work must not
      // hold up.
      _finishPolicyWrite(outcome, now: now, freesHere: true)
      if isDone { return }
    }
  }

  /// Empties the store on a critical memory-pressure event, counting the evictions.
  func _removeAllUnderPressure() {
    _ = _perform(.removeAll, reason: .evictedByMemoryPressure, activatingPolicy: true)
  }
}
