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
/// - **Reads** (`subscript` get, ``count``, ``isEmpty``, ``allItems``, ``values(forKeys:)``)
///   are wait-free in practice: they never take a lock, never wait for a writer and never
///   write to a cache line shared with other reading threads, so they scale with cores.
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
/// The store keeps two copies of its dictionary (the *left-right* technique). Readers read the
/// published copy and announce themselves in a per-thread stripe of counters; the single
/// active writer updates the other copy, publishes it with one atomic store, and replays the
/// same write on the first copy at its next write, once the readers that were inside it have
/// left. The price is memory: the dictionary exists twice (values are shared by reference or
/// copy-on-write, so only the hash tables and any inline value payloads are doubled).
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
/// ``purgeEvictableItems(context:)``, every ``evictionInterval`` and on
/// ``handleMemoryPressure(_:)``; a ``countLimit`` and a ``costLimit`` enforced by every write,
/// least recently used first in approximation (CLOCK); and a time to live per entry
/// (``defaultTimeToLive``, ``setValue(_:forKey:cost:timeToLive:)``). Removals appear in change
/// batches with their ``ChangeReason``, and ``statistics`` counts them:
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

  /// The two copies of the contents.
  @usableFromInline let _copies: _Copies<Key, Value>
  /// Bit 0: the copy (0 or 1) that readers use. Bit 1: an overlay is active. Written only by a
  /// writer holding `_writeLock`, and, while an overlay is active, also holding `_backlogLock`.
  @usableFromInline let _state: Atomic<Int>
  /// Per-thread counts of the readers inside each copy.
  @usableFromInline let _readers: _ReaderIndicator
  /// Serialises writers.
  @usableFromInline let _writeLock: _Lock
  /// The writes applied to the published copy but not yet to the hidden one; guarded by
  /// `_writeLock`.
  @usableFromInline let _pending: _UnsafeBox<_Pending<Key, Value>>
  /// Guards `_overlay` against concurrent readers.
  @usableFromInline let _backlogLock: _Lock
  /// Writes made while the hidden copy was held by a reader. Modified only by a writer holding
  /// both locks; read by writers holding `_writeLock` or readers holding `_backlogLock`.
  @usableFromInline let _overlay: _UnsafeBox<_Overlay<Key, Value>>
  /// Guards `_creations`.
  @usableFromInline let _creationLock: _Lock
  /// Values being created by `value(forKey:orInsert:)`, by key; guarded by `_creationLock`.
  @usableFromInline let _creations: _UnsafeBox<[Key: _Creation<Value>]>
  /// The changes since the previous batch, as logged by writers; guarded by `_writeLock`.
  @usableFromInline let _tracker: _UnsafeBox<_ChangeTracker<Key, Value>>
  /// The same changes, coalesced per key; lock order: `_accumulator`, then `_writeLock`.
  @usableFromInline let _accumulator: _Protected<_ChangeAccumulator<Key, Value>>
  /// Subscribers and publication state.
  let _hub: _ChangeHub<Key, Value>
  /// The source of time for everything that happens on an interval.
  @usableFromInline let _scheduler: any StoreScheduler
  /// The scheduler's time at creation: policy times are nanoseconds since then.
  @usableFromInline let _origin: ContinuousClock.Instant
  /// Whether writes go through the eviction policy. Set once, under the write lock, never
  /// cleared; writers read it before locking to read the clock outside the lock, and again
  /// under the lock.
  @usableFromInline let _policyActive: Atomic<Bool>
  /// The eviction policy's bookkeeping; guarded by `_writeLock`.
  @usableFromInline let _policy: _UnsafeBox<_Policy<Key>>
  /// The earliest expiry of any entry, in policy nanoseconds; `Int64.max` when no entry
  /// expires. Written under the write lock before the write that needs it is published.
  @usableFromInline let _nextExpiry: Atomic<Int64>
  /// The address of the recency table reads update, or 0 (see `_RecencyTable`).
  @usableFromInline let _recencyTable: Atomic<Int>
  /// The current second since creation, plus one, for reads to record; 0 while no decider
  /// needs read times.
  @usableFromInline let _readTick: Atomic<UInt32>
  /// The eviction decider given at creation.
  let _evictionDecider: EvictionDecider?
  /// Serialises purges, so that the decider never runs concurrently with itself.
  let _purgeGate: _PurgeGate

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
  public convenience init(name: String? = nil, scheduler: some StoreScheduler = .dispatch) {
    self.init(name: name, scheduler: scheduler, decider: nil)
  }

  init(name: String?, scheduler: some StoreScheduler, decider: EvictionDecider?) {
    self.name = name
    _scheduler = scheduler
    _origin = scheduler.now
    _policyActive = Atomic(false)
    _policy = _UnsafeBox(_Policy())
    _nextExpiry = Atomic(.max)
    _recencyTable = Atomic(0)
    _readTick = Atomic(0)
    _evictionDecider = decider
    _purgeGate = _PurgeGate()
    _tracker = _UnsafeBox(_ChangeTracker())
    _accumulator = _Protected(_ChangeAccumulator())
    _hub = _ChangeHub()
    _copies = _Copies()
    _state = Atomic(0)
    _readers = _ReaderIndicator()
    _writeLock = _Lock()
    _pending = _UnsafeBox(_Pending())
    _backlogLock = _Lock()
    _overlay = _UnsafeBox(_Overlay())
    _creationLock = _Lock()
    _creations = _UnsafeBox([:])
  }

  deinit {
    // Changes recorded but not yet published still reach the subscribers; then every
    // `changes` iteration ends.
    _publishChanges()
    _hub.finishAll()
    _tracker.deallocate()
    _copies.deallocate()
    _readers.deallocate()
    _writeLock.deallocate()
    _pending.deallocate()
    _backlogLock.deallocate()
    _overlay.deallocate()
    _creationLock.deallocate()
    _creations.deallocate()
    _policy.pointer.pointee.table.deallocate()
    _policy.deallocate()
  }
}

