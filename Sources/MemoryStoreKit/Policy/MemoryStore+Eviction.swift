import Synchronization

// MARK: - The eviction decider

extension MemoryStore {

  /// Decides whether an entry should be evicted: `true` evicts it.
  ///
  /// The decider runs on the thread that purges — the caller of
  /// ``purgeEvictableItems(trigger:)`` or ``handleMemoryPressure(_:)``, or a background queue
  /// of the store's scheduler for the periodic purge — outside the locks that reads and writes
  /// take: it may read and write the store. It runs inside the store's *purge gate*, which
  /// keeps it from running concurrently with itself: a purge it starts returns at once, empty,
  /// and a purge started on another thread waits for it, so it must not wait for another
  /// thread's purge.
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
    var entryTimeToLive: EntryTimeToLive?
    var onRefreshFailure: RefreshFailureHandler?

    /// Whether a write must run a function of the entry before it locks (see
    /// ``MemoryStore/_terms(_:_:cost:timeToLive:)``).
    var judgesEntries: Bool { entryCost != nil || entryTimeToLive != nil }
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
      let isFirst = newValue != nil && _startKeepingWriteTimes(now: now)
      _replaceFunction(\.evictionDecider, with: newValue)
      guard isFirst else { return }
      _signals.readTick.store(Self._tick(now), ordering: .relaxed)
      _scheduleTick()
      if evictionInterval == .zero { evictionInterval = .seconds(600) }
    }
  }

  /// Replaces the function at `keyPath` with `newValue`: under the functions' lock, with
  /// `_signals.judgesEntries` kept in step with them there, so that concurrent setters leave
  /// them agreeing; the function replaced is released after unlocking (it may hold the last
  /// reference to something whose deinit uses the store).
  func _replaceFunction<Function>(
    _ keyPath: WritableKeyPath<_UserFunctions, Function?>, with newValue: Function?
  ) {
    let replaced = _functions.withLock { functions in
      defer {
        functions[keyPath: keyPath] = newValue
        _signals.judgesEntries.store(functions.judgesEntries, ordering: .relaxed)
      }
      return functions[keyPath: keyPath]
    }
    withExtendedLifetime(replaced) {}
  }

  /// Makes entries keep their write time from now on, if they did not; returns whether they
  /// did not. Entries written before report `now`.
  func _startKeepingWriteTimes(now: Int64) -> Bool {
    guard !_signals.keepsWriteTimes.load(ordering: .relaxed) else { return false }
    return _transact { write in
      guard !_signals.keepsWriteTimes.load(ordering: .relaxed) else { return false }
      write.policy.writeTimesSince = now
      _signals.writeTimesSince.store(now, ordering: .relaxed)
      _signals.keepsWriteTimes.store(true, ordering: .relaxed)
      _signals.timesEntries.store(true, ordering: .relaxed)
      // Purges walk the ring: every entry needs a place in it.
      write.giveEveryEntryMetadata(in: self)
      return true
    }
  }

  /// Asks the eviction decider about every entry and removes those it returns `true` for.
  ///
  /// ```swift
  /// let evicted = store.purgeEvictableItems(trigger: .manual("low disk"))
  /// ```
  ///
  /// The purge judges the entries present when it starts, in chunks: it reads about a hundred
  /// entries under the write lock, calls the decider for each outside it (inside the purge
  /// gate only, see ``EvictionDecider``), then
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
    get { _writer.withLock { $0.policy.evictionInterval } }
    set {
      guard evictionDecider != nil else { return }
      let interval = max(newValue, .zero)
      let generation = _writer.withLock { state in
        state.policy.evictionInterval = interval
        state.policy.intervalGeneration &+= 1
        return state.policy.intervalGeneration
      }
      if interval > .zero { _scheduleIntervalPurge(after: interval, generation: generation) }
    }
  }
}

// MARK: - Purging

extension MemoryStore {

  /// Runs the decider over the entries present now, in chunks; see
  /// ``purgeEvictableItems(trigger:)``.
  func _purge(_ trigger: EvictionTrigger) -> [Key: Value] {
    guard let decider = evictionDecider, _purgeGate.enter() else { return [:] }
    defer { _purgeGate.leave() }
    // The decider judges only entries that have not expired.
    _removeExpiredEntries()
    let start = _clockNanos()
    _signals.readTick.store(Self._tick(start), ordering: .relaxed)
    let (startVersion, writeTimesSince) = _writer.withAccess { access in
      access.policy.purgesRunning += 1
      return (_table.publishedVersion(access.held), access.policy.writeTimesSince)
    }
    defer { _writer.withLock { $0.policy.purgesRunning -= 1 } }
    let startInstant = _instant(start)
    var evicted: [Key: Value] = [:]
    var position = 0
    var isFinished = false
    while !isFinished {
      var candidates:
        [(
          key: Key, value: Value, metadata: _EntryMetadata, deadline: Int64, version: UInt64,
          tick: UInt32
        )] = []
      candidates.reserveCapacity(Self._purgeChunk)
      _writer.yieldToWaiters()
      _writer.withAccess { access in
        // Holes are not filled while a purge runs, so positions stay put; entries written
        // since the purge started are newer than its version and not judged.
        while position < _table.ringCount(access.held) && candidates.count < Self._purgeChunk {
          if let node = _table.ringNode(at: position, access.held), node.version <= startVersion {
            candidates.append(
              (
                node.key.pointee, node.value.pointee, node.metadata, node.deadline, node.version,
                node.recency.pointee.load(ordering: .relaxed) >> 2
              ))
          }
          position += 1
        }
        isFinished = position >= _table.ringCount(access.held)
      }
      // The decider runs outside the write lock; the purge gate is held.
      var victims: [(key: Key, version: UInt64)] = []
      for candidate in candidates {
        let context = EvictionContext(
          trigger: trigger, now: startInstant,
          writtenAt: _instant(max(candidate.metadata.writtenAt, writeTimesSince)),
          lastReadAt: candidate.tick == 0
            ? nil : _clock.origin + .seconds(Int64(candidate.tick) - 1),
          cost: candidate.metadata.cost,
          expiresAt: candidate.deadline == .max ? nil : _instant(candidate.deadline))
        if decider(candidate.key, candidate.value, context) {
          victims.append((candidate.key, candidate.version))
        }
      }
      candidates = []
      guard !victims.isEmpty else { continue }
      let removed = _transact(.evictedByDecider, freesHere: true) { write in
        write.removeUnchanged(victims, in: self)
      }
      evicted.merge(removed) { _, new in new }
    }
    return evicted
  }

  func _scheduleIntervalPurge(after interval: Duration, generation: UInt64) {
    _clock.scheduler.schedule(after: interval) { [weak self] in
      self?._intervalPurgeFired(generation: generation)
    }
  }

  func _intervalPurgeFired(generation: UInt64) {
    let interval = _writer.withLock { state in
      state.policy.intervalGeneration == generation ? state.policy.evictionInterval : .zero
    }
    guard interval > .zero else { return }
    _ = _purge(.interval)
    _scheduleIntervalPurge(after: interval, generation: generation)
  }

  /// Advances the second that reads record, once a second while a decider is set.
  func _scheduleTick() {
    _clock.scheduler.schedule(after: .seconds(1)) { [weak self] in
      guard let self else { return }
      self._signals.readTick.store(Self._tick(self._clockNanos()), ordering: .relaxed)
      self._scheduleTick()
    }
  }
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
