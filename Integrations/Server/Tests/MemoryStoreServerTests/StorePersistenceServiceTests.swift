import Foundation
import InMemoryLogging
import Logging
import MemoryStoreKit
import MetricsTestKit
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@testable import MemoryStoreServer

@Suite(.timeLimit(.minutes(1))) struct StorePersistenceServiceTests {
  typealias Store = MemoryStore<String, String>

  /// A store named `name`, a service for it and the snapshot at `url`, with recorded logs and
  /// metrics.
  struct Fixture {
    let store: Store
    let service: StorePersistenceService<String, String>
    let metrics = TestMetrics()
    let logs: InMemoryLogHandler

    init(
      name: String = "sessions", url: URL, scheduler: some StoreScheduler = .dispatch,
      configuration: StorePersistenceService<String, String>.Configuration = .init(
        saveInterval: .zero)
    ) throws {
      store = Store(name: name, scheduler: scheduler)
      let (logger, handler) = recordingLogger()
      logs = handler
      service = StorePersistenceService(
        manager: try PersistenceManager(store: store, fileURL: url, coder: .binary),
        configuration: configuration, logger: logger, metricsFactory: metrics)
    }
  }

  @Test func itLoadsAtStartAndSavesOnceMoreAtGracefulShutdown() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    let earlier = Store()
    earlier.addEntries(["alice": "token-a", "bob": "token-b"])
    try PersistenceManager(store: earlier, fileURL: url, coder: .binary).save()

    let fixture = try Fixture(url: url)
    try await testGracefulShutdown { trigger in
      try await withThrowingTaskGroup { group in
        group.addTask { try await fixture.service.run() }
        #expect(try await fixture.service.waitUntilLoaded() == 2)
        #expect(fixture.store["alice"] == "token-a")
        // Written after the load, removed, replaced: the last save holds the store as it is.
        fixture.store["carol"] = "token-c"
        fixture.store["bob"] = nil
        fixture.store["alice"] = "token-a2"
        trigger.triggerGracefulShutdown()
        try await group.waitForAll()
      }
    }
    #expect(try snapshotContents(url) == ["alice": "token-a2", "carol": "token-c"])
    #expect(
      fixture.metrics.timerValues("memorystore_load_duration_seconds", store: "sessions").count == 1
    )
    #expect(
      fixture.metrics.timerValues("memorystore_save_duration_seconds", store: "sessions").count == 1
    )
    #expect(fixture.metrics.total("memorystore_saves_total", store: "sessions") == 1)
    #expect(fixture.metrics.total("memorystore_save_failures_total", store: "sessions") == 0)
    #expect(
      fixture.metrics.gauge("memorystore_last_save_timestamp_seconds", store: "sessions") != nil)
    #expect(fixture.logs.entries(at: .info, containing: "loaded").count == 1)
    #expect(fixture.logs.entries(at: .info, containing: "saved the store at shutdown").count == 1)
  }

  @Test func cancellationSavesToo() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    let fixture = try Fixture(url: url)
    let run = Task { try await fixture.service.run() }
    #expect(try await fixture.service.waitUntilLoaded() == 0)
    fixture.store["dave"] = "token-d"
    run.cancel()
    try await run.value
    #expect(try snapshotContents(url) == ["dave": "token-d"])
  }

  @Test func aFinalSaveThatFailsIsThrownLoggedAndCounted() async throws {
    let directory = try temporaryDirectory().appending(path: "data", directoryHint: .isDirectory)
    let url = directory.appending(path: "sessions.snapshot")
    let fixture = try Fixture(url: url)
    try await testGracefulShutdown { trigger in
      let run = Task { try await fixture.service.run() }
      _ = try await fixture.service.waitUntilLoaded()
      fixture.store["erin"] = "token-e"
      // The snapshot's directory becomes a file: no save can write there.
      try FileManager.default.removeItem(at: directory)
      try Data("not a directory".utf8).write(to: directory)
      trigger.triggerGracefulShutdown()
      let error = await #expect(throws: PersistenceError.self) { try await run.value }
      #expect(error?.kind == .writeFailed)
    }
    #expect(fixture.store["erin"] == "token-e", "the store in memory is left as it was")
    #expect(fixture.metrics.total("memorystore_save_failures_total", store: "sessions") == 1)
    #expect(fixture.metrics.total("memorystore_saves_total", store: "sessions") == 0)
    let logged = fixture.logs.entries(at: .error, containing: "final save failed")
    #expect(logged.count == 1)
    #expect(logged.first?.metadata["memorystore.file"] == "\(url.path)")
    let message = logged.first?.metadata["error"].map { "\($0)" } ?? ""
    #expect(message.contains(url.lastPathComponent))
  }

  @Test(arguments: [true, false])
  func aSnapshotThatFailsToLoadIsLoggedThenTheServiceGoesOnOrStops(goesOn: Bool) async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    try Data("this is not a snapshot".utf8).write(to: url)
    let fixture = try Fixture(
      url: url,
      configuration: .init(saveInterval: .zero, loadFailure: goesOn ? .continue : .stop))
    try await testGracefulShutdown { trigger in
      let run = Task { try await fixture.service.run() }
      if goesOn {
        #expect(try await fixture.service.waitUntilLoaded() == 0)
        fixture.store["frank"] = "token-f"
        trigger.triggerGracefulShutdown()
        try await run.value
      } else {
        await #expect(throws: PersistenceError.self) { try await fixture.service.waitUntilLoaded() }
        await #expect(throws: PersistenceError.self) { try await run.value }
      }
    }
    #expect(fixture.metrics.total("memorystore_load_failures_total", store: "sessions") == 1)
    let logged = fixture.logs.entries(at: .error, containing: "failed to load")
    #expect(logged.count == 1)
    #expect(logged.first?.metadata["memorystore.file"] == "\(url.path)")
    // The rejected file was moved aside, not lost; going on, the last save wrote a new one.
    let names = try FileManager.default.contentsOfDirectory(
      atPath: url.deletingLastPathComponent().path)
    #expect(names.contains { $0.hasPrefix("sessions.snapshot.corrupt-") })
    if goesOn {
      #expect(try snapshotContents(url) == ["frank": "token-f"])
    }
  }

  @Test func periodicSavesRunOnTheIntervalAndAreReported() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    let scheduler = ManualScheduler()
    let fixture = try Fixture(
      url: url, scheduler: scheduler, configuration: .init(saveInterval: .seconds(30)))
    try await testGracefulShutdown { trigger in
      let run = Task { try await fixture.service.run() }
      _ = try await fixture.service.waitUntilLoaded()
      // The service sets the manager's interval once it has loaded; it is set when the timer is.
      #expect(await eventually { scheduler.pendingCount == 1 })
      fixture.store["gina"] = "token-g"
      scheduler.advance(by: .seconds(30))
      #expect(
        await eventually {
          fixture.metrics.total("memorystore_saves_total", store: "sessions") == 1
        })
      #expect(try snapshotContents(url) == ["gina": "token-g"])
      trigger.triggerGracefulShutdown()
      try await run.value
    }
    #expect(fixture.metrics.total("memorystore_saves_total", store: "sessions") == 2)
    #expect(fixture.service.manager.saveInterval == .zero, "auto-save stops with the service")
  }

  @Test func runningTwiceIsRefused() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    let fixture = try Fixture(url: url)
    let run = Task { try await fixture.service.run() }
    _ = try await fixture.service.waitUntilLoaded()
    let error = await #expect(throws: StoreServiceError.self) { try await fixture.service.run() }
    #expect(error?.kind == .alreadyRun)
    run.cancel()
    try await run.value
  }

  @Test func waitingForTheLoadEndsWhenTheWaiterIsCancelled() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    let fixture = try Fixture(url: url)
    let waiter = Task { try await fixture.service.waitUntilLoaded() }
    waiter.cancel()
    await #expect(throws: CancellationError.self) { try await waiter.value }
  }

  @Test func underStopARejectedSnapshotAsideKeepsTheServiceFromStartingAgain() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    try Data("this is not a snapshot".utf8).write(to: url)
    let configuration = StorePersistenceService<String, String>.Configuration(
      saveInterval: .zero, loadFailure: .stop)
    let first = try Fixture(url: url, configuration: configuration)
    await #expect(throws: PersistenceError.self) { try await first.service.run() }
    // A restart finds no snapshot, but the rejected one beside it: it does not start empty.
    let second = try Fixture(url: url, configuration: configuration)
    let error = await #expect(throws: StoreServiceError.self) { try await second.service.run() }
    #expect(error?.kind == .rejectedSnapshotAside)
    #expect(error?.description.contains("sessions.snapshot.corrupt-") == true)
    await #expect(throws: StoreServiceError.self) { try await second.service.waitUntilLoaded() }
    #expect(second.logs.entries(at: .error, containing: "rejected snapshot").count == 1)
    #expect(!FileManager.default.fileExists(atPath: url.path), "nothing was saved over it")
  }

  @Test func aSnapshotThatCannotBeReadStopsTheServiceEvenUnderContinue() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    // A directory where the snapshot should be: it cannot be read, nor moved aside.
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    let fixture = try Fixture(url: url, configuration: .init(loadFailure: .continue))
    let error = await #expect(throws: PersistenceError.self) { try await fixture.service.run() }
    #expect(error?.kind == .readFailed)
    #expect(fixture.logs.entries(at: .error, containing: "failed to load").count == 1)
    #expect(fixture.metrics.total("memorystore_load_failures_total", store: "sessions") == 1)
  }

  @Test func inAServiceGroupTheLastSaveFollowsTheWritersShutdown() async throws {
    let url = try temporaryDirectory().appending(path: "sessions.snapshot")
    let fixture = try Fixture(url: url)
    /// Writes while it runs, and once more while it shuts down: as a server answers the
    /// requests it has accepted.
    struct Writer: Service {
      let store: MemoryStore<String, String>
      let persistence: StorePersistenceService<String, String>
      func run() async throws {
        _ = try await persistence.waitUntilLoaded()
        store["while running"] = "1"
        try? await gracefulShutdown()
        store["while shutting down"] = "2"
      }
    }
    let group = ServiceGroup(
      services: [fixture.service, Writer(store: fixture.store, persistence: fixture.service)],
      logger: Logger(label: "test"))
    try await withThrowingTaskGroup { tasks in
      tasks.addTask { try await group.run() }
      _ = try await fixture.service.waitUntilLoaded()
      #expect(await eventually { fixture.store["while running"] != nil })
      await group.triggerGracefulShutdown()
      try await tasks.waitForAll()
    }
    #expect(try snapshotContents(url) == ["while running": "1", "while shutting down": "2"])
  }

  @Test func aWaiterCancelledWhileWaitingGetsCancellationErrorAndTheOthersTheLoad() async throws {
    let readiness = Readiness()
    let cancelled = Task { try await readiness.wait() }
    let kept = Task { try await readiness.wait() }
    #expect(await eventually { readiness.waiterCount == 2 })
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(readiness.waiterCount == 1)
    readiness.resolve(.success(7))
    #expect(try await kept.value.get() == 7)
    // Later waiters get it at once; a second resolution changes nothing.
    readiness.resolve(.success(8))
    #expect(try await readiness.wait().get() == 7)
  }
}
