import CoreMetrics
import Foundation
import Logging
import MemoryStoreKit
import ServiceLifecycle

/// A store that can give memory back: ``MemoryStoreKit/MemoryStore`` is one.
public protocol MemoryPressureResponder: Sendable {
  /// The name used in logs.
  var name: String? { get }
  /// Frees memory for `level` (see ``MemoryStoreKit/MemoryStore/handleMemoryPressure(_:)``).
  func handleMemoryPressure(_ level: MemoryPressureLevel)
}

extension MemoryStore: MemoryPressureResponder {}

/// Watches the memory that the process's control group (its container) uses against its
/// limit, and tells stores to trim when it runs high: on Linux, what the system's
/// memory-pressure events do for a store on Apple platforms.
///
/// ```swift
/// let pressure = MemoryPressureService(stores: [thumbnails, sessions], logger: logger)
/// let group = ServiceGroup(services: [pressure, server], logger: logger)
/// ```
///
/// Every ``Configuration/interval`` it reads the usage and the limit: cgroup v2's
/// `memory.current` against `memory.high`, or `memory.max` when there is no `memory.high`;
/// cgroup v1's `memory.usage_in_bytes` against `memory.limit_in_bytes`. At
/// ``Configuration/warningFraction`` of the limit it calls each store's
/// ``MemoryStoreKit/MemoryStore/handleMemoryPressure(_:)`` with `.warning`, at
/// ``Configuration/criticalFraction`` with `.critical`: when the level rises, and again every
/// ``Configuration/repeatInterval`` while it stays up. What each store then frees is its
/// ``MemoryStoreKit/MemoryStore/memoryPressurePolicy``'s choice. Without a limit (or on a system
/// without these files) it logs so once and watches nothing until it is stopped.
///
/// It logs each rise and fall of the level (`notice`, with the usage and the limit) and counts
/// the calls in `memorystore_memory_pressure_events_total`, with the dimension `level`.
///
/// Thread safety: every method may be called from any thread; ``run()`` is called once. The
/// stores are told outside every lock of the service, on the task that runs it.
public final class MemoryPressureService: Service, Sendable {
  /// When the service tells the stores to trim: a value, safe to share between threads.
  public struct Configuration: Sendable {
    /// How often the usage is read. Five seconds by default.
    public var interval: Duration
    /// The fraction of the limit at which stores get a warning. 0.85 by default.
    public var warningFraction: Double
    /// The fraction of the limit at which stores get a critical event. 0.95 by default.
    public var criticalFraction: Double
    /// How often the stores are told again while the level stays up. Thirty seconds by
    /// default.
    public var repeatInterval: Duration
    /// The control group's directory: `/sys/fs/cgroup` by default (a container sees its own
    /// group there). Tests and unusual mounts set it.
    public var cgroupDirectory: URL

    /// Settings with the given values; fractions are clamped to 0...1, and the critical one to
    /// at least the warning one.
    public init(
      interval: Duration = .seconds(5), warningFraction: Double = 0.85,
      criticalFraction: Double = 0.95, repeatInterval: Duration = .seconds(30),
      cgroupDirectory: URL = URL(fileURLWithPath: "/sys/fs/cgroup", isDirectory: true)
    ) {
      precondition(interval > .zero, "the interval must be above zero")
      self.interval = interval
      self.warningFraction = min(max(warningFraction, 0), 1)
      self.criticalFraction = min(max(criticalFraction, self.warningFraction), 1)
      self.repeatInterval = repeatInterval
      self.cgroupDirectory = cgroupDirectory
    }
  }

  /// The memory a control group uses and its limit, in bytes.
  public struct Usage: Sendable, Equatable {
    /// The bytes in use.
    public var used: Int
    /// The limit.
    public var limit: Int

    /// A usage of `used` bytes out of `limit`.
    public init(used: Int, limit: Int) {
      self.used = used
      self.limit = limit
    }

    /// The fraction of the limit in use.
    public var fraction: Double { Double(used) / Double(limit) }
  }

  /// The stores told to trim.
  public let stores: [any MemoryPressureResponder]
  /// The settings.
  public let configuration: Configuration

