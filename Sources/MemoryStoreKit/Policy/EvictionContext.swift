/// What the eviction decider knows when it judges one entry: why it runs, and the entry's
/// metadata.
///
/// ```swift
/// let sessions = MemoryStore<String, Session>(name: "sessions") { _, _, context in
///   guard let lastRead = context.lastReadAt else { return context.age > .seconds(600) }
///   return context.now - lastRead > .seconds(600)    // evict sessions idle for 10 minutes
/// }
/// ```
///
/// All instants come from the store's ``StoreScheduler``, the clock shared with change batches
/// and expiry, so tests control them with a ``ManualScheduler``.
public struct EvictionContext: Sendable {
  /// What started this run of the decider.
  public let trigger: EvictionTrigger
  /// When the run started.
  public let now: ContinuousClock.Instant
  /// When the entry's current value was written.
  ///
  /// With the system scheduler on Linux, a write that sets no time to live in a store where
  /// no entry expires takes its time from the system's coarse clock, which is cheaper to read
  /// and trails the precise one by at most one scheduler tick (1 to 10 ms, typically 4): the
  /// entry may appear that much older, never younger, and ``age`` is never negative.
  public let writtenAt: ContinuousClock.Instant
  /// When the entry was last read, to the second, or `nil` if it was not read since it was
  /// inserted.
  ///
  /// Reads record this without a lock, in the entry itself. The value is the start of the
  /// second in which the read happened (as the store's clock saw it, ticking once a second
  /// while a decider is set).
  public let lastReadAt: ContinuousClock.Instant?
  /// The entry's cost: as given to its write (``MemoryStore/setValue(_:forKey:cost:timeToLive:)``,
  /// or `cost:` of a get-or-create), else as ``MemoryStore/entryCost`` weighed it, else 0.
  public let cost: Int
  /// When the entry expires, or `nil` if it has no time to live.
  public let expiresAt: ContinuousClock.Instant?

  /// The payload of a manual purge; `nil` for the other triggers.
  public var userInfo: (any Sendable)? { trigger.userInfo }

  /// How long ago the entry's current value was written.
  public var age: Duration { now - writtenAt }

  /// Creates a context; the store creates them, and tests of a decider may too.
  public init(
    trigger: EvictionTrigger, now: ContinuousClock.Instant, writtenAt: ContinuousClock.Instant,
    lastReadAt: ContinuousClock.Instant? = nil, cost: Int = 0,
    expiresAt: ContinuousClock.Instant? = nil
  ) {
    self.trigger = trigger
    self.now = now
    self.writtenAt = writtenAt
    self.lastReadAt = lastReadAt
    self.cost = cost
    self.expiresAt = expiresAt
  }
}
