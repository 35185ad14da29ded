import Synchronization

// MARK: - Public API

extension MemoryStore {
  /// Decides whether an entry should be evicted: `true` evicts it.
  ///
  /// The decider runs on the thread that purges — the caller of
  /// ``purgeEvictableItems(context:)`` or ``handleMemoryPressure(_:)``, or a background queue
  /// of the store's scheduler for the periodic purge — outside every lock of the store. It may
  /// read and write the store. It never runs concurrently with itself for one store.
  public typealias EvictionDecider = @Sendable (Key, Value, EvictionContext) -> Bool

  /// Creates an empty store whose entries an eviction decider can remove.
  ///
  /// ```swift
  /// let quotes = MemoryStore<String, Quote>(name: "quotes") { _, quote, context in
  ///   context.now - quote.time > .seconds(60)    // evict quotes older than a minute
  /// }
  /// quotes.evictionInterval = .seconds(30)       // purge every 30 s (default 600 s)
  /// ```
  ///
  /// The decider runs for every entry when ``purgeEvictableItems(context:)`` is called, every
  /// ``evictionInterval`` (600 seconds unless changed), and on
  /// ``handleMemoryPressure(_:)``. See ``EvictionDecider`` for where it runs.
  ///
  /// A store with a decider records, for each entry, when it was written and its cost and, for
  /// the decider's ``EvictionContext/lastReadAt``, reads note the second of their lookup in a
  /// lock-free table. Its clock ticks once a second on the scheduler while the store exists.
  ///
  /// - Parameters:
  ///   - name: A name for diagnostics.
  ///   - scheduler: The source of time and of the periodic purge; tests pass a
  ///     ``ManualScheduler``.
  ///   - evictionDecider: Returns `true` for an entry that should be removed.
  public convenience init(
    name: String? = nil, scheduler: some StoreScheduler = .dispatch,
    evictionDecider: @escaping EvictionDecider
  ) {
    self.init(name: name, scheduler: scheduler, decider: evictionDecider)
    _writeLock.withLock { _activatePolicyLocked(now: 0, needsRecency: true) }
    _readTick.store(1, ordering: .relaxed)
    _scheduleTick()
    evictionInterval = .seconds(600)
  }

  /// Asks the eviction decider about every entry and removes those it returns `true` for.
  ///
  /// ```swift
  /// let evicted = store.purgeEvictableItems(context: .manual("low disk"))
  /// ```
  ///
  /// The purge judges the entries present when it starts, in chunks: it reads a few hundred
  /// entries under the write lock, calls the decider for each outside every lock, then
  /// removes the chosen ones in one write. So readers never wait, and writers wait at most
  /// for one chunk, whatever the size of the store. There is no time-of-check to time-of-use
  /// race: an entry written (replaced) after the purge started, or after the decider judged
  /// it, is not removed, and entries written during the purge are never lost.
  ///
  /// Without a decider this does nothing; on an empty store the decider is not called. A
  /// purge called from inside the decider returns at once, empty; one called from another
  /// thread while a purge runs waits for it, so a decider must not wait for another thread's
  /// purge. Removals appear in change batches with reason
  /// ``ChangeReason/evictedByDecider``.
  ///
  /// - Parameter trigger: Why the purge runs, passed to the decider in
  ///   ``EvictionContext/trigger``; by default `.manual(nil)`.
  /// - Returns: The entries removed. When it returns, every read sees them gone.
  /// - Complexity: O(*n*) decider calls for *n* entries.
  @discardableResult
  public func purgeEvictableItems(context trigger: EvictionTrigger = .manual(nil)) -> [Key: Value] {
    _purge(trigger)
  }

