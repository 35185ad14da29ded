import Synchronization

// MARK: - Local changes

extension MemoryStore {
  /// Opens the store's feed of local changes: from now on, every write of the store's API
  /// hands its changes to the feed, in commit order, until the feed is closed (see
  /// ``LocalChangeFeed`` and ``LocalChange``).
  ///
  /// ```swift
  /// let feed = store.openLocalChangeFeed()
  /// store["a"] = 1
  /// store["b"] = nil
  /// feed.take()   // [.updated("a", 1), .removed("b")]
  /// ```
  ///
  /// A store has one open feed at most: opening a second while one is open stops the process
  /// with a message. The feed costs a write one append under the lock it already holds; reads
  /// pay nothing.
  ///
  /// - Returns: The open feed. Closing it (or letting it go) stops the store keeping changes.
  public func openLocalChangeFeed() -> LocalChangeFeed<Key, Value> {
    let signal = _FeedSignal()
    let opened = _writer.withLock { state -> Bool in
      guard !state.changes.feedsLocalChanges else { return false }
      state.changes.feedsLocalChanges = true
      return true
    }
    if !opened {
      _preconditionFailure(
        "openLocalChangeFeed() was called on a store whose feed is open: close it first")
    }
    _feedSignal.withLock { $0 = signal }
    return LocalChangeFeed(store: self, signal: signal)
  }

  /// Swaps the chunks of local changes out, if `signal`'s feed is the open one, and hands the
  /// writes `emptied`, the chunks the previous take emptied, to fill next (so that a feed
  /// taken at a steady pace costs its writes no allocation). The changes are moved out of the
  /// chunks after unlocking, on the taking thread.
  func _takeLocalChanges(
    for signal: _FeedSignal, handingBack emptied: [_LocalChangeChunk<Key, Value>]
  ) -> [_LocalChangeChunk<Key, Value>] {
    guard _feedSignal.withLock({ $0 === signal }) else { return [] }
    let (full, current) = _writer.withLock { state in
      state.changes.localChanges.takeAll(keeping: emptied)
    }
    return _LocalChangeBuffer.inOrder(full, current)
  }

  /// Closes `signal`'s feed, if it is the open one: writes stop keeping local changes.
  func _closeLocalChangeFeed(_ signal: _FeedSignal) {
    let isOpen = _feedSignal.withLock { slot in
      guard slot === signal else { return false }
      slot = nil
      return true
    }
    if isOpen {
      let dropped = _writer.withLock { state in
        state.changes.feedsLocalChanges = false
        state.changes.feedNeedsWake = false
        state.changes.suppressesFeed = false
        defer { state.changes.localChanges = _LocalChangeBuffer() }
        return state.changes.localChanges
      }
      // Released only now: a value's deinit may use the store.
      withExtendedLifetime(dropped) {}
    }
    signal.close()
  }

  /// Wakes the open feed: a write gave it changes. Called after the write unlocked.
  @usableFromInline
  func _wakeLocalChangeFeed() {
    _feedSignal.withLock { $0 }?.signal()
  }
}

// MARK: - Invalidation

extension MemoryStore {
  /// The most keys one critical section of ``invalidateAll(except:)`` drops, when it cannot
  /// drop them all at once.
  static var _invalidationChunk: Int { 1_024 }

