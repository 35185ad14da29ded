/// Why the store removed an entry on its own.
///
/// Used by ``StoreStatistics/evictions`` to count evictions per cause, and by
/// ``ChangeReason/evicted(_:)`` and ``ChangeReason/evictionReason`` in change batches.
public enum EvictionReason: Hashable, Sendable, CaseIterable, CustomStringConvertible {
  /// The eviction decider returned `true` for the entry.
  case decider
  /// The store held more than ``MemoryStore/countLimit`` entries.
  case countLimit
  /// The entries' total cost exceeded ``MemoryStore/costLimit``.
  case costLimit
  /// The entry's time to live ran out.
  case expired
  /// ``MemoryStore/handleMemoryPressure(_:)`` trimmed the store.
  case memoryPressure

  public var description: String {
    switch self {
    case .decider: "decider"
    case .countLimit: "count limit"
    case .costLimit: "cost limit"
    case .expired: "expired"
    case .memoryPressure: "memory pressure"
    }
  }
}

/// How severe a memory-pressure event is, as in `DispatchSource.MemoryPressureEvent`.
public enum MemoryPressureLevel: Hashable, Sendable, CustomStringConvertible {
  /// Memory is getting scarce: free what is cheap to recreate.
  case warning
  /// Memory is critically low: free everything the policy allows.
  case critical

  public var description: String {
    switch self {
    case .warning: "warning"
    case .critical: "critical"
    }
  }
}

/// What started a run of the eviction decider.
public enum EvictionTrigger: Sendable, CustomStringConvertible {
  /// A call to ``MemoryStore/purgeEvictableItems(trigger:)``, with the caller's payload,
  /// passed to the decider unchanged.
  case manual((any Sendable)?)
  /// The periodic purge (``MemoryStore/evictionInterval``).
  case interval
  /// ``MemoryStore/handleMemoryPressure(_:)``, with its level.
  case memoryPressure(MemoryPressureLevel)

  /// The payload of a ``manual(_:)`` trigger; `nil` for the others.
  public var userInfo: (any Sendable)? {
    if case .manual(let userInfo) = self { return userInfo }
    return nil
  }

  public var description: String {
    switch self {
    case .manual(let userInfo): userInfo.map { "manual(\($0))" } ?? "manual"
    case .interval: "interval"
    case .memoryPressure(let level): "memory pressure (\(level))"
    }
  }
}

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

/// What ``MemoryStore/handleMemoryPressure(_:)`` frees.
///
/// ```swift
/// store.memoryPressurePolicy = MemoryPressurePolicy(warningFraction: 0.75)
/// ```
public struct MemoryPressurePolicy: Hashable, Sendable {
  /// On a warning, a store with a ``MemoryStore/countLimit`` or ``MemoryStore/costLimit`` is
  /// trimmed, least recently used first, to this fraction of each limit. Default 0.5.
  public var warningFraction: Double
  /// On a critical event, the same with this fraction. Default 0, which empties a limited
  /// store.
  public var criticalFraction: Double
  /// Whether a critical event also empties a store without limits. Default `false`: a store
  /// without limits holds state, not a cache, unless this says otherwise.
  public var removesAllOnCritical: Bool

  /// Creates a policy; fractions are clamped to 0...1.
  public init(
    warningFraction: Double = 0.5, criticalFraction: Double = 0, removesAllOnCritical: Bool = false
  ) {
    self.warningFraction = min(max(warningFraction, 0), 1)
    self.criticalFraction = min(max(criticalFraction, 0), 1)
    self.removesAllOnCritical = removesAllOnCritical
  }
}

/// A store's counters, read at one instant by ``MemoryStore/statistics``.
///
/// ```swift
/// let stats = quotes.statistics
/// print("hit rate \(stats.hitRate), \(stats.evictions[.countLimit]) evicted by the limit")
/// ```
public struct StoreStatistics: Hashable, Sendable, CustomStringConvertible {
  /// Evictions counted per ``EvictionReason``.
  public struct Evictions: Hashable, Sendable {
    // One field per reason rather than an array: a write that evicts counts it with one add,
    // not an array's uniqueness check.
    @usableFromInline var decider: UInt64 = 0
    @usableFromInline var countLimit: UInt64 = 0
    @usableFromInline var costLimit: UInt64 = 0
    @usableFromInline var expired: UInt64 = 0
    @usableFromInline var memoryPressure: UInt64 = 0

