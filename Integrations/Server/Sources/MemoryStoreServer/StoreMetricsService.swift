import CoreMetrics
import Logging
import MemoryStoreKit
import ServiceLifecycle
import Synchronization

/// Exports a store's statistics through `swift-metrics`, sampled on an interval, and logs
/// what an operator must see: memory-pressure trims and failed refreshes.
///
/// ```swift
/// let quotes = MemoryStore<String, Quote>(name: "quotes")
/// let metrics = StoreMetricsService(store: quotes, interval: .seconds(10), logger: logger)
/// let group = ServiceGroup(services: [metrics, server], logger: logger)
/// ```
///
/// Reads and writes of the store pay nothing for it: the store counts hits and misses
/// whether or not anyone exports them, and the service reads
/// ``MemoryStoreKit/MemoryStore/statistics`` once per interval.
///
/// ## The metrics
/// Each has the dimension `store`, the store's name (`store` for a store without one: give
/// each store a name of its own, or their series mix):
///
/// | Label | Kind | What |
/// |---|---|---|
/// | `memorystore_hits_total` | counter | lookups that found their key |
/// | `memorystore_misses_total` | counter | lookups that did not |
/// | `memorystore_hit_ratio` | gauge | hits / lookups since the store was created (for a window, divide the counters' rates) |
/// | `memorystore_evictions_total` | counter | entries the store removed on its own; dimension `reason`: `decider`, `count_limit`, `cost_limit`, `expired`, `memory_pressure` |
/// | `memorystore_entries` | gauge | the number of entries |
/// | `memorystore_total_cost` | gauge | the sum of the entries' costs |
/// | `memorystore_change_batches_total` | counter | change batches the notification interval published |
/// | `memorystore_change_batch_delay_seconds_total` | counter | the sum of their delays, from a batch's first change to its delivery: over a window, its rate divided by the batches' is the mean delay |
/// | `memorystore_change_batch_delay_max_seconds` | gauge | the longest delay of one batch |
/// | `memorystore_refresh_failures_total` | counter | reloads of `timeToRefresh` that threw, while ``run()`` runs |
///
/// Counters start at what the store counted before the service started: the first sample
/// adds it all.
///
/// ## The logs
/// - `notice`: entries removed by memory pressure since the previous sample.
/// - `warning`: a reload of ``MemoryStoreKit/MemoryStore/timeToRefresh`` that threw, with the
///   error (the key is logged at `debug` only, as keys may be session ids or user names).
///
/// Thread safety: every method may be called from any thread; ``run()`` is called once.
/// Samples do not overlap (one that finds another under way returns at once), so gauges are
/// recorded in the order the statistics were read. Metric handlers and the logger are called
/// outside every lock of the service and of the store.
public final class StoreMetricsService<Key: Hashable & Sendable, Value: Sendable>: Service,
  Sendable
{
  /// The store whose statistics are exported.
  public let store: MemoryStore<Key, Value>
  /// The sampling period.
  public let interval: Duration

  let logger: Logger
  let metrics: StoreMetrics
  /// The counters as of the latest sample; held by the sample under way only.
  let latest = Locked(Sampled())
  /// Whether a sample is under way.
  let sampling = Atomic(false)

  /// Creates a service that exports `store`'s statistics every `interval`.
  ///
  /// Failed refreshes are reported while ``run()`` runs: it sets the store's
  /// ``MemoryStoreKit/MemoryStore/onRefreshFailure`` to a handler that reports each one and
  /// then calls the handler that was set before, and puts that one back when it returns. Set
  /// your own handler before the service starts.
  ///
  /// - Parameters:
  ///   - store: The store.
  ///   - interval: How often to sample; ten seconds by default (Prometheus scrapes every 15 to
  ///     60 seconds).
  ///   - logger: Where trims and failed refreshes are logged; its metadata gains
  ///     `memorystore.store`.
  ///   - metricsFactory: Where the metrics go; by default the one that `MetricsSystem` was
  ///     bootstrapped with.
  public init(
    store: MemoryStore<Key, Value>, interval: Duration = .seconds(10),
    logger: Logger = Logger(label: "MemoryStoreServer"),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) {
    precondition(interval > .zero, "the sampling interval must be above zero")
    self.store = store
    self.interval = interval
    let name = StoreLabel.name(of: store)
    var logger = logger
    logger[metadataKey: "memorystore.store"] = "\(name)"
    self.logger = logger
    metrics = StoreMetrics(store: name, factory: metricsFactory)
  }

  /// Reports failed refreshes, and samples at once, then every ``interval`` until graceful
  /// shutdown or cancellation, then once more.
  public func run() async throws {
    let previous = store.onRefreshFailure
    store.onRefreshFailure = { [logger, metrics] key, error in
      metrics.refreshFailures.increment()
      logger.warning(
        "refreshing an entry failed; it keeps its value", metadata: ["error": "\(error)"])
      logger.debug("the entry whose refresh failed", metadata: ["key": "\(key)"])
      previous?(key, error)
    }
    defer { store.onRefreshFailure = previous }
    sample()
    try? await cancelWhenGracefulShutdown { [self] in
      while true {
        try await Task.sleep(for: interval)
        sample()
      }
    }
    sample()
  }

  /// Reads the store's statistics now and records what changed since the previous sample.
  ///
  /// ``run()`` calls it on its interval; call it yourself before a scrape that must be
  /// current (as the example server does), or in tests. If another sample is under way, it
  /// returns at once: that one records the store as it is.
  ///
  /// - Complexity: O(*t*) for the *t* threads that have read the store (their counters are
  ///   added up), with one short hold of the store's write lock; like any read, it may first
  ///   remove entries whose time is up.
  public func sample() {
    guard
      sampling.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
    else { return }
    defer { sampling.store(false, ordering: .releasing) }
    let statistics = store.statistics
    let delta = latest.withLock { $0.advance(to: statistics) }
    metrics.hits.increment(by: delta.hits)
    metrics.misses.increment(by: delta.misses)
    for reason in EvictionReason.allCases {
      let removed = delta.evictions[reason, default: 0]
      if removed > 0 { metrics.evictions[reason]?.increment(by: removed) }
    }
    metrics.entries.record(statistics.count)
    metrics.totalCost.record(statistics.totalCost)
    if statistics.hits + statistics.misses > 0 { metrics.hitRatio.record(statistics.hitRate) }
    metrics.changeBatches.increment(by: delta.batches)
    if delta.batchDelay > .zero { metrics.changeBatchDelay.increment(by: delta.batchDelay.seconds) }
    metrics.longestBatchDelay.record(statistics.changeBatches.longestDelay.seconds)
    let trimmed = delta.evictions[.memoryPressure, default: 0]
    if trimmed > 0 {
      logger.notice(
        "memory pressure trimmed the store",
        metadata: ["removed": "\(trimmed)", "entries": "\(statistics.count)"])
    }
  }
}

