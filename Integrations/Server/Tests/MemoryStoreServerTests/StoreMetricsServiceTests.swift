import Foundation
import InMemoryLogging
import Logging
import MemoryStoreKit
import MemoryStoreServer
import MetricsTestKit
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@Suite(.timeLimit(.minutes(1))) struct StoreMetricsServiceTests {
  typealias Store = MemoryStore<String, Int>

  @Test func theCountersMoveAsTheWorkloadSays() throws {
    let store = Store(name: "quotes")
    store.countLimit = 10
    let metrics = TestMetrics()
    let service = StoreMetricsService(store: store, metricsFactory: metrics)
    // Counted before the service samples: the first sample adds them.
    for index in 0..<30 { store["k\(index)"] = index }
    var hits = 0
    for index in 0..<30 where store["k\(index)"] != nil { hits += 1 }
    service.sample()
    #expect(hits == 10)
    #expect(metrics.total("memorystore_hits_total", store: "quotes") == 10)
    #expect(metrics.total("memorystore_misses_total", store: "quotes") == 20)
    #expect(metrics.gauge("memorystore_hit_ratio", store: "quotes") == 10.0 / 30)
    #expect(
      metrics.total("memorystore_evictions_total", store: "quotes", [("reason", "count_limit")])
        == 20)
    #expect(
      metrics.total("memorystore_evictions_total", store: "quotes", [("reason", "expired")]) == 0)
    #expect(metrics.gauge("memorystore_entries", store: "quotes") == 10)

    // The next sample adds only what happened since.
    let present = store.keys
    for key in present.prefix(4) { _ = store[key] }
    service.sample()
    #expect(metrics.total("memorystore_hits_total", store: "quotes") == 14)
    #expect(metrics.total("memorystore_misses_total", store: "quotes") == 20)
    #expect(metrics.gauge("memorystore_hit_ratio", store: "quotes") == 14.0 / 34)

    // Removals by the app are not evictions.
    store.removeAll()
    service.sample()
    #expect(metrics.gauge("memorystore_hit_ratio", store: "quotes") == 14.0 / 34)
    #expect(metrics.gauge("memorystore_entries", store: "quotes") == 0)
    #expect(
      metrics.total("memorystore_evictions_total", store: "quotes", [("reason", "count_limit")])
        == 20)
  }

  @Test func costsAndExpiriesAreExported() throws {
    let scheduler = ManualScheduler()
    let store = Store(name: "cache", scheduler: scheduler)
    let metrics = TestMetrics()
    let service = StoreMetricsService(store: store, metricsFactory: metrics)
    store.setValue(1, forKey: "a", cost: 40, timeToLive: .seconds(5))
    store.setValue(2, forKey: "b", cost: 2)
    service.sample()
    #expect(metrics.gauge("memorystore_total_cost", store: "cache") == 42)
    scheduler.advance(by: .seconds(6))
    #expect(store["a"] == nil)
    service.sample()
    #expect(
      metrics.total("memorystore_evictions_total", store: "cache", [("reason", "expired")]) == 1)
    #expect(metrics.gauge("memorystore_total_cost", store: "cache") == 2)
    #expect(metrics.gauge("memorystore_entries", store: "cache") == 1)
  }

  @Test func memoryPressureTrimsAreCountedAndLogged() throws {
    let store = Store(name: "images")
    store.countLimit = 100
    let metrics = TestMetrics()
    let (logger, logs) = recordingLogger()
    let service = StoreMetricsService(store: store, logger: logger, metricsFactory: metrics)
    for index in 0..<100 { store["k\(index)"] = index }
    service.sample()
    #expect(logs.entries(at: .notice, containing: "memory pressure").isEmpty)
    store.handleMemoryPressure(.warning)
    let trimmed = 100 - store.count
    #expect(trimmed > 0)
    service.sample()
    #expect(
      metrics.total("memorystore_evictions_total", store: "images", [("reason", "memory_pressure")])
        == Int64(trimmed))
    let logged = logs.entries(at: .notice, containing: "memory pressure trimmed")
    #expect(logged.count == 1)
    #expect(logged.first?.metadata["removed"] == "\(trimmed)")
    #expect(logged.first?.metadata["memorystore.store"] == "images")
  }

  @Test func changeBatchesAndTheirDelaysAreExported() async throws {
    let scheduler = ManualScheduler()
    let store = Store(name: "prices", scheduler: scheduler)
    store.notificationInterval = .seconds(1)
    let subscription = store.observe { _ in }
    let metrics = TestMetrics()
    let service = StoreMetricsService(store: store, metricsFactory: metrics)
    store["AAPL"] = 231
    scheduler.advance(by: .seconds(1))
    store["MSFT"] = 415
    scheduler.advance(by: .seconds(1))
    service.sample()
    #expect(metrics.total("memorystore_change_batches_total", store: "prices") == 2)
    // A floating-point counter: MetricsTestKit keeps it as an integer counter of whole seconds.
    #expect(
      metrics.total("memorystore_change_batch_delay_seconds_total", store: "prices") == 2)
    #expect(metrics.gauge("memorystore_change_batch_delay_max_seconds", store: "prices") == 1)
    store["AAPL"] = 232
    scheduler.advance(by: .seconds(1))
    service.sample()
    #expect(metrics.total("memorystore_change_batches_total", store: "prices") == 3)
    #expect(
      metrics.total("memorystore_change_batch_delay_seconds_total", store: "prices") == 3)
    subscription.cancel()
  }

  @Test func failedRefreshesAreCountedLoggedAndStillReachTheAppsHandler() async throws {
    let scheduler = ManualScheduler()
    let store = Store(name: "rates", scheduler: scheduler)
    store.timeToRefresh = .seconds(10)
    let (reported, report) = AsyncStream.makeStream(of: String.self)
    store.onRefreshFailure = { key, _ in report.yield(key) }
    let metrics = TestMetrics()
    let (logger, logs) = recordingLogger()
    let service = StoreMetricsService(store: store, logger: logger, metricsFactory: metrics)
    struct SourceDown: Error {}
    var keys = reported.makeAsyncIterator()
    try await testGracefulShutdown { trigger in
      let run = Task { try await service.run() }
      // The first sample comes after the handler is in place.
      #expect(await eventually { metrics.gauge("memorystore_entries", store: "rates") != nil })
      store["EURUSD"] = 108
      scheduler.advance(by: .seconds(11))
      #expect(try await store.value(forKey: "EURUSD") { throw SourceDown() } == 108)
      #expect(await keys.next() == "EURUSD")
      #expect(metrics.total("memorystore_refresh_failures_total", store: "rates") == 1)
      #expect(logs.entries(at: .warning, containing: "refreshing an entry failed").count == 1)
      let keyed = logs.entries(at: .debug, containing: "whose refresh failed")
      #expect(keyed.first?.metadata["key"] == "EURUSD")
      trigger.triggerGracefulShutdown()
      try await run.value
    }
    // Stopped: the app's own handler is back, alone.
    store["GBPUSD"] = 126
    scheduler.advance(by: .seconds(11))
    #expect(try await store.value(forKey: "GBPUSD") { throw SourceDown() } == 126)
    #expect(await keys.next() == "GBPUSD")
    #expect(metrics.total("memorystore_refresh_failures_total", store: "rates") == 1)
  }

  @Test func samplesDoNotOverlap() async throws {
    let store = Store(name: "busy")
    let metrics = TestMetrics()
    let service = StoreMetricsService(store: store, metricsFactory: metrics)
    for index in 0..<100 { store["k\(index)"] = index }
    // Many samples at once, while lookups go on: the counters end at the store's totals.
    await withTaskGroup { group in
      for task in 0..<8 {
        group.addTask {
          for index in 0..<200 {
            _ = store["k\((index + task) % 150)"]
            service.sample()
          }
        }
      }
    }
    service.sample()
    let statistics = store.statistics
    #expect(metrics.total("memorystore_hits_total", store: "busy") == Int64(statistics.hits))
    #expect(metrics.total("memorystore_misses_total", store: "busy") == Int64(statistics.misses))
    #expect(metrics.gauge("memorystore_hit_ratio", store: "busy") == statistics.hitRate)
  }

  @Test func runSamplesAtStartAndAtShutdown() async throws {
    let store = Store(name: "flags")
    let metrics = TestMetrics()
    let service = StoreMetricsService(
      store: store, interval: .seconds(3600), metricsFactory: metrics)
    store["dark-mode"] = 1
    _ = store["dark-mode"]
    try await testGracefulShutdown { trigger in
      let run = Task { try await service.run() }
      #expect(await eventually { metrics.total("memorystore_hits_total", store: "flags") == 1 })
      _ = store["dark-mode"]
      _ = store["absent"]
      trigger.triggerGracefulShutdown()
      try await run.value
    }
    #expect(metrics.total("memorystore_hits_total", store: "flags") == 2)
    #expect(metrics.total("memorystore_misses_total", store: "flags") == 1)
  }

  @Test func aStoreWithoutANameIsLabelledStore() {
    let metrics = TestMetrics()
    let service = StoreMetricsService(store: Store(), metricsFactory: metrics)
    service.sample()
    #expect(metrics.gauge("memorystore_entries", store: "store") == 0)
  }
}