  /// How often the store runs the eviction decider on every entry; `.zero` disables it.
  ///
  /// With a decider the default is 600 seconds, as in YMCache; without one it is always `.zero`
  /// and setting it has no effect, so no timer exists. Setting it restarts the period. The
  /// purge runs on the scheduler's background queue with trigger ``EvictionTrigger/interval``.
  /// Thread-safe.
  public var evictionInterval: Duration {
    get { _writeLock.withLock { _policy.pointer.pointee.evictionInterval } }
    set {
      guard _evictionDecider != nil else { return }
      let interval = max(newValue, .zero)
      let generation = _writeLock.withLock {
        _policy.pointer.pointee.evictionInterval = interval
        _policy.pointer.pointee.intervalGeneration &+= 1
        return _policy.pointer.pointee.intervalGeneration
      }
      if interval > .zero { _scheduleIntervalPurge(after: interval, generation: generation) }
    }
  }

  /// The most entries the store holds; `nil` (the default) or 0 for no limit.
  ///
  /// ```swift
  /// let recent = MemoryStore<String, Quote>(name: "recent")
  /// recent.countLimit = 10_000
  /// ```
  ///
  /// Enforced strictly: when a write returns, the store is within the limit. The write that
  /// goes over it evicts the entry the CLOCK hand picks — the least recently used, in
  /// approximation; an entry read often survives up to three turns of the hand (see
  /// <doc:Eviction>) — never the entry being written, unless it is the only one left.
  /// Keys whose hashes fall in the same slot of the recency table share a counter, which
  /// makes the order approximate for them. Lowering the limit evicts at once, in chunks. Evictions appear in change batches with
  /// reason ``ChangeReason/evictedByCountLimit``.
  ///
  /// Setting a limit makes reads note recency in a lock-free table (a hash and one relaxed
  /// atomic load per hit, and a store only when the entry's counter changes) and writes keep
  /// per-entry records. Setting the first limit on a large store is O(*n*). Thread-safe.
  public var countLimit: Int? {
    get { _writeLock.withLock { _policy.pointer.pointee.countLimit }.nonZero }
    set { _setLimit(\.countLimit, to: newValue) }
  }

  /// The most total cost the entries may have; `nil` (the default) or 0 for no limit.
  ///
  /// Costs are given per write with ``setValue(_:forKey:cost:timeToLive:)``; other writes
  /// cost 0. Enforced like ``countLimit``, with reason ``ChangeReason/evictedByCostLimit``.
  /// An entry whose cost alone exceeds the limit is evicted by its own write. Thread-safe.
  public var costLimit: Int? {
    get { _writeLock.withLock { _policy.pointer.pointee.costLimit }.nonZero }
    set { _setLimit(\.costLimit, to: newValue) }
  }

  /// How long entries live when a write gives no time to live; `nil` (the default) for
  /// forever.
  ///
  /// ```swift
  /// sessions.defaultTimeToLive = .seconds(1_800)
  /// ```
  ///
  /// Applies to writes made after it is set. An expired entry is never returned by any read
  /// (subscript, ``count``, ``allItems``, ``values(forKeys:)``, a save), even before it is
  /// removed: while any entry has a time to live, a read compares the earliest expiry with
  /// the clock, and the first read or write after an expiry removes the expired entries. A
  /// timer on the scheduler removes them too, at the earliest expiry, so that they leave
  /// memory and appear in change batches with reason ``ChangeReason/expired`` without a read.
  ///
  /// While no entry has a time to live, reads pay one relaxed atomic load for this; while one
  /// does, they also read the scheduler's clock. Thread-safe.
  public var defaultTimeToLive: Duration? {
    get { _writeLock.withLock { _policy.pointer.pointee.defaultTimeToLive } }
    set {
      let now = _clockNanos()
      _writeLock.withLock {
        _activatePolicyLocked(now: now, needsRecency: false)
        _policy.pointer.pointee.defaultTimeToLive = newValue
      }
    }
  }

