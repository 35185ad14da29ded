import Synchronization

// MARK: - Refresh after write

extension MemoryStore {
  /// How long after an entry was written a get-or-load that finds it reloads it in the
  /// background: the caller gets the stored value at once, and one reload replaces it when it
  /// arrives. `nil` (the default): entries are never reloaded while they are present.
  ///
  /// ```swift
  /// quotes.timeToRefresh = .seconds(5)  // reload quotes older than 5 s …
  /// quotes.defaultTimeToLive = .seconds(60)  // … and never serve one older than a minute
  /// let quote = try await quotes.value(forKey: symbol) { try await feed.quote(symbol) }
  /// ```
  ///
  /// - **Who refreshes.** ``value(forKey:cost:timeToLive:orLoad:)`` and
  ///   ``values(forKeys:cost:timeToLive:orLoad:)``, the reads that have a loader: a hit on an
  ///   entry written at least this long ago returns the entry, and starts a reload with the
  ///   caller's loader (for a bulk call, one call of its loader for every such key). The
  ///   subscript and the other reads, which have no loader, never refresh.
  /// - **One reload at a time per key**, shared with loads: while a key's reload runs, hits do
  ///   not start another, and a caller that misses on the key (it expired meanwhile) waits for
  ///   the reload as it would for a load, and gets what the store then holds, or else the
  ///   value reloaded.
  /// - **What the reload does.** Its value replaces the entry's if the entry is still the one
  ///   it reloaded: a write or a removal of the key while it runs wins, and the reloaded value
  ///   is dropped (a removed entry never comes back). The new value is a write: its write time
  ///   is the reload's, and its cost and time to live are those of the call that started it,
  ///   or the store's (``entryCost``, ``entryTimeToLive``, ``defaultTimeToLive``); without
  ///   them it keeps the entry's cost and deadline. A loader that leaves a bulk key out leaves
  ///   the entry as it is.
  /// - **A failed reload** keeps the entry as it is (it is tried again by the next hit) and is
  ///   reported to ``onRefreshFailure``.
  /// - **Expiry still applies**: a refresh never extends the life of the value it reloads;
  ///   with a time to live longer than this, a key read often is reloaded before it expires,
  ///   and one read rarely expires.
  ///
  /// Setting it makes entries keep their write time, as a decider does (8 bytes each); an
  /// entry written before it was first set counts as written then. A hit of a get-or-load
  /// then also reads the clock. Thread-safe.
  public var timeToRefresh: Duration? {
    get {
      let lifetime = _signals.refreshLifetime.load(ordering: .relaxed)
      return lifetime == 0 ? nil : .nanoseconds(lifetime)
    }
    set {
      let lifetime = newValue.map { Swift.max($0.nanoseconds, 1) } ?? 0
      if lifetime != 0 { _ = _startKeepingWriteTimes(now: _clockNanos()) }
      _signals.refreshLifetime.store(lifetime, ordering: .relaxed)
    }
  }

  /// Called with the key and the error of a reload of ``timeToRefresh`` that threw; the entry
  /// keeps its value. It runs on the reload's task, outside every lock, and may use the store.
  public typealias RefreshFailureHandler = @Sendable (Key, any Error) -> Void

  /// What is told of each failed reload of ``timeToRefresh`` (see ``RefreshFailureHandler``);
  /// `nil` (the default): nothing. A failure of a bulk reload is reported once per key.
  ///
  /// ```swift
  /// quotes.onRefreshFailure = { symbol, error in log("\(symbol): \(error)") }
  /// ```
  ///
  /// Thread-safe.
  public var onRefreshFailure: RefreshFailureHandler? {
    get { _functions.withLock { $0.onRefreshFailure } }
    set { _replaceFunction(\.onRefreshFailure, with: newValue) }
  }

  /// An entry that a get-or-load found due for a reload: its key, and the version of its node
  /// (what the reload replaces).
  typealias _DueEntry = (key: Key, version: UInt64)

  /// The value for `key`, read as the subscript reads it, and, when the store refreshes and
  /// the entry is due, the entry to reload.
  func _read(refreshing key: Key) -> (value: Value, due: _DueEntry?)? {
    guard _signals.refreshLifetime.load(ordering: .relaxed) != 0 else {
      return self[key].map { ($0, nil) }
    }
    return _readDue(key)
  }

