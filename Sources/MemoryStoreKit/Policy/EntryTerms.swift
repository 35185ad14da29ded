import Synchronization

/// What an entry carries besides its value: its cost and the time it has left.
///
/// ```swift
/// if let terms = sessions.terms(forKey: token), let left = terms.timeToLive {
///   print("the session ends in \(left)")
/// }
/// ```
public struct EntryTerms: Hashable, Sendable {
  /// The entry's cost toward ``MemoryStore/costLimit``; 0 without one.
  public var cost: Int
  /// The time until the entry's time to live ends (``MemoryStore/defaultTimeToLive``, its
  /// own, or ``MemoryStore/entryTimeToLive``'s); `nil` if it has none.
  public var timeToLive: Duration?
  /// The time until the entry expires unless it is read (``MemoryStore/timeToIdle``); `nil`
  /// if it does not expire when idle.
  public var timeToIdle: Duration?
  /// The time since the entry's value was last written, while the store keeps write times
  /// (``MemoryStore/keepWriteTimes()``, or an ``MemoryStore/evictionDecider``); `nil`
  /// otherwise. An entry written before the store started keeping them counts from then.
  public var age: Duration?

  /// Creates terms: a cost, the times left, and the age.
  public init(
    cost: Int = 0, timeToLive: Duration? = nil, timeToIdle: Duration? = nil, age: Duration? = nil
  ) {
    self.cost = cost
    self.timeToLive = timeToLive
    self.timeToIdle = timeToIdle
    self.age = age
  }
}

extension MemoryStore {
  /// The cost and the times left of the entry for `key`, or `nil` if the key is absent or
  /// its entry has expired, like Redis's `PTTL`.
  ///
  /// ```swift
  /// store.setValue(session, forKey: token, cost: 1, timeToLive: .seconds(1_800))
  /// store.terms(forKey: token)?.timeToLive   // about 1 800 seconds
  /// ```
  ///
  /// A look at the entry, not a use of it: it is not counted in ``statistics``, does not
  /// renew the entry's idle time, and does not count toward its place in the eviction order.
  ///
  /// Thread-safe, and takes no lock, like a read.
  ///
  /// - Complexity: O(1) on average.
  public func terms(forKey key: Key) -> EntryTerms? {
    // `nil`: absent; `.some(nil)`: an entry without metadata (no cost, no deadline).
    let found = _withReadAccess { view -> _EntryMetadata?? in
      guard let node = view.node(forKey: key) else { return nil }
      return .some(node.hasMetadata ? node.metadata : nil)
    }
    guard let found else { return nil }
    guard let metadata = found else { return EntryTerms() }
    // Read after the entry: a store that keeps write times gave every entry metadata first.
    let keepsWriteTimes = _signals.keepsWriteTimes.load(ordering: .relaxed)
    let now = _clockNanos()
    guard Swift.min(metadata.expiresAt, metadata.idleExpiresAt) > now else { return nil }
    return EntryTerms(
      cost: metadata.cost,
      timeToLive: metadata.expiresAt == .max ? nil : .nanoseconds(metadata.expiresAt - now),
      timeToIdle: metadata.idleExpiresAt == .max
        ? nil : .nanoseconds(metadata.idleExpiresAt - now),
      age: keepsWriteTimes
        ? .nanoseconds(Swift.max(now - _writeTime(recorded: metadata.writtenAt), 0)) : nil)
  }

  /// The time an entry was written, given the write time its node recorded: an entry written
  /// before the store kept write times counts as written when it started keeping them.
  func _writeTime(recorded writtenAt: Int64) -> Int64 {
    Swift.max(writtenAt, _signals.writeTimesSince.load(ordering: .relaxed))
  }

  /// Makes the entries keep the time their value was written, from now on, so that
  /// ``terms(forKey:)`` reports their ``EntryTerms/age``; the entries already there count
  /// from this call. Once on, it stays on for the store's life (an
  /// ``evictionDecider`` turns it on too).
  ///
  /// ```swift
  /// sessions.keepWriteTimes()
  /// sessions[token] = session
  /// sessions.terms(forKey: token)?.age   // a few microseconds
  /// ```
  ///
  /// It costs each later write a read of the clock, and each entry 8 bytes.
  ///
  /// Thread-safe: a write.
  ///
  /// - Complexity: O(1) when already on; otherwise a write that gives every entry its
  ///   metadata (see ``costLimit``), O(1) per later write.
  public func keepWriteTimes() {
    _ = _startKeepingWriteTimes(now: _clockNanos())
  }
}