  let logger: Logger
  let events: [MemoryPressureLevel: Counter]
  /// The level of the previous check, and when the stores were last told.
  let state = Locked<(level: MemoryPressureLevel?, toldAt: ContinuousClock.Instant?)>((nil, nil))

  /// Creates a service that tells `stores` to trim when the control group's memory runs high.
  ///
  /// - Parameters:
  ///   - stores: The stores to trim, in the order they are told.
  ///   - configuration: The thresholds, the interval and where the control group's files are.
  ///   - logger: Where the level's rises and falls are logged.
  ///   - metricsFactory: Where the count of events goes; by default the one that
  ///     `MetricsSystem` was bootstrapped with.
  public init(
    stores: [any MemoryPressureResponder], configuration: Configuration = Configuration(),
    logger: Logger = Logger(label: "MemoryStoreServer"),
    metricsFactory: any MetricsFactory = MetricsSystem.factory
  ) {
    self.stores = stores
    self.configuration = configuration
    self.logger = logger
    events = Dictionary(
      uniqueKeysWithValues: [MemoryPressureLevel.warning, .critical].map { level in
        (
          level,
          Counter(
            label: "memorystore_memory_pressure_events_total",
            dimensions: [("level", "\(level)")], factory: metricsFactory)
        )
      })
  }

  /// Checks the usage every ``Configuration/interval`` until graceful shutdown or
  /// cancellation. When there is no limit to watch, it says so and waits for the shutdown
  /// (a service that returns early would end its group).
  public func run() async throws {
    guard let usage = usage() else {
      logger.notice(
        "no memory limit found for this process's control group: not watching memory pressure",
        metadata: ["directory": "\(configuration.cgroupDirectory.path)"])
      try? await gracefulShutdown()
      return
    }
    logger.info(
      "watching memory pressure",
      metadata: ["used": "\(usage.used)", "limit": "\(usage.limit)"])
    try? await cancelWhenGracefulShutdown { [self] in
      while true {
        check()
        try await Task.sleep(for: configuration.interval)
      }
    }
  }

  /// Reads the usage now and tells the stores to trim if it is high: what ``run()`` does on
  /// its interval.
  ///
  /// - Returns: The level the stores were told of, or `nil` if they were told nothing.
  @discardableResult
  public func check() -> MemoryPressureLevel? {
    guard let usage = usage() else { return nil }
    let level: MemoryPressureLevel? =
      usage.fraction >= configuration.criticalFraction
      ? .critical : usage.fraction >= configuration.warningFraction ? .warning : nil
    let now = ContinuousClock.now
    let (previous, tells) = state.withLock { state in
      let previous = state.level
      state.level = level
      guard let level else { return (previous, false) }
      let rises = previous.map { $0 == .warning && level == .critical } ?? true
      let repeats = state.toldAt.map { now - $0 >= configuration.repeatInterval } ?? true
      guard rises || repeats else { return (previous, false) }
      state.toldAt = now
      return (previous, true)
    }
    if previous != level {
      logger.notice(
        "memory pressure \(level.map { "\($0)" } ?? "over")",
        metadata: [
          "used": "\(usage.used)", "limit": "\(usage.limit)",
          "fraction": "\((usage.fraction * 1000).rounded() / 1000)",
        ])
    }
    guard tells, let level else { return nil }
    events[level]?.increment()
    for store in stores { store.handleMemoryPressure(level) }
    return level
  }

  /// The control group's usage and limit, or `nil` without a limit or without the files.
  public func usage() -> Usage? {
    let directory = configuration.cgroupDirectory
    func number(_ path: String) -> Int? {
      guard
        let text = try? String(contentsOf: directory.appending(path: path), encoding: .utf8)
      else { return nil }
      return Int(text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    // A limit this high is no limit (cgroup v1 writes one near Int64.max; v2 writes "max").
    func isLimit(_ value: Int?) -> Int? { value.flatMap { $0 > 0 && $0 < 1 << 60 ? $0 : nil } }
    if let used = number("memory.current"),
      let limit = isLimit(number("memory.high")) ?? isLimit(number("memory.max"))
    {
      return Usage(used: used, limit: limit)
    }
    if let used = number("memory/memory.usage_in_bytes"),
      let limit = isLimit(number("memory/memory.limit_in_bytes"))
    {
      return Usage(used: used, limit: limit)
    }
    return nil
  }
}
