import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension MemoryStore {
  /// Runs `body` with the store's contents at one instant and the write count at that instant,
  /// without copying the contents and without blocking readers or writers while `body` runs.
  ///
  /// The calling thread stays announced as a reader of the copy published at that instant
  /// until `body` returns, so that copy is neither modified nor copied: writers made meanwhile
  /// go to the overlay, which readers consult. When `body` returns, this thread folds the
  /// overlay into both copies, in O(distinct keys written meanwhile), holding the write lock:
  /// writers wait for it, readers do not. `body` may run user code (an encoder) and may read
  /// and write the store.
  ///
  /// - Complexity: O(1) before `body` runs, unless an overlay left by another long reader must
  ///   be folded first: then the call waits until that reader leaves.
  func _withSnapshot<R, E: Error>(
    _ body: ([Key: Value], UInt64) throws(E) -> R
  ) throws(E) -> R {
    // A snapshot never holds an entry that has expired when it is taken.
    _expireDueEntries()
    let counters = _readers.countersForCurrentThread()
    var copy = 0
    var writeCount: UInt64 = 0
    while true {
      _writeLock.lock()
      let folded = _applyLocked(nil)
      let state = _state.load(ordering: .relaxed)
      let isSettled = state & 2 == 0
      if isSettled {
        // No writer can republish while the write lock is held, so this announcement lands on
        // the copy that stays published, and every write from now on sees it.
        copy = state & 1
        counters[copy].wrappingAdd(1, ordering: .sequentiallyConsistent)
        writeCount = _tracker.pointer.pointee.writeCount
      }
      _writeLock.unlock()
      withExtendedLifetime(folded) {}
      if isSettled { break }
      // Another long reader (a save in progress) holds the copy the overlay must be folded
      // into: wait for it to leave.
      usleep(100)
    }
    defer {
      // Leave the copy and fold in the writes made meanwhile, both under the write lock, so
      // that this thread (a save, in the background) does the fold rather than the next
      // writer or reader. Writers wait for it; readers do not.
      _writeLock.lock()
      counters[copy].wrappingSubtract(1, ordering: .releasing)
      let leftovers = _settleLocked()
      _writeLock.unlock()
      withExtendedLifetime(leftovers) {}
    }
    return try body(_copies.pointer(copy).pointee, writeCount)
  }

  /// The number of writes that changed the store so far.
  var _writeCount: UInt64 {
    _writeLock.withLock { _tracker.pointer.pointee.writeCount }
  }

  /// Sets every entry of `entries`, as one atomic write logged with `reason`.
  func _merge(_ entries: [Key: Value], reason: ChangeReason) {
    _ = _perform(.merge(entries), reason: reason)
  }
}
