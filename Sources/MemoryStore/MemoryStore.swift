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
/// ## Lifetime
///
/// Writes are applied before their call returns, so nothing is ever pending: when the last
/// reference to a store goes away, the store is freed at once and nothing is lost or dropped.
public final class MemoryStore<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// The name given at creation, for diagnostics. Immutable; safe to read from any thread.
  public let name: String?

  /// The two copies of the contents.
  @usableFromInline let _copies: _Copies<Key, Value>
  /// Which copy (0 or 1) readers use. Written only by the writer holding `_writeLock`.
  @usableFromInline let _published: Atomic<Int>
  /// Per-thread counts of the readers inside each copy.
  @usableFromInline let _readers: _ReaderIndicator
  /// Serialises writers.
  @usableFromInline let _writeLock: _Lock
  /// The last write applied to the published copy but not yet to the other one; guarded by
  /// `_writeLock`.
  @usableFromInline let _pending: _UnsafeBox<_WriteOperation<Key, Value>?>
  /// Guards `_creations`.
  @usableFromInline let _creationLock: _Lock
  /// Values being created by `value(forKey:orInsert:)`, by key; guarded by `_creationLock`.
  @usableFromInline let _creations: _UnsafeBox<[Key: _Creation<Value>]>

  /// Creates an empty store.
  ///
  /// - Parameter name: A name for diagnostics; it has no effect on behaviour.
  public init(name: String? = nil) {
    self.name = name
    _copies = _Copies()
    _published = Atomic(0)
    _readers = _ReaderIndicator()
    _writeLock = _Lock()
    _pending = _UnsafeBox(nil)
    _creationLock = _Lock()
    _creations = _UnsafeBox([:])
  }

  deinit {
    _copies.deallocate()
    _readers.deallocate()
    _writeLock.deallocate()
    _pending.deallocate()
    _creationLock.deallocate()
    _creations.deallocate()
  }
}

// MARK: - The left-right protocol

extension MemoryStore {
  /// Runs `body` on the published copy, announced in the calling thread's reader stripe.
  ///
  /// `body` must be store code only: never user code, which could write to the store and wait
  /// for this very reader to leave.
  @inlinable @inline(__always)
  func _withReadAccess<R>(_ body: (UnsafeMutablePointer<[Key: Value]>) -> R) -> R {
    let counters = _readers.countersForCurrentThread()
    var copy = _published.load(ordering: .relaxed)
    while true {
      // Announce, then check that the copy is still the published one. A writer publishes
      // before it checks the counters, and both sides use sequentially consistent operations,
      // so either the writer sees this reader or this reader sees the newer copy.
      counters[copy].wrappingAdd(1, ordering: .sequentiallyConsistent)
      let current = _published.load(ordering: .sequentiallyConsistent)
      if current == copy { break }
      counters[copy].wrappingSubtract(1, ordering: .releasing)
      copy = current
    }
    defer { counters[copy].wrappingSubtract(1, ordering: .releasing) }
    return body(_copies.pointer(copy))
  }

  /// Runs one write under the write lock.
  ///
  /// `body` receives the hidden copy, already brought up to date with the published one, and
  /// returns its result and the operation it performed (`nil` if it changed nothing). A
  /// changed copy is published before the lock is released; the operation is kept to be
  /// replayed on the other copy by the next write.
  @inlinable @inline(__always)
  func _withWriteAccess<R>(
    _ body: (UnsafeMutablePointer<[Key: Value]>) -> (result: R, operation: _WriteOperation<Key, Value>?)
  ) -> R {
    _writeLock.lock()
    let hidden = _published.load(ordering: .relaxed) ^ 1
    // Readers that were inside the hidden copy when it was last unpublished must leave first.
    _readers.waitUntilNoReaders(in: hidden)
    let copy = _copies.pointer(hidden)
    let previous = _pending.pointer.move()
    let displaced = previous?.replay(on: copy)
    let (result, operation) = body(copy)
    if operation != nil {
      _published.store(hidden, ordering: .sequentiallyConsistent)
    }
    _pending.pointer.initialize(to: operation)
    _writeLock.unlock()
    // Release what the replay displaced only now: it may run a value's deinit.
    withExtendedLifetime((previous, displaced)) {}
    return result
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
      _withReadAccess { $0.pointee[key] }
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
    _withReadAccess { $0.pointee.count }
  }

  /// Whether the store has no entries, read at one point of the write order.
  ///
  /// - Complexity: O(1). Never blocks.
  @inlinable
  public var isEmpty: Bool {
    _withReadAccess { $0.pointee.isEmpty }
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
  ///   The store's next two writes each pay one O(*n*) copy of the copy they modify while the
  ///   snapshot is alive; take snapshots for work that needs them, not on every read.
  @inlinable
  public var allItems: [Key: Value] {
    _withReadAccess { $0.pointee }
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
    return _withReadAccess { copy in
      var result: [Key: Value] = [:]
      result.reserveCapacity(keys.count)
      for key in keys {
        if let value = copy.pointee[key] { result[key] = value }
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
    _withWriteAccess { copy in
      let old = copy.pointee.updateValue(value, forKey: key)
      return (old, .set(key, value))
    }
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
    _withWriteAccess { copy in
      guard let index = copy.pointee.index(forKey: key) else { return (nil, nil) }
      let removed = copy.pointee.remove(at: index)
      return (removed.value, .remove(key))
    }
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
    _withWriteAccess { copy in
      copy.pointee.merge(entries) { _, new in new }
      return ((), .merge(entries))
    }
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
    _withWriteAccess { copy in
      var removed: [Key] = []
      for key in keys {
        if let index = copy.pointee.index(forKey: key) {
          copy.pointee.remove(at: index)
          removed.append(key)
        }
      }
      return ((), removed.isEmpty ? nil : .removeKeys(removed))
    }
  }

  /// Removes every entry as one atomic, ordered write.
  ///
  /// - Complexity: O(*n*) to release the entries; the critical section itself is O(1) for the
  ///   copy readers see next.
  @inlinable
  public func removeAll() {
    _withWriteAccess { copy in
      if copy.pointee.isEmpty { return ((), nil) }
      copy.pointee = [:]
      return ((), .removeAll)
    }
  }

  /// Returns once every write issued before the call has been applied.
  ///
  /// Writes are applied before their own call returns, so this only waits for writes that
  /// other threads are applying at this instant. It exists so that code written against the
  /// store's asynchronous-write contract has one place to wait, and it will also wait for the
  /// work later attached to writes.
  public func flush() async {
    _writeLock.withLock {}
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
      if let value = self[key] {
        _creationLock.unlock()
        return value
      }
      if let creation = _creations.pointer.pointee[key] {
        _creationLock.unlock()
        precondition(
          !creation.isOwnedByCurrentThread,
          "value(forKey:orInsert:) was called again for the same key from inside its makeValue")
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
    _withWriteAccess { copy in
      if let existing = copy.pointee[key] { return (existing, nil) }
      copy.pointee[key] = value
      return (value, .set(key, value))
    }
  }
}