  /// Drops the entries of `keys` because they changed elsewhere: another instance wrote them,
  /// so what this store holds may be stale. The next read misses, and a get-or-load loads the
  /// current value.
  ///
  /// ```swift
  /// // A message from another instance said that these keys changed:
  /// store.invalidateValues(forKeys: ["AAPL", "MSFT"])
  /// ```
  ///
  /// - **Not a local change.** The removals are reported to change batches and
  ///   ``removals`` with the reason ``ChangeReason/invalidated``, but never
  ///   to the ``LocalChangeFeed``: applying another instance's changes does not echo back.
  /// - **Local writes win.** A key with a local change that the open feed has not handed over
  ///   yet is kept, and so are the keys of `kept` (the changes taken from the feed but not yet
  ///   published): this instance's write is newer than anything an invalidation announces now,
  ///   and it will reach the others in turn.
  /// - **Loads that race it store nothing.** A get-or-create, get-or-load or bulk load of one
  ///   of these keys that started before this call returns its value to its callers but does
  ///   not store it, since it may have read the source before the change.
  /// - **An atomic write**: ordered with every other write, and no read sees part of it.
  ///
  /// - Parameters:
  ///   - keys: The keys to drop.
  ///   - kept: Keys to keep even so: those with local changes on their way to the others.
  /// - Returns: How many entries it dropped.
  /// - Complexity: O(*k*) for *k* keys, plus O(*p*) for *p* local changes not yet taken.
  @discardableResult
  public func invalidateValues(
    forKeys keys: some Sequence<Key>, except kept: Set<Key> = []
  ) -> Int {
    // Iterate the caller's sequence before taking the write lock: it is user code.
    let keys = Array(keys)
    guard !keys.isEmpty else { return 0 }
    return _invalidate(keys, except: kept, recording: true)
  }

  /// Drops every entry because the store may have missed changes made elsewhere: the link to
  /// the other instances was lost or re-established, a message was lost, or an instance asked
  /// for it. The next reads miss, and get-or-load loads current values.
  ///
  /// ```swift
  /// // The connection that brought other instances' changes was lost:
  /// store.invalidateAll()
  /// ```
  ///
  /// As ``invalidateValues(forKeys:except:)``: reported with the reason
  /// ``ChangeReason/invalidated``, never to the ``LocalChangeFeed``; keys with local changes
  /// not yet taken from the feed, and those of `kept`, are kept; every load that started
  /// before this call stores nothing. Without keys to keep, it is one atomic write, like
  /// ``removeAll()``; with some, it drops the others in chunks of atomic writes, so that
  /// other writers wait for no more than a chunk.
  ///
  /// - Parameter kept: Keys to keep: those with local changes on their way to the others.
  /// - Returns: How many entries it dropped.
  /// - Complexity: O(1) without keys to keep (the entries are freed after the write, in the
  ///   background if many); O(*n*) with some.
  @discardableResult
  public func invalidateAll(except kept: Set<Key> = []) -> Int {
    let dropped = _transact(.invalidated, collectingExpiredKeys: true) { write -> Int? in
      write.access.state.invalidations.recordAll()
      _invalidationGeneration.store(
        write.access.state.invalidations.generation, ordering: .releasing)
      guard kept.isEmpty && write.access.changes.localChanges.isEmpty else { return nil }
      let count = _table.stagedCount(write.held)
      write.removeAll(in: self)
      return count
    }
    if let dropped { return dropped }
    // Keys to keep: drop the others from a copy of the keys, a chunk per write. An entry
    // written meanwhile is newer than the invalidation; one loaded meanwhile started after it.
    let keys = _withReadAccess { view in
      var keys: [Key] = []
      view.table._forEachNode(at: view.version) { keys.append($0.key.pointee) }
      return keys
    }
    var count = 0
    var start = 0
    while start < keys.count {
      let end = Swift.min(start + Self._invalidationChunk, keys.count)
      count += _invalidate(keys[start..<end], except: kept, recording: false)
      start = end
    }
    return count
  }

  /// Drops `keys` but `kept` and those with local changes not yet taken, as one write;
  /// `recording`: notes the invalidation for the loads it overtakes.
  func _invalidate(_ keys: some Collection<Key>, except kept: Set<Key>, recording: Bool) -> Int {
    _transact(.invalidated) { write in
      if recording {
        write.access.state.invalidations.record(keys.lazy.map(\.hashValue))
        _invalidationGeneration.store(
          write.access.state.invalidations.generation, ordering: .releasing)
      }
      let local = write.access.changes.localChanges
      let pending = local.isEmpty ? [] : local.keys()
      var count = 0
      for key in keys where !kept.contains(key) && !pending.contains(key) {
        if write.remove(key, reason: .invalidated, in: self) != nil { count += 1 }
      }
      return count
    }
  }