  /// Inserts or replaces the value for `key` with a cost and a time to live, and returns the
  /// value it replaced.
  ///
  /// ```swift
  /// images.setValue(image, forKey: url, cost: image.byteCount)
  /// tokens.setValue(token, forKey: user, timeToLive: .seconds(300))
  /// ```
  ///
  /// An ordered write, like ``updateValue(_:forKey:)``. The write may evict other entries to
  /// stay within ``countLimit`` and ``costLimit``; they are removed in the same atomic write.
  ///
  /// - Parameters:
  ///   - value: The value to store.
  ///   - key: The key to store it for.
  ///   - cost: The entry's cost toward ``costLimit``, such as its size in bytes. Default 0.
  ///   - timeToLive: How long the entry lives; `nil` uses ``defaultTimeToLive``. Zero or
  ///     less: the entry is expired at once.
  /// - Returns: The previous value, or `nil` if the key was absent or expired.
  /// - Complexity: O(1) on average, plus O(1) amortised per eviction.
  @discardableResult
  public func setValue(
    _ value: Value, forKey key: Key, cost: Int = 0, timeToLive: Duration? = nil
  ) -> Value? {
    _performWithPolicy(.set(key, value), reason: .write, cost: cost, timeToLive: timeToLive)
      .previous
  }

  /// What ``handleMemoryPressure(_:)`` frees. Thread-safe.
  public var memoryPressurePolicy: MemoryPressurePolicy {
    get { _writeLock.withLock { _policy.pointer.pointee.memoryPressure } }
    set { _writeLock.withLock { _policy.pointer.pointee.memoryPressure = newValue } }
  }

  /// Frees memory: runs the decider with ``EvictionTrigger/memoryPressure(_:)``, then trims a
  /// store with limits, least recently used first, to the fraction of its limits that
  /// ``memoryPressurePolicy`` gives for `level`; a critical event also empties a store without
  /// limits if the policy says so.
  ///
  /// Works on every platform. On Apple platforms, `monitorSystemMemoryPressure(queue:)`
  /// calls it for the system's events; on Linux the app calls it, for example when the
  /// cgroup's `memory.events` file reports `high`, or from its own accounting:
  ///
  /// ```swift
  /// if residentBytes > budget { store.handleMemoryPressure(.warning) }
  /// ```
  ///
  /// Removals appear in change batches with reason ``ChangeReason/evictedByMemoryPressure``
  /// (``ChangeReason/evictedByDecider`` for the decider's). Runs on the calling thread; the
  /// trimming holds the write lock for one chunk of evictions at a time.
  public func handleMemoryPressure(_ level: MemoryPressureLevel) {
    if _evictionDecider != nil { _ = _purge(.memoryPressure(level)) }
    let pressure = _writeLock.withLock { _policy.pointer.pointee.memoryPressure }
    let fraction = level == .critical ? pressure.criticalFraction : pressure.warningFraction
    _enforceLimits(fraction: fraction, reason: .memoryPressure)
    if level == .critical && pressure.removesAllOnCritical { _removeAllUnderPressure() }
  }

  /// Hits, misses, evictions per reason, count and total cost.
  ///
  /// Hits and misses are counted by every read in the reading thread's own stripe of
  /// counters, next to the counters reads already update, so counting costs about one
  /// uncontended atomic increment per read; this property adds the stripes up, so under
  /// concurrent reads the two numbers are each exact but not from one instant. The rest is
  /// read under the write lock.
  public var statistics: StoreStatistics {
    // Like every read, it never counts an entry that has expired.
    _expireDueEntries()
    let hits = _readers.total(ofCounter: _ReaderIndicator.hitCounter)
    let misses = _readers.total(ofCounter: _ReaderIndicator.missCounter)
    return _writeLock.withLock {
      let policy = _policy.pointer
      return StoreStatistics(
        hits: UInt64(truncatingIfNeeded: hits), misses: UInt64(truncatingIfNeeded: misses),
        evictions: policy.pointee.evictions, count: _lockedView().count,
        totalCost: policy.pointee.totalCost)
    }
  }
}

