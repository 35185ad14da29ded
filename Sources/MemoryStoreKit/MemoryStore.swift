import Dispatch
import Synchronization

/// A thread-safe, subscriptable dictionary store: reads are synchronous and never wait, writes
/// are totally ordered and visible to every read that starts after the write call returns.
///
/// Use it like a `Dictionary` shared by many threads:
///
/// ```swift
/// let quotes = MemoryStore<String, Double>(name: "quotes")
/// quotes["AAPL"] = 231.4              // ordered write, visible to every later read
/// let price = quotes["AAPL"]          // synchronous read: 231.4
/// quotes["AAPL"] = nil                // assigning nil removes the key
/// quotes.addEntries(["MSFT": 415.2, "NVDA": 131.9])   // one atomic write
/// ```
///
/// ## Thread safety and ordering
///
/// Every member may be called from any thread, task or actor at the same time.
///
/// - **Reads** (`subscript` get, ``count``, ``isEmpty``, ``contains(_:)``, ``allItems``,
///   ``keys``, ``values``, ``values(forKeys:)``) are wait-free in practice: they never take a
///   lock, never wait for a writer and never write to a cache line shared with other reading
///   threads, so they scale with cores.
/// - **Writes** (`subscript` set, ``updateValue(_:forKey:)``, ``removeValue(forKey:)``,
///   ``addEntries(_:)``, ``removeValues(forKeys:)``, ``removeAll()``) are applied before the
///   call returns, in one total order; a write never waits for readers that start after it,
///   nor for later work. Writers are serialised with each other by a short critical section.
/// - **Linearizable:** once a write call returns, every read that starts afterwards, on any
///   thread, observes that write or a later one. One thread's writes apply in call order.
/// - **Atomic batches:** no read ever observes part of an ``addEntries(_:)``,
///   ``removeValues(forKeys:)`` or ``removeAll()``; ``allItems`` and ``values(forKeys:)`` are
///   consistent snapshots taken at one point of that order.
///
/// ## How it works
///
/// The store is a versioned hash table (see <doc:Internals>). A reader announces itself in its
/// thread's own stripe of counters, loads the version of the last published write, and reads
/// the table as it was at that version. The single active writer links new nodes in place of
/// the ones it replaces, stamped with the next version, and publishes them with one atomic
/// store of the version: a batch of changes becomes visible at once. Replaced values stay
/// readable until no reader can still see them, then are freed outside every lock. Each
/// entry is stored once, and the table grows a few buckets per write, so no write rehashes
/// the whole store.
///
/// `Key`'s `Hashable` conformance runs inside the store's critical sections, as it does inside
/// a `Dictionary`; it must not access the store.
///
/// ## Observing changes
///
/// With a ``notificationInterval`` above zero, the store publishes what changed as one
/// ``ChangeBatch`` per interval, at most, to ``changes`` iterations, ``observe(on:_:)``
/// handlers and, if set, a ``notificationCenter``:
///
/// ```swift
/// quotes.notificationInterval = .milliseconds(250)
/// for await batch in quotes.changes { print(batch.updated, batch.removed) }
/// ```
///
/// ## Eviction, limits and expiry
///
/// A store can remove entries on its own: an eviction decider run by
/// ``purgeEvictableItems(trigger:)``, every ``evictionInterval`` and on
/// ``handleMemoryPressure(_:)``; a ``countLimit`` and a ``costLimit`` enforced by every write,
/// in W-TinyLFU order (a new key stays only if used more often than the entry it would push
/// out); and a time to live per entry (``defaultTimeToLive``,
/// ``setValue(_:forKey:cost:timeToLive:)``). Removals appear in change batches with their
/// ``ChangeReason``, and ``statistics`` counts them:
///
/// ```swift
/// let sessions = MemoryStore<String, Session>(name: "sessions")
/// sessions.countLimit = 10_000
/// sessions.defaultTimeToLive = .seconds(1_800)
/// ```
///
/// A store without these pays nothing for them but one relaxed atomic load per read and one
/// per write; see <doc:Eviction>.
///
/// ## Lifetime
///
/// Writes are applied before their call returns, so no write is ever pending: when the last
/// reference to a store goes away, the store is freed at once and nothing is lost. Changes
/// recorded for a batch that was not published yet are delivered to the subscribers then.
/// Subscriptions and timers refer to the store weakly and never keep it alive.
public final class MemoryStore<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// The name given at creation, for diagnostics. Immutable; safe to read from any thread.
  public let name: String?

  /// The contents: a versioned hash table that readers read without locks (see
  /// <doc:Internals>). Written only inside a write transaction (see `_transact`).
  @usableFromInline let _table: _ConcurrentTable<Key, Value>
  /// The write lock and what it guards: the policy, the change log and the removal log.
  @usableFromInline let _writer: _Writer<Key, Value>
  /// Values being created by get-or-create and loaded by get-or-load, by key.
  let _inFlight: _Protected<_InFlight<Key, Value>>
  /// Change batches: the coalesced changes, the subscribers and the publication state.
  @usableFromInline let _hub: _ChangeHub<Key, Value>
  /// The store's time: its scheduler, and the system clock's offsets.
  @usableFromInline let _clock: _StoreClock
  /// What writes and reads check before any lock: which work a write has, the earliest
  /// expiry.
  @usableFromInline let _signals: _WriteSignals
  /// The user's functions that the store calls: the eviction decider and the cost function.
  let _functions: _Protected<_UserFunctions>
  /// Serialises purges, so that the decider never runs concurrently with itself.
  let _purgeGate: _PurgeGate
  /// The observers of tracked reads: made when ``tracksReads`` is first turned on.
  @usableFromInline let _readObservers = _ReadObserversSlot()
  /// The wake-up of the open ``LocalChangeFeed``, if one is open.
  let _feedSignal = _Protected<_FeedSignal?>(nil)
  /// The generation of the latest invalidation (see ``_InvalidationRecord``), for a load to
  /// note when it starts; written under the write lock.
  let _invalidationGeneration = Atomic<UInt64>(0)

  /// Creates an empty store.
  ///
  /// ```swift
  /// let quotes = MemoryStore<String, Quote>(name: "quotes")
  /// ```
  ///
  /// - Parameters:
  ///   - name: A name for diagnostics; it has no effect on behaviour.
  ///   - scheduler: The source of time for interval behaviour such as change batches. The
  ///     default uses real time; tests pass a ``ManualScheduler``.
  ///   - tracksReads: Whether reads register with the Observation framework (see
  ///     ``tracksReads``).
  public init(
    name: String? = nil, scheduler: some StoreScheduler = .dispatch, tracksReads: Bool = false
  ) {
    self.name = name
    _clock = _StoreClock(scheduler: scheduler)
    _signals = _WriteSignals()
    _functions = _Protected(_UserFunctions())
    _purgeGate = _PurgeGate()
    _hub = _ChangeHub()
    _table = _ConcurrentTable()
    _writer = _Writer()
    _inFlight = _Protected(_InFlight())
    if tracksReads { self.tracksReads = true }
  }

  deinit {
    // Changes recorded but not yet published still reach the subscribers; then every
    // `changes` iteration ends.
    _publishChanges()
    _hub.finishAll()
    // Removals logged but not yet delivered still reach the subscribers; then their
    // iterations end.
    _deliverRemovals(finishing: true)
    // An iteration of the local change feed ends.
    _feedSignal.withLock { $0 }?.close()
    _writer.deallocate()
  }
}

