import Dispatch
import Foundation
import Synchronization

// MARK: - Configuration and publishing

extension MemoryStore {
  /// How often the store publishes a ``ChangeBatch``; `.zero` turns change batches off.
  ///
  /// While it is above zero the store records every change and publishes at most one batch
  /// per interval, only when something changed: the first change after a batch schedules
  /// the next one, one interval later. Changes made while it is `.zero` are never reported.
  /// A new value takes effect for the next write; turning batches off publishes what was
  /// recorded until then at once.
  ///
  /// A new store starts with batches off, and turns them on at
  /// ``defaultNotificationInterval`` when it gets its first subscriber (a ``changes``
  /// iteration, an ``observe(on:_:)`` handler or a ``notificationCenter``), unless the
  /// interval was set before: a store whose interval was set to `.zero` publishes nothing to
  /// its subscribers (and says so on the standard error in debug builds).
  ///
  /// ```swift
  /// store.notificationInterval = .milliseconds(250)
  /// ```
  ///
  /// Thread-safe. While batches are on, each write appends its change to a log under the write
  /// lock; the log is coalesced per key off the write path, so a write costs little more and
  /// reads nothing (see <doc:ObservingChanges>; the benchmark's README has the measurements).
  public var notificationInterval: Duration {
    get {
      _writer.withLock { $0.changes.interval }
    }
    set {
      let interval = max(newValue, .zero)
      let wasTracking = _writer.withLock { state in
        let wasTracking = state.changes.isTracking
        state.changes.interval = interval
        state.changes.intervalIsChosen = true
        return wasTracking
      }
      if wasTracking && interval == .zero { _publishChanges() }
    }
  }

  /// The interval at which a store whose ``notificationInterval`` was never set publishes
  /// batches once it has a subscriber: 100 milliseconds, ten batches a second at most.
  public static var defaultNotificationInterval: Duration { .milliseconds(100) }

  /// Turns batches on at the default interval for a new subscriber, unless the interval was
  /// chosen; in debug builds, warns a subscriber of a store whose batches were turned off.
  func _startBatchesForSubscriber() {
    let isOffByChoice = _writer.withLock { state -> Bool in
      guard state.changes.interval == .zero else { return false }
      if state.changes.intervalIsChosen { return true }
      state.changes.interval = Self.defaultNotificationInterval
      return false
    }
    #if DEBUG
      if isOffByChoice {
        let store = name.map { "MemoryStore \"\($0)\"" } ?? "A MemoryStore"
        FileHandle.standardError.write(
          Data(
            ("\(store) got a subscriber while its notificationInterval is .zero: it publishes "
              + "no change batches until the interval is set above zero.\n").utf8))
      }
    #endif
  }

  /// Publishes the changes recorded so far and waits for the handlers: what ``flush()`` now
  /// does, with the rest of the store's deferred work.
  ///
  /// Thread-safe.
  @available(*, deprecated, renamed: "flush()")
  public func flushChanges() async {
    await flush()
  }

  /// Publishes the changes logged so far, if they make a batch.
  ///
  /// - Parameter disarm: Whether this is the scheduled publication, after which the next
  ///   change schedules another.
  func _publishChanges(disarm: Bool = false) {
    _ = _publishChanges(disarm: disarm, subscribing: nil)
  }

  /// Publishes the changes logged so far, if they make a batch; with `sink`, then subscribes
  /// it, and returns a read section entered at the very point of the write order where the
  /// published changes end (so the next batch is the difference from what the section sees).
  /// With `scheduledAt`, this is the publication that the first change scheduled then, and
  /// the batch's delay is counted for ``statistics``.
  ///
  /// Inlinable, like the write path, so that the scheduled publication (see
  /// ``_schedulePublication(after:)``) coalesces and builds its batch specialised for the
  /// client's types.
  @inlinable
  func _publishChanges(
    disarm: Bool, subscribing sink: _ChangeHub<Key, Value>.Sink?,
    scheduledAt: ContinuousClock.Instant? = nil
  ) -> (
    section: (version: UInt64, token: (UnsafeMutablePointer<Atomic<Int>>, Int)),
    subscription: Subscription, last: UInt64
  )? {
    let (coalesced, batch, displaced, subscribed) = _hub.publication.withLock {
      last in
      let coalesced = _coalesceLogged(
        publishing: true, disarm: disarm, enteringReadSection: sink != nil)
      var batch: ChangeBatch<Key, Value>?
      var displaced: _ChangeHub<Key, Value>.Displaced = ([], [])
      if let recorded = coalesced.recorded, !recorded.isEmpty,
        let published = recorded.batch(sequenceNumber: last + 1)
      {
        last += 1
        batch = published
        displaced = _hub.deliver(published)
        _countBatchDelay(scheduledAt: scheduledAt)
      }
      let subscribed = sink.map { sink in
        (coalesced.section.unsafelyUnwrapped, _hub.add(sink), last)
      }
      return (coalesced, batch, displaced, subscribed)
    }
    // Released only now: dropping logged, coalesced or merged changes may run a value's deinit.
    withExtendedLifetime((coalesced, batch, displaced)) {}
    return subscribed
  }

