import Synchronization

// MARK: - Time to live

extension MemoryStore {
  /// How long entries live when a write gives no time to live; `nil` (the default) for
  /// forever.
  ///
  /// ```swift
  /// sessions.defaultTimeToLive = .seconds(1_800)
  /// ```
  ///
  /// Applies to writes made after it is set, and to the entries a persistence manager's
  /// `load()` wrote without a time to live and no write has replaced since, whether the load
  /// came before or after (from the moment it is set, for those: O(*n*) once). An expired
  /// entry is never returned by any read (subscript, ``count``, ``allItems``,
  /// ``values(forKeys:)``, a save), even before it is removed: while any entry has a time to
  /// live, a read compares the earliest expiry with the clock and, once it has passed, the
  /// deadline of each entry it finds. A read never removes anything and never waits: a timer
  /// on the scheduler removes the expired entries at the earliest expiry, and so does the next
  /// write, so that they leave memory and appear in change batches with reason
  /// ``ChangeReason/expired``.
  ///
  /// While no entry has a time to live, reads pay one relaxed atomic load for this; while one
  /// does, they also read the scheduler's clock. Thread-safe.
  public var defaultTimeToLive: Duration? {
    get { _writer.withLock { $0.policy.expiry.defaultTimeToLive } }
    set { _setExpiry(\.defaultTimeToLive, to: newValue) }
  }

  /// A rule that gives each entry its own time to live from its key and value: a token that
  /// expires when its own `exp` says, a quote that lives less after the market closes.
  /// Returning `nil` leaves the entry to ``defaultTimeToLive``.
  ///
  /// It runs outside every lock, on the writing thread, for every write that gives no time to
  /// live of its own: the subscript, ``updateValue(_:forKey:)``, ``addEntries(_:)``,
  /// ``setValue(_:forKey:cost:timeToLive:)`` without `timeToLive`, get-or-create and
  /// get-or-load without `timeToLive`, ``update(forKey:_:)``, `merge(_:uniquingKeysWith:)` and
  /// a persistence manager's `load()`. It may run more than once for one write (a
  /// read-modify-write that runs again). It must be a fast, pure function, and it must not wait
  /// for the store.
  public typealias EntryTimeToLive = @Sendable (Key, Value) -> Duration?

  /// The store's rule for each entry's time to live (see ``EntryTimeToLive``); `nil` (the
  /// default) for none.
  ///
  /// ```swift
  /// tokens.entryTimeToLive = { _, token in token.expiresAt - .now }
  /// tokens[userID] = token   // lives until the token's own expiry
  /// ```
  ///
  /// - **Updates recompute it.** ``update(forKey:_:)`` and `merge(_:uniquingKeysWith:)` give
  ///   the entry the time to live the rule returns for its new value; where the rule returns
  ///   `nil` they keep the entry's deadline, as they do without a rule.
  /// - **Not on reads.** The rule never runs when an entry is read: a read takes no lock and
  ///   calls no code of yours, and a rule there would make every hit pay for a call. For an
  ///   entry that reads keep alive, set ``timeToIdle``; the entry then expires at whichever
  ///   comes first.
  ///
  /// Entries written before it is set keep their deadlines. Setting it makes entries written
  /// from then on carry their metadata, in O(1). Thread-safe.
  public var entryTimeToLive: EntryTimeToLive? {
    get { _functions.withLock { $0.entryTimeToLive } }
    set {
      if newValue != nil {
        _transact(activatingPolicy: true) { _ in
          _signals.timesEntries.store(true, ordering: .relaxed)
        }
      }
      _replaceFunction(\.entryTimeToLive, with: newValue)
    }
  }