    /// No evictions.
    @inlinable init() {}

    /// The number of entries removed for `reason`. O(1).
    @inlinable
    public subscript(reason: EvictionReason) -> UInt64 {
      get {
        switch reason {
        case .decider: decider
        case .countLimit: countLimit
        case .costLimit: costLimit
        case .expired: expired
        case .memoryPressure: memoryPressure
        }
      }
      set {
        switch reason {
        case .decider: decider = newValue
        case .countLimit: countLimit = newValue
        case .costLimit: costLimit = newValue
        case .expired: expired = newValue
        case .memoryPressure: memoryPressure = newValue
        }
      }
    }

    /// The number of entries removed for every reason together.
    public var total: UInt64 { decider + countLimit + costLimit + expired + memoryPressure }
  }

  /// Lookups that found their key: subscript reads, `valueOrInsert(forKey:_:)` hits, and each
  /// key found by `values(forKeys:)`.
  public var hits: UInt64
  /// Lookups that did not find their key.
  public var misses: UInt64
  /// Entries the store removed on its own, per reason.
  public var evictions: Evictions
  /// The number of entries.
  public var count: Int
  /// The sum of the entries' costs (0 unless costs are given).
  public var totalCost: Int
  /// The change batches published on the ``MemoryStore/notificationInterval`` and how late
  /// they were.
  public var changeBatches: ChangeBatches = ChangeBatches()

  /// The change batches that the interval published, and their delays: from the first change
  /// of a batch, which schedules its publication, until the batch is handed to the
  /// subscribers.
  ///
  /// A delay well above ``MemoryStore/notificationInterval`` means the store's scheduler runs
  /// late (its queue is busy). Batches published early, by ``MemoryStore/flush()`` or a new
  /// subscription, are not counted; a batch of changes made after such an early one counts
  /// from it (its first change is not timed, so that no write pays for a clock read).
  public struct ChangeBatches: Hashable, Sendable {
    /// The number of batches published.
    public var published: UInt64 = 0
    /// The sum of their delays.
    public var totalDelay: Duration = .zero
    /// The longest delay of one.
    public var longestDelay: Duration = .zero

    /// No batches.
    public init() {}

    /// The mean delay of a batch, or zero before the first.
    public var averageDelay: Duration {
      published == 0 ? .zero : totalDelay / Double(published)
    }
  }

  /// What happened between `earlier` and these statistics, like Caffeine's
  /// `CacheStats.minus`: the counters (hits, misses, evictions per reason, batches published
  /// and their total delay) less `earlier`'s, each at least 0, and the state now (``count``,
  /// ``totalCost``, and ``ChangeBatches/longestDelay``, which is a maximum since the store
  /// was made and cannot be taken apart).
  ///
  /// ```swift
  /// let before = quotes.statistics
  /// runTheMorningBurst()
  /// let burst = quotes.statistics.since(before)
  /// print("hit rate during the burst: \(burst.hitRate)")
  /// ```
  ///
  /// Statistics of two different stores give a meaningless difference. O(1).
  public func since(_ earlier: StoreStatistics) -> StoreStatistics {
    func less(_ now: UInt64, _ then: UInt64) -> UInt64 { now >= then ? now - then : 0 }
    var difference = self
    difference.hits = less(hits, earlier.hits)
    difference.misses = less(misses, earlier.misses)
    for reason in EvictionReason.allCases {
      difference.evictions[reason] = less(evictions[reason], earlier.evictions[reason])
    }
    difference.changeBatches.published = less(
      changeBatches.published, earlier.changeBatches.published)
    difference.changeBatches.totalDelay = Swift.max(
      changeBatches.totalDelay - earlier.changeBatches.totalDelay, .zero)
    return difference
  }

  /// `hits / (hits + misses)`, or 0 before the first lookup.
  public var hitRate: Double {
    let lookups = hits + misses
    return lookups == 0 ? 0 : Double(hits) / Double(lookups)
  }

  public var description: String {
    let rate = (hitRate * 1000).rounded() / 10
    return
      "\(count) \(count == 1 ? "entry" : "entries"), cost \(totalCost), \(hits) hits, \(misses) misses (\(rate) %), \(evictions.total) evicted"
  }
}