  /// Counts a published batch's delay for ``statistics``: from `scheduledAt`, when its first
  /// change scheduled it (`nil`: published early, by a flush or a new subscription).
  /// `publication` is held.
  @usableFromInline
  func _countBatchDelay(scheduledAt: ContinuousClock.Instant?) {
    let now = _clock.scheduler.now
    _hub.batchDelays.withLock { delays in
      guard let scheduledAt else {
        delays.lastEarlyBatch = now
        return
      }
      // A batch published early since the scheduling took the changes made before it:
      // this batch's first change came after that one.
      let delay = now - max(scheduledAt, delays.lastEarlyBatch ?? scheduledAt)
      delays.counted.published &+= 1
      delays.counted.totalDelay += delay
      delays.counted.longestDelay = max(delays.counted.longestDelay, delay)
    }
  }

  /// What a coalescing pass produced: the recorded changes when publishing, what it let go
  /// of, for the caller to release after unlocking, and the read section it entered if asked.
  @usableFromInline typealias _Coalesced = (
    recorded: _RecordedChanges<Key, Value>?, segments: [_LogSegment<Key, Value>],
    displaced: [Value], section: (version: UInt64, token: (UnsafeMutablePointer<Atomic<Int>>, Int))?
  )

  /// Moves logged changes into the accumulator, oldest first.
  ///
  /// - Parameters:
  ///   - publishing: Whether to take everything, the segment being filled included, and
  ///     return the accumulated changes for a batch; otherwise only full segments are taken.
  ///   - disarm: Whether the scheduled publication is running.
  ///   - enteringReadSection: Whether to enter a read section where the changes taken end.
  @inlinable
  func _coalesceLogged(
    publishing: Bool, disarm: Bool = false, enteringReadSection: Bool = false
  ) -> _Coalesced {
    _hub.accumulator.withLock { accumulator in
      let (segments, section) = _writer.withLock { state in
        if disarm { state.changes.isArmed = false }
        if !publishing { state.changes.isCoalescing = false }
        // Under the write lock, the log and the table agree: the section sees exactly the
        // changes taken.
        return (
          state.changes.takeLogged(includingCurrent: publishing),
          enteringReadSection ? _table.enterReadSection() : nil
        )
      }
      var displaced: [Value] = []
      for segment in segments { accumulator.apply(segment, displaced: &displaced) }
      return (publishing ? accumulator.take() : nil, segments, displaced, section)
    }
  }

  /// Does what a write's logging asked for, after the write lock is released.
  @inlinable @inline(never)
  func _followUp(_ followUp: _TrackingFollowUp) {
    if let notices = followUp.notices?.takeRetainedValue() {
      _readObservers.with { $0.notify(notices, on: _clock.scheduler) }
    }
    if followUp.deliversRemovals { _scheduleRemovalDelivery() }
    if followUp.wakesFeed { _wakeLocalChangeFeed() }
    if let delay = followUp.publishAfter {
      _schedulePublication(after: delay)
    }
    if followUp.coalesceNow {
      withExtendedLifetime(_coalesceLogged(publishing: false)) {}
    } else if followUp.coalesceInBackground {
      // Not on a global queue: the Swift task pool can hold all of their threads.
      _Overcommit.serial.async { [weak self] in
        guard let self else { return }
        withExtendedLifetime(self._coalesceLogged(publishing: false)) {}
      }
    }
  }