// MARK: - The engine

extension MemoryStore {
  /// The per-thread reader counters (hits and misses live there too).
  @inlinable
  var _readers: _ReaderIndicator { _table._readers }

  /// Runs `body` on the store as readers see it: the table at the version published when the
  /// read starts.
  ///
  /// `body` must be store code only (a key's `==` aside): a reader that stays inside delays
  /// the freeing of replaced values, never a writer.
  @inlinable @inline(__always)
  func _withReadAccess<R>(_ body: (_ReadView<Key, Value>) -> R) -> R {
    _withCountedReadAccess { view, _ in body(view) }
  }

  /// ``_withReadAccess(_:)``, also giving `body` the calling thread's stripe of counters (for
  /// statistics).
  @inlinable @inline(__always)
  func _withCountedReadAccess<R>(
    _ body: (_ReadView<Key, Value>, UnsafeMutablePointer<Atomic<Int>>) -> R
  ) -> R {
    // An entry that has expired by the instant the read starts is absent from its view.
    let early = _signals.nextExpiry.load(ordering: .acquiring)
    return _table.withCountedReadSection { version, counters in
      body(_readView(at: version, earlyExpiry: early), counters)
    }
  }

  /// Runs `body` with the node that holds `key` now (`nil`: absent, or expired by now), valid
  /// while `body` runs: the read of one key, which loads no version in the common case (see
  /// ``_ConcurrentTable/_latestNode(forKey:hash:counters:)``). With `counting`, the lookup
  /// counts as a hit or a miss, and a hit as a use for eviction.
  ///
  /// `body` must be store code only, as for ``_withReadAccess(_:)``.
  @inlinable @inline(__always)
  func _withLatestNode<R>(
    forKey key: Key, hash: Int, counting: Bool = true, _ body: (_Node<Key, Value>?) -> R
  ) -> R {
    _table.withLatestReadSection { counters in
      var node = _table._latestNode(forKey: key, hash: hash, counters: counters)
      if let found = node, found.hasMetadata, !_isLive(found) { node = nil }
      if counting { _recordLookup(node, counters: counters) }
      return body(node)
    }
  }

