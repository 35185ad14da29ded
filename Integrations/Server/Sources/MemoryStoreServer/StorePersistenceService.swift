import CoreMetrics
import Foundation
import Logging
import MemoryStoreKit
import Metrics
import ServiceLifecycle

/// Owns a store's persistence in a service group: loads the snapshot when it starts, saves on
/// an interval while it runs, and saves once more on graceful shutdown (SIGTERM, with the
/// group's signals) before it returns.
///
/// ```swift
/// let sessions = MemoryStore<String, Session>(name: "sessions")
/// let persistence = StorePersistenceService(
///   manager: try PersistenceManager(store: sessions, fileURL: snapshotURL, coder: .binary),
///   configuration: .init(saveInterval: .seconds(30)),
///   logger: logger)
/// let group = ServiceGroup(
///   services: [persistence, server],  // the server stops first, then the last save runs
///   gracefulShutdownSignals: [.sigterm, .sigint],
///   logger: logger)
/// try await group.run()
/// ```
///
/// A service group shuts its services down in reverse order: list the persistence service
/// *before* whatever writes to the store (the HTTP server), so that the final save runs after
/// the last request was answered and holds every write a client saw acknowledged. That holds
/// for a graceful shutdown that ends within the group's `maximumGracefulShutdownDuration`:
/// past it the group cancels its services, and the service saves at once, while requests may
/// still be under way; it then says so in a `warning`.
///
/// ## What it reports
/// - **Logs**, on `logger`, each with `memorystore.store` and `memorystore.file`: the load
///   (`info`, entries restored; `error`, with the error), each failed save (`error`, with the
///   error; a failed periodic save is tried again one interval later), and the final save
///   (`info`).
/// - **Metrics**, through `metricsFactory`, each with the dimension `store` (the store's name):
///   `memorystore_load_duration_seconds` and `memorystore_save_duration_seconds` (timers),
///   `memorystore_load_failures_total`, `memorystore_saves_total` and
///   `memorystore_save_failures_total` (counters), `memorystore_last_save_timestamp_seconds`
///   (a gauge, seconds since 1970 of the last successful save; a period in which nothing was
///   written saves nothing, so on an idle store it ages: alert on the failures instead).
///
/// Saves the app makes itself with ``MemoryStoreKit/PersistenceManager/save()`` are its own to
/// handle: the service reports the periodic saves and the ones it makes.
///
/// ## Failures
/// - A snapshot that fails to decode (corrupt, truncated, of another format) is moved aside by
///   the manager as `<name>.corrupt-<date>` and logged at `error`; the service then goes on with
///   the store as it is, or stops with the error, as ``Configuration/loadFailure`` says. Under
///   ``Configuration/LoadFailure/stop`` it also refuses to start while such a file lies beside
///   the snapshot, so that a restart does not serve an empty store in its place: inspect it,
///   then remove or restore it.
/// - A snapshot that cannot be read (``MemoryStoreKit/PersistenceError/Kind-swift.struct/readFailed``:
///   permissions, an I/O error) stops the service whatever the configuration: the file is
///   still there, and the store could neither save over it nor go on without it.
/// - The final save that fails is logged at `error`, counted, and thrown by ``run()``, so that
///   the service group, and the process, end with it: it is never swallowed. The store in
///   memory and the previous snapshot on disk are left as they were.
///
/// Thread safety: every method may be called from any thread; ``run()`` is called once. The
/// load and the final save run on the task that runs the service (blocking it for their
/// O(*n*) decoding or encoding), the periodic saves on the manager's background queue; none
/// runs while the service holds a lock.
public final class StorePersistenceService<
  Key: Hashable & Sendable & Codable, Value: Sendable & Codable
