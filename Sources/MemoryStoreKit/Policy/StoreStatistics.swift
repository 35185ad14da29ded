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