// MARK: - The left-right protocol

extension MemoryStore {
  /// Runs `body` on the store as readers see it: the published copy, announced in the calling
  /// thread's reader stripe, plus the overlay if one is active.
  ///
  /// `body` must be store code only, never user code, which could write to the store and make
  /// a writer wait for this very reader.
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
    // No entry visible to this read has expired at the instant it starts.
    _expireDueEntries()
    let counters = _readers.countersForCurrentThread()
    var state = _state.load(ordering: .relaxed)
    while true {
      let copy = state & 1
      // Announce, then check that the copy is still the published one. A writer publishes
      // before it checks the counters, and both sides use sequentially consistent operations,
      // so either the writer sees this reader or this reader sees the newer copy.
      counters[copy].wrappingAdd(1, ordering: .sequentiallyConsistent)
      let current = _state.load(ordering: .sequentiallyConsistent)
      if current == copy {
        defer {
          counters[copy].wrappingSubtract(1, ordering: .releasing)
          // A reader that was preempted inside this copy may be what holds an overlay back.
          if _state.load(ordering: .relaxed) & 2 != 0 { _helpFoldOverlay() }
        }
        return body(_ReadView(copy: _copies.pointer(copy), overlay: nil), counters)
      }
      if current & 1 == copy, let result = _readThroughOverlay(current, counters, body) {
        counters[copy].wrappingSubtract(1, ordering: .releasing)
        return result
      }
      counters[copy].wrappingSubtract(1, ordering: .releasing)
      state = _state.load(ordering: .relaxed)
    }
  }

  /// The read path while an overlay is active; `nil` if the state changed meanwhile (the
  /// caller then starts again). The caller is announced in the published copy.
  @inlinable @inline(never)
  func _readThroughOverlay<R>(
    _ state: Int, _ counters: UnsafeMutablePointer<Atomic<Int>>,
    _ body: (_ReadView<Key, Value>, UnsafeMutablePointer<Atomic<Int>>) -> R
  ) -> R? {
    _helpFoldOverlay()
    _backlogLock.lock()
    defer { _backlogLock.unlock() }
    // The published copy cannot be republished while this reader is inside it, so an
    // unchanged state means the overlay still sits on top of this copy.
    guard _state.load(ordering: .acquiring) == state else { return nil }
    return body(_ReadView(copy: _copies.pointer(state & 1), overlay: _overlay.pointer), counters)
  }

  /// The store as readers see it, for code holding the write lock (the published copy cannot
  /// change under it).
  @inlinable
  func _lockedView() -> _ReadView<Key, Value> {
    let state = _state.load(ordering: .relaxed)
    return _ReadView(
      copy: _copies.pointer(state & 1), overlay: state & 2 != 0 ? _overlay.pointer : nil)
  }

  /// The largest overlay a reader folds in (see ``_helpFoldOverlay()``).
  @inlinable static var _readerFoldLimit: Int { 256 }

  /// If the write lock is free and so is the copy that held the overlay back, folds the
  /// overlay into that copy and publishes it. Never waits.
  ///
  /// Inlinable (though never inlined) so that it is specialised for the client's types: an
  /// unspecialised fold looks up generic metadata on every call, and readers call it on every
  /// read while an overlay is active.
  @inlinable @inline(never)
  func _helpFoldOverlay() {
    let hidden = (_state.load(ordering: .relaxed) & 1) ^ 1
    // Cheap early exit while the reader that holds the overlay back is still there.
    guard !_readers.hasReaders(in: hidden), _writeLock.tryLock() else { return }
    // A read folds only a small overlay, so that no read does work proportional to the writes
    // made while a save held a copy: the save folds those in itself, or the next write does.
    // (The overlay changes only under the write lock, which is held here.)
    if _overlay.pointer.pointee.changes.count > Self._readerFoldLimit {
      _writeLock.unlock()
      return
    }
    let caughtUp = _applyLocked(nil)
    _writeLock.unlock()
    withExtendedLifetime(caughtUp) {}
  }

  /// Performs one write and returns whether it changed the store and the previous value of the
  /// key it names (for `set`, `insert` and `remove`).
  @inlinable @inline(__always)
  func _perform(
    _ operation: _WriteOperation<Key, Value>, reason: ChangeReason = .write
  ) -> (changed: Bool, previous: Value?) {
    if _policyActive.load(ordering: .relaxed) {
      return _performWithPolicy(operation, reason: reason)
    }
    _writeLock.lock()
    if _policyActive.load(ordering: .relaxed) {
      _writeLock.unlock()
      return _performWithPolicy(operation, reason: reason)
    }
    let followUp =
      _tracker.pointer.pointee.isTracking ? _trackLocked(operation, reason: reason) : nil
    let result = _applyLocked(operation)
    if result.changed { _tracker.pointer.pointee.writeCount &+= 1 }
    _writeLock.unlock()
    // Release what the write took out of the copies only now: it may run a value's deinit.
    withExtendedLifetime(result.leftovers) {}
    if let followUp { _followUp(followUp) }
    return (result.changed, result.previous)
  }

  /// Sets (`newValue` non-`nil`) or removes `key`: the path every single-key write takes.
  ///
  /// Same protocol as ``_perform(_:reason:)``, written out for one key so that the common case, a
  /// pending single-key write to replay and no overlay, touches only concrete values.
  @inlinable @inline(__always)
  func _performKeyed(_ key: Key, _ newValue: Value?) -> (changed: Bool, previous: Value?) {
    if _policyActive.load(ordering: .relaxed) {
      return _performWithPolicy(newValue.map { .set(key, $0) } ?? .remove(key), reason: .write)
    }
    _writeLock.lock()
    if _policyActive.load(ordering: .relaxed) {
      _writeLock.unlock()
      return _performWithPolicy(newValue.map { .set(key, $0) } ?? .remove(key), reason: .write)
    }
    let state = _state.load(ordering: .relaxed)
    let hidden = (state & 1) ^ 1
    guard state & 2 == 0, _pending.pointer.pointee.second == nil,
      _readers.becomesFree(hidden)
    else {
      let result = _applyLocked(newValue.map { .set(key, $0) } ?? .remove(key))
      let followUp =
        result.changed ? _logKeyedLocked(key, newValue, wasPresent: result.previous != nil) : nil
      _writeLock.unlock()
      withExtendedLifetime(result.leftovers) {}
      if let followUp { _followUp(followUp) }
      return (result.changed, result.previous)
    }
    let copy = _copies.pointer(hidden)
    // Catch the hidden copy up with the write it has not seen yet.
    let replayed = _pending.pointer.pointee.first
    var caughtUpValue: Value?
    var caughtUpEntry: (key: Key, value: Value)?
    var caughtUpOther: _Leftovers<Key, Value>.Applied?
    switch replayed {
    case .set(let replayedKey, let replayedValue):
      caughtUpValue = copy.pointee.updateValue(replayedValue, forKey: replayedKey)
    case .remove(let replayedKey):
      if let index = copy.pointee.index(forKey: replayedKey) {
        caughtUpEntry = copy.pointee.remove(at: index)
      }
    case .some(let operation):
      caughtUpOther = operation.apply(to: copy)
    case nil:
      break
    }
    let previous: Value?
    var removed: (key: Key, value: Value)?
    if let newValue {
      previous = copy.pointee.updateValue(newValue, forKey: key)
    } else if let index = copy.pointee.index(forKey: key) {
      removed = copy.pointee.remove(at: index)
      previous = removed?.value
    } else {
      previous = nil
    }
    let changed = newValue != nil || removed != nil
    var followUp: _TrackingFollowUp?
    if changed {
      _state.store(hidden, ordering: .sequentiallyConsistent)
      _pending.pointer.pointee.first = newValue.map { .set(key, $0) } ?? .remove(key)
      followUp = _logKeyedLocked(key, newValue, wasPresent: previous != nil)
    } else {
      _pending.pointer.pointee.first = nil
    }
    _writeLock.unlock()
    // Released only now: a value's deinit may use the store.
    // (One call per value: a tuple would be destroyed through runtime metadata.)
    withExtendedLifetime(replayed) {}
    withExtendedLifetime(caughtUpValue) {}
    withExtendedLifetime(caughtUpEntry) {}
    withExtendedLifetime(caughtUpOther) {}
    withExtendedLifetime(removed) {}
    if let followUp { _followUp(followUp) }
    return (changed, previous)
  }

  /// Applies `operation` (or only catches up, if it is `nil`) with the write lock held.
  ///
  /// Normally the hidden copy is brought up to date with the pending writes and the overlay,
  /// `operation` is applied to it, and it is published. If a reader still holds the hidden
  /// copy (one preempted in the middle of a lookup), the writer does not wait for it:
  /// `operation` goes into the overlay, which readers consult until a later write or read finds
  /// the copy free and folds the overlay in.
  ///
  /// - Returns: Also what the write took out of the copies, for the caller to release after it
  ///   unlocks.
  @inlinable @inline(__always)
  func _applyLocked(
    _ operation: _WriteOperation<Key, Value>?
  ) -> (changed: Bool, previous: Value?, leftovers: _Leftovers<Key, Value>?) {
    let state = _state.load(ordering: .relaxed)
    let hasOverlay = state & 2 != 0
    if operation == nil && !hasOverlay { return (false, nil, nil) }
    let hidden = (state & 1) ^ 1
    // Spin briefly for a reader finishing its lookup; once an overlay is active, only look.
    let isFree = hasOverlay ? !_readers.hasReaders(in: hidden) : _readers.becomesFree(hidden)
    guard isFree else {
      guard let operation else { return (false, nil, nil) }
      let recorded = _recordInOverlay(operation, state: state)
      let leftovers = _Leftovers(
        pending: _Pending(), caughtUp: (nil, nil, nil), displaced: recorded.displaced)
      return (recorded.changed, recorded.previous, leftovers)
    }
    let copy = _copies.pointer(hidden)
    var leftovers = _replayPendingLocked(on: copy)
    let fromOverlay = hasOverlay ? _WriteOperation.overlay(_overlay.pointer.pointee) : nil
    let caughtUp3 = fromOverlay?.apply(to: copy)
    let applied = operation?.apply(to: copy)
    let changed = applied?.changed ?? false
    if hasOverlay {
      _backlogLock.lock()
      _state.store(hidden, ordering: .sequentiallyConsistent)
      _overlay.pointer.pointee = _Overlay()
      _backlogLock.unlock()
      _pending.pointer.pointee = _Pending(fromOverlay, changed ? operation : nil)
    } else if changed {
      _state.store(hidden, ordering: .sequentiallyConsistent)
      _pending.pointer.pointee = _Pending(operation)
    }
    // Everything the catch-up took out of the copy, including the previous values it
    // reports, is released by the caller after unlocking.
    leftovers.caughtUp.2 = caughtUp3
    leftovers.displaced = applied?.displaced
    return (changed, applied?.previous, leftovers)
  }

  /// Replays the pending writes on `copy`, the hidden copy, which no reader holds, and leaves
  /// nothing pending (write lock held).
  ///
  /// - Returns: What the replay took out of the copy, for the caller to release after it
  ///   unlocks.
  @inlinable @inline(__always)
  func _replayPendingLocked(
    on copy: UnsafeMutablePointer<[Key: Value]>
  ) -> _Leftovers<Key, Value> {
    let pending = _pending.pointer.move()
    let caughtUp1 = pending.first?.apply(to: copy)
    let caughtUp2 = pending.second?.apply(to: copy)
    _pending.pointer.initialize(to: _Pending())
    return _Leftovers(pending: pending, caughtUp: (caughtUp1, caughtUp2, nil), displaced: nil)
  }

  /// Records `operation` in the overlay on top of the published copy (write lock held).
  @usableFromInline
  func _recordInOverlay(
    _ operation: _WriteOperation<Key, Value>, state: Int
  ) -> (changed: Bool, previous: Value?, displaced: _Displaced<Key, Value>) {
    // The published copy is not modified while the write lock is held, so this writer may
    // read it without announcing itself.
    let base = _copies.pointer(state & 1)
    _backlogLock.lock()
    defer { _backlogLock.unlock() }
    if state & 2 == 0 {
      _overlay.pointer.pointee = _Overlay()
      _overlay.pointer.pointee.count = base.pointee.count
    }
    let result = _overlay.pointer.pointee.record(operation, base: base)
    if result.changed && state & 2 == 0 {
      _state.store(state | 2, ordering: .sequentiallyConsistent)
    }
    return result
  }
}