// MARK: - Reads

extension MemoryStore {
  /// Counts a lookup and, for a hit in a store that tracks recency, notes it for eviction.
  @inlinable @inline(__always)
  func _recordLookup(_ key: Key, found: Bool, counters: UnsafeMutablePointer<Atomic<Int>>) {
    counters[found ? _ReaderIndicator.hitCounter : _ReaderIndicator.missCounter]
      .wrappingAdd(1, ordering: .relaxed)
    if found {
      let table = _recencyTable.load(ordering: .acquiring)
      if table != 0 { _noteRead(key, table: table) }
    }
  }

  /// Raises the key's CLOCK counter (to at most 3) and records the current second, storing
  /// only when that changes the slot, so hot keys cost a load and no write.
  @inlinable @inline(__always)
  func _noteRead(_ key: Key, table: Int) {
    // Safe: a published table is never freed before the store (see `_RecencyTable`), and its
    // header was written before the releasing store that published it.
    let base = UnsafeMutableRawPointer(bitPattern: table).unsafelyUnwrapped
    let mask = base.load(as: Int.self)
    let slot = (base + MemoryLayout<Int>.stride + (key.hashValue & mask) &* 4)
      .assumingMemoryBound(to: Atomic<UInt32>.self)
    let value = slot.pointee.load(ordering: .relaxed)
    let counter = value & 3
    let updated = _readTick.load(ordering: .relaxed) << 2 | (counter == 3 ? 3 : counter + 1)
    if updated != value { slot.pointee.store(updated, ordering: .relaxed) }
  }

  /// Removes the entries that have expired by now, if any may have: what every read, save,
  /// purge and statistics call does first. One relaxed atomic load while no entry expires.
  @inlinable @inline(__always)
  func _expireDueEntries() {
    if _nextExpiry.load(ordering: .relaxed) != .max { _expireBeforeRead() }
  }

  /// Removes the entries that have expired by now (see ``_expireDueEntries()``).
  @inlinable @inline(never)
  func _expireBeforeRead() {
    let now = _clockNanos()
    while _nextExpiry.load(ordering: .acquiring) <= now {
      _writeLock.lock()
      let outcome = _policyWriteLocked(now: now, operation: nil)
      _writeLock.unlock()
      _finishPolicyWrite(outcome, now: now)
    }
  }
}

// MARK: - Writes through the policy

extension MemoryStore {
  /// The most expired entries one write removes; the rest go with the next reads or writes.
  @inlinable static var _expiryChunk: Int { 4_096 }
  /// The most entries a purge judges, or a trim evicts, per critical section.
  @inlinable static var _purgeChunk: Int { 512 }

  /// What a write through the policy leaves for the caller to do after unlocking.
  @usableFromInline
  struct _PolicyOutcome {
    @usableFromInline var changed = false
    @usableFromInline var previous: Value?
    @usableFromInline var garbage: _TableGarbage?
    @usableFromInline var followUp: _TrackingFollowUp?
    /// Arm the expiry timer for this deadline.
    @usableFromInline var armSweepAt: Int64?
    /// The entries removed at the caller's request (a purge's).
    @usableFromInline var removed: [Key: Value] = [:]

    @inlinable init() {}
  }

  /// Performs `operation` through the policy, activating it first if needed.
  @inlinable
  func _performWithPolicy(
    _ operation: _WriteOperation<Key, Value>, reason: ChangeReason, cost: Int = 0,
    timeToLive: Duration? = nil
  ) -> (changed: Bool, previous: Value?) {
    // Read the clock before locking: the scheduler may be user code.
    let now = _clockNanos()
    _writeLock.lock()
    _activatePolicyLocked(now: now, needsRecency: false)
    let outcome = _policyWriteLocked(
      now: now, operation: operation, reason: reason, cost: cost, timeToLive: timeToLive)
    _writeLock.unlock()
    let result = (outcome.changed, outcome.previous)
    _finishPolicyWrite(outcome, now: now)
    return result
  }

