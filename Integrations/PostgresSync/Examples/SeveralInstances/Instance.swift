import Logging
import MemoryStoreKit
import MemoryStorePostgres

/// One instance of the flag service: a store of its own, and the sync that keeps it coherent
/// with the other instances' stores through the database, with connections of its own (a pool
/// for commits and reads, one connection that listens to the channel).
final class Instance: Sendable {
  /// `instance 1`, `a`, …: for the narration and the errors.
  let name: String
  /// The flags this instance serves from memory.
  let store: MemoryStore<String, FeatureFlag>
  /// What publishes the store's local writes and drops what the other instances change.
  let sync: PostgresSync<String, FeatureFlag>
  /// The sync's events, in order.
  let events: EventLog
  private let running: Task<Void, any Error>

  /// Creates the store and its sync, and starts running the sync.
  ///
  /// - Throws: ``MemoryStorePostgres/PostgresSyncError`` for an invalid channel or table name.
  init(
    name: String, endpoint: PostgresEndpoint,
    configuration: PostgresSync<String, FeatureFlag>.Configuration, logger: Logger
  ) throws {
    self.name = name
    store = MemoryStore(name: name)
    let sync = try PostgresSync(
      store: store, endpoint: endpoint, configuration: configuration, logger: logger)
    self.sync = sync
    events = EventLog(sync.events)
    running = Task { try await sync.run() }
  }

  /// Waits until the sync listens to the channel, after the event at position `start`.
  ///
  /// - Throws: ``TimedOut`` after `limit`.
  func waitUntilListening(after start: Int = 0, within limit: Duration) async throws {
    try await events.first(after: start, within: limit, "\(name) listening to the channel") {
      $0 == .listening
    }
  }

  /// Waits until the store no longer holds `key`, checking every 0.1 ms; returns when it
  /// noticed.
  ///
  /// - Throws: ``TimedOut`` after `limit`.
  func waitUntilDropped(_ key: String, within limit: Duration) async throws
    -> ContinuousClock.Instant
  {
    try await poll(within: limit, every: .microseconds(100), "\(name) dropping \(key)") {
      store.contains(key) ? nil : ContinuousClock.now
    }
  }

  /// Waits until the sync has received `count` messages of the other instances in all, and
  /// acted on them; returns when it noticed.
  ///
  /// - Throws: ``TimedOut`` after `limit`.
  @discardableResult
  func waitForMessages(_ count: UInt64, within limit: Duration) async throws
    -> ContinuousClock.Instant
  {
    try await poll(within: limit, every: .microseconds(100), "\(name) receiving \(count) messages")
    {
      sync.statistics.messagesReceived >= count ? ContinuousClock.now : nil
    }
  }

  /// Stops the sync: it commits what is pending and closes its connections. Returns whether
  /// it stopped within `limit`.
  func stop(within limit: Duration) async -> Bool {
    running.cancel()
    return await finished(running, within: limit)
  }
}
