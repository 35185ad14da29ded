import Dispatch
import Synchronization

// MARK: - Configuration and publishing

extension MemoryStore {
  /// How often the store publishes a ``ChangeBatch``; `.zero` (the default) turns change
  /// batches off.
  ///
  /// While it is above zero the store records every change and publishes at most one batch
  /// per interval, only when something changed: the first change after a batch schedules
  /// the next one, one interval later. Changes made while it is `.zero` are never reported.
  /// A new value takes effect for the next write; turning batches off publishes what was
  /// recorded until then at once.
  ///
  /// ```swift
  /// store.notificationInterval = .milliseconds(250)
  /// ```
  ///
  /// Thread-safe. While batches are on, each write appends its change to a log under the write
  /// lock; the log is coalesced per key off the write path, so a write costs little more and
  /// reads nothing (see <doc:ObservingChanges> for the measurements).
  public var notificationInterval: Duration {
    get {
      _writeLock.withLock { _tracker.pointer.pointee.interval }
    }
    set {
      let interval = max(newValue, .zero)
      let wasTracking = _writeLock.withLock {
        let wasTracking = _tracker.pointer.pointee.isTracking
        _tracker.pointer.pointee.interval = interval
        return wasTracking
      }
      if wasTracking && interval == .zero { _publishChanges() }
    }
  }

  /// Publishes the changes recorded so far now, without waiting for the interval, and returns
  /// once every ``observe(on:_:)`` handler and ``notificationCenter`` observer has run for
  /// every batch published so far (``changes`` iterations have the batches waiting for their
  /// next iteration).
  ///
  /// Use it in tests, and before an app quits. Publishes nothing when nothing changed.
  ///
  /// - Complexity: O(k) for k keys changed since the previous batch.
  public func flushChanges() async {
    _publishChanges()
    for handler in _hub.handlerSinks() {
      await handler.drained()
    }
  }

  /// Publishes the changes logged so far, if they make a batch.
  ///
  /// - Parameter disarm: Whether this is the scheduled publication, after which the next
  ///   change schedules another.
  func _publishChanges(disarm: Bool = false) {
    let (coalesced, batch, displaced) = _hub.publication.withLock {
      last -> (_Coalesced, ChangeBatch<Key, Value>?, [ChangeBatch<Key, Value>]) in
      let coalesced = _coalesceLogged(publishing: true, disarm: disarm)
      guard let recorded = coalesced.recorded, !recorded.isEmpty,
        let batch = recorded.batch(sequenceNumber: last + 1)
      else {
        return (coalesced, nil, [])
      }
      last += 1
      return (coalesced, batch, _hub.deliver(batch))
    }
    // Released only now: dropping logged, coalesced or merged changes may run a value's deinit.
    withExtendedLifetime((coalesced, batch, displaced)) {}
  }

  /// What a coalescing pass produced: the recorded changes when publishing, and what it let go
  /// of, for the caller to release after unlocking.
  @usableFromInline typealias _Coalesced = (
    recorded: _RecordedChanges<Key, Value>?, segments: [[_LoggedChange<Key, Value>]],
    displaced: [Value]
  )

  /// Moves logged changes into the accumulator, oldest first.
  ///
  /// - Parameters:
  ///   - publishing: Whether to take everything, the segment being filled included, and
  ///     return the accumulated changes for a batch; otherwise only full segments are taken.
  ///   - disarm: Whether the scheduled publication is running.
  @inlinable
  func _coalesceLogged(publishing: Bool, disarm: Bool = false) -> _Coalesced {
    _accumulator.withLock { accumulator in
      let segments = _writeLock.withLock {
        if disarm { _tracker.pointer.pointee.isArmed = false }
        if !publishing { _tracker.pointer.pointee.isCoalescing = false }
        return _tracker.pointer.pointee.takeLogged(includingCurrent: publishing)
      }
      var displaced: [Value] = []
      for segment in segments {
        for logged in segment { accumulator.apply(logged, displaced: &displaced) }
      }
      return (publishing ? accumulator.take() : nil, segments, displaced)
    }
  }

  /// Does what a write's logging asked for, after the write lock is released.
  @inlinable @inline(never)
  func _followUp(_ followUp: _TrackingFollowUp) {
    if let delay = followUp.publishAfter {
      _schedulePublication(after: delay)
    }
    if followUp.coalesceNow {
      withExtendedLifetime(_coalesceLogged(publishing: false)) {}
    } else if followUp.coalesceInBackground {
      DispatchQueue.global(qos: .utility).async { [weak self] in
        guard let self else { return }
        withExtendedLifetime(self._coalesceLogged(publishing: false)) {}
      }
    }
  }