  /// Starts keeping records for every entry (write lock held). O(*n*) the first time.
  @inlinable
  func _activatePolicyLocked(now: Int64, needsRecency: Bool) {
    let policy = _policy.pointer
    if !_policyActive.load(ordering: .relaxed) {
      let contents = _lockedView().dictionary
      for key in contents.keys {
        policy.pointee.write(key, now: now, cost: 0, expiresAt: .max)
      }
      _policyActive.store(true, ordering: .relaxed)
      // Releasing `contents` here runs no deinit: the store still holds every value.
    }
    if needsRecency { _reserveRecencyLocked() }
  }

  /// Gives reads a recency table with room for the current entries (write lock held).
  @inlinable
  func _reserveRecencyLocked() {
    let policy = _policy.pointer
    if policy.pointee.table.base != nil
      && policy.pointee.records.count * 4 <= policy.pointee.table.slotCount
    {
      return
    }
    if let table = policy.pointee.table.reserve(forEntries: policy.pointee.records.count * 2) {
      _recencyTable.store(Int(bitPattern: table), ordering: .releasing)
    }
  }

  /// The heart of every write of a store with a policy (write lock held): removes due expired
  /// entries, applies `operation`, removes the `requested` entries whose value is still the
  /// judged one, and evicts to stay within the limits (times `trimFraction`), all as one
  /// atomic write, logged for change batches with each key's reason.
  @inlinable
  func _policyWriteLocked(
    now: Int64, operation: _WriteOperation<Key, Value>?, reason: ChangeReason = .write,
    cost: Int = 0, timeToLive: Duration? = nil,
    requested: [(key: Key, version: UInt64)] = [], requestedReason: EvictionReason = .decider,
    trimFraction: Double = 1, trimReason: EvictionReason? = nil, maximumEvictions: Int = .max
  ) -> _PolicyOutcome {
    let policy = _policy.pointer
    var outcome = _PolicyOutcome()
    // 1. Expired entries, earliest first, a bounded number per write.
    var expired = policy.pointee.takeExpired(now: now, limit: Self._expiryChunk)
    func expireIfDue(_ key: Key) {
      if policy.pointee.expiringCount > 0 && policy.pointee.isExpired(key, now: now) {
        policy.pointee.remove(key)
        expired.append(key)
      }
    }
    // 2. The write itself, mirrored in the records.
    let lifetime = timeToLive ?? policy.pointee.defaultTimeToLive
    let expiresAt = lifetime.map { now.addingSaturating($0.nanoseconds) } ?? .max
    var protected: Key?
    var insertApplies = false
    switch operation {
    case .set(let key, _):
      expireIfDue(key)
      policy.pointee.write(key, now: now, cost: cost, expiresAt: expiresAt)
      protected = key
    case .insert(let key, _):
      expireIfDue(key)
      if policy.pointee.records[key] == nil {
        policy.pointee.write(key, now: now, cost: cost, expiresAt: expiresAt)
        insertApplies = true
        protected = key
      }
    case .remove(let key):
      expireIfDue(key)
      policy.pointee.remove(key)
    case .merge(let entries):
      for key in entries.keys {
        expireIfDue(key)
        policy.pointee.write(key, now: now, cost: 0, expiresAt: expiresAt)
      }
    case .removeKeys(let keys):
      for key in keys {
        expireIfDue(key)
        policy.pointee.remove(key)
      }
    case .removeAll:
      if let evictionReason = reason.evictionReason {
        policy.pointee.evictions[evictionReason] += UInt64(policy.pointee.records.count)
      }
      policy.pointee.removeAll()
    case .compound, nil:
      break
    }
    // 3. Entries a purge chose, if their value is still the one it judged.
    var evicted: [(key: Key, reason: EvictionReason)] = []
    for (key, version) in requested where policy.pointee.records[key]?.version == version {
      policy.pointee.remove(key)
      evicted.append((key, requestedReason))
    }
    let requestedCount = evicted.count
    // 4. The limits.
    while evicted.count < maximumEvictions,
      let over = policy.pointee.isOverLimits(fraction: trimFraction),
      let victim = policy.pointee.nextVictim(protecting: protected)
    {
      policy.pointee.remove(victim)
      evicted.append((victim, trimReason ?? over))
    }
    policy.pointee.evictions[.expired] += UInt64(expired.count)
    for (_, reason) in evicted { policy.pointee.evictions[reason] += 1 }

    let nextExpiry = policy.pointee.nextExpiry()
    if nextExpiry != .max && policy.pointee.sweepArmedFor.map({ nextExpiry < $0 }) ?? true {
      policy.pointee.sweepArmedFor = nextExpiry
      outcome.armSweepAt = nextExpiry
    }
    guard operation != nil || !expired.isEmpty || !evicted.isEmpty else { return outcome }

    // 5. Log, then apply as one write.
    let view = _lockedView()
    for (key, _) in evicted.prefix(requestedCount) {
      outcome.removed[key] = view.value(forKey: key)
    }
    outcome.followUp = _logPolicyWriteLocked(
      view: view, expired: expired, operation: operation, insertApplies: insertApplies,
      evicted: evicted, reason: reason)
    // A read that sees this write must see an earlier expiry it brings; a later one only
    // once the expired entries are gone from what readers see.
    let earlier = min(nextExpiry, _nextExpiry.load(ordering: .relaxed))
    _nextExpiry.store(earlier, ordering: .relaxed)
    // The write alone when it expires and evicts nothing (the common case): a compound write
    // is an allocation.
    let result: (changed: Bool, previous: Value?, garbage: _TableGarbage?)
    if let operation, expired.isEmpty, evicted.isEmpty {
      result = _applyLocked(operation)
    } else {
      result = _applyLocked(
        .compound(expired: expired, operation, evicted: evicted.map { $0.key }))
    }
    _nextExpiry.store(nextExpiry, ordering: .releasing)
    if result.changed { _tracker.pointer.pointee.writeCount &+= 1 }
    outcome.changed = result.changed
    outcome.previous = result.previous
    outcome.garbage = result.garbage
    if policy.pointee.table.base != nil { _reserveRecencyLocked() }
    policy.pointee.compactIfSparse()
    return outcome
  }

