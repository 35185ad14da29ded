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
  /// Thread-safe. Recording costs each write one hash-table update while batches are on;
  /// reads are unaffected.
  public var notificationInterval: Duration {
    get {
      _writeLock.withLock { _tracker.pointer.pointee.interval }
    }
    set {
      let interval = max(newValue, .zero)
      let wasTracking = _writeLock.withLock {
        let wasTracking = _tracker.pointer.pointee.isTracking
        _tracker.pointer.pointee.interval = interval
        _tracker.pointer.pointee.isTracking = interval > .zero
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

  /// Publishes what the tracker holds, if it makes a batch.
  ///
  /// - Parameter disarm: Whether this is the scheduled publication, after which the next
  ///   change schedules another.
  func _publishChanges(disarm: Bool = false) {
    let (recorded, batch, delivered) = _hub.publication.withLock {
      last -> (_RecordedChanges<Key, Value>, ChangeBatch<Key, Value>?, [ChangeBatch<Key, Value>]) in
      let recorded = _writeLock.withLock {
        if disarm { _tracker.pointer.pointee.isArmed = false }
        return _tracker.pointer.pointee.take()
      }
      guard !recorded.isEmpty, let batch = recorded.batch(sequenceNumber: last + 1) else {
        return (recorded, nil, [])
      }
      last += 1
      return (recorded, batch, _hub.deliver(batch))
    }
    // Released only now: dropping recorded or merged changes may run a value's deinit.
    withExtendedLifetime((recorded, batch, delivered)) {}
  }

  /// Schedules the next publication `delay` from now.
  @usableFromInline
  func _schedulePublication(after delay: Duration) {
    _scheduler.schedule(after: delay) { [weak self] in
      self?._publishChanges(disarm: true)
    }
  }

  /// Records a batch write before it is applied (write lock held, batches on).
  ///
  /// - Returns: What the tracker let go, to release after unlocking, and the delay after which
  ///   to schedule a publication, if one must be scheduled.
  @usableFromInline
  func _trackLocked(
    _ operation: _WriteOperation<Key, Value>
  ) -> (displaced: [Value?], clearedChanges: [Key: _KeyChange<Value>], schedule: Duration?) {
    let state = _state.load(ordering: .relaxed)
    // The store as readers see it; stable while the write lock is held.
    let view = _ReadView(
      copy: _copies.pointer(state & 1), overlay: state & 2 != 0 ? _overlay.pointer : nil)
    var displaced: [Value?] = []
    var clearedChanges: [Key: _KeyChange<Value>] = [:]
    var changed = false
    let tracker = _tracker.pointer
    switch operation {
    case .set(let key, let value):
      let present = view.value(forKey: key) != nil
      displaced.append(tracker.pointee.record(key, value, wasPresent: present))
      changed = true
    case .insert(let key, let value):
      if view.value(forKey: key) == nil {
        displaced.append(tracker.pointee.record(key, value, wasPresent: false))
        changed = true
      }
    case .remove(let key):
      if view.value(forKey: key) != nil {
        displaced.append(tracker.pointee.record(key, nil, wasPresent: true))
        changed = true
      }
    case .merge(let entries):
      displaced.reserveCapacity(entries.count)
      for (key, value) in entries {
        let present = view.value(forKey: key) != nil
        displaced.append(tracker.pointee.record(key, value, wasPresent: present))
      }
      changed = !entries.isEmpty
    case .removeKeys(let keys):
      for key in keys where tracker.pointee.isPresent(key) ?? (view.value(forKey: key) != nil) {
        displaced.append(tracker.pointee.record(key, nil, wasPresent: true))
        changed = true
      }
    case .removeAll:
      if view.count > 0 {
        clearedChanges = tracker.pointee.recordClear(contents: view.dictionary)
        changed = true
      }
    case .overlay:
      preconditionFailure("an overlay is not a write of its own")
    }
    return (displaced, clearedChanges, changed ? tracker.pointee.arm() : nil)
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
