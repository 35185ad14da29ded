/// The engine's table behind a write lock, as the store's plain path uses it: lock-free reads,
/// one hash per write, atomic publication and reclamation outside the lock.
///
/// For the benchmark, which measures the engine against its baselines as it evolves. Not part
/// of the supported API.
@_spi(Benchmark)
public final class _EngineProbe<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  @usableFromInline let _table = _ConcurrentTable<Key, Value>()
  @usableFromInline let _writeLock = _Lock()

  /// An empty table.
  public init() {}

  deinit { _writeLock.deallocate() }

  /// Reads or writes the value of `key`; assigning `nil` removes it. Reads never wait; a write
  /// is visible to every read that starts after it returns.
  ///
  /// - Complexity: O(1) on average.
  @inlinable
  public subscript(key: Key) -> Value? {
    get { _table.value(forKey: key) }
    set {
      _writeLock.lock()
      let held = _WriteLockHeld.forATableOfItsOwn
      if let newValue {
        _table.stageSet(key, newValue, held)
      } else {
        _table.stageRemove(key, held)
      }
      let garbage = _table.publish(held)
      _writeLock.unlock()
      if let garbage { _table._free(garbage) }
    }
  }

  /// Writes every entry of `entries` as one atomic write.
  ///
  /// - Complexity: O(*m*) for *m* entries.
  @inlinable
  public func addEntries(_ entries: [Key: Value]) {
    _writeLock.lock()
    let held = _WriteLockHeld.forATableOfItsOwn
    for (key, value) in entries { _table.stageSet(key, value, held) }
    let garbage = _table.publish(held)
    _writeLock.unlock()
    if let garbage { _table._free(garbage) }
  }

  /// The number of entries. O(1), never waits.
  @inlinable
  public var count: Int { _table.count }
}
