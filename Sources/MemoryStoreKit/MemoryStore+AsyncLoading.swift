// MARK: - Asynchronous get-or-create

extension MemoryStore {
  /// Returns the value for `key`, loading and storing it with `load` if it is absent (or has
  /// expired): the main use of a cache, with one load per key however many callers miss.
  ///
  /// ```swift
  /// let avatar = try await avatars.value(forKey: userID) {
  ///   try await api.fetchAvatar(for: userID)   // runs once for concurrent misses
  /// }
  /// ```
  ///
  /// - **One load at a time per key.** Callers that miss on a key while its load runs wait for
  ///   that load and receive its result; the store keeps what it loaded. A bulk load of
  ///   ``values(forKeys:cost:timeToLive:orLoad:)`` that includes the key counts as its load; if
  ///   its loader returns no value for the key, this call then loads it with `load`. If a write stores the
  ///   key while the load runs, the stored value wins and every caller receives it. If a write
  ///   removes the key (or clears the store), or an invalidation drops it, while the load
  ///   runs, what the load read may be older than that: the callers receive the loaded value,
  ///   and the store does not keep it.
  /// - **No lock is held while `load` runs**: it runs in a task of its own, and may read and
  ///   write the store (but not wait for a load of the same key).
  /// - **Cancellation is per caller.** A caller whose task is cancelled stops waiting and
  ///   throws `CancellationError`; the load goes on for the others, and its value is stored
  ///   even if nobody waits for it any more, for the next reader.
  /// - **A thrown error stores nothing**: every caller waiting for that load throws it, and the
  ///   next call loads again.
  /// - **Refresh.** With ``timeToRefresh``, a hit on an entry written that long ago returns it
  ///   and starts one reload with `load` in the background (see ``timeToRefresh``).
  ///
  /// The value loaded is returned to every caller even if the store does not keep it: one
  /// whose cost alone exceeds ``costLimit`` is evicted by its own write. `cost` and
  /// `timeToLive` are those of the call that starts the load.
  ///
  /// The read is a hit or a miss in ``statistics`` like a subscript read. While a load runs,
  /// it keeps the store alive.
  ///
  /// A trailing closure that does not `await` loads in a task of its own too:
  /// `try await store.value(forKey: key) { … }` never runs the closure on the calling task.
  /// To create on the calling thread, call ``valueOrInsert(forKey:cost:timeToLive:_:)``.
  ///
  /// - Parameters:
  ///   - key: The key to read or load.
  ///   - cost: The cost of the value loaded toward ``costLimit``; `nil` (the default) uses
  ///     ``entryCost``, or 0 without one. Runs outside every lock, after the load.
  ///   - timeToLive: How long the value loaded lives; `nil` uses ``defaultTimeToLive``.
  ///   - load: Loads the value; runs only on a miss, in a task of its own.
  /// - Returns: The value stored for `key`, or the value loaded.
  /// - Throws: What `load` throws, or `CancellationError` if the calling task is cancelled
  ///   while it waits.
  /// - Complexity: O(1) on average on a hit; a miss adds the load and one write.
  public func value(
    forKey key: Key, cost: (@Sendable (Value) -> Int)? = nil, timeToLive: Duration? = nil,
    orLoad load: @escaping @Sendable () async throws -> Value
  ) async throws -> Value {
    if let (value, due) = _read(refreshing: key) {
      if let due {
        _refresh([due], cost: cost, timeToLive: timeToLive) { keys in
          [keys[0]: try await load()]
        }
      }
      return value
    }
    while true {
      let (flight, isNew) = _inFlight.withLock { inFlight -> (_Load<Value>, Bool) in
        if let running = inFlight.loads[key] { return (running, false) }
        let flight = _Load<Value>()
        inFlight.loads[key] = flight
        return (flight, true)
      }
      if isNew {
        Task {
          let result: Result<Value?, any Error>
          // Not counted as a lookup: the caller's own read above was.
          if let stored = _withReadAccess({ $0.value(forKey: key) }) {
            // A load that ended between the miss above and this one's start stored it.
            result = .success(stored)
          } else {
            do {
              let since = _invalidationStart()
              let loaded = try await load()
              result = .success(
                _insertIfAbsent(
                  loaded, forKey: key, cost: cost.map { Self._clampedCost($0(loaded)) },
                  timeToLive: timeToLive, since: since))
            } catch {
              result = .failure(error)
            }
          }
          _finishLoads([(key, flight, result)])
        }
      }
      if let value = try await flight.wait() { return value }
      // A bulk load of `values(forKeys:orLoad:)` ran for the key and its loader returned no
      // value for it: this caller loads it with its own `load`.
    }
  }