  /// Logs a write through the policy for change batches (write lock held, before applying).
  @inlinable
  func _logPolicyWriteLocked(
    view: _ReadView<Key, Value>, expired: [Key], operation: _WriteOperation<Key, Value>?,
    insertApplies: Bool, evicted: [(key: Key, reason: EvictionReason)], reason: ChangeReason
  ) -> _TrackingFollowUp? {
    let tracker = _tracker.pointer
    guard tracker.pointee.isTracking else { return nil }
    let logged = tracker.pointee.log.count
    var cleared = false
    let expiredKeys = expired.isEmpty ? [] : Set(expired)
    func isPresent(_ key: Key) -> Bool {
      !expiredKeys.contains(key) && view.value(forKey: key) != nil
    }
    for key in expired {
      tracker.pointee.log.append(.key(key, nil, wasPresent: true, .expired))
    }
    switch operation {
    case .set(let key, let value):
      tracker.pointee.log.append(.key(key, value, wasPresent: isPresent(key), reason))
    case .insert(let key, let value):
      if insertApplies { tracker.pointee.log.append(.key(key, value, wasPresent: false, reason)) }
    case .remove(let key):
      if isPresent(key) { tracker.pointee.log.append(.key(key, nil, wasPresent: true, reason)) }
    case .merge(let entries):
      for (key, value) in entries {
        tracker.pointee.log.append(.key(key, value, wasPresent: isPresent(key), reason))
      }
    case .removeKeys(let keys):
      for key in keys where isPresent(key) {
        tracker.pointee.log.append(.key(key, nil, wasPresent: true, reason))
      }
    case .removeAll:
      // The expired keys are present, and removed by this write before the clear.
      if view.count > expired.count {
        tracker.pointee.log.append(
          .clear(_ClearedContents(table: _table, excluding: expired), reason))
        cleared = true
      }
    case .compound, nil:
      break
    }
    for (key, evictionReason) in evicted {
      tracker.pointee.log.append(.key(key, nil, wasPresent: true, .evicted(evictionReason)))
    }
    if cleared { return tracker.pointee.followUp(sealing: true) }
    return tracker.pointee.log.count == logged ? nil : tracker.pointee.followUpIfNeeded()
  }

