// MARK: - Memory pressure

extension MemoryStore {
  /// What ``handleMemoryPressure(_:)`` frees. Thread-safe.
  public var memoryPressurePolicy: MemoryPressurePolicy {
    get { _writer.withLock { $0.policy.memoryPressure } }
    set { _writer.withLock { $0.policy.memoryPressure = newValue } }
  }

  /// Frees memory: runs the decider with ``EvictionTrigger/memoryPressure(_:)``, then frees the
  /// limits' sketch of how often keys were used and their record of the keys evicted lately (9
  /// to 18 bytes per entry of the limit, made again, empty, by the next eviction of the limits)
  /// and trims a store with limits, in eviction order, to the
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
    // How often keys were used, and which were evicted lately, is memory the store can do
    // without (it is made again, empty, at the next eviction of the limits): it goes first,
    // freed after the lock is released.
    let (pressure, forgotten) = _writer.withLock { state in
      (state.policy.memoryPressure, state.policy.releaseEvictionMemory())
    }
    withExtendedLifetime(forgotten) {}
    let fraction = level == .critical ? pressure.criticalFraction : pressure.warningFraction
    _enforceLimits(fraction: fraction, reason: .memoryPressure)
    if level == .critical && pressure.removesAllOnCritical { _removeAllUnderPressure() }
  }
}

// MARK: - System events (Apple platforms)

#if canImport(Darwin)
  import Dispatch

  extension MemoryStore {
    /// Calls ``handleMemoryPressure(_:)`` for the system's memory-pressure events until the
    /// returned subscription is cancelled or released. Apple platforms only; on Linux, call
    /// ``handleMemoryPressure(_:)`` yourself.
    ///
    /// ```swift
    /// let monitor = store.monitorSystemMemoryPressure()
    /// ```
    ///
    /// The handler runs on `queue` and holds the store weakly.
    ///
    /// - Parameter queue: Where the events are handled; a background queue by default.
    /// - Returns: Keep it for as long as the store should respond.
    public func monitorSystemMemoryPressure(
      queue: DispatchQueue = .global(qos: .utility)
    ) -> Subscription {
      let source = _MemoryPressureSource(queue: queue)
      source.start { [weak self] level in self?.handleMemoryPressure(level) }
      return Subscription { source.cancel() }
    }
  }

  /// Owns a dispatch memory-pressure source.
  final class _MemoryPressureSource: @unchecked Sendable {
    // Safe: `source` is immutable after init, and dispatch sources may be used from any
    // thread (their methods are thread-safe, as Dispatch documents).
    private let source: any DispatchSourceMemoryPressure

    init(queue: DispatchQueue) {
      source = DispatchSource.makeMemoryPressureSource(
        eventMask: [.warning, .critical], queue: queue)
    }

    func start(_ handler: @escaping @Sendable (MemoryPressureLevel) -> Void) {
      let source = source
      source.setEventHandler { [unowned(unsafe) source] in
        // `unowned(unsafe)`: the handler runs only while the source is alive and active; it is
        // cancelled (and its handler released) before the source is freed.
        handler(source.data.contains(.critical) ? .critical : .warning)
      }
      source.activate()
    }

    func cancel() {
      source.cancel()
    }
  }
#endif