  /// Returns the values for `keys`, loading every missing one with one call of `load`: the
  /// bulk form of ``value(forKey:cost:timeToLive:orLoad:)``, for a page of records that one
  /// request fetches.
  ///
  /// ```swift
  /// let profiles = try await cache.values(forKeys: page.userIDs) { missing in
  ///   try await api.fetchProfiles(ids: missing)   // one request for every miss
  /// }
  /// ```
  ///
  /// - **One load per key, shared.** A key that another call (bulk or single) is loading is not
  ///   asked for again: this call waits for that load. The keys that nobody is loading are
  ///   passed to one call of `load`, in a task of its own, and while it runs, single-key and
  ///   bulk callers that miss on them wait for it.
  /// - **Found or absent.** `load` returns the values it found; a key it leaves out is not
  ///   stored and is absent from the result (a single-key caller that was waiting for it loads
  ///   it with its own loader). Values for keys not asked for are ignored. If a write stores a
  ///   key while the load runs, the stored value wins.
  /// - **Errors and cancellation** as for ``value(forKey:cost:timeToLive:orLoad:)``: if a load
  ///   this call waits for throws, the call throws that error, and nothing that load would
  ///   have stored is stored; a cancelled caller throws `CancellationError` and the loads go
  ///   on for the others. No lock is held while `load` runs.
  ///
  /// Each key is read once, a hit or a miss in ``statistics`` like a subscript read; repeated
  /// keys count once. With ``timeToRefresh``, the hits written that long ago are returned and
  /// reloaded in the background by one more call of `load` (see ``timeToRefresh``).
  ///
  /// - Parameters:
  ///   - keys: The keys to read or load.
  ///   - cost: The cost of each value loaded toward ``costLimit``; `nil` (the default) uses
  ///     ``entryCost``, or 0 without one. Runs outside every lock, after the load.
  ///   - timeToLive: How long the values loaded live; `nil` uses ``defaultTimeToLive``.
  ///   - load: Loads the values of the keys it is given (every one missing and not being
  ///     loaded, each once); runs only if there is such a key, in a task of its own.
  /// - Returns: The value of every key that was stored or loaded.
  /// - Throws: What a load this call waits for throws, or `CancellationError` if the calling
  ///   task is cancelled while it waits.
  /// - Complexity: O(*k*) for *k* keys, plus the load and one write per value loaded.
  public func values(
    forKeys keys: some Sequence<Key>, cost: (@Sendable (Value) -> Int)? = nil,
    timeToLive: Duration? = nil,
    orLoad load: @escaping @Sendable ([Key]) async throws -> [Key: Value]
  ) async throws -> [Key: Value] {
    var found: [Key: Value] = [:]
    var missing: [Key] = []
    var seen: Set<Key> = []
    var due: [_DueEntry] = []
    for key in keys where seen.insert(key).inserted {
      if let (value, dueEntry) = _read(refreshing: key) {
        found[key] = value
        if let dueEntry { due.append(dueEntry) }
      } else {
        missing.append(key)
      }
    }
    if !due.isEmpty { _refresh(due, cost: cost, timeToLive: timeToLive, load) }
    guard !missing.isEmpty else { return found }
    let (waited, started) = _inFlight.withLock { inFlight in
      var waited: [(Key, _Load<Value>)] = []
      var started: [(Key, _Load<Value>)] = []
      for key in missing {
        if let running = inFlight.loads[key] {
          waited.append((key, running))
        } else {
          let flight = _Load<Value>()
          inFlight.loads[key] = flight
          started.append((key, flight))
          waited.append((key, flight))
        }
      }
      return (waited, started)
    }
    if !started.isEmpty {
      Task { await _loadInBulk(started, cost: cost, timeToLive: timeToLive, load) }
    }
    for (key, flight) in waited {
      if let value = try await flight.wait() { found[key] = value }
    }
    return found
  }