  /// The generation of invalidations a load starting now must compare with when it stores
  /// (see ``_InvalidationRecord``). Read before the load reads its source.
  func _invalidationStart() -> UInt64 {
    // From now on, removals by writes are recorded too: a load must not store a value that a
    // removal made after it read its source has made stale.
    if !_signals.loadsStarted.load(ordering: .relaxed) {
      _signals.loadsStarted.store(true, ordering: .sequentiallyConsistent)
    }
    return _invalidationGeneration.load(ordering: .acquiring)
  }

  /// Records a removal of the key whose hash is `hash` by a write, for the loads it
  /// overtakes; under the write lock, once loads have started.
  @usableFromInline @inline(never)
  func _recordRemovalForLoads(hash: Int, in state: inout _WriterState<Key, Value>) {
    state.invalidations.recordRemoval(hash: hash)
    _invalidationGeneration.store(state.invalidations.generation, ordering: .releasing)
  }

  /// Records a removal of every key by a write (`removeAll()`), for the loads it overtakes;
  /// under the write lock, once loads have started.
  @usableFromInline @inline(never)
  func _recordClearForLoads(in state: inout _WriterState<Key, Value>) {
    state.invalidations.recordAll()
    _invalidationGeneration.store(state.invalidations.generation, ordering: .releasing)
  }
}

// MARK: - Loads from a shared source

extension MemoryStore {
  /// A point in the order of a store's invalidations, taken before reading a source: a value
  /// read after it is stale if an invalidation of its key came after it (see
  /// ``insertLoaded(_:forKey:cost:timeToLive:after:)``).
  public struct LoadMark: Hashable, Sendable {
    let generation: UInt64
  }

  /// A mark to take just before reading a value from the source that other instances write
  /// to, for ``insertLoaded(_:forKey:cost:timeToLive:after:)``.
  ///
  /// Thread-safe; one atomic load.
  public func loadMark() -> LoadMark {
    LoadMark(generation: _invalidationStart())
  }

  /// Stores `value`, read from a shared source after `mark` was taken, unless the key holds a
  /// value already or an invalidation of the key came after `mark`: what a loader of its own
  /// (a warm start, a read-through with each row's own time to live) calls instead of a write.
  ///
  /// ```swift
  /// let mark = store.loadMark()
  /// let row = try await database.row(forKey: key)          // may be stale by the time it returns
  /// store.insertLoaded(row.value, forKey: key, timeToLive: row.timeLeft, after: mark)
  /// ```
  ///
  /// Like a get-or-load's value, it is a copy of the source, not a local change: the
  /// ``LocalChangeFeed`` does not get it, and change batches report it as a ``ChangeReason/write``.
  ///
  /// - Parameters:
  ///   - value: The value read.
  ///   - key: Its key.
  ///   - cost: Its cost; `nil` uses ``entryCost``, or 0 without one.
  ///   - timeToLive: How long it lives; `nil` uses ``entryTimeToLive`` or ``defaultTimeToLive``.
  ///   - mark: The mark taken before the source was read.
  /// - Returns: Whether the store took the value (`false`: the key held one, or an
  ///   invalidation overtook the read).
  /// - Complexity: O(1) on average: one write.
  @discardableResult
  public func insertLoaded(
    _ value: Value, forKey key: Key, cost: Int? = nil, timeToLive: Duration? = nil,
    after mark: LoadMark
  ) -> Bool {
    _insertCopy(
      value, forKey: key, cost: cost.map(Self._clampedCost), timeToLive: timeToLive,
      since: mark.generation
    ).stored
  }
}
