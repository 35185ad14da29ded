import Dispatch
import Synchronization

extension MemoryStore {
  /// Every entry that leaves the store while an iteration runs, with its value and why:
  /// replaced or removed by a write, or evicted by a limit, the decider, memory pressure or its
  /// time to live. The notifications Caffeine, Guava and PINCache give, which change batches
  /// (net differences) cannot: a key added and evicted within one interval is reported here.
  ///
  /// ```swift
  /// for await removal in images.removals where removal.cause.isEviction {
  ///   diskCache.write(removal.value, forKey: removal.key)   // spill evicted images to disk
  /// }
  /// ```
  ///
  /// Like ``changes`` and ``updates(of:)``, the sequence subscribes nothing by itself: each
  /// iteration is a subscriber of its own from the moment it starts (when `for await` makes
  /// its iterator), and receives the removals of writes ordered after that point. Removals
  /// arrive in the order the writes made them, shortly after each write returns, on the
  /// iteration's own task: no lock of the store is held, so the consumer may read and write
  /// the store. ``flush()`` returns once they have been handed to every iteration.
  ///
  /// **A slow consumer loses the oldest.** Up to 10 000 removals wait for the consumer
  /// (``removals(bufferingNewest:)`` chooses another bound); when another comes, the oldest
  /// waiting one is dropped, so memory stays bounded. Leaving the loop, cancelling its task or dropping the iterator ends the
  /// subscription; an iteration ends when the store is freed, after the removals made until
  /// then.
  ///
  /// While there is a subscriber, each write that removes or replaces a value logs it under
  /// the write lock (an append, and a retain of the value) and a background queue delivers
  /// them; ``removeAll()`` then costs O(*n*) to log every entry. Without subscribers a write
  /// pays nothing more: the flag it reads is the one it already reads for change batches.
  ///
  /// Thread-safe: the sequence refers to the store weakly. O(1) to start an iteration.
  public var removals: Removals { Removals(store: self, limit: 10_000) }

  /// ``removals``, with up to `limit` removals waiting for each iteration's consumer (at
  /// least 1) before the oldest is dropped.
  ///
  /// ```swift
  /// for await removal in images.removals(bufferingNewest: 100) {
  ///   print("\(removal.key) left: \(removal.cause)")
  /// }
  /// ```
  ///
  /// - Parameter limit: The most removals that wait for each iteration's consumer; at least 1.
  /// - Returns: The removals, as an `AsyncSequence`; thread-safe, and it refers to the store
  ///   weakly.
  public func removals(bufferingNewest limit: Int) -> Removals {
    Removals(store: self, limit: max(limit, 1))
  }

  /// The `AsyncSequence` of the entries that leave a store; see ``MemoryStore/removals``.
  ///
  /// Thread-safe; refers to the store weakly. Each iterator is a subscriber of its own.
  public struct Removals: AsyncSequence, Sendable {
    public typealias Element = Removal<Key, Value>
    public typealias Failure = Never

    weak var store: MemoryStore?
    /// The most removals that wait for an iteration's consumer.
    let limit: Int

    /// The sequence itself: `store.removals`, the spelling from when ``MemoryStore/removals``
    /// was a method.
    @available(*, deprecated, message: "removals is a property: write store.removals")
    public func callAsFunction() -> Self { self }

    /// Subscribes: the iterator receives the removals of every write ordered after this call.
    public func makeAsyncIterator() -> Iterator {
      let (stream, continuation) = AsyncStream.makeStream(
        of: Removal<Key, Value>.self, bufferingPolicy: .bufferingNewest(limit))
      if let store {
        store._subscribeToRemovals(continuation)
      } else {
        continuation.finish()
      }
      return Iterator(base: stream.makeAsyncIterator())
    }

    /// Iterates one subscription; dropping it ends the subscription.
    ///
    /// Sendable, as the iterators of ``MemoryStore/changes`` and ``MemoryStore/updates(of:)``
    /// are, so that an iteration may be started (subscribed) on one task and consumed on
    /// another; it is consumed by one task at a time: a second task that waits while one
    /// already does stops the program.
    public struct Iterator: AsyncIteratorProtocol, @unchecked Sendable {
      // Safe (`@unchecked Sendable`): the only stored property is `AsyncStream`'s iterator,
      // a reference to the stream's storage, which guards its state with a lock and stops the
      // program if two tasks wait on it at once; it is not Sendable only to discourage sharing.
      var base: AsyncStream<Removal<Key, Value>>.Iterator

      /// The next removal, waiting for it if necessary; `nil` when the store is gone and every
      /// removal was taken, or when the task is cancelled.
      public mutating func next() async -> Removal<Key, Value>? {
        await base.next()
      }

      /// The next removal, waiting for it if necessary; `nil` when the store is gone and every
      /// removal was taken, or when the task is cancelled.
      public mutating func next(
        isolation actor: isolated (any Actor)?
      ) async -> Removal<Key, Value>? {
        await base.next(isolation: actor)
      }
    }
  }

  /// Registers `continuation` as a subscriber of the removals of writes ordered after this
  /// call; its termination unregisters it.
  func _subscribeToRemovals(_ continuation: AsyncStream<Removal<Key, Value>>.Continuation) {
    // Under the write lock: every write ordered after this point is logged and delivered.
    let id = _writer.withLock { state in
      state.removals.nextSubscriberID += 1
      state.removals.subscribers[state.removals.nextSubscriberID] = .init(
        continuation: continuation,
        start: state.removals.delivered &+ UInt64(state.removals.entries.count))
      state.changes.recordsRemovals = true
      return state.removals.nextSubscriberID
    }
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      // Released after unlocking: it may hold the last reference to removals still buffered.
      let removed = _writer.withLock { state in
        defer { state.changes.recordsRemovals = !state.removals.subscribers.isEmpty }
        return state.removals.subscribers.removeValue(forKey: id)
      }
      withExtendedLifetime(removed) {}
    }
  }

  /// Delivers the logged removals on the removals queue.
  @usableFromInline
  func _scheduleRemovalDelivery() {
    _RemovalQueue.queue.async { [weak self] in self?._deliverRemovals() }
  }

  /// Hands the logged removals to the subscribers, oldest first (on the removals queue, or in
  /// deinit).
  func _deliverRemovals(finishing: Bool = false) {
    let (entries, first, subscribers) = _writer.withLock { state in
      state.removals.isDeliveryScheduled = false
      let first = state.removals.delivered
      state.removals.delivered &+= UInt64(state.removals.entries.count)
      let subscribers = Array(state.removals.subscribers.values)
      if finishing { state.removals.subscribers = [:] }
      defer { state.removals.entries = [] }
      return (state.removals.entries, first, subscribers)
    }
    for subscriber in subscribers {
      for (offset, removal) in entries.enumerated()
      where first &+ UInt64(offset) >= subscriber.start {
        subscriber.continuation.yield(removal)
      }
      if finishing { subscriber.continuation.finish() }
    }
    // The values are released here, outside every lock: a deinit may use the store.
  }
}