  /// ``_read(refreshing:)`` of a store that refreshes.
  func _readDue(_ key: Key) -> (value: Value, due: _DueEntry?)? {
    let found = _withLatestNode(forKey: key, hash: key.hashValue) { node in
      node.map { ($0.value.pointee, $0.version, $0.writtenAt) }
    }
    guard let (value, version, writtenAt) = found else { return nil }
    let lifetime = _signals.refreshLifetime.load(ordering: .relaxed)
    let written = _writeTime(recorded: writtenAt)
    guard lifetime != 0, _clockNanos() - written >= lifetime else { return (value, nil) }
    return (value, (key, version))
  }

  /// Starts one reload of the entries of `due` that no load or reload is running for, with
  /// `load`, in a task of its own.
  func _refresh(
    _ due: [_DueEntry], cost: (@Sendable (Value) -> Int)?, timeToLive: Duration?,
    _ load: @escaping @Sendable ([Key]) async throws -> [Key: Value]
  ) {
    let started = _inFlight.withLock { inFlight in
      due.compactMap { entry -> (_DueEntry, _Load<Value>)? in
        guard inFlight.loads[entry.key] == nil else { return nil }
        let flight = _Load<Value>()
        inFlight.loads[entry.key] = flight
        return (entry, flight)
      }
    }
    guard !started.isEmpty else { return }
    Task { await _reload(started, cost: cost, timeToLive: timeToLive, load) }
  }

  /// Runs one reload of the entries of `flights`, stores what it returns over the entries it
  /// reloaded, reports a failure, and finishes the flights.
  func _reload(
    _ flights: [(_DueEntry, _Load<Value>)], cost: (@Sendable (Value) -> Int)?,
    timeToLive: Duration?, _ load: @Sendable ([Key]) async throws -> [Key: Value]
  ) async {
    defer { _inFlight.withLock { $0.afterReload }?() }
    let loaded: [Key: Value]
    do {
      loaded = try await load(flights.map(\.0.key))
    } catch {
      // Waiters (callers that missed meanwhile) throw as they would for a failed load.
      _finishLoads(flights.map { ($0.0.key, $0.1, .failure(error)) })
      if let report = _functions.withLock({ $0.onRefreshFailure }) {
        for (entry, _) in flights { report(entry.key, error) }
      }
      return
    }
    var replacements:
      [(key: Key, value: Value, expected: UInt64?, cost: Int?, timeToLive: Duration?)] = []
    for (entry, _) in flights {
      guard let value = loaded[entry.key] else { continue }
      let terms = _terms(
        entry.key, value, cost: cost.map { Self._clampedCost($0(value)) },
        timeToLive: timeToLive)
      replacements.append((entry.key, value, entry.version, terms.cost, terms.timeToLive))
    }
    // A time to live, given or by default, needs the clock: the write reads it if any is given.
    let anyLifetime = replacements.lazy.compactMap(\.timeToLive).first
    let applied: [Bool] =
      replacements.isEmpty
      ? []
      : _transact(timeToLive: anyLifetime) { write in
        // A copy of the source, not a local change.
        if write.access.changes.feedsLocalChanges { write.access.changes.suppressesFeed = true }
        let defaultTimeToLive = write.policy.expiry.defaultTimeToLive
        return replacements.map { replacement in
          var replacement = replacement
          replacement.timeToLive = replacement.timeToLive ?? defaultTimeToLive
          return write.replace([replacement], in: self)
        }
      }
    var appliedKeys: Set<Key> = []
    for (replacement, stored) in zip(replacements, applied) where stored {
      appliedKeys.insert(replacement.key)
    }
    // A caller that missed meanwhile (the entry expired) gets what the store now holds (a
    // write won) or the value reloaded, which a dropped reload does not store; a key the
    // loader left out it loads itself, as after a bulk load.
    _finishLoads(
      flights.map { entry, flight in
        let value =
          appliedKeys.contains(entry.key)
          ? loaded[entry.key]
          : loaded[entry.key].map { reloaded in
            _withReadAccess { $0.value(forKey: entry.key) } ?? reloaded
          }
        return (entry.key, flight, .success(value))
      })
  }
}
