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

  /// Creates terms: a cost and the times left.
  public init(cost: Int = 0, timeToLive: Duration? = nil, timeToIdle: Duration? = nil) {
    self.cost = cost
    self.timeToLive = timeToLive
    self.timeToIdle = timeToIdle
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
    let found = _withReadAccess { view -> (Bool, Int, Int64, Int64)? in
      guard let node = view.node(forKey: key) else { return nil }
      guard node.hasMetadata else { return (false, 0, .max, .max) }
      return (true, node.cost, node.expiresAt, node.idleExpiresAt)
    }
    guard let (hasMetadata, cost, expiresAt, idleExpiresAt) = found else { return nil }
    guard hasMetadata else { return EntryTerms() }
    let now = _clockNanos()
    guard Swift.min(expiresAt, idleExpiresAt) > now else { return nil }
    return EntryTerms(
      cost: cost,
      timeToLive: expiresAt == .max ? nil : .nanoseconds(expiresAt - now),
      timeToIdle: idleExpiresAt == .max ? nil : .nanoseconds(idleExpiresAt - now))
  }
}
