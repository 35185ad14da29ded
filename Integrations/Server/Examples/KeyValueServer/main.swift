// A key/value HTTP server backed by a MemoryStore: Hummingbird routes, the store's snapshot
// loaded at start, saved on an interval and once more when SIGTERM or SIGINT asks the server to
// stop, and its statistics exported for Prometheus.
//
//   swift run -c release KeyValueServer [--port 8080] [--host 127.0.0.1]
//     [--directory ./kv-data] [--save-interval 30] [--metrics-interval 10]
//
//   curl -X PUT localhost:8080/entries/greeting -d 'hello'
//   curl localhost:8080/entries/greeting          # hello
//   curl -X DELETE localhost:8080/entries/greeting
//   curl localhost:8080/metrics                   # memorystore_hits_total{store="kv"} 1 …
//
// Routes: GET/PUT/DELETE /entries/{key}, GET /entries (the number of entries), GET /health,
// GET /metrics. Every write is answered once it is in the store: the last save, which runs
// after the server has answered its last request, holds it.

import Foundation
import Hummingbird
import Logging
import MemoryStoreKit
import MemoryStoreServer
import Metrics
import Prometheus
import ServiceLifecycle
import UnixSignals

let options = try Options(CommandLine.arguments.dropFirst())
var logger = Logger(label: "KeyValueServer")
logger.logLevel = options.logLevel

// Metrics: a Prometheus registry, served at /metrics.
let registry = PrometheusCollectorRegistry()
let metricsFactory = PrometheusMetricsFactory(registry: registry)
MetricsSystem.bootstrap(metricsFactory)

// The store, its snapshot and its statistics.
let store = MemoryStore<String, String>(name: "kv")
let persistence = StorePersistenceService(
  manager: try PersistenceManager(
    store: store, fileURL: options.directory.appending(path: "kv.snapshot"), coder: .binary),
  configuration: .init(saveInterval: options.saveInterval),
  logger: logger, metricsFactory: metricsFactory)
let storeMetrics = StoreMetricsService(
  store: store, interval: options.metricsInterval, logger: logger,
  metricsFactory: metricsFactory)
// In a container with a memory limit, trims the store before the limit is reached.
let memoryPressure = MemoryPressureService(
  stores: [store], logger: logger, metricsFactory: metricsFactory)

let router = Router()
router.get("/health") { _, _ in "ok" }
router.get("/entries") { _, _ in "\(store.count)" }
router.get("/entries/{key}") { _, context -> Response in
  let key = try context.parameters.require("key")
  guard let value = store[key] else { return Response(status: .notFound) }
  return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: value)))
}
router.put("/entries/{key}") { request, context -> HTTPResponse.Status in
  let key = try context.parameters.require("key")
  let body = try await request.body.collect(upTo: 1 << 20)
  store[key] = String(buffer: body)
  return .noContent
}
router.delete("/entries/{key}") { _, context -> HTTPResponse.Status in
  let key = try context.parameters.require("key")
  return store.removeValue(forKey: key) == nil ? .notFound : .noContent
}
router.get("/metrics") { _, _ in
  storeMetrics.sample()  // a scrape sees the store as it is now
  return registry.emitToString()
}

var app = Application(
  router: router,
  configuration: .init(address: .hostname(options.host, port: options.port)),
  // A service group stops its services in reverse order: the HTTP server first (the
  // application's own), then the others, the persistence service's last save last.
  services: [persistence, storeMetrics, memoryPressure],
  onServerRunning: { channel in
    // The line the tests and scripts wait for, with the port chosen when --port is 0.
    let port = channel.localAddress?.port ?? options.port
    FileHandle.standardOutput.write(Data("listening on http://\(options.host):\(port)\n".utf8))
  },
  logger: logger)
// No request is answered before the snapshot is back in the store.
app.beforeServerStarts { _ = try await persistence.waitUntilLoaded() }

var configuration = ServiceGroupConfiguration(
  services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
// Past this, shutdown turns into cancellation: the persistence service still saves.
configuration.maximumGracefulShutdownDuration = options.gracePeriod
do {
  try await ServiceGroup(configuration: configuration).run()
} catch {
  // A failed last save among them: the process must not end as if all were saved.
  logger.critical("the server stopped with an error", metadata: ["error": "\(error)"])
  exit(1)
}
print("stopped")
