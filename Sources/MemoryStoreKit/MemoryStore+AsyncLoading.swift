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
  ///   that load and receive its result; the store keeps what it loaded. If a write stores the
  ///   key while the load runs, the stored value wins and every caller receives it. A removal
  ///   made while the load runs does not stop it: the loaded value is stored when it arrives.
  /// - **No lock is held while `load` runs**: it runs in a task of its own, and may read and
  ///   write the store (but not wait for a load of the same key).
  /// - **Cancellation is per caller.** A caller whose task is cancelled stops waiting and
  ///   throws `CancellationError`; the load goes on for the others, and its value is stored
  ///   even if nobody waits for it any more, for the next reader.
  /// - **A thrown error stores nothing**: every caller waiting for that load throws it, and the
  ///   next call loads again.
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
    if let value = self[key] { return value }
    let (flight, isNew) = _inFlight.withLock { inFlight -> (_Load<Value>, Bool) in
      if let running = inFlight.loads[key] { return (running, false) }
      let flight = _Load<Value>()
      inFlight.loads[key] = flight
      return (flight, true)
    }
    if isNew {
      Task {
        let result: Result<Value, any Error>
        // Not counted as a lookup: the caller's own read above was.
        if let stored = _withReadAccess({ $0.value(forKey: key) }) {
          // A load that ended between the miss above and this one's start stored it.
          result = .success(stored)
        } else {
          do {
            let loaded = try await load()
            result = .success(
              _insertIfAbsent(
                loaded, forKey: key, cost: cost.map { Self._clampedCost($0(loaded)) },
                timeToLive: timeToLive))
          } catch {
            result = .failure(error)
          }
        }
        _inFlight.withLock { inFlight in
          if inFlight.loads[key] === flight { inFlight.loads.removeValue(forKey: key) }
        }
        flight.finish(result)
      }
    }
    return try await flight.wait()
  }
}

/// One load of `value(forKey:orLoad:)`: the callers waiting for it, then its result.
final class _Load<Value: Sendable>: Sendable {
  typealias Waiter = CheckedContinuation<Value, any Error>

  struct State {
    var result: Result<Value, any Error>?
    var waiters: [Int: Waiter] = [:]
    var nextID = 0
  }

  let state = _Protected(State())

  /// Waits for the result; throws `CancellationError` at once if the calling task is
  /// cancelled, without affecting the load.
  func wait() async throws -> Value {
    let id = state.withLock { state in
      state.nextID += 1
      return state.nextID
    }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: Waiter) in
        let ready = state.withLock { state -> Result<Value, any Error>? in
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
  func finish(_ result: Result<Value, any Error>) {
    let waiters = state.withLock { state in
      state.result = result
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    for waiter in waiters { waiter.resume(with: result) }
  }
}
