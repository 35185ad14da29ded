import Synchronization

// MARK: - Get or create

extension MemoryStore {
  /// Returns the value for `key`, creating and storing it with `makeValue` on the calling
  /// thread if it is absent.
  ///
  /// ```swift
  /// let session = sessions.valueOrInsert(forKey: id) { Session(id: id) }
  /// let token = tokens.valueOrInsert(forKey: user, timeToLive: .seconds(300)) {
  ///   Token.issue(for: user)
  /// }
  /// ```
  ///
  /// Concurrent callers that miss on the same key call `makeValue` exactly once between them
  /// and all receive the stored value. While it runs, no lock is held: reads and writes of the
  /// store, including other get-or-create calls for other keys, proceed, and `makeValue` may
  /// itself read and write the store. If a plain write stores `key` while `makeValue` runs, the
  /// stored value wins and is returned to every caller. If a write removes `key` (or clears
  /// the store), or an invalidation drops it, while `makeValue` runs, what `makeValue` read may
  /// be older than that: its value is returned to the callers but not stored.
  ///
  /// The value created is returned to the callers even if the store does not keep it: one
  /// whose cost alone exceeds ``costLimit`` is evicted by its own write.
  ///
  /// `makeValue` must not call `valueOrInsert(forKey:_:)` for the same key: that would wait
  /// for itself, and it stops the program with a message instead.
  ///
  /// Its name is not `value(forKey:)`, so that it cannot be taken for the get-or-load that
  /// loads in a task of its own, ``value(forKey:cost:timeToLive:orLoad:)``: in `async` code,
  /// `try await store.value(forKey: key) { … }` is always that one, and never blocks the
  /// calling task while the closure runs.
  ///
  /// - Parameters:
  ///   - key: The key to read or create.
  ///   - cost: The cost of the value created toward ``costLimit``; `nil` (the default) uses
  ///     ``entryCost``, or 0 without one. Runs outside every lock, only on a miss.
  ///   - timeToLive: How long the value created lives; `nil` uses ``defaultTimeToLive``.
  ///   - makeValue: Creates the value; runs on the calling thread, only on a miss.
  /// - Returns: The value stored for `key`, or the value created.
  /// - Throws: What `makeValue` throws; then nothing is stored, and a waiting caller for the
  ///   same key runs its own `makeValue`.
  /// - Complexity: O(1) on average on a hit; a miss adds `makeValue` and one write.
  @inlinable
  public func valueOrInsert(
    forKey key: Key, cost: ((Value) -> Int)? = nil, timeToLive: Duration? = nil,
    _ makeValue: () throws -> Value
  ) rethrows -> Value {
    if let value = self[key] { return value }
    return try _createValue(forKey: key, cost: cost, timeToLive: timeToLive, makeValue)
  }

  /// Returns the value for `key`, creating and storing it with `makeValue` on the calling
  /// thread if it is absent: ``valueOrInsert(forKey:cost:timeToLive:_:)``.
  ///
  /// With a trailing closure in `async` code, `value(forKey:) { … }` is the get-or-load,
  /// ``value(forKey:cost:timeToLive:orLoad:)``; this one is taken only in synchronous code or
  /// by its label.
  @available(
    *, deprecated, renamed: "valueOrInsert(forKey:_:)",
    message: "to load in a task of its own instead, call value(forKey:orLoad:)"
  )
  @inlinable @_disfavoredOverload
  public func value(forKey key: Key, orInsert makeValue: () throws -> Value) rethrows -> Value {
    try valueOrInsert(forKey: key, makeValue)
  }

  @usableFromInline
  func _createValue(
    forKey key: Key, cost: ((Value) -> Int)?, timeToLive: Duration?,
    _ makeValue: () throws -> Value
  ) rethrows -> Value {
    while true {
      // Under the creations' lock: a value stored already, or a creation to wait for, or
      // this caller's own, registered.
      let found = _inFlight.withLock { inFlight -> _CreationLookup<Value> in
        if let value = _withReadAccess({ $0.value(forKey: key) }) { return .stored(value) }
        if let creation = inFlight.creations[key] { return .running(creation) }
        let creation = _Creation<Value>()
        creation.lock.lock()
        inFlight.creations[key] = creation
        return .started(creation)
      }
      let creation: _Creation<Value>
      switch found {
      case .stored(let value):
        return value
      case .running(let running):
        if running.isOwnedByCurrentThread {
          _preconditionFailure(
            "valueOrInsert(forKey:_:) was called again for the same key from inside its makeValue")
        }
        running.lock.lock()
        let outcome = running.outcome
        running.lock.unlock()
        if let outcome { return outcome }
        continue  // The creator's makeValue threw: try again, with this caller's makeValue.
      case .started(let started):
        creation = started
      }

      var stored: Value?
      defer {
        _inFlight.withLock { _ = $0.creations.removeValue(forKey: key) }
        creation.outcome = stored
        creation.lock.unlock()
      }
      let since = _invalidationStart()
      let made = try makeValue()
      let value = _insertIfAbsent(
        made, forKey: key, cost: cost.map { Self._clampedCost($0(made)) }, timeToLive: timeToLive,
        since: since)
      stored = value
      return value
    }
  }

  /// Stores `value`, which a get-or-create or a load made, for `key` unless a value is
  /// already there; returns the stored value, or `value` if it was stored (whether or not the
  /// store kept it: a value whose cost alone exceeds the cost limit is evicted by its own
  /// write). `cost` `nil` weighs it with the store's cost function, or gives 0. Runs that
  /// function: call it outside every lock.
  ///
  /// The value is a copy of its source, not a local change: the ``LocalChangeFeed`` does not
  /// get it. `since` is ``_invalidationStart()`` from before the value was made: if an
  /// invalidation or a removal by a write of the key came after, the value is returned but
  /// not stored.
  @usableFromInline
  func _insertIfAbsent(
    _ value: Value, forKey key: Key, cost: Int? = nil, timeToLive: Duration? = nil,
    since: UInt64
  ) -> Value {
    _insertCopy(value, forKey: key, cost: cost, timeToLive: timeToLive, since: since).existing
      ?? value
  }

  /// Stores `value`, a copy of its source made after the invalidation generation `since`,
  /// for `key`, unless the key holds a live value (returned as `existing`) or an invalidation
  /// of the key came after `since`; `stored` says whether it was stored. Not a local change.
  /// Runs the store's cost and time-to-live functions: call it outside every lock.
  func _insertCopy(
    _ value: Value, forKey key: Key, cost: Int?, timeToLive: Duration?, since: UInt64
  ) -> (stored: Bool, existing: Value?) {
    let terms = _terms(key, value, cost: cost, timeToLive: timeToLive)
    let cost = terms.cost ?? 0
    let timeToLive = terms.timeToLive
    return _transact(timeToLive: timeToLive, activatingPolicy: cost != 0 || timeToLive != nil) {
      write in
      if let existing = write.liveNode(key, in: self) { return (false, existing.value.pointee) }
      if write.access.state.invalidations.overtook(hash: key.hashValue, since: since) {
        return (false, nil)
      }
      if write.access.changes.feedsLocalChanges { write.access.changes.suppressesFeed = true }
      _ = write.set(key, value, cost: cost, timeToLive: timeToLive, in: self)
      return (true, nil)
    }
  }
}