  /// Frees what a write retired (a value's deinit may run): call without any store lock.
  ///
  /// A large amount (the values a long reader, such as a save, held back, or a generation that
  /// `removeAll()` retired) is freed on a background queue instead, so that no write pays for
  /// work proportional to the store; ``flush()`` waits for it.
  @inlinable @inline(__always)
  func _release(_ garbage: _TableGarbage?) {
    guard let garbage else { return }
    if garbage.isLarge {
      _releaseInBackground(garbage)
    } else {
      _table._free(garbage)
    }
  }

  @usableFromInline
  func _releaseInBackground(_ garbage: _TableGarbage) {
    let table = _table
    _freeQueue.async { table._free(garbage) }
  }
}

// MARK: - Reading

extension MemoryStore {
  /// Reads or writes the value stored for `key`; assigning `nil` removes the key.
  ///
  /// ```swift
  /// store["AAPL"] = quote          // insert or replace
  /// if let q = store["AAPL"] { … } // read
  /// store["AAPL"] = nil            // remove
  /// ```
  ///
  /// The getter is synchronous and never blocks. The setter is an ordered write, visible to
  /// every read that starts after it returns. It stores the entry with the default time to
  /// live and the cost that ``entryCost`` gives (0 without one), whatever the entry it
  /// replaces had; see ``setValue(_:forKey:cost:timeToLive:)`` for others.
  ///
  /// - Complexity: O(1) on average for both, like `Dictionary`.
  @inlinable
  public subscript(key: Key) -> Value? {
    get {
      // Hashed once, for the table and for a tracked read.
      let hash = key.hashValue
      _observeRead(.value(hash: hash))
      return _withLatestNode(forKey: key, hash: hash) { $0?.value.pointee }
    }
    set {
      if let newValue {
        updateValue(newValue, forKey: key)
      } else {
        removeValue(forKey: key)
      }
    }
  }

  /// The number of entries, read at one point of the write order. An entry whose deadline has
  /// passed is not counted, whether or not the store has removed it yet.
  ///
  /// - Complexity: O(1), except in the moment between an entry's expiry and its removal (by
  ///   the expiry timer, at the deadline, or by the next write), when it counts the live
  ///   entries in O(*n*). Never blocks.
  @inlinable
  public var count: Int {
    _observeRead(.membership)
    // An entry that has expired is not counted, whether or not it has been removed yet.
    guard _signals.nextExpiry.load(ordering: .relaxed) == .max else {
      return _withReadAccess { $0.count }
    }
    return _table.count
  }

  /// Whether the store has no entries, read at one point of the write order.
  ///
  /// - Complexity: O(1). Never blocks.
  @inlinable
  public var isEmpty: Bool {
    count == 0
  }

  /// A consistent snapshot of every entry: the contents at one point of the write order, never
  /// a mix of before and after a write. Later writes do not change the returned dictionary.
  ///
  /// ```swift
  /// let snapshot = store.allItems
  /// store.removeAll()
  /// snapshot.count   // unchanged
  /// ```
  ///
  /// This is how to iterate a store: the store itself is not a `Sequence`, so that no loop
  /// can mistake a live, changing store for a fixed collection; iterate a snapshot instead
  /// (``keys`` and ``values`` are cheaper when only one side is needed):
  ///
  /// ```swift
  /// for (symbol, quote) in store.allItems { print(symbol, quote) }
  /// ```
  ///
  /// - Complexity: O(*n*) to take, on the calling thread: it copies every entry at one
  ///   version into a new dictionary. Writers never wait for it. Take snapshots for work that
  ///   needs them, not on every read.
  @inlinable
  public var allItems: [Key: Value] {
    _observeRead(.contents)
    return _withReadAccess { $0.dictionary }
  }

  /// The keys of every entry, at one point of the write order: a snapshot, like
  /// ``allItems``, in no particular order. Later writes do not change the returned array.
  ///
  /// ```swift
  /// for symbol in store.keys.sorted() { print(symbol) }
  /// ```
  ///
  /// - Complexity: O(*n*) to take, on the calling thread. Writers never wait for it.
  @inlinable
  public var keys: [Key] {
    _observeRead(.membership)
    return _withReadAccess { $0.map { key, _ in key } }
  }