  /// How long an entry lives after it was last read or written: an idle (sliding) timeout,
  /// for sessions and tokens that stay while they are used. `nil` (the default): entries
  /// never expire for being idle.
  ///
  /// ```swift
  /// sessions.timeToIdle = .seconds(1_800)   // 30 minutes without a request ends a session
  /// if let session = sessions[id] { … }      // a hit renews it: one call, no lock
  /// ```
  ///
  /// - **What renews an entry**: a write of it (set, update, merge, ``touch(_:timeToLive:)``)
  ///   and a read that returns it (the subscript, ``values(forKeys:)``,
  ///   ``value(forKey:cost:timeToLive:orLoad:)``, ``values(forKeys:cost:timeToLive:orLoad:)``).
  ///   ``contains(_:)``, ``count``, ``keys``, ``allItems`` and saves do not.
  /// - **Without a lock**: a read that returns the entry pushes its idle deadline back in the
  ///   entry itself, with one atomic store, and only once it would move by at least 1/64 of the
  ///   time to idle or a second, whichever is less: reads of a hot entry do not write it on
  ///   every read. An entry may therefore expire up to that step early (plus, with the
  ///   system scheduler on Linux, the coarse clock's tick, a few milliseconds); never late.
  /// - **With a time to live**: an entry expires at whichever comes first, its time to live
  ///   (``defaultTimeToLive`` or a write's) or its idle deadline.
  ///
  /// Applies to entries written after it is set, and, as ``defaultTimeToLive`` does, to the
  /// entries a load wrote, whatever the order. Expired entries are never returned and are
  /// removed as those of ``defaultTimeToLive`` are, with reason ``ChangeReason/expired``.
  /// Thread-safe.
  public var timeToIdle: Duration? {
    get { _writer.withLock { $0.policy.expiry.timeToIdle } }
    set { _setExpiry(\.timeToIdle, to: newValue) }
  }

  /// Sets ``defaultTimeToLive`` or ``timeToIdle`` (`setting`) in one write, which also gives
  /// the entries a load wrote, and no write replaced since, the deadlines they lack under the
  /// store's settings, from now. With a value, the write reads the clock.
  func _setExpiry(_ setting: WritableKeyPath<_Expiry, Duration?>, to newValue: Duration?) {
    if newValue != nil { _signals.timesEntries.store(true, ordering: .relaxed) }
    _transact(timeToLive: newValue) { write in
      let loaded = newValue == nil ? [] : write.loadedKeys(in: self)
      write.activatePolicy(in: self)
      write.policy.expiry[keyPath: setting] = newValue
      let (lifetime, idleLifetime) = (
        write.policy.expiry.defaultLifetime, write.policy.expiry.idleLifetime
      )
      _signals.idleLifetime.store(idleLifetime ?? 0, ordering: .relaxed)
      write.giveDeadlines(to: loaded, lifetime: lifetime, idleLifetime: idleLifetime, in: self)
    }
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
    if timeToLive == nil && !_signals.policyActive.load(ordering: .relaxed) {
      // Not `contains`: a touch is not a read that Observation tracks.
      return _withReadAccess { $0.node(forKey: key) != nil }
    }
    // A time to live needs the policy, as `setValue(_:forKey:cost:timeToLive:)` does.
    return _transact(timeToLive: timeToLive, activatingPolicy: true) { write in
      let lifetime = timeToLive?.nanoseconds ?? write.policy.expiry.defaultLifetime
      return write.renew(key, lifetime: lifetime, in: self) != nil
    }
  }
}

// MARK: - Time

extension MemoryStore {
  /// The scheduler's time, in nanoseconds since the store was created.
  @inlinable
  func _clockNanos() -> Int64 {
    // The fields, not `_clock.nanoseconds()`: a method call would copy the clock, and retain
    // its scheduler.
    let systemOrigin = _clock.systemOrigin
    if systemOrigin != 0 { return _SystemClock.nanoseconds - systemOrigin }
    return (_clock.scheduler.now - _clock.origin).nanoseconds
  }

  func _instant(_ nanos: Int64) -> ContinuousClock.Instant {
    _clock.origin + .nanoseconds(nanos)
  }

  /// The second that reads record for `nanos`: 1 for the first second.
  static func _tick(_ nanos: Int64) -> UInt32 {
    UInt32(clamping: nanos / 1_000_000_000 + 1)
  }
}
