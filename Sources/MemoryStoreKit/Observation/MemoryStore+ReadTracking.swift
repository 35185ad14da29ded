import Observation
import Synchronization

// MARK: - Tracked reads (Observation)

extension MemoryStore {
  /// Whether reads register with Swift's Observation framework, so that a SwiftUI view, an
  /// `@Observable` model or an `Observations` sequence that reads the store updates when what
  /// it read changes. Off by default; thread-safe.
  ///
  /// ```swift
  /// let quotes = MemoryStore<String, Double>(name: "quotes", tracksReads: true)
  /// withObservationTracking {
  ///   _ = quotes["AAPL"]
  /// } onChange: {
  ///   print("AAPL changed")
  /// }
  /// quotes["AAPL"] = 189.5   // prints "AAPL changed"
  /// quotes["MSFT"] = 411.2   // prints nothing: nobody read MSFT
  /// ```
  ///
  /// While it is on, a read inside a tracking scope (`withObservationTracking`, a SwiftUI
  /// `body`, an `Observations` closure) registers what it read, and a later change of that
  /// fires the observation:
  ///
  /// | read | fires on |
  /// |---|---|
  /// | `store[key]`, ``values(forKeys:)`` | a write, removal, expiry or eviction of the key, and ``removeAll()`` |
  /// | ``contains(_:)`` | the key's insertion or removal (not a new value of a present key) |
  /// | ``count``, ``isEmpty``, ``keys`` | any key's insertion or removal |
  /// | ``values``, ``allItems`` | any change |
  ///
  /// A change that nobody read fires nothing. Keys are told apart by 15 bits of their hash: a
  /// change to a key fires the observers of another key once in about 32 000 pairs, a change
  /// that is not one (Observation allows it: the observer re-reads and finds nothing new).
  ///
  /// **When and where observers run.** After the write is applied and every lock of the store
  /// is released: `withObservationTracking`'s `onChange` sees the new value, and may read and
  /// write the store. For a write you make, it runs on your thread, or on the thread that is
  /// delivering the store's notices at that moment (one thread at a time delivers them, so
  /// that no observation runs twice for one registration); either way the write returns once
  /// the observations it fired have run (a write made by an observer returns at once, and its
  /// observations run when that observer returns). For a change the store makes
  /// itself (an expiry found by a read or by the expiry timer, a purge's evictions), it runs
  /// on a background queue: never inside a read.
  ///
  /// **A change during registration.** Observation registers what a scope read when the scope
  /// ends, so a write made by another thread between the read and that moment finds no
  /// observer yet: every change is therefore notified again about 5 ms and 255 ms later, on a
  /// background queue, and at once by ``flush()``. An observer registered meanwhile is told
  /// then; one that had already read the new value may be told again. A registration that
  /// ends more than about 255 ms after a change it raced (its thread descheduled that long)
  /// misses that change.
  ///
  /// **Not batched.** Observation fires per change, independent of ``notificationInterval``:
  /// an observation fires once, at the first change after it registered (SwiftUI then
  /// re-renders at its next frame, with whatever the store holds then). Use change batches
  /// for a coalesced stream of what changed.
  ///
  /// **Cost.** Off, a read pays one relaxed atomic load, and a write nothing. On, a read
  /// outside any tracking scope costs about 30 ns more, a read inside one about 500 ns (mostly
  /// Observation's own bookkeeping), and a write about 30 ns more; the first write of a key
  /// after a read of it also notifies (a microsecond or so, with the observers it fires), and
  /// later writes do not until it is read again (see <doc:ObservingChanges>). Turn it on for
  /// the stores that views read; leave it off for stores that only servers and background
  /// work read.
  ///
  /// - Complexity: O(1) to turn on; O(*b*) to turn off, for the *b* keys read while it was on.
  ///
  /// Turning it off notifies every observation registered so far, so that none waits for a
  /// change it would no longer hear of.
  public var tracksReads: Bool {
    get { _signals.tracksReads.load(ordering: .relaxed) }
    set {
      if newValue { _readObservers.make() }
      // Both flags change together under the write lock, so that concurrent settings end in
      // one of them; what reads registered is collected there and notified after unlocking.
      let released = _writer.withLock { state -> Set<Int>? in
        guard state.changes.observesReads != newValue else { return nil }
        state.changes.observesReads = newValue
        _signals.tracksReads.store(newValue, ordering: .releasing)
        return newValue ? nil : _readObservers.with { $0.takeEveryBucket() }
      }
      if let released { _readObservers.with { $0.deliver(released) } }
    }
  }

  /// Registers `read` with the current tracking scope, if reads are tracked: one relaxed load
  /// when they are not. Call before reading the table.
  @inlinable @inline(__always)
  func _observeRead(_ read: @autoclosure () -> _TrackedRead) {
    if _signals.tracksReads.load(ordering: .relaxed) { _trackRead(read()) }
  }

  @usableFromInline @inline(never)
  func _trackRead(_ read: _TrackedRead) {
    _readObservers.with { $0.access(read) }
  }
}

/// A store is `Observable`, so that SwiftUI can pass it down a view hierarchy as an `@Observable`
/// model is passed (`.environment(store)`, `@Environment(MemoryStore<String, Quote>.self)`).
/// Its reads are tracked while ``MemoryStore/tracksReads`` is on; off, a view that reads it
/// is not redrawn by its changes.
extension MemoryStore: Observable {}