  /// Schedules the publication of the changes logged so far, `delay` from now (inlinable, so
  /// that the publication runs specialised).
  @inlinable
  func _schedulePublication(after delay: Duration) {
    let scheduledAt = _clock.scheduler.now
    _clock.scheduler.schedule(after: delay) { [weak self] in
      _ = self?._publishChanges(disarm: true, subscribing: nil, scheduledAt: scheduledAt)
    }
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
  /// Starting the first iteration of a store whose ``notificationInterval`` was never set
  /// turns batches on at ``defaultNotificationInterval``; nothing is published while the
  /// interval is `.zero`.
  ///
  /// The sequence refers to the store weakly: it does not keep the store alive.
  public var changes: Changes { Changes(store: self, includesInitialSnapshot: false) }

  /// The store's change batches, as an `AsyncSequence` whose first element, with
  /// `includingInitialSnapshot`, is the whole store: the way to keep a mirror of a store that
  /// is being written.
  ///
  /// ```swift
  /// var mirror: [String: Double] = [:]
  /// for await batch in store.changes(includingInitialSnapshot: true) {
  ///   batch.apply(to: &mirror)   // the first batch replaces the mirror's contents
  ///   render(mirror)
  /// }
  /// ```
  ///
  /// The snapshot and the subscription are taken at one point of the write order: every write
  /// after that point is in a later batch, and every earlier one in the snapshot. So applying
  /// the elements in order reproduces the store exactly, however busy its writers are, which
  /// subscribing and then reading ``allItems`` does not (a change made between the two, and
  /// published before the read, would be missed).
  ///
  /// Batches are differences from the previous batch, so the snapshot is taken where one
  /// ends: starting an iteration first publishes the changes recorded so far to the other
  /// subscribers, as ``flush()`` would.
  ///
  /// The first element is a batch with ``ChangeBatch/isInitialSnapshot`` set: every entry in
  /// ``ChangeBatch/updated`` and ``ChangeBatch/addedKeys``, and the sequence number of the
  /// last batch published before it, so that the batches after it continue the sequence. A
  /// consumer that is slow to take it receives it merged with the batches that follow, as
  /// one snapshot. Otherwise the sequence behaves as ``changes``: batches come only while
  /// ``notificationInterval`` is above zero.
  ///
  /// - Parameter includingInitialSnapshot: Whether the first element is the whole store.
  /// - Complexity: Starting an iteration with the snapshot copies every entry, O(*n*), on the
  ///   calling thread; writers never wait for it.
  public func changes(includingInitialSnapshot: Bool) -> Changes {
    Changes(store: self, includesInitialSnapshot: includingInitialSnapshot)
  }

  /// Subscribes `sink`, with a snapshot of the store taken at the same point of the write
  /// order placed in it first.
  ///
  /// Batches are differences from the previous batch, so the snapshot is taken where one
  /// ends: the changes logged so far are published first (to the other subscribers).
  func _subscribeWithSnapshot(_ sink: _StreamSink<Key, Value>) -> Subscription {
    let (subscription, entries, last) = _subscribe(.stream(sink)) { $0.dictionary }
    // Batches delivered meanwhile changed what the snapshot holds, so they follow it. Placed
    // under `publication`, as deliveries are, so that none runs meanwhile; what it displaces
    // is released after.
    let displaced = _hub.publication.withLock { _ in
      sink.preload(ChangeBatch(snapshot: entries, sequenceNumber: last))
    }
    withExtendedLifetime(displaced) {}
    return subscription
  }

  /// Subscribes `sink` where a batch ends (publishing the changes logged so far), and returns
  /// `read` of the store at that very point, with the number of the last batch published.
  func _subscribe<R>(
    _ sink: _ChangeHub<Key, Value>.Sink, reading read: (_ReadView<Key, Value>) -> R
  ) -> (subscription: Subscription, read: R, last: UInt64) {
    // An entry that has expired by the instant the read starts is absent from its view.
    let early = _signals.nextExpiry.load(ordering: .acquiring)
    let (section, subscription, last) = _publishChanges(disarm: false, subscribing: sink)
      .unsafelyUnwrapped
    let result = read(_readView(at: section.version, earlyExpiry: early))
    _table.leaveReadSection(section.token)
    return (subscription, result, last)
  }

  /// Calls `handler` with every change batch published from now on, until the returned
  /// subscription is cancelled or released.
  ///
  /// ```swift
  /// let subscription = store.observe { batch in
  ///   for (symbol, quote) in batch.updated { render(symbol, quote) }
  /// }
  /// ```
  ///
  /// The handler runs serially and in batch order, on a serial queue of its own, never under a
  /// lock of the store. Without `queue`, that serial queue targets no other: Dispatch runs it
  /// on a thread of its overcommitting pool, at the utility quality of service, so batches
  /// reach the handler on the interval even while Swift tasks keep every core busy (see
  /// <doc:ObservingChanges>). With `queue`, it targets `queue`, and the handler runs where
  /// that queue runs its work. It may read and write the store; a write it makes appears in a
  /// later batch. A handler slower than the batches receives the batches that
  /// waited for it merged into one. The first handler of a store whose
  /// ``notificationInterval`` was never set turns batches on at
  /// ``defaultNotificationInterval``.
  ///
  /// - Parameters:
  ///   - queue: The queue the handler runs on; `nil` for a thread that the Swift task pool
  ///     cannot hold. A concurrent queue is fine: calls are still serial.
  ///   - handler: Receives each batch.
  /// - Returns: A subscription; delivery stops when it is cancelled or released.
  public func observe(
    on queue: DispatchQueue? = nil,
    _ handler: @escaping @Sendable (ChangeBatch<Key, Value>) -> Void
  ) -> Subscription {
    _startBatchesForSubscriber()
    // Without a queue, a serial queue that targets no other: Dispatch's overcommitting pool
    // gives it a thread even while the Swift task pool holds every thread of the global queues.
    let serial = DispatchQueue(
      label: "MemoryStore.observer" + (name.map { " (\($0))" } ?? ""), qos: .utility,
      target: queue)
    return _hub.add(.handler(_HandlerSink(queue: serial, handler: handler)))
  }

  /// Calls `handler` on the main actor with every change batch published from now on, until
  /// the returned subscription is cancelled or released: for view models and other
  /// `@MainActor` code.
  ///
  /// ```swift
  /// @MainActor final class QuotesModel {
  ///   var rows: [String: Double] = [:]
  ///   var subscription: Subscription?
  ///
  ///   init(store: MemoryStore<String, Double>) {
  ///     subscription = store.observeOnMainActor { [weak self] batch in
  ///       guard let self else { return }
  ///       batch.apply(to: &self.rows)   // main-actor state, no hop and no assumption
  ///     }
  ///   }
  /// }
  /// ```
  ///
  /// The handler runs serially and in batch order on the main queue, which the main actor
  /// runs on, as ``observe(on:_:)`` with `.main` would, but typed as main-actor isolated, so
  /// that it may touch main-actor state under Swift 6's strict concurrency. The rest is as
  /// for ``observe(on:_:)``.
  ///
  /// - Parameter handler: Receives each batch, on the main actor.
  /// - Returns: A subscription; delivery stops when it is cancelled or released.
  public func observeOnMainActor(
    _ handler: @escaping @MainActor @Sendable (ChangeBatch<Key, Value>) -> Void
  ) -> Subscription {
    observe(on: .main) { batch in
      // The handler's queue targets the main queue, which is the main actor's executor.
      MainActor.assumeIsolated { handler(batch) }
    }
  }

  /// The value of one key, now and after each change: an `AsyncSequence` whose first element
  /// is the key's current value, followed by its value after each published batch that
  /// changes it.
  ///
  /// ```swift
  /// for await update in quotes.updates(of: "AAPL") {
  ///   label.text = update.value.map { "\($0)" } ?? "—"   // nil: the key is absent
  /// }
  /// ```
  ///
  /// Each element is a ``KeyUpdate``, whose ``KeyUpdate/value`` is `nil` while the key is
  /// absent; the iterator's `next()` returns `nil` only when the sequence ends, so an absent key
  /// and the end never look alike.
  ///
  /// Changes come with the store's batches, one element per batch at most, so a key written
  /// many times within an interval yields its latest value once; a consumer slower than the
  /// batches receives only the latest value it missed (memory: one value). The first
  /// element and the subscription are taken at one point of the write order, as for
  /// ``changes(includingInitialSnapshot:)``, so no change is missed between them. Starting an
  /// iteration of a store whose ``notificationInterval`` was never set turns batches on at
  /// ``defaultNotificationInterval``.
  ///
  /// Like ``changes`` and ``removals``, the sequence subscribes nothing by
  /// itself: each iteration is a subscriber from the moment it starts (when `for await` makes
  /// its iterator), which costs every published batch one lookup of its key; a store nobody
  /// watches pays nothing. Leaving the loop, cancelling its task or dropping the iterator ends
  /// it; it ends when the store is freed, after the last value was taken. The sequence refers
  /// to the store weakly.
  ///
  /// - Parameter key: The key to watch.
  /// - Returns: The key's updates; thread-safe.
  /// - Complexity: O(1) to start, on the calling thread.
  public func updates(of key: Key) -> Updates {
    Updates(store: self, key: key)
  }

  /// The value of one key, now and after each change, as optionals: `next()` returns `Value??`,
  /// whose `.some(nil)` (absent) is easily mistaken for `nil` (the end).
  ///
  /// Thread-safe; see ``updates(of:)``, whose elements say which is which.
  @available(*, deprecated, renamed: "updates(of:)")
  public func updates(forKey key: Key) -> KeyUpdates {
    KeyUpdates(updates: updates(of: key))
  }

  /// Subscribes `sink` to its key, with the key's value taken at the same point of the write
  /// order placed in it first.
  func _subscribe(_ sink: _KeySink<Key, Value>) -> Subscription {
    let (subscription, current, _) = _subscribe(.key(sink)) { $0.value(forKey: sink.key) }
    // A value delivered meanwhile is newer.
    sink.preload(current)
    return subscription
  }

  /// The `AsyncSequence` of one key's updates; see ``MemoryStore/updates(of:)``.
  ///
  /// Thread-safe; refers to the store weakly. Each iterator is a subscriber of its own.
  public struct Updates: AsyncSequence, Sendable {
    public typealias Element = KeyUpdate<Key, Value>
    public typealias Failure = Never

    weak var store: MemoryStore?
    let key: Key

    /// Subscribes: the iterator receives the key's current value, then its changes.
    public func makeAsyncIterator() -> Iterator {
      guard let store else { return Iterator(key: key, sink: nil, subscription: nil) }
      store._startBatchesForSubscriber()
      let sink = _KeySink<Key, Value>(key: key)
      return Iterator(key: key, sink: sink, subscription: store._subscribe(sink))
    }

    /// Iterates one subscription. Dropping the iterator ends the subscription.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
      let key: Key
      let sink: _KeySink<Key, Value>?
      let subscription: Subscription?

      /// The key's next update, waiting for it if necessary; `nil` only at the end: when the
      /// store is gone and the last update was taken, or when the task is cancelled.
      public mutating func next() async -> KeyUpdate<Key, Value>? {
        await next(isolation: nil)
      }

      /// The key's next update, waiting for it if necessary; `nil` only at the end: when the
      /// store is gone and the last update was taken, or when the task is cancelled.
      public mutating func next(
        isolation actor: isolated (any Actor)?
      ) async -> KeyUpdate<Key, Value>? {
        guard let sink, let subscription else { return nil }
        guard let value = await sink.next(isolation: actor, onCancel: { subscription.cancel() })
        else { return nil }
        return KeyUpdate(key: key, value: value)
      }
    }
  }