  /// The values of every entry, at one point of the write order: a snapshot, like
  /// ``allItems``, in no particular order. Later writes do not change the returned array.
  ///
  /// - Complexity: O(*n*) to take, on the calling thread. Writers never wait for it.
  @inlinable
  public var values: [Value] {
    _observeRead(.contents)
    return _withReadAccess { $0.map { _, value in value } }
  }

  /// Whether `key` has a value, read at one point of the write order, as the subscript reads
  /// it (an expired entry has none).
  ///
  /// Unlike a subscript read, it is neither a hit nor a miss in ``statistics``, and it does not
  /// count as a use of the entry for eviction: asking whether a key is cached does not keep it
  /// cached.
  ///
  /// ```swift
  /// if !store.contains("AAPL") { store["AAPL"] = await fetchQuote("AAPL") }
  /// ```
  ///
  /// - Complexity: O(1) on average. Never blocks.
  @inlinable
  public func contains(_ key: Key) -> Bool {
    let hash = key.hashValue
    _observeRead(.presence(hash: hash))
    return _withLatestNode(forKey: key, hash: hash, counting: false) { $0 != nil }
  }

  /// Reads several keys at one point of the write order.
  ///
  /// Keys that are absent are left out of the result; a key repeated in `keys` appears once.
  ///
  /// ```swift
  /// let quotes = store.values(forKeys: ["AAPL", "MSFT"])
  /// ```
  ///
  /// - Parameter keys: The keys to read. The sequence is iterated once, before the read.
  /// - Returns: The entries for the keys that are present.
  /// - Complexity: O(*k*) for *k* keys. Never blocks.
  @inlinable
  public func values(forKeys keys: some Sequence<Key>) -> [Key: Value] {
    // Iterate the caller's sequence before entering the read: it is user code.
    let keys = Array(keys)
    if _signals.tracksReads.load(ordering: .relaxed) {
      for key in keys { _trackRead(.value(hash: key.hashValue)) }
    }
    return _withCountedReadAccess { view, counters in
      var result: [Key: Value] = [:]
      result.reserveCapacity(keys.count)
      for key in keys {
        let node = view.node(forKey: key)
        if let node { result[key] = node.value.pointee }
        _recordLookup(node, counters: counters)
      }
      return result
    }
  }
}

// MARK: - Writing

extension MemoryStore {
  /// Inserts or replaces the value for `key` and returns the value it replaced.
  ///
  /// An ordered write: once it returns, every read that starts afterwards sees `value` (or a
  /// later write).
  ///
  /// - Returns: The previous value, or `nil` if the key was absent.
  /// - Complexity: O(1) on average.
  @inlinable @discardableResult
  public func updateValue(_ value: Value, forKey key: Key) -> Value? {
    _performKeyed(key, value)
  }

  /// Removes `key` and returns the value it had. Removing an absent key changes nothing.
  ///
  /// An ordered write: once it returns, every read that starts afterwards misses `key` (or
  /// sees a later write).
  ///
  /// - Returns: The removed value, or `nil` if the key was absent.
  /// - Complexity: O(1) on average.
  @inlinable @discardableResult
  public func removeValue(forKey key: Key) -> Value? {
    _performKeyed(key, nil)
  }

  /// Inserts or replaces every entry of `entries` as one atomic, ordered write: no read sees
  /// some of the entries without the others.
  ///
  /// ```swift
  /// store.addEntries(["AAPL": 231.4, "MSFT": 415.2])
  /// ```
  ///
  /// - Complexity: O(*m*) for *m* entries.
  @inlinable
  public func addEntries(_ entries: [Key: Value]) {
    guard !entries.isEmpty else { return }
    let terms = _termsAll(entries)
    _transact { $0.setAll(entries, costs: terms.costs, lifetimes: terms.lifetimes, in: self) }
  }

  /// Removes every key in `keys` as one atomic, ordered write. Absent keys are ignored.
  ///
  /// - Parameter keys: The keys to remove. The sequence is iterated once, before the write.
  /// - Complexity: O(*k*) for *k* keys.
  @inlinable
  public func removeValues(forKeys keys: some Sequence<Key>) {
    // Iterate the caller's sequence before taking the write lock: it is user code.
    let keys = Array(keys)
    guard !keys.isEmpty else { return }
    _transact { write in
      for key in keys { write.remove(key, reason: .write, in: self) }
    }
  }