>: Service, Sendable {
  /// How the service saves and loads: a value, safe to share between threads.
  public struct Configuration: Sendable {
    /// The period of saves while the service runs; `.zero` saves only at shutdown. Thirty
    /// seconds by default. A period in which nothing was written to the store saves nothing.
    public var saveInterval: Duration
    /// What the service does when the snapshot fails to decode.
    /// ``LoadFailure/continue`` by default.
    public var loadFailure: LoadFailure

    /// What the service does when the snapshot fails to decode: a value, safe to share
    /// between threads.
    public enum LoadFailure: Sendable, Equatable {
      /// Go on with the store as it is (empty at start): the failure is logged and counted,
      /// and the rejected file is kept aside by the manager. For a cache, or any store that
      /// can be rebuilt.
      case `continue`
      /// Stop: ``StorePersistenceService/run()`` throws the error, which ends the service
      /// group, and goes on refusing to start while the rejected file lies beside the
      /// snapshot. For a store whose loss the server must not hide.
      case stop
    }

    /// Settings with the given values.
    public init(saveInterval: Duration = .seconds(30), loadFailure: LoadFailure = .continue) {
      precondition(saveInterval >= .zero, "saveInterval must not be negative")
      self.saveInterval = saveInterval
      self.loadFailure = loadFailure
    }
  }

  /// The manager that saves and loads the store.
  public let manager: PersistenceManager<Key, Value>
  /// The settings.
  public let configuration: Configuration

  let logger: Logger
  let metrics: PersistenceMetrics
  let readiness = Readiness()
  let runs = Locked(false)

  /// Creates a service for `manager`'s store and file.
  ///
  /// - Parameters:
  ///   - manager: The store's persistence manager. The service sets its
  ///     ``MemoryStoreKit/PersistenceManager/saveInterval`` while it runs; leave it at `.zero`
  ///     yourself.
  ///   - configuration: The save interval and what a failed load does.
  ///   - logger: Where loads, failed saves and the final save are logged. Its metadata gains
  ///     `memorystore.store` and `memorystore.file`.
  ///   - metricsFactory: Where the metrics go; by default the one that `MetricsSystem` was
  ///     bootstrapped with.
  public init(
    manager: PersistenceManager<Key, Value>, configuration: Configuration = Configuration(),
    logger: Logger = Logger(label: "MemoryStoreServer"),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) {
    self.manager = manager
    self.configuration = configuration
    let name = StoreLabel.name(of: manager.store)
    var logger = logger
    logger[metadataKey: "memorystore.store"] = "\(name)"
    logger[metadataKey: "memorystore.file"] = "\(manager.fileURL.path)"
    self.logger = logger
    metrics = PersistenceMetrics(store: name, factory: metricsFactory)
  }

  /// Loads the snapshot, saves every ``Configuration/saveInterval`` until graceful shutdown or
  /// cancellation, then saves once more and returns.
  ///
  /// - Throws: The ``MemoryStoreKit/PersistenceError`` of the final save, or of the load when
  ///   it stops the service; ``StoreServiceError`` if a rejected snapshot lies beside the file
  ///   under ``Configuration/LoadFailure/stop``, or if it is called a second time.
  public func run() async throws {
    let isFirstRun = runs.withLock { runs in
      defer { runs = true }
      return !runs
    }
    guard isFirstRun else {
      throw StoreServiceError(
        .alreadyRun,
        "run() was called twice on the StorePersistenceService of \(manager.fileURL.path)")
    }
    do {
      readiness.resolve(.success(try load()))
    } catch {
      readiness.resolve(.failure(error))
      throw error
    }

    // Periodic saves are reported as the manager's outcomes arrive; the reporter stops at the
    // first manual outcome once the final save has begun (the final save's, or one the app
    // made just before), after every outcome before it.
    let outcomes = manager.saveOutcomes
    let finalSaveBegun = Locked(false)
    let reporter = Task { [self] in
      for await outcome in outcomes {
        if outcome.trigger == .automatic {
          report(outcome.result, final: false)
        } else if finalSaveBegun.withLock({ $0 }) {
          return
        }
      }
    }
    manager.saveInterval = configuration.saveInterval
    do {
      try await gracefulShutdown()
    } catch {
      logger.warning(
        "cancelled, not shut down gracefully: saving now, while writes may be under way",
        metadata: ["lost": "the writes answered after this save"])
    }
    manager.saveInterval = .zero

    finalSaveBegun.withLock { $0 = true }
    let result = Result { () throws(PersistenceError) in try manager.save() }
    // Not cancelled with the service: the outcome it stops at is in the sequence already.
    await reporter.value
    report(result, final: true)
    if case .failure(let error) = result { throw error }
  }

  /// Waits until the service has loaded the snapshot (or failed to, and gone on), and returns
  /// the number of entries restored: for a server that must not answer before its store is
  /// restored.
  ///
  /// ```swift
  /// app.beforeServerStarts { _ = try await persistence.waitUntilLoaded() }
  /// ```
  ///
  /// - Returns: The entries restored; 0 when there was no snapshot, or when it failed to
  ///   decode and ``Configuration/loadFailure`` is ``Configuration/LoadFailure/continue``.
  /// - Throws: What stopped the service at its load (see ``run()``); `CancellationError` if the
  ///   calling task is cancelled first.
  public func waitUntilLoaded() async throws -> Int {
    try await readiness.wait().get()
  }

  /// Loads the snapshot; returns the entries restored, or throws what stops the service.
  private func load() throws -> Int {
    if configuration.loadFailure == .stop, let rejected = rejectedSnapshot() {
      let error = StoreServiceError(
        .rejectedSnapshotAside,
        "\(rejected.path) holds a snapshot of \(manager.fileURL.path) that failed to load: "
          + "inspect it, then remove it, or restore it in place of the snapshot")
      metrics.loadFailures.increment()
      logger.error(
        "a rejected snapshot lies beside the file: not starting",
        metadata: ["rejected": "\(rejected.path)"])
      throw error
    }
    let start = ContinuousClock.now
    do {
      let count = try manager.load()
      metrics.loadDuration.record(duration: ContinuousClock.now - start)
      logger.info("loaded the store's snapshot", metadata: ["entries": "\(count)"])
      return count
    } catch {
      metrics.loadFailures.increment()
      let stops = configuration.loadFailure == .stop || error.kind == .readFailed
      logger.error(
        "the store's snapshot failed to load",
        metadata: ["error": "\(error)", "then": stops ? "stopping" : "going on without it"])
      if stops { throw error }
      return 0
    }
  }

  /// A file that a load moved aside, beside the snapshot, if there is one.
  private func rejectedSnapshot() -> URL? {
    let directory = manager.fileURL.deletingLastPathComponent()
    let prefix = manager.fileURL.lastPathComponent + ".corrupt-"
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    return names.sorted().first { $0.hasPrefix(prefix) }.map { directory.appending(path: $0) }
  }

  private func report(_ result: Result<SaveReport, PersistenceError>, final: Bool) {
    switch result {
    case .success(let report):
      metrics.saves.increment()
      metrics.saveDuration.record(duration: report.duration)
      metrics.lastSave.record(report.date.timeIntervalSince1970)
      if final {
        logger.info(
          "saved the store at shutdown",
          metadata: ["entries": "\(report.entryCount)", "bytes": "\(report.byteCount)"])
      }
    case .failure(let error):
      metrics.saveFailures.increment()
      logger.error(
        final ? "the store's final save failed" : "a periodic save of the store failed",
        metadata: ["error": "\(error)"])
    }
  }
}

/// The persistence service's metrics.
struct PersistenceMetrics: Sendable {
  let loadDuration: CoreMetrics.Timer
  let loadFailures: Counter
  let saveDuration: CoreMetrics.Timer
  let saves: Counter
  let saveFailures: Counter
  let lastSave: Gauge

  init(store: String, factory: any MetricsFactory) {
    let dimensions = [("store", store)]
    loadDuration = Timer(
      label: "memorystore_load_duration_seconds", dimensions: dimensions, factory: factory)
    loadFailures = Counter(
      label: "memorystore_load_failures_total", dimensions: dimensions, factory: factory)
    saveDuration = Timer(
      label: "memorystore_save_duration_seconds", dimensions: dimensions, factory: factory)
    saves = Counter(label: "memorystore_saves_total", dimensions: dimensions, factory: factory)
    saveFailures = Counter(
      label: "memorystore_save_failures_total", dimensions: dimensions, factory: factory)
    lastSave = Gauge(
      label: "memorystore_last_save_timestamp_seconds", dimensions: dimensions, factory: factory)
  }
}