  /// Does, after unlocking, what a write through the policy left to do.
  @inlinable
  func _finishPolicyWrite(_ outcome: _PolicyOutcome, now: Int64) {
    // Released only now: a value's deinit may use the store.
    _release(outcome.garbage)
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
      _writeLock.lock()
      let outcome = _policyWriteLocked(now: now, operation: nil)
      _writeLock.unlock()
      _finishPolicyWrite(outcome, now: now)
    } while _nextExpiry.load(ordering: .acquiring) <= now
  }

  /// Sets a limit and evicts down to it.
  func _setLimit(_ limit: WritableKeyPath<_Policy<Key>, Int>, to newValue: Int?) {
    let value = max(newValue ?? 0, 0)
    let now = _clockNanos()
    _writeLock.withLock {
      _activatePolicyLocked(now: now, needsRecency: value > 0)
      _policy.pointer.pointee[keyPath: limit] = value
    }
    _enforceLimits(fraction: 1, reason: nil)
  }

  /// Evicts, one chunk per critical section, until the store is within `fraction` of its
  /// limits.
  func _enforceLimits(fraction: Double, reason: EvictionReason?) {
    guard _policyActive.load(ordering: .relaxed) else { return }
    while true {
      let now = _clockNanos()
      _writeLock.lock()
      let outcome = _policyWriteLocked(
        now: now, operation: nil, trimFraction: fraction, trimReason: reason,
        maximumEvictions: Self._purgeChunk)
      let isDone = _policy.pointer.pointee.isOverLimits(fraction: fraction) == nil
      _writeLock.unlock()
      _finishPolicyWrite(outcome, now: now)
      if isDone { return }
    }
  }

  /// Empties the store on a critical memory-pressure event, counting the evictions.
  func _removeAllUnderPressure() {
    let now = _clockNanos()
    _writeLock.lock()
    _activatePolicyLocked(now: now, needsRecency: false)
    let outcome = _policyWriteLocked(
      now: now, operation: .removeAll, reason: .evictedByMemoryPressure)
    _writeLock.unlock()
    _finishPolicyWrite(outcome, now: now)
  }
}

// MARK: - Purging