/// What one write took out of the copies or the overlay, released after the write lock.
@usableFromInline
struct _Leftovers<Key: Hashable, Value> {
  @usableFromInline typealias Applied = (
    changed: Bool, previous: Value?, displaced: _Displaced<Key, Value>
  )
  @usableFromInline let pending: _Pending<Key, Value>
  @usableFromInline var caughtUp: (Applied?, Applied?, Applied?)
  @usableFromInline var displaced: _Displaced<Key, Value>?

  @inlinable
  init(
    pending: _Pending<Key, Value>, caughtUp: (Applied?, Applied?, Applied?),
    displaced: _Displaced<Key, Value>?
  ) {
    self.pending = pending
    self.caughtUp = caughtUp
    self.displaced = displaced
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
  /// every read that starts after it returns.
  ///
  /// - Complexity: O(1) on average for both, like `Dictionary`.
  @inlinable
  public subscript(key: Key) -> Value? {
    get {
      _withCountedReadAccess { view, counters in
        let value = view.value(forKey: key)
        _recordLookup(key, found: value != nil, counters: counters)
        return value
      }
    }
    set {
      if let newValue {
        updateValue(newValue, forKey: key)
      } else {
        removeValue(forKey: key)
      }
    }
  }

  /// The number of entries, read at one point of the write order.
  ///
  /// - Complexity: O(1). Never blocks.
  @inlinable
  public var count: Int {
    _withReadAccess { $0.count }
  }

  /// Whether the store has no entries, read at one point of the write order.
  ///
  /// - Complexity: O(1). Never blocks.
  @inlinable
  public var isEmpty: Bool {
    _withReadAccess { $0.count == 0 }
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
  /// - Complexity: O(1) to take: the snapshot shares storage with the store copy-on-write.
  ///   While the snapshot is alive, the first write that modifies the copy it shares pays one
  ///   O(*n*) copy of that table (the second write after the snapshot, in general); take
  ///   snapshots for work that needs them, not on every read.
  @inlinable
  public var allItems: [Key: Value] {
    _withReadAccess { $0.dictionary }
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
    return _withCountedReadAccess { view, counters in
      var result: [Key: Value] = [:]
      result.reserveCapacity(keys.count)
      for key in keys {
        let value = view.value(forKey: key)
        if let value { result[key] = value }
        _recordLookup(key, found: value != nil, counters: counters)
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
    _performKeyed(key, value).previous
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
    _performKeyed(key, nil).previous
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
    _ = _perform(.merge(entries))
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
    _ = _perform(.removeKeys(keys))
  }

  /// Removes every entry as one atomic, ordered write.
  ///
  /// - Complexity: O(*n*) to release the entries; the critical section itself is O(1) for the
  ///   copy readers see next.
  @inlinable
  public func removeAll() {
    _ = _perform(.removeAll)
  }

  /// Returns once every write issued before the call has been applied.
  ///
  /// Writes are applied before their own call returns, so this only waits for writes that
  /// other threads are applying at this instant. It exists so that code written against the
  /// store's asynchronous-write contract has one place to wait, and it will also wait for the
  /// work later attached to writes.
  ///
  /// It also brings the store's second copy up to date when no reader holds it, so values
  /// that were replaced or removed are released now rather than at the next write.
  ///
  /// - Complexity: O(k) for the k entries the last one or two writes touched.
  public func flush() async {
    _settle()
  }

  /// Folds the overlay in and brings the hidden copy up to date, if no reader holds it.
  func _settle() {
    _writeLock.lock()
    let leftovers = _settleLocked()
    _writeLock.unlock()
    // Released only now: a value's deinit may use the store.
    withExtendedLifetime(leftovers) {}
  }

  /// ``_settle()`` with the write lock held; returns what to release after unlocking.
  func _settleLocked() -> (folded: _Leftovers<Key, Value>?, settled: _Leftovers<Key, Value>?) {
    let folded = _applyLocked(nil).leftovers
    var settled: _Leftovers<Key, Value>?
    let state = _state.load(ordering: .relaxed)
    let hidden = (state & 1) ^ 1
    if state & 2 == 0 && _readers.becomesFree(hidden) {
      settled = _replayPendingLocked(on: _copies.pointer(hidden))
    }
    return (folded, settled)
  }
}

// MARK: - Get or create

extension MemoryStore {
  /// Returns the value for `key`, creating and storing it with `makeValue` if it is absent.
  ///
  /// ```swift
  /// let session = sessions.value(forKey: id) { Session(id: id) }
  /// ```
  ///
  /// Concurrent callers that miss on the same key call `makeValue` exactly once between them
  /// and all receive the stored value. While it runs, no lock is held: reads and writes of the
  /// store, including other get-or-create calls for other keys, proceed, and `makeValue` may
  /// itself read and write the store. If a plain write stores `key` while `makeValue` runs, the
  /// stored value wins and is returned to every caller.
  ///
  /// `makeValue` must not call `value(forKey:orInsert:)` for the same key: that would wait for
  /// itself, and it stops the program with a message instead.
  ///
  /// - Parameters:
  ///   - key: The key to read or create.
  ///   - makeValue: Creates the value; runs on the calling thread, only on a miss.
  /// - Returns: The value stored for `key`.
  /// - Throws: What `makeValue` throws; then nothing is stored, and a waiting caller for the
  ///   same key runs its own `makeValue`.
  /// - Complexity: O(1) on a hit; a miss adds `makeValue` and one write.
  @inlinable
  public func value(forKey key: Key, orInsert makeValue: () throws -> Value) rethrows -> Value {
    if let value = self[key] { return value }
    return try _createValue(forKey: key, makeValue)
  }

  @usableFromInline
  func _createValue(forKey key: Key, _ makeValue: () throws -> Value) rethrows -> Value {
    while true {
      _creationLock.lock()
      if let value = _withReadAccess({ $0.value(forKey: key) }) {
        _creationLock.unlock()
        return value
      }
      if let creation = _creations.pointer.pointee[key] {
        _creationLock.unlock()
        if creation.isOwnedByCurrentThread {
          _preconditionFailure(
            "value(forKey:orInsert:) was called again for the same key from inside its makeValue")
        }
        creation.lock.lock()
        let outcome = creation.outcome
        creation.lock.unlock()
        if let outcome { return outcome }
        continue  // The creator's makeValue threw: try again, with this caller's makeValue.
      }
      let creation = _Creation<Value>()
      creation.lock.lock()
      _creations.pointer.pointee[key] = creation
      _creationLock.unlock()

      var stored: Value?
      defer {
        _creationLock.withLock { _ = _creations.pointer.pointee.removeValue(forKey: key) }
        creation.outcome = stored
        creation.lock.unlock()
      }
      let made = try makeValue()
      let value = _insertIfAbsent(made, forKey: key)
      stored = value
      return value
    }
  }

  /// Stores `value` for `key` unless a value is already there; returns the stored value.
  @usableFromInline
  func _insertIfAbsent(_ value: Value, forKey key: Key) -> Value {
    _perform(.insert(key, value)).previous ?? value
  }
}
