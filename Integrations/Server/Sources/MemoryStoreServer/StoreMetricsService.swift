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
/// whether or not anyone exports them, and the service reads ``MemoryStoreKit/MemoryStore/statistics``
/// once per interval (one short hold of the store's write lock).
///
/// ## The metrics
/// Each has the dimension `store`, the store's name (`store` for a store without one):
///
/// | Label | Kind | What |
/// |---|---|---|
/// | `memorystore_hits_total` | counter | lookups that found their key |
/// | `memorystore_misses_total` | counter | lookups that did not |
/// | `memorystore_hit_ratio` | gauge | hits / lookups over the last interval (kept when it had none) |
/// | `memorystore_evictions_total` | counter | entries the store removed on its own; dimension `reason`: `decider`, `count_limit`, `cost_limit`, `expired`, `memory_pressure` |
/// | `memorystore_entries` | gauge | the number of entries |
/// | `memorystore_total_cost` | gauge | the sum of the entries' costs |
/// | `memorystore_change_batches_total` | counter | change batches the interval published |
/// | `memorystore_change_batch_delay_seconds` | gauge | their mean delay over the last interval, from a batch's first change to its delivery |
/// | `memorystore_refresh_failures_total` | counter | reloads of `timeToRefresh` that threw |
///
/// Counters start at what the store counted before the service started: the first sample
/// adds it all.
///
/// ## The logs
/// - `notice`: entries removed by memory pressure since the last sample.
/// - `warning`: a reload of ``MemoryStoreKit/MemoryStore/timeToRefresh`` that threw, with the
///   error (the key is logged at `debug` only, as keys may be session ids or user names).
///
/// Thread safety: every method may be called from any thread; ``run()`` is called once.
/// Metric handlers are called outside every lock of the service and of the store.
public final class StoreMetricsService<Key: Hashable & Sendable, Value: Sendable>: Service,
  Sendable
{
  /// The store whose statistics are exported.
  public let store: MemoryStore<Key, Value>
  /// The sampling period.
  public let interval: Duration

  let logger: Logger
  let metrics: StoreMetrics
  /// The counters as of the latest sample.
  let latest = Mutex(Sampled())

  /// Creates a service that exports `store`'s statistics every `interval`.
  ///
  /// - Parameters:
  ///   - store: The store.
  ///   - interval: How often to sample; ten seconds by default (Prometheus scrapes every 15 to
  ///     60 seconds).
  ///   - logger: Where trims and failed refreshes are logged; its metadata gains
  ///     `memorystore.store`.
  ///
  /// From now on, failed refreshes of the store are reported: the service sets the store's
  /// ``MemoryStoreKit/MemoryStore/onRefreshFailure`` to a handler that reports each one and
  /// then calls the handler that was set before. Set your own handler before you create the
  /// service.
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
    let previous = store.onRefreshFailure
    let refreshFailures = metrics.refreshFailures
    store.onRefreshFailure = { [logger] key, error in
      refreshFailures.increment()
      logger.warning(
        "refreshing an entry failed; it keeps its value", metadata: ["error": "\(error)"])
      logger.debug("the entry whose refresh failed", metadata: ["key": "\(key)"])
      previous?(key, error)
    }
  }

  /// Samples at once, then every ``interval`` until graceful shutdown or cancellation, then
  /// once more.
  public func run() async throws {
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
  /// current, or in tests.
  ///
  /// - Complexity: O(1), with one short hold of the store's write lock.
  public func sample() {
    let statistics = store.statistics
    let (delta, hitRatio, batchDelay) = latest.withLock { latest in
      latest.advance(to: statistics)
    }
    metrics.hits.increment(by: delta.hits)
    metrics.misses.increment(by: delta.misses)
    for reason in EvictionReason.allCases {
      let removed = delta.evictions[reason, default: 0]
      if removed > 0 { metrics.evictions[reason]?.increment(by: removed) }
    }
    metrics.entries.record(statistics.count)
    metrics.totalCost.record(statistics.totalCost)
    if let hitRatio { metrics.hitRatio.record(hitRatio) }
    metrics.changeBatches.increment(by: delta.batches)
    if let batchDelay { metrics.changeBatchDelay.record(batchDelay.seconds) }
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
  }

  /// Moves to `statistics`, returning what grew, the hit ratio of the lookups between, and
  /// the mean delay of the batches between (each `nil` if there were none). Counters only
  /// grow: a sample older than the latest (two samples at once) adds nothing.
  mutating func advance(
    to statistics: StoreStatistics
  ) -> (delta: Delta, hitRatio: Double?, batchDelay: Duration?) {
    var delta = Delta()
    delta.hits = Self.grow(&hits, to: statistics.hits)
    delta.misses = Self.grow(&misses, to: statistics.misses)
    for reason in EvictionReason.allCases {
      delta.evictions[reason] = Self.grow(
        &evictions[reason, default: 0], to: statistics.evictions[reason])
    }
    let batchesBefore = batches
    let delayBefore = batchDelay
    delta.batches = Self.grow(&batches, to: statistics.changeBatches.published)
    var meanDelay: Duration?
    if delta.batches > 0 {
      batchDelay = statistics.changeBatches.totalDelay
      meanDelay = (batchDelay - delayBefore) / Double(batches - batchesBefore)
    }
    let lookups = delta.hits + delta.misses
    let hitRatio = lookups > 0 ? Double(delta.hits) / Double(lookups) : nil
    return (delta, hitRatio, meanDelay)
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
  let changeBatchDelay: Gauge
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
    changeBatchDelay = gauge("memorystore_change_batch_delay_seconds")
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