  /// Runs one bulk load for the keys of `flights`, stores what it returns, and finishes the
  /// flights.
  func _loadInBulk(
    _ flights: [(Key, _Load<Value>)], cost: (@Sendable (Value) -> Int)?, timeToLive: Duration?,
    _ load: @Sendable ([Key]) async throws -> [Key: Value]
  ) async {
    var finished: [(Key, _Load<Value>, Result<Value?, any Error>)] = []
    var pending: [(Key, _Load<Value>)] = []
    for (key, flight) in flights {
      // Not counted as lookups: the caller's own reads were.
      if let stored = _withReadAccess({ $0.value(forKey: key) }) {
        // A load that ended between the caller's miss and this one's start stored it.
        finished.append((key, flight, .success(stored)))
      } else {
        pending.append((key, flight))
      }
    }
    if !pending.isEmpty {
      do {
        let since = _invalidationStart()
        let loaded = try await load(pending.map(\.0))
        for (key, flight) in pending {
          let value = loaded[key].map { value in
            _insertIfAbsent(
              value, forKey: key, cost: cost.map { Self._clampedCost($0(value)) },
              timeToLive: timeToLive, since: since)
          }
          finished.append((key, flight, .success(value)))
        }
      } catch {
        for (key, flight) in pending { finished.append((key, flight, .failure(error))) }
      }
    }
    _finishLoads(finished)
  }

  /// Ends loads: each stops being the key's running load (new callers start another), then
  /// hands its result to the callers waiting for it.
  func _finishLoads(_ loads: [(Key, _Load<Value>, Result<Value?, any Error>)]) {
    _inFlight.withLock { inFlight in
      for (key, flight, _) in loads where inFlight.loads[key] === flight {
        inFlight.loads.removeValue(forKey: key)
      }
    }
    for (_, flight, result) in loads { flight.finish(result) }
  }
}

/// One key's load, by `value(forKey:orLoad:)` or `values(forKeys:orLoad:)`: the callers waiting
/// for it, then its result (`nil`: a bulk loader returned no value for the key).
final class _Load<Value: Sendable>: Sendable {
  typealias Waiter = CheckedContinuation<Value?, any Error>

  struct State {
    var result: Result<Value?, any Error>?
    var waiters: [Int: Waiter] = [:]
    var nextID = 0
  }

  let state = _Protected(State())

  /// Waits for the result; throws `CancellationError` at once if the calling task is
  /// cancelled, without affecting the load.
  func wait() async throws -> Value? {
    let id = state.withLock { state in
      state.nextID += 1
      return state.nextID
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: Waiter) in
        let ready = state.withLock { state -> Result<Value?, any Error>? in
          if let result = state.result { return result }
          if Task.isCancelled { return .failure(CancellationError()) }
          state.waiters[id] = continuation
          return nil
        }
        if let ready { continuation.resume(with: ready) }
      }
    } onCancel: {
      let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
      waiter?.resume(throwing: CancellationError())
    }
  }

  /// Records the result and hands it to every caller waiting.
  func finish(_ result: Result<Value?, any Error>) {
    let waiters = state.withLock { state in
      state.result = result
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume(with: result) }
  }
}
