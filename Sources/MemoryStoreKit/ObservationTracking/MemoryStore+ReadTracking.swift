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
  /// quotes["AAPL"] = 189.5   // prints "AAPL changed", on the store's scheduler
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
  /// **When and where observers run.** A write hands what it changed to the store's
  /// scheduler and returns: it never runs an observer and never waits for one. One delivery at
  /// a time then runs on the scheduler, outside every lock: `withObservationTracking`'s
  /// `onChange` sees the new value, and may read and write the store. Each observation is told
  /// once per registration, however many writes before the delivery changed what it read.
  /// ``flush()`` delivers what is pending at once and waits for it; with a
  /// ``ManualScheduler``, running it delivers.
  ///
  /// **A change during registration.** Observation registers what a scope read when the scope
  /// ends: a delivery that runs between the read and that moment finds no observer, and the
  /// observation hears of the next change instead, as with an `@Observable` type's setter.
  /// Registrations made on the delivering thread (an observer registering again from its
  /// `onChange`) never miss: the delivery of later changes runs after them.
  ///
  /// **Not batched.** Observation fires per change, independent of ``notificationInterval``:
  /// an observation fires once, at the first delivery after it registered (SwiftUI then
  /// re-renders at its next frame, with whatever the store holds then). Use change batches
  /// for a coalesced stream of what changed.
  ///
  /// **Cost.** Off, a read pays one relaxed atomic load, and a write nothing. On, a read
  /// outside any tracking scope pays a memory fence and Observation's look for a scope, a read
  /// inside one mostly Observation's own bookkeeping; a write of a key that a tracked read
  /// once read hands its notice over (a short lock), and writes of keys no tracked read ever
  /// read hand nothing over. Measured in <doc:ObservingChanges>. Turn it on for the stores
  /// that views read; leave it off for stores that only servers and background work read.
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
      let released = _writer.withLock { state -> [Int]? in
        guard state.changes.observesReads != newValue else { return nil }
        state.changes.observesReads = newValue
        _signals.tracksReads.store(newValue, ordering: .releasing)
        return newValue ? nil : _readObservers.with { $0.takeRegisteredBuckets() }
      }
      if let released, !released.isEmpty {
        _readObservers.with { $0.hand(over: released, on: _clock.scheduler) }
      }
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
