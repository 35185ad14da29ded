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
