import Foundation
import InMemoryLogging
import Logging
import MemoryStoreKit
import MemoryStoreServer
import MetricsTestKit
import ServiceLifecycleTestKit
import Testing

@Suite(.timeLimit(.minutes(1))) struct MemoryPressureServiceTests {
  /// A control group's files in a directory of the test's own.
  struct FakeGroup {
    let directory: URL

    init(version2: Bool = true) throws {
      directory = try temporaryDirectory()
      if !version2 {
        try FileManager.default.createDirectory(
          at: directory.appending(path: "memory"), withIntermediateDirectories: true)
      }
    }

    func write(_ name: String, _ value: String) throws {
      try Data((value + "\n").utf8).write(to: directory.appending(path: name))
    }
  }

  func service(
    _ group: FakeGroup, stores: [any MemoryPressureResponder],
    repeatInterval: Duration = .seconds(30)
  ) -> (MemoryPressureService, TestMetrics, InMemoryLogHandler) {
    let metrics = TestMetrics()
    let (logger, logs) = recordingLogger()
    let service = MemoryPressureService(
      stores: stores,
      configuration: .init(repeatInterval: repeatInterval, cgroupDirectory: group.directory),
      logger: logger, metricsFactory: metrics)
    return (service, metrics, logs)
  }

  @Test func aRisingLevelTrimsTheStoresOnceAndAFallIsLogged() throws {
    let group = try FakeGroup()
    try group.write("memory.max", "1000")
    try group.write("memory.current", "500")
    let store = MemoryStore<String, Int>(name: "thumbnails")
    store.countLimit = 100
    for index in 0..<100 { store["k\(index)"] = index }
    let (service, metrics, logs) = service(group, stores: [store])

    #expect(service.usage() == .init(used: 500, limit: 1000))
    #expect(service.check() == nil)
    #expect(store.count == 100)

    try group.write("memory.current", "870")
    #expect(service.check() == .warning)
    #expect(store.count == 50, "trimmed to the policy's warning fraction of the limit")
    #expect(service.check() == nil, "told once while the level stays")
    #expect(
      metrics.counterTotal(
        label: "memorystore_memory_pressure_events_total", dimensions: [("level", "warning")]) == 1)

    try group.write("memory.current", "960")
    #expect(service.check() == .critical, "a rise to critical is told at once")
    #expect(store.isEmpty)

    try group.write("memory.current", "100")
    #expect(service.check() == nil)
    let notices = logs.entries.filter { $0.level == .notice }.map { "\($0.message)" }
    #expect(
      notices == ["memory pressure warning", "memory pressure critical", "memory pressure over"])
  }

  @Test func whileTheLevelStaysUpTheStoresAreToldAgainOnTheRepeatInterval() throws {
    let group = try FakeGroup()
    try group.write("memory.max", "1000")
    try group.write("memory.current", "900")
    let store = MemoryStore<String, Int>(name: "cache")
    let (service, metrics, _) = service(group, stores: [store], repeatInterval: .zero)
    #expect(service.check() == .warning)
    #expect(service.check() == .warning)
    #expect(
      metrics.counterTotal(
        label: "memorystore_memory_pressure_events_total", dimensions: [("level", "warning")]) == 2)
  }

  @Test func memoryHighIsTheLimitWhenItIsSet() throws {
    let group = try FakeGroup()
    try group.write("memory.max", "max")
    try group.write("memory.high", "2000")
    try group.write("memory.current", "1800")
    let (service, _, _) = service(group, stores: [])
    #expect(service.usage() == .init(used: 1800, limit: 2000))
    #expect(service.check() == .warning)
  }

  @Test func cgroupVersion1IsReadToo() throws {
    let group = try FakeGroup(version2: false)
    try group.write("memory/memory.limit_in_bytes", "4096")
    try group.write("memory/memory.usage_in_bytes", "4000")
    let (service, _, _) = service(group, stores: [])
    #expect(service.usage() == .init(used: 4000, limit: 4096))
    #expect(service.check() == .critical)
  }

  @Test func withoutALimitNothingIsWatched() async throws {
    let group = try FakeGroup()
    try group.write("memory.max", "max")
    try group.write("memory.current", "123456")
    let (service, _, logs) = service(group, stores: [])
    #expect(service.usage() == nil)
    #expect(service.check() == nil)
    // run() says so, and waits for the shutdown: returning would end its service group.
    try await testGracefulShutdown { trigger in
      let run = Task { try await service.run() }
      #expect(
        await eventually { !logs.entries(at: .notice, containing: "no memory limit").isEmpty })
      trigger.triggerGracefulShutdown()
      try await run.value
    }
    #expect(logs.entries(at: .notice, containing: "no memory limit").count == 1)
  }
}