  /// The `AsyncSequence` of one key's values as optionals; see ``MemoryStore/updates(of:)``,
  /// which replaces it.
  ///
  /// Thread-safe; refers to the store weakly.
  @available(*, deprecated, renamed: "Updates")
  public struct KeyUpdates: AsyncSequence, Sendable {
    public typealias Element = Value?
    public typealias Failure = Never

    /// The sequence this one reads, each update as its value.
    let updates: Updates

    /// Subscribes: the iterator receives the key's current value, then its changes.
    public func makeAsyncIterator() -> Iterator {
      Iterator(base: updates.makeAsyncIterator())
    }

    /// Iterates one subscription. Dropping the iterator ends the subscription.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
      var base: Updates.Iterator

      /// The key's next value (`.some(nil)`: absent), waiting for it if necessary; `nil` when
      /// the store is gone or the task is cancelled.
      public mutating func next() async -> Value?? {
        await next(isolation: nil)
      }

      /// The key's next value (`.some(nil)`: absent), waiting for it if necessary; `nil` when
      /// the store is gone or the task is cancelled.
      public mutating func next(isolation actor: isolated (any Actor)?) async -> Value?? {
        await base.next(isolation: actor).map(\.value)
      }
    }
  }

  /// The `AsyncSequence` of a store's change batches; see ``MemoryStore/changes``.
  ///
  /// Thread-safe; refers to the store weakly.
  public struct Changes: AsyncSequence, Sendable {
    public typealias Element = ChangeBatch<Key, Value>
    public typealias Failure = Never

    weak var store: MemoryStore?
    /// Whether an iteration starts with a snapshot of the store.
    let includesInitialSnapshot: Bool

    /// Subscribes: the iterator receives every batch published from now on, after the
    /// snapshot if the sequence includes one.
    public func makeAsyncIterator() -> Iterator {
      guard let store else { return Iterator(sink: nil, subscription: nil) }
      store._startBatchesForSubscriber()
      let sink = _StreamSink<Key, Value>()
      let subscription =
        includesInitialSnapshot
        ? store._subscribeWithSnapshot(sink) : store._hub.add(.stream(sink))
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
