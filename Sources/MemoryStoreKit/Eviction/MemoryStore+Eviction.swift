import Synchronization

// MARK: - Public API

extension MemoryStore {
  /// Decides whether an entry should be evicted: `true` evicts it.
  ///
  /// The decider runs on the thread that purges — the caller of
  /// ``purgeEvictableItems(trigger:)`` or ``handleMemoryPressure(_:)``, or a background queue
  /// of the store's scheduler for the periodic purge — outside every lock of the store. It may
  /// read and write the store. It never runs concurrently with itself for one store.
  public typealias EvictionDecider = @Sendable (Key, Value, EvictionContext) -> Bool

  /// The user's functions that the store calls, kept together behind one lock.
  ///
  /// They are fields of a struct rather than the lock's state themselves: a function value
  /// stored as the state of a generic container is converted to and from the container's
  /// generic form on every access, and an `inout` access wraps it in two more conversion
  /// thunks each time, so that after many reads calling it overflowed the stack.
  struct _UserFunctions: Sendable {
    var evictionDecider: EvictionDecider?
    var entryCost: EntryCost?
  }

  /// Creates an empty store whose entries an eviction decider can remove.
  ///
  /// ```swift
  /// let quotes = MemoryStore<String, Quote>(name: "quotes") { _, quote, context in
  ///   context.now - quote.time > .seconds(60)    // evict quotes older than a minute
  /// }
  /// quotes.evictionInterval = .seconds(30)       // purge every 30 s (default 600 s)
  /// ```
  ///
  /// The decider runs for every entry when ``purgeEvictableItems(trigger:)`` is called, every
  /// ``evictionInterval`` (600 seconds unless changed), and on
  /// ``handleMemoryPressure(_:)``. See ``EvictionDecider`` for where it runs.
  ///
  /// A store with a decider keeps, with each entry, when it was written and its cost and, for
  /// the decider's ``EvictionContext/lastReadAt``, reads note the second of their lookup in the
  /// entry, without a lock. Its clock ticks once a second on the scheduler while the store exists.
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
    self.init(name: name, scheduler: scheduler)
    self.evictionDecider = evictionDecider
  }

  /// The eviction decider: returns `true` for an entry that should be removed; `nil` for none.
  ///
  /// ```swift
  /// let quotes = MemoryStore<String, Quote>(name: "quotes")
  /// quotes.evictionDecider = { _, quote, context in context.now - quote.time > .seconds(60) }
  /// ```
  ///
  /// It may be given at creation (``init(name:scheduler:evictionDecider:)``) or set at any
  /// time, and replaced or removed; a purge running when it changes finishes with the decider
  /// it started with. Setting the first decider makes entries keep their write time and reads
  /// note the second of their lookup (see the initializer), turns ``evictionInterval`` to 600
  /// seconds if it was `.zero`, and, on a large store, is O(*n*) once, like a first limit.
  /// Entries written before the first decider was set report that instant as their
  /// ``EvictionContext/writtenAt``. Thread-safe.
  public var evictionDecider: EvictionDecider? {
    get { _functions.withLock { $0.evictionDecider } }
    set {
      let now = _clockNanos()
      let (activation, isFirst) = _writeLock.withLock { () -> (_TableGarbage?, Bool) in
        guard newValue != nil, !_keepsWriteTimes.load(ordering: .relaxed) else {
          return (nil, false)
        }
        _policy.pointer.pointee.writeTimesSince = now
        _keepsWriteTimes.store(true, ordering: .relaxed)
        _timesEntries.store(true, ordering: .relaxed)
        return (_activatePolicyLocked(now: now), true)
      }
      // The decider replaced is released after unlocking: it may hold the last reference to
      // something whose deinit uses the store.
      let replaced = _functions.withLock { functions in
        defer { functions.evictionDecider = newValue }
        return functions.evictionDecider
      }
      withExtendedLifetime(replaced) {}
      _release(activation)
      guard isFirst else { return }
      _readTick.store(Self._tick(now), ordering: .relaxed)
      _scheduleTick()
      if evictionInterval == .zero { evictionInterval = .seconds(600) }
    }
  }

  /// Asks the eviction decider about every entry and removes those it returns `true` for.
  ///
  /// ```swift
  /// let evicted = store.purgeEvictableItems(trigger: .manual("low disk"))
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
  public func purgeEvictableItems(trigger: EvictionTrigger = .manual(nil)) -> [Key: Value] {
    _purge(trigger)
  }

  /// Asks the eviction decider about every entry; the former name of
  /// ``purgeEvictableItems(trigger:)``, whose argument is a trigger, not a context.
  @available(*, deprecated, renamed: "purgeEvictableItems(trigger:)")
  @discardableResult
  public func purgeEvictableItems(context trigger: EvictionTrigger) -> [Key: Value] {
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
      guard evictionDecider != nil else { return }
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
  /// goes over it evicts the entry the eviction order picks — SIEVE's: the oldest entry not
  /// read since the hand last passed it; an entry read often survives up to three passes of
  /// the hand (see <doc:Eviction>) — never the entry being written, unless it is the only one
  /// left.
  /// Each entry has a counter of its own. Lowering the limit evicts at once, in chunks.
  /// Evictions appear in change batches with reason ``ChangeReason/evictedByCountLimit``.
  ///
  /// Setting a limit makes entries carry their metadata in their nodes (16 bytes each, more
  /// for a cost or a deadline), and reads note recency in the node they found (one relaxed
  /// atomic load per hit, and a store only when the entry's counter changes); the eviction
  /// order takes 8 bytes per entry. Once it evicts, the limit remembers the keys it evicted
  /// last (about 43 bytes per entry of the limit). Setting the first limit on a large store is
  /// O(*n*). Thread-safe.
  public var countLimit: Int? {
    get { _writeLock.withLock { _policy.pointer.pointee.countLimit }.nonZero }
    set { _setLimit(\.countLimit, to: newValue) }
  }

  /// The most total cost the entries may have; `nil` (the default) or 0 for no limit.
  ///
  /// ```swift
  /// let thumbnails = MemoryStore<URL, Data>(name: "thumbnails")
  /// thumbnails.entryCost = { _, data in data.count }   // every write is weighed
  /// thumbnails.costLimit = 4 << 20                      // 4 MiB
  /// ```
  ///
  /// An entry's cost is, in this order: the `cost` its write gives
  /// (``setValue(_:forKey:cost:timeToLive:)``, or `cost:` of a get-or-create), what
  /// ``entryCost`` returns for it, or 0. A read-modify-write (``update(forKey:_:)``,
  /// `merge(_:uniquingKeysWith:)`) without ``entryCost`` keeps the cost of the entry it
  /// changes, as does ``touch(_:timeToLive:)``. Enforced like ``countLimit``, with reason
  /// ``ChangeReason/evictedByCostLimit``.
  /// An entry whose cost alone exceeds the limit is evicted by its own write and evicts
  /// nothing else (a key it replaced is then gone too); a get-or-create still returns such a
  /// value to its callers. Entries of cost 0 are never evicted to meet the cost limit (only
  /// the count limit removes them); finding a costed entry to evict is O(*n*) at worst, when
  /// few entries have a cost. Thread-safe.
  public var costLimit: Int? {
    get { _writeLock.withLock { _policy.pointer.pointee.costLimit }.nonZero }
    set { _setLimit(\.costLimit, to: newValue) }
  }

  /// Computes the cost of an entry from its key and value, such as its size in bytes.
  ///
  /// Called outside every lock of the store, before the write takes its lock: on the writing
  /// thread, or in the load's task for get-or-load, and after the closure for
  /// ``update(forKey:_:)``; it may run more than once for one write (a read-modify-write that
  /// runs again). It must be a fast, pure function, and it must not wait for the store. A
  /// negative result counts as 0, and one above 2^48 as 2^48.
  public typealias EntryCost = @Sendable (Key, Value) -> Int

  /// The store's cost function (a *weigher*): the cost of every value written without a
  /// cost of its own; `nil` (the default) for none, when such writes cost 0.
  ///
  /// ```swift
  /// let thumbnails = MemoryStore<URL, Data>(name: "thumbnails")
  /// thumbnails.entryCost = { _, data in data.count }
  /// thumbnails.costLimit = 4 << 20
  /// let data = try await thumbnails.value(forKey: url) { try await download(url) }
  /// ```
  ///
  /// It weighs the values of every write that gives no cost: the subscript,
  /// ``updateValue(_:forKey:)``, ``addEntries(_:)``, ``setValue(_:forKey:cost:timeToLive:)``
  /// without `cost`, get-or-create (``valueOrInsert(forKey:cost:timeToLive:_:)``,
  /// ``value(forKey:cost:timeToLive:orLoad:)``) without `cost`, ``update(forKey:_:)``,
  /// `merge(_:uniquingKeysWith:)` and a persistence manager's `load()`. It runs outside every
  /// lock (see ``EntryCost``). Entries written before it is set keep their costs.
  ///
  /// Setting it makes entries carry their metadata, as a first limit does: O(*n*) once on a
  /// large store, and writes go through the eviction policy. Thread-safe.
  public var entryCost: EntryCost? {
    get { _functions.withLock { $0.entryCost } }
    set {
      let now = _clockNanos()
      let activation =
        newValue == nil ? nil : _writeLock.withLock { _activatePolicyLocked(now: now) }
      // The function replaced is released after unlocking, like a decider.
      // The flag is set under the same lock as the function, so that concurrent setters
      // leave them agreeing.
      let replaced = _functions.withLock { functions in
        defer {
          functions.entryCost = newValue
          _weighs.store(newValue != nil, ordering: .relaxed)
        }
        return functions.entryCost
      }
      withExtendedLifetime(replaced) {}
      _release(activation)
    }
  }

  /// The largest cost an entry counts: 2^48 (a larger one counts as this, a negative one as
  /// 0), so that the total cost of entries never overflows.
  @inlinable static var _maximumCost: Int { 1 << 48 }

  /// `cost` within 0...``_maximumCost``.
  @inlinable @inline(__always)
  static func _clampedCost(_ cost: Int) -> Int { min(max(cost, 0), _maximumCost) }

  /// The cost of `value` for `key` by ``entryCost``, or `nil` without one. Runs user code:
  /// call it outside every lock.
  @inlinable @inline(__always)
  func _weigh(_ key: Key, _ value: Value) -> Int? {
    guard _weighs.load(ordering: .relaxed) else { return nil }
    return _weighSlow(key, value)
  }

  @usableFromInline
  func _weighSlow(_ key: Key, _ value: Value) -> Int? {
    guard let entryCost = _functions.withLock({ $0.entryCost }) else { return nil }
    return Self._clampedCost(entryCost(key, value))
  }

  /// The costs of `entries` by ``entryCost``, or `nil` without one. Runs user code: call it
  /// outside every lock.
  @inlinable
  func _weighAll(_ entries: [Key: Value]) -> [Key: Int]? {
    guard _weighs.load(ordering: .relaxed) else { return nil }
    return _weighAllSlow(entries)
  }

  @usableFromInline
  func _weighAllSlow(_ entries: [Key: Value]) -> [Key: Int]? {
    guard let entryCost = _functions.withLock({ $0.entryCost }) else { return nil }
    var costs: [Key: Int] = [:]
    costs.reserveCapacity(entries.count)
    for (key, value) in entries { costs[key] = Self._clampedCost(entryCost(key, value)) }
    return costs
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
      let activation = _writeLock.withLock {
        if newValue != nil { _timesEntries.store(true, ordering: .relaxed) }
        _policy.pointer.pointee.defaultTimeToLive = newValue
        return _activatePolicyLocked(now: now)
      }
      _release(activation)
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
  ///   - cost: The entry's cost toward ``costLimit``, such as its size in bytes; `nil` (the
  ///     default) weighs the value with ``entryCost``, or gives 0 without one. Negative: 0;
  ///     above 2^48: 2^48.
  ///   - timeToLive: How long the entry lives; `nil` uses ``defaultTimeToLive``. Zero or
  ///     less: the entry is expired at once.
  /// - Returns: The previous value, or `nil` if the key was absent or expired.
  /// - Complexity: O(1) on average, plus O(1) amortised per eviction.
  @discardableResult
  public func setValue(
    _ value: Value, forKey key: Key, cost: Int? = nil, timeToLive: Duration? = nil
  ) -> Value? {
    _performKeyedWithPolicy(key, value, cost: cost.map(Self._clampedCost), timeToLive: timeToLive)
      .previous
  }

  /// Renews the time to live of `key`'s entry, and counts as a use of it for eviction,
  /// without rewriting its value; returns whether the key was present.
  ///
  /// ```swift
  /// // Keep a session alive for another 30 minutes from now, if it still exists.
  /// if !sessions.touch(sessionID, timeToLive: .seconds(1_800)) { showLogin() }
  /// ```
  ///
  /// An ordered write: it never brings back an entry that was removed or has expired (it
  /// returns `false` instead), and a write of the key that it races wins or loses as a whole.
  /// Its value, cost and write time are kept. It is not a change: no ``ChangeBatch`` reports
  /// it, and it is neither a hit nor a miss in ``statistics``.
  ///
  /// - Parameters:
  ///   - key: The key whose entry to renew.
  ///   - timeToLive: How long the entry lives from now; `nil` uses ``defaultTimeToLive``. With
  ///     neither, the entry's expiry is left as it is and only its use is counted. Zero or
  ///     less: the entry expires at once.
  /// - Returns: Whether `key` had an entry, which was renewed.
  /// - Complexity: O(1) on average.
  @discardableResult
  public func touch(_ key: Key, timeToLive: Duration? = nil) -> Bool {
    // No entry has metadata, and none is given a time to live: nothing to renew or count.
    if timeToLive == nil && !_policyActive.load(ordering: .relaxed) { return contains(key) }
    // A time to live needs the policy, as `setValue(_:forKey:cost:timeToLive:)` does.
    return _perform(
      .renew(key, timeToLive: timeToLive), timeToLive: timeToLive, activatingPolicy: true
    )
    .previous != nil
  }

  /// What ``handleMemoryPressure(_:)`` frees. Thread-safe.
  public var memoryPressurePolicy: MemoryPressurePolicy {
    get { _writeLock.withLock { _policy.pointer.pointee.memoryPressure } }
    set { _writeLock.withLock { _policy.pointer.pointee.memoryPressure = newValue } }
  }

  /// Frees memory: runs the decider with ``EvictionTrigger/memoryPressure(_:)``, then frees the
  /// count limit's record of recently evicted keys (up to 12 bytes per entry of the limit,
  /// rebuilt by later evictions) and trims a store with limits, in eviction order, to the
  /// fraction of its limits that ``memoryPressurePolicy`` gives for `level`; a critical event
  /// also empties a store without limits if the policy says so.
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
    if evictionDecider != nil { _ = _purge(.memoryPressure(level)) }
    // The record of evicted keys is memory the store can do without: it goes first, freed
    // after the lock is released.
    let (pressure, forgotten) = _writeLock.withLock {
      let policy = _policy.pointer
      let records = (policy.pointee.ghosts, policy.pointee.sampledEvictions)
      if records.0.capacity > 0 { policy.pointee.ghosts = _GhostKeys() }
      if records.1.capacity > 0 { policy.pointee.sampledEvictions = _GhostKeys() }
      return (policy.pointee.memoryPressure, records)
    }
    withExtendedLifetime(forgotten) {}
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
    let updated = _Recency.read(word, tick: _readTick.load(ordering: .relaxed))
    if updated != word { node.recency.pointee.store(updated, ordering: .relaxed) }
  }

  /// Removes the entries that have expired by now, if any may have: what every read, save,
  /// purge and statistics call does first. One relaxed atomic load while no entry expires.
  ///
  /// With the system scheduler on Linux, a coarse upper bound of the clock (about 6 ns to read)
  /// rules out most reads before the clock itself is read (about 28 ns).
  @inlinable @inline(__always)
  func _expireDueEntries() {
    let deadline = _nextExpiry.load(ordering: .relaxed)
    guard deadline != .max else { return }
    if _coarseOffset != 0 && _SystemClock.coarse &+ _coarseOffset < deadline { return }
    _expireBeforeRead()
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
      _writeLock.yieldToWaiters()
    }
  }
}

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
    let cost = cost ?? newValue.flatMap { _weigh(key, $0) } ?? 0
    let now = _lockForWrite(timeToLive: timeToLive)
    let activation = _activatePolicyLocked(now: now)
    var write = _PolicyWrite(store: self, now: now, reason: .write, collectsExpiredKeys: false)
    _beginPolicyWriteLocked(&write)
    var protected = -1
    if let newValue {
      let applied = write.set(
        key, newValue, _entryMetadataLocked(now: now, cost: cost, timeToLive: timeToLive), in: self)
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

/// One write of a store with a policy, in progress under the write lock: stages each change
/// on the table, keeps the policy's totals and logs it for change batches in the same step.
///
/// Its methods take the store as an argument rather than keeping a reference to it: the
/// caller's `self` is guaranteed alive, so using it costs no reference counting, while a
/// stored unowned reference costs a retain and a release per use (slow ones, once a timer
/// holds a weak reference to the store).
@usableFromInline
struct _PolicyWrite<Key: Hashable & Sendable, Value: Sendable>: ~Copyable {
  @usableFromInline let now: Int64
  @usableFromInline let reason: ChangeReason
  @usableFromInline var outcome = MemoryStore<Key, Value>._PolicyOutcome()
  /// The number of entries removed because they expired.
  @usableFromInline var expiredCount = 0
  /// Those entries' keys, if the write collects them (a clear logs the contents without them).
  @usableFromInline var expiredKeys: [Key]?
  /// Whether the write emptied the store (its log entry is sealed at once).
  @usableFromInline var cleared = false
  @usableFromInline let logged: Int
  /// Whether the store has a policy: its nodes carry metadata, and the policy keeps totals.
  @usableFromInline let carriesMetadata: Bool
  /// Whether removals are logged for ``MemoryStore/removals(bufferingNewest:)``.
  @usableFromInline let recordsRemovals: Bool
  /// Whether the removals logged must have their delivery scheduled.
  @usableFromInline var deliversRemovals = false

  @inlinable
  init(
    store: MemoryStore<Key, Value>, now: Int64, reason: ChangeReason, collectsExpiredKeys: Bool
  ) {
    self.now = now
    self.reason = reason
    if collectsExpiredKeys { expiredKeys = [] }
    carriesMetadata = store._table.carriesMetadata
    recordsRemovals = store._tracker.pointer.pointee.recordsRemovals
    logged = store._tracker.pointer.pointee.log.count
  }

  /// The current node of `key` unless it is absent or expired (then it is removed as such).
  @inlinable
  mutating func liveNode(_ key: Key, in store: MemoryStore<Key, Value>) -> _Node<Key, Value>? {
    guard let node = store._table.stagedNode(forKey: key) else { return nil }
    guard node.expiresAt > now else {
      remove(key, reason: .expired, in: store)
      return nil
    }
    return node
  }

  /// Stages `key` → `value`; returns the live value it replaces (an expired one is logged as
  /// removed by expiry first) and the entry's ring position (-1 on a store without a policy).
  @inlinable @inline(__always)
  mutating func set(
    _ key: Key, _ value: Value, _ metadata: _EntryMetadata, in store: MemoryStore<Key, Value>
  ) -> (previous: Value?, position: Int) {
    let (old, node) = store._table.stageSet(
      key, value, metadata: carriesMetadata ? metadata : nil)
    if carriesMetadata {
      store._policy.pointer.pointee.track(node, replacing: old, count: store._table.stagedCount)
    }
    outcome.changed = true
    var previous: Value?
    if let old, !old.isTombstone {
      let expired = old.hasMetadata && old.expiresAt <= now
      if expired {
        noteExpired(key, in: store)
      } else {
        previous = old.value.pointee
      }
      if recordsRemovals {
        logRemoval(key, old.value.pointee, expired ? .evicted(.expired) : .replaced, in: store)
      }
    }
    store._logPolicyChange(key, value, wasPresent: previous != nil, reason)
    return (previous, node.hasMetadata ? node.slot : -1)
  }

  /// Restages `key`'s live entry with the same value, its expiry moved to `lifetime` from now
  /// (unchanged if `nil`), counted as a use; logged as no change. Returns the entry's value and
  /// ring position, or `nil` if the key is absent or expired.
  @inlinable
  mutating func renew(
    _ key: Key, lifetime: Int64?, in store: MemoryStore<Key, Value>
  ) -> (value: Value, position: Int)? {
    guard let node = liveNode(key, in: store) else { return nil }
    var metadata = node.metadata
    if let lifetime { metadata.expiresAt = now.addingSaturating(lifetime) }
    let value = node.value.pointee
    let (old, new) = store._table.stageSet(key, value, metadata: metadata)
    store._policy.pointer.pointee.track(new, replacing: old, count: store._table.stagedCount)
    outcome.changed = true
    return (value, new.slot)
  }

  /// Counts and logs the removal of `key` because it expired.
  @inlinable
  mutating func noteExpired(_ key: Key, in store: MemoryStore<Key, Value>) {
    expiredCount += 1
    expiredKeys?.append(key)
    store._logPolicyChange(key, nil, wasPresent: true, .expired)
  }

  /// Stages the removal of `key`; returns the value removed, unless it had expired (then the
  /// removal is counted and logged as an expiry). An eviction (`checksExpiry` false) is logged
  /// with its own reason.
  @inlinable @inline(__always)
  @discardableResult
  mutating func remove(
    _ key: Key, hash: Int? = nil, reason: ChangeReason, checksExpiry: Bool = true,
    in store: MemoryStore<Key, Value>
  ) -> Value? {
    guard let old = store._table.stageRemoveNode(key, hash: hash) else { return nil }
    return removed(old, key: key, reason: reason, checksExpiry: checksExpiry, in: store)
  }

  /// Removes the entry at ring position `position` (the store has a policy), which the policy
  /// chose: its key is neither hashed nor compared.
  @inlinable @inline(__always)
  mutating func removeEntry(
    at position: Int, reason: ChangeReason, in store: MemoryStore<Key, Value>
  ) {
    let old = store._table.stageRemoveEntry(at: position)
    _ = removed(old, key: old.key.pointee, reason: reason, checksExpiry: false, in: store)
  }

  /// Accounts for `old`, just removed, and logs it as `key` (the caller's key, as every
  /// write logs it); returns its value unless it had expired.
  @inlinable @inline(__always)
  mutating func removed(
    _ old: _Node<Key, Value>, key: @autoclosure () -> Key, reason: ChangeReason,
    checksExpiry: Bool, in store: MemoryStore<Key, Value>
  ) -> Value? {
    if carriesMetadata { store._policy.pointer.pointee.untrack(old) }
    outcome.changed = true
    if reason == .expired || (checksExpiry && old.expiresAt <= now) {
      noteExpired(key(), in: store)
      if recordsRemovals { logRemoval(key(), old.value.pointee, .evicted(.expired), in: store) }
      return nil
    }
    if recordsRemovals { logRemoval(key(), old.value.pointee, .removal(reason), in: store) }
    // Checked here too so that an untracked store does not copy the key out of the node.
    if store._tracker.pointer.pointee.isTracking {
      store._logPolicyChange(key(), nil, wasPresent: true, reason)
    }
    return old.value.pointee
  }

  /// Stages the removal of every entry.
  @inlinable
  mutating func removeAll(in store: MemoryStore<Key, Value>) {
    let table = store._table
    let count = table.stagedCount
    guard count > 0 else { return }
    let policy = store._policy.pointer
    if let evictionReason = reason.evictionReason {
      policy.pointee.evictions[evictionReason] += UInt64(count)
    }
    let tracker = store._tracker.pointer
    if tracker.pointee.isTracking {
      // What readers see now, less the expired entries this write removed first.
      tracker.pointee.log.append(
        .clear(_ClearedContents(table: table, excluding: expiredKeys ?? []), reason))
      cleared = true
    }
    if recordsRemovals {
      // What readers see now, less the expired entries this write removed first.
      let expired = Set(expiredKeys ?? [])
      let cause = RemovalCause.removal(reason)
      table._forEach(at: table._writer.pointer.pointee.version) { key, value in
        if !expired.contains(key) { logRemoval(key, value, cause, in: store) }
      }
    }
    table.stageRemoveAll()
    policy.pointee.removeAll()
    outcome.changed = true
  }

  /// Logs a removal for ``MemoryStore/removals(bufferingNewest:)``.
  @inlinable
  mutating func logRemoval(
    _ key: Key, _ value: Value, _ cause: RemovalCause, in store: MemoryStore<Key, Value>
  ) {
    if store._logRemovalLocked(key, value, cause) { deliversRemovals = true }
  }

  /// Publishes the write and completes ``outcome``: what is left to do after unlocking.
  @inlinable @inline(__always)
  mutating func finish(in store: MemoryStore<Key, Value>) {
    let policy = store._policy.pointer
    let nextExpiry = policy.pointee.nextExpiry
    if nextExpiry != .max && policy.pointee.sweepArmedFor.map({ nextExpiry < $0 }) ?? true {
      policy.pointee.sweepArmedFor = nextExpiry
      outcome.armSweepAt = nextExpiry
    }
    guard outcome.changed else {
      // Nothing to publish; the earliest deadline may have moved back (items that surfaced
      // early sank), and no entry expires before it.
      if nextExpiry != store._nextExpiry.load(ordering: .relaxed) {
        store._nextExpiry.store(nextExpiry, ordering: .releasing)
      }
      return
    }
    let tracker = store._tracker.pointer
    if cleared {
      outcome.followUp = tracker.pointee.followUp(sealing: true)
    } else if tracker.pointee.log.count != logged {
      outcome.followUp = tracker.pointee.followUpIfNeeded()
    }
    if deliversRemovals {
      outcome.followUp = outcome.followUp ?? _TrackingFollowUp()
      outcome.followUp?.deliversRemovals = true
    }
    // A read that sees this write must see an earlier expiry it brings; a later one only
    // once the expired entries are gone from what readers see. Stored only when it changes:
    // every read loads it.
    let current = store._nextExpiry.load(ordering: .relaxed)
    if nextExpiry < current { store._nextExpiry.store(nextExpiry, ordering: .relaxed) }
    outcome.garbage = store._table.publish()
    if nextExpiry > current { store._nextExpiry.store(nextExpiry, ordering: .releasing) }
    tracker.pointee.writeCount &+= 1
  }
}

// MARK: - Purging

extension MemoryStore {
  /// Runs the decider over the entries present now, in chunks; see
  /// ``purgeEvictableItems(trigger:)``.
  func _purge(_ trigger: EvictionTrigger) -> [Key: Value] {
    guard let decider = evictionDecider, _purgeGate.enter() else { return [:] }
    defer { _purgeGate.leave() }
    _expireDueEntries()
    let start = _clockNanos()
    _readTick.store(Self._tick(start), ordering: .relaxed)
    let (startVersion, writeTimesSince) = _writeLock.withLock {
      _policy.pointer.pointee.purgesRunning += 1
      return (_table._writer.pointer.pointee.version, _policy.pointer.pointee.writeTimesSince)
    }
    defer { _writeLock.withLock { _policy.pointer.pointee.purgesRunning -= 1 } }
    let startInstant = _instant(start)
    var evicted: [Key: Value] = [:]
    var position = 0
    var isFinished = false
    while !isFinished {
      var candidates:
        [(key: Key, value: Value, metadata: _EntryMetadata, version: UInt64, tick: UInt32)] = []
      candidates.reserveCapacity(Self._purgeChunk)
      _writeLock.yieldToWaiters()
      _writeLock.withLock {
        // Holes are not filled while a purge runs, so positions stay put; entries written
        // since the purge started are newer than its version and not judged.
        while position < _table.ringCount && candidates.count < Self._purgeChunk {
          if let node = _table.ringNode(at: position), node.version <= startVersion {
            candidates.append(
              (
                node.key.pointee, node.value.pointee, node.metadata, node.version,
                node.recency.pointee.load(ordering: .relaxed) >> 2
              ))
          }
          position += 1
        }
        isFinished = position >= _table.ringCount
      }
      // The decider runs outside every lock.
      var victims: [(key: Key, version: UInt64)] = []
      for candidate in candidates {
        let context = EvictionContext(
          trigger: trigger, now: startInstant,
          writtenAt: _instant(max(candidate.metadata.writtenAt, writeTimesSince)),
          lastReadAt: candidate.tick == 0
            ? nil : _origin + .seconds(Int64(candidate.tick) - 1),
          cost: candidate.metadata.cost,
          expiresAt: candidate.metadata.expiresAt == .max
            ? nil : _instant(candidate.metadata.expiresAt))
        if decider(candidate.key, candidate.value, context) {
          victims.append((candidate.key, candidate.version))
        }
      }
      candidates = []
      guard !victims.isEmpty else { continue }
      let now = _clockNanos()
      _writeLock.lock()
      let outcome = _policyWriteLocked(
        now: now, operation: .removeUnchanged(victims), reason: .evictedByDecider)
      _writeLock.unlock()
      evicted.merge(outcome.removed ?? [:]) { _, new in new }
      _finishPolicyWrite(outcome, now: now, freesHere: true)
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
    if _systemOrigin != 0 { return _SystemClock.nanoseconds - _systemOrigin }
    return (_scheduler.now - _origin).nanoseconds
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
