import Foundation
import Logging
import MemoryStoreKit
import MemoryStoreServer
import ServiceLifecycle
import Testing
import UnixSignals

/// The README's example, compiled as it is written there and run until it is shut down.
@Suite struct ReadmeSnippetTests {
  struct Session: Codable, Sendable, Equatable {
    var user: String
  }

  /// Stands for the HTTP server of the README.
  struct Server: Service {
    func run() async throws { try? await gracefulShutdown() }
  }

  @Test func theReadmesServiceGroupRunsAndSavesAtShutdown() async throws {
    let snapshotURL = try temporaryDirectory().appending(path: "sessions.snapshot")
    let logger = Logger(label: "readme")
    let server = Server()

    let sessions = MemoryStore<String, Session>(name: "sessions")
    let persistence = StorePersistenceService(
      manager: try PersistenceManager(store: sessions, fileURL: snapshotURL, coder: .binary),
      configuration: .init(saveInterval: .seconds(30)),
      logger: logger)
    let metrics = StoreMetricsService(store: sessions, interval: .seconds(10), logger: logger)

    // A group stops its services in reverse order: the server first, then the last save.
    let group = ServiceGroup(
      services: [persistence, metrics, server],
      gracefulShutdownSignals: [.sigterm, .sigint],
      logger: logger)

    try await withThrowingTaskGroup { tasks in
      tasks.addTask { try await group.run() }
      _ = try await persistence.waitUntilLoaded()
      sessions["s1"] = Session(user: "ada")
      await group.triggerGracefulShutdown()
      try await tasks.waitForAll()
    }
    let restored = MemoryStore<String, Session>()
    _ = try PersistenceManager(store: restored, fileURL: snapshotURL, coder: .binary).load()
    #expect(restored["s1"] == Session(user: "ada"))
  }
}