  /// Schedules the publication of the changes logged so far, `delay` from now.
  @usableFromInline
  func _schedulePublication(after delay: Duration) {
    _scheduler.schedule(after: delay) { [weak self] in
      self?._publishChanges(disarm: true)
    }
  }

  /// Logs a single-key write that changed the store (write lock held), and counts it in the
  /// store's write count, which the persistence manager compares to skip unchanged saves.
  ///
  /// - Returns: What to do after unlocking, if anything.
  @inlinable @inline(__always)
  func _logKeyedLocked(_ key: Key, _ value: Value?, wasPresent: Bool) -> _TrackingFollowUp? {
    _tracker.pointer.pointee.writeCount &+= 1
    guard _tracker.pointer.pointee.isTracking else { return nil }
    return _tracker.pointer.pointee.record(key, value, wasPresent: wasPresent)
  }
}

// MARK: - Subscribing

extension MemoryStore {
  /// The store's change batches, as an `AsyncSequence`.
  ///
  /// ```swift
  /// for await batch in store.changes {
  ///   print("\(batch.updated.count) updated, \(batch.removed.count) removed")
  /// }
  /// ```
  ///
  /// Each iteration is its own subscriber, from the moment it starts (when `for await` creates
  /// its iterator) and receives every batch published afterwards. A consumer that falls
  /// behind never makes memory grow without bound: batches waiting for it are merged into one
  /// (see ``ChangeBatch/sequenceNumbers``). Leaving the loop, or cancelling its task, ends
  /// the subscription. The iteration ends when the store is freed, after the changes recorded
  /// until then are delivered.
  ///
  /// Nothing is published while ``notificationInterval`` is `.zero`.
  ///
  /// The sequence refers to the store weakly: it does not keep the store alive.
  public var changes: Changes { Changes(store: self) }

  /// Calls `handler` with every change batch published from now on, until the returned
  /// subscription is cancelled or released.
  ///
  /// ```swift
  /// let subscription = store.observe { batch in
  ///   for (symbol, quote) in batch.updated { render(symbol, quote) }
  /// }
  /// ```
  ///
  /// The handler runs serially and in batch order, on a serial queue of its own that targets
  /// `queue` (by default a global queue). It may read and write the store; a write it makes
  /// appears in a later batch. A handler slower than the batches receives the batches that
  /// waited for it merged into one.
  ///
  /// - Parameters:
  ///   - queue: The queue the handler runs on; `nil` for a global background queue. A
  ///     concurrent queue is fine: calls are still serial.
  ///   - handler: Receives each batch.
  /// - Returns: A subscription; delivery stops when it is cancelled or released.
  public func observe(
    on queue: DispatchQueue? = nil,
    _ handler: @escaping @Sendable (ChangeBatch<Key, Value>) -> Void
  ) -> Subscription {
    let serial = DispatchQueue(
      label: "MemoryStore.observer" + (name.map { " (\($0))" } ?? ""),
      target: queue ?? .global(qos: .utility))
    return _hub.add(.handler(_HandlerSink(queue: serial, handler: handler)))
  }

  /// The `AsyncSequence` of a store's change batches; see ``MemoryStore/changes``.
  ///
  /// Thread-safe; refers to the store weakly.
  public struct Changes: AsyncSequence, Sendable {
    public typealias Element = ChangeBatch<Key, Value>
    public typealias Failure = Never

    weak var store: MemoryStore?

    /// Subscribes: the iterator receives every batch published from now on.
    public func makeAsyncIterator() -> Iterator {
      guard let store else { return Iterator(sink: nil, subscription: nil) }
      let sink = _StreamSink<Key, Value>()
      let subscription = store._hub.add(.stream(sink))
      return Iterator(sink: sink, subscription: subscription)
    }

    /// Iterates one subscription. Dropping the iterator ends the subscription.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
      let sink: _StreamSink<Key, Value>?
      let subscription: Subscription?

      /// The next batch, waiting for it if necessary; `nil` when the store is gone or the
      /// task is cancelled.
      public mutating func next() async -> ChangeBatch<Key, Value>? {
        await next(isolation: nil)
      }

      /// The next batch, waiting for it if necessary; `nil` when the store is gone or the
      /// task is cancelled.
      public mutating func next(
        isolation actor: isolated (any Actor)?
      ) async -> ChangeBatch<Key, Value>? {
        guard let sink, let subscription else { return nil }
        return await sink.next(isolation: actor) { subscription.cancel() }
      }
    }
  }
}