extension MemoryStore {
  /// Runs the decider over the entries present now, in chunks; see
  /// ``purgeEvictableItems(context:)``.
  func _purge(_ trigger: EvictionTrigger) -> [Key: Value] {
    guard let decider = _evictionDecider, _purgeGate.enter() else { return [:] }
    defer { _purgeGate.leave() }
    _expireDueEntries()
    let start = _clockNanos()
    _readTick.store(Self._tick(start), ordering: .relaxed)
    let startVersion = _writeLock.withLock {
      _policy.pointer.pointee.purgesRunning += 1
      return _policy.pointer.pointee.version
    }
    defer { _writeLock.withLock { _policy.pointer.pointee.purgesRunning -= 1 } }
    let startInstant = _instant(start)
    var evicted: [Key: Value] = [:]
    var position = 0
    var isFinished = false
    while !isFinished {
      var candidates: [(key: Key, value: Value, record: _EntryRecord, tick: UInt32)] = []
      candidates.reserveCapacity(Self._purgeChunk)
      _writeLock.withLock {
        let policy = _policy.pointer
        let view = _lockedView()
        while position < policy.pointee.ring.count && candidates.count < Self._purgeChunk {
          if let key = policy.pointee.ring[position], let record = policy.pointee.records[key],
            record.version <= startVersion, let value = view.value(forKey: key)
          {
            candidates.append((key, value, record, policy.pointee.table.lastReadTick(of: key)))
          }
          position += 1
        }
        isFinished = position >= policy.pointee.ring.count
      }
      // The decider runs outside every lock.
      var victims: [(key: Key, version: UInt64)] = []
      for candidate in candidates {
        let context = EvictionContext(
          trigger: trigger, now: startInstant, writtenAt: _instant(candidate.record.writtenAt),
          lastReadAt: candidate.tick == 0
            ? nil : _origin + .seconds(Int64(candidate.tick) - 1),
          cost: candidate.record.cost,
          expiresAt: candidate.record.expiresAt == .max
            ? nil : _instant(candidate.record.expiresAt))
        if decider(candidate.key, candidate.value, context) {
          victims.append((candidate.key, candidate.record.version))
        }
      }
      candidates = []
      guard !victims.isEmpty else { continue }
      let now = _clockNanos()
      _writeLock.lock()
      let outcome = _policyWriteLocked(
        now: now, operation: nil, requested: victims, requestedReason: .decider)
      _writeLock.unlock()
      evicted.merge(outcome.removed) { _, new in new }
      _finishPolicyWrite(outcome, now: now)
    }
    return evicted
  }

  func _scheduleIntervalPurge(after interval: Duration, generation: UInt64) {
    _scheduler.schedule(after: interval) { [weak self] in
      self?._intervalPurgeFired(generation: generation)
    }
  }

  func _intervalPurgeFired(generation: UInt64) {
    let interval = _writeLock.withLock {
      _policy.pointer.pointee.intervalGeneration == generation
        ? _policy.pointer.pointee.evictionInterval : .zero
    }
    guard interval > .zero else { return }
    _ = _purge(.interval)
    _scheduleIntervalPurge(after: interval, generation: generation)
  }

  /// Advances the second that reads record, once a second while a decider is set.
  func _scheduleTick() {
    _scheduler.schedule(after: .seconds(1)) { [weak self] in
      guard let self else { return }
      self._readTick.store(Self._tick(self._clockNanos()), ordering: .relaxed)
      self._scheduleTick()
    }
  }
}

// MARK: - Time

extension MemoryStore {
  /// The scheduler's time, in nanoseconds since the store was created.
  @inlinable
  func _clockNanos() -> Int64 {
    (_scheduler.now - _origin).nanoseconds
  }

  func _instant(_ nanos: Int64) -> ContinuousClock.Instant {
    _origin + .nanoseconds(nanos)
  }

  /// The second that reads record for `nanos`: 1 for the first second.
  static func _tick(_ nanos: Int64) -> UInt32 {
    UInt32(clamping: nanos / 1_000_000_000 + 1)
  }
}

extension Int {
  fileprivate var nonZero: Int? { self == 0 ? nil : self }
}

/// Serialises purges of one store; a purge started from inside the decider (the same thread)
/// is refused instead of waiting for itself. Reads and writes never touch it.
final class _PurgeGate: Sendable {
  private let lock = _Lock()
  /// The thread slot of the purging thread, or 0.
  private let owner = Atomic<Int>(0)

  func enter() -> Bool {
    let thread = _ThreadSlot.current
    if owner.load(ordering: .relaxed) == thread { return false }
    lock.lock()
    owner.store(thread, ordering: .relaxed)
    return true
  }

  func leave() {
    owner.store(0, ordering: .relaxed)
    lock.unlock()
  }

  deinit {
    lock.deallocate()
  }
}
