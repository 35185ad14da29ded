import Foundation
import Logging
import MemoryStoreKit
import PostgresNIO
import Testing

@testable import MemoryStorePostgres

/// A test's wait ran out.
struct WaitTimedOut: Error, CustomStringConvertible {
  let what: String
  var description: String { "timed out waiting for \(what)" }
}

/// Every event a sync reported, in order, for tests to wait on (each wait bounded).
final class SyncEventLog: Sendable {
  private let events = Locked<[PostgresSyncEvent]>([])
  private let waiters = Locked<[AsyncSignal]>([])

  init(_ stream: AsyncStream<PostgresSyncEvent>) {
    Task { [self] in
      for await event in stream {
        events.withLock { $0.append(event) }
        for waiter in waiters.withLock({ $0 }) { waiter.signal() }
      }
    }
  }

  var all: [PostgresSyncEvent] { events.withLock { $0 } }
  var count: Int { events.withLock { $0.count } }

  /// The first event from position `start` on that satisfies `predicate`, waiting for it up
  /// to `limit`.
  @discardableResult
  func first(
    from start: Int = 0, within limit: Duration = .seconds(30), _ what: String,
    where predicate: @Sendable (PostgresSyncEvent) -> Bool
  ) async throws -> PostgresSyncEvent {
    let signal = AsyncSignal()
    waiters.withLock { $0.append(signal) }
    defer { waiters.withLock { $0.removeAll { $0 === signal } } }
    let deadline = ContinuousClock.now + limit
    while true {
      if let found = events.withLock({ $0.dropFirst(start).first(where: predicate) }) {
        return found
      }
      guard ContinuousClock.now < deadline else { throw WaitTimedOut(what: what) }
      try? await withTimeout(deadline - .now, orThrow: CancellationError()) {
        await signal.wait()
      }
    }
  }
}

/// Waits until `condition` holds, checking every few milliseconds, up to `limit`.
func eventually(
  within limit: Duration = .seconds(30), _ what: String, _ condition: () -> Bool
) async throws {
  let deadline = ContinuousClock.now + limit
  while !condition() {
    guard ContinuousClock.now < deadline else { throw WaitTimedOut(what: what) }
    try await Task.sleep(for: .milliseconds(2))
  }
}

/// One instance of a store kept coherent through the test database.
struct SyncInstance: Sendable {
  let store: MemoryStore<String, Int>
  let sync: PostgresSync<String, Int>
  let events: SyncEventLog
  let task: Task<Void, any Error>

  /// Waits until the instance listens to its channel and, if it creates a shared table,
  /// until the table is ready (a test that locks the table must not block its creation).
  func waitUntilReady() async throws {
    try await events.first("listening") { $0 == .listening }
    if sync.configuration.table != nil && sync.configuration.createsTable {
      try await events.first("the shared table ready") { $0 == .tableReady }
    }
  }
}

/// A channel and table name of their own for one test.
func uniqueName(_ prefix: String) -> String {
  prefix + "_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
}

/// Runs `body` with `count` instances sharing a channel and a table, each with its own store
/// and connections, all listening with the table ready; stops them afterwards.
func withInstances(
  _ count: Int, database: TestDatabase, table: Bool = true,
  configure: (inout PostgresSync<String, Int>.Configuration) -> Void = { _ in },
  _ body: ([SyncInstance]) async throws -> Void
) async throws {
  let name = uniqueName("sync")
  var configuration = PostgresSync<String, Int>.Configuration(
    channel: name, table: table ? name : nil)
  configuration.keepAliveInterval = .milliseconds(250)
  configure(&configuration)
  let endpoint = try PostgresEndpoint(url: database.url + "?sslmode=disable")
  var instances: [SyncInstance] = []
  for index in 0..<count {
    let store = MemoryStore<String, Int>(name: "instance \(index)")
    var logger = Logger(label: "sync.\(index)")
    logger.logLevel =
      ProcessInfo.processInfo.environment["MEMORYSTORE_SYNC_LOG"].flatMap {
        Logger.Level(rawValue: $0)
      }
      ?? .critical
    let sync = try PostgresSync(
      store: store, endpoint: endpoint, configuration: configuration, logger: logger)
    let events = SyncEventLog(sync.events)
    let task = Task { try await sync.run() }
    instances.append(SyncInstance(store: store, sync: sync, events: events, task: task))
  }
  do {
    for instance in instances { try await instance.waitUntilReady() }
    try await body(instances)
  } catch {
    // The body's failure is the one reported; a stop that fails too is recorded beside it.
    do {
      try await stop(instances)
    } catch let stopError {
      Issue.record(stopError, "after the test failed with \(error)")
    }
    throw error
  }
  try await stop(instances)
}

/// Cancels the instances' syncs and waits for each `run()` to end: within its grace period
/// and a commit's time limit, so a `run()` still running after 30 s fails the test.
private func stop(_ instances: [SyncInstance]) async throws {
  for instance in instances { instance.task.cancel() }
  for instance in instances {
    let task = instance.task
    try await withDeadline(
      .seconds(30),
      orThrow: WaitTimedOut(what: "run() of \(instance.store.name ?? "a store") to end")
    ) { _ = try? await task.value }
  }
}

/// Sends `payload` on `channel` from a connection of the test's own.
func notify(_ channel: String, _ payload: String, database: TestDatabase) async throws {
  try await withDeadline(.seconds(30), orThrow: WaitTimedOut(what: "a NOTIFY on \(channel)")) {
    try await database.withConnection { connection in
      _ = try await connection.query(
        "SELECT pg_notify(\(channel), \(payload))", logger: testLogger
      ).collect()
    }
  }
}

let testLogger = Logger(label: "MemoryStorePostgresTests")