  /// Removes every entry as one atomic, ordered write.
  ///
  /// - Complexity: O(1) under the write lock (it starts a new, empty generation of the table);
  ///   the old entries are released later, outside every lock, once no reader can see them.
  ///   While ``removals`` has subscribers, O(*n*): every entry is logged.
  @inlinable
  public func removeAll() {
    _transact(collectingExpiredKeys: true) { $0.removeAll(in: self) }
  }

  /// Finishes now what the store does after writes, and returns once it is done for every
  /// write made before the call: change batches published and handled, removals handed over,
  /// replaced values freed.
  ///
  /// ```swift
  /// store["a"] = 1
  /// await store.flush()   // every observe handler has seen "a"; every removal is handed over
  /// ```
  ///
  /// In order, it:
  /// - waits for writes that other threads are applying at this instant (a write is applied
  ///   before its own call returns);
  /// - publishes the changes recorded so far as a batch, without waiting for the
  ///   ``notificationInterval`` (nothing when nothing changed), and waits until every
  ///   ``observe(on:_:)`` handler and ``notificationCenter`` observer has run for every batch
  ///   published so far; ``changes`` iterations have the batches waiting for their next
  ///   iteration;
  /// - hands the removals of writes made before the call to every ``removals``
  ///   iteration;
  /// - with ``tracksReads`` on, delivers at once the notices that writes made before the call
  ///   handed to the scheduler (see ``tracksReads``), and waits for them;
  /// - frees the values that writes replaced or removed, when no reader still needs them,
  ///   rather than leaving them for later writes to free, and waits for the background queues
  ///   that coalesce logged changes and free large groups of values (so a value's `deinit`
  ///   must not wait for a lock that the caller of `flush()` holds).
  ///
  /// Use it in tests, and before an app quits. Thread-safe.
  ///
  /// - Complexity: O(*k* + *r*) for the *k* keys changed since the previous batch and the *r*
  ///   values replaced or removed since they were last freed.
  @inlinable
  public func flush() async {
    await _beginFlush()
    // Inlined, so that the batch is coalesced and built specialised for the client's types,
    // as the scheduled publication's is: unspecialised, every dictionary operation of a
    // batch of thousands of keys looks up its types' metadata.
    _ = _publishChanges(disarm: false, subscribing: nil)
    await _endFlush()
  }

  /// What ``flush()`` does before publishing: waits for the background coalescing queued
  /// before the call, then frees what readers no longer need.
  @usableFromInline
  func _beginFlush() async {
    // A background pass that coalesced logged changes before the call has let go of what it
    // took (a clear's contents, replaced values) before those are counted as freed.
    await _Overcommit.afterQueuedWork()
    _settle()
  }

  /// What ``flush()`` does after publishing: waits for the `observe` handlers, delivers the
  /// removals logged so far and the pending notices of tracked reads.
  @usableFromInline
  func _endFlush() async {
    for handler in _hub.handlerSinks() {
      await handler.drained()
    }
    // Delivered on the removals queue, in order after the deliveries already queued: including
    // removals whose writer has not queued their delivery yet.
    if DispatchQueue.getSpecific(key: _RemovalQueue.key) == nil {
      _RemovalQueue.queue.sync { _deliverRemovals() }
    }
    await _readObservers.current?.sendPending()
  }

  /// The queue that frees large garbage (see ``_release(_:)``).
  @usableFromInline
  var _freeQueue: DispatchQueue { _Freeing.queue }

  /// Frees the values that writes replaced or removed, if no reader still needs them, a
  /// bounded step at a time under the write lock.
  func _settle() {
    // What was handed to the background queue is freed first (unless this runs there: a
    // value's deinit may use the store).
    if DispatchQueue.getSpecific(key: _Freeing.key) == nil { _freeQueue.sync {} }
    // Bounded, so that writers made meanwhile cannot keep it going.
    var steps = _writer.withAccess { access in
      _table.retainedCount(access.held) / _ConcurrentTable<Key, Value>.tombstonesPerReclaim + 8
    }
    while steps > 0 {
      steps -= 1
      _writer.yieldToWaiters()
      let step = _writer.withAccess { _table.reclaimStep($0.held) }
      // Freed here, whatever its size: the caller waits for it.
      if let garbage = step.garbage { _table._free(garbage) }
      if step.isFinished { return }
    }
  }
}

/// The queue on which every store frees large garbage: serial, at utility priority.
@usableFromInline
enum _Freeing {
  @usableFromInline static let queue: DispatchQueue = {
    let queue = DispatchQueue(label: "MemoryStore.freeing", qos: .utility)
    queue.setSpecific(key: key, value: ())
    return queue
  }()

  /// Marks the queue, so that code running on it can tell.
  static let key = DispatchSpecificKey<Void>()
}