/// The counters of the latest sample, and how a new one differs.
struct Sampled: Sendable {
  var hits: UInt64 = 0
  var misses: UInt64 = 0
  var evictions = [EvictionReason: UInt64]()
  var batches: UInt64 = 0
  var batchDelay: Duration = .zero

  /// What grew since the previous sample.
  struct Delta {
    var hits: Int64 = 0
    var misses: Int64 = 0
    var evictions = [EvictionReason: Int64]()
    var batches: Int64 = 0
    var batchDelay: Duration = .zero
  }

  /// Moves to `statistics`, returning what grew.
  mutating func advance(to statistics: StoreStatistics) -> Delta {
    var delta = Delta()
    delta.hits = Self.grow(&hits, to: statistics.hits)
    delta.misses = Self.grow(&misses, to: statistics.misses)
    for reason in EvictionReason.allCases {
      delta.evictions[reason] = Self.grow(
        &evictions[reason, default: 0], to: statistics.evictions[reason])
    }
    delta.batches = Self.grow(&batches, to: statistics.changeBatches.published)
    let totalDelay = statistics.changeBatches.totalDelay
    if totalDelay > batchDelay {
      delta.batchDelay = totalDelay - batchDelay
      batchDelay = totalDelay
    }
    return delta
  }

  private static func grow(_ counter: inout UInt64, to value: UInt64) -> Int64 {
    guard value > counter else { return 0 }
    defer { counter = value }
    return Int64(clamping: value - counter)
  }
}

/// The metrics of ``StoreMetricsService``.
struct StoreMetrics: Sendable {
  let hits: Counter
  let misses: Counter
  let hitRatio: Gauge
  let evictions: [EvictionReason: Counter]
  let entries: Gauge
  let totalCost: Gauge
  let changeBatches: Counter
  let changeBatchDelay: FloatingPointCounter
  let longestBatchDelay: Gauge
  let refreshFailures: Counter

  init(store: String, factory: any MetricsFactory) {
    let dimensions = [("store", store)]
    func counter(_ label: String) -> Counter {
      Counter(label: label, dimensions: dimensions, factory: factory)
    }
    func gauge(_ label: String) -> Gauge {
      Gauge(label: label, dimensions: dimensions, factory: factory)
    }
    hits = counter("memorystore_hits_total")
    misses = counter("memorystore_misses_total")
    hitRatio = gauge("memorystore_hit_ratio")
    evictions = Dictionary(
      uniqueKeysWithValues: EvictionReason.allCases.map { reason in
        (
          reason,
          Counter(
            label: "memorystore_evictions_total",
            dimensions: dimensions + [("reason", reason.metricLabel)], factory: factory)
        )
      })
    entries = gauge("memorystore_entries")
    totalCost = gauge("memorystore_total_cost")
    changeBatches = counter("memorystore_change_batches_total")
    changeBatchDelay = FloatingPointCounter(
      label: "memorystore_change_batch_delay_seconds_total", dimensions: dimensions,
      factory: factory)
    longestBatchDelay = gauge("memorystore_change_batch_delay_max_seconds")
    refreshFailures = counter("memorystore_refresh_failures_total")
  }
}

extension EvictionReason {
  /// The value of the `reason` dimension.
  var metricLabel: String {
    switch self {
    case .decider: "decider"
    case .countLimit: "count_limit"
    case .costLimit: "cost_limit"
    case .expired: "expired"
    case .memoryPressure: "memory_pressure"
    }
  }
}
