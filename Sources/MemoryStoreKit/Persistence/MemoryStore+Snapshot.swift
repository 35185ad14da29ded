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
  /// without blocking readers or writers while `body` runs.
  ///
  /// The contents are read at the version published at that instant, outside every lock:
  /// writes made meanwhile are published as usual, and the versions this read needs stay
  /// reachable until it is done. `body` runs after the read, so it may run user code (an
  /// encoder) and may read and write the store.
  ///
  /// - Complexity: O(*n*) to copy the contents, on the calling thread only.
  func _withSnapshot<R, E: Error>(
    _ body: ([Key: Value], UInt64) throws(E) -> R
  ) throws(E) -> R {
    // A snapshot never holds an entry that has expired when it is taken.
    _expireDueEntries()
    // Under the write lock, the published version is the one the write count describes.
    let (writeCount, version, token) = _writer.withLock { state in
      let (version, token) = _table.enterReadSection()
      return (state.changes.writeCount, version, token)
    }
    let contents = _ReadView(table: _table, version: version).dictionary
    _table.leaveReadSection(token)
    // Free what the writes made meanwhile replaced, now that this reader has left.
    defer { _settle() }
    return try body(contents, writeCount)
  }

  /// The number of writes that changed the store so far.
  var _writeCount: UInt64 {
    _writer.withLock { $0.changes.writeCount }
  }

  /// Sets every entry of `entries`, as one atomic write logged with `reason`; returns how many
  /// of them the store holds once the write's evictions are done.
  func _merge(_ entries: [Key: Value], reason: ChangeReason) -> Int {
    let terms = _termsAll(entries)
    return _transact(reason) { write in
      write.setAll(entries, costs: terms.costs, lifetimes: terms.lifetimes, in: self)
      // Limits may evict some: only a store with a policy has any.
      guard write.carriesMetadata else { return entries.count }
      write.end(.toLimits, in: self)
      return entries.keys.reduce(0) { $0 + (_table.stagedNode(forKey: $1) != nil ? 1 : 0) }
    }
  }
}
