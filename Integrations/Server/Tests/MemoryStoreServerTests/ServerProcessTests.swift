import Foundation
import Synchronization
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The `KeyValueServer` example run as a child process, written to over HTTP on loopback,
/// then stopped by a signal.
@Suite(.serialized, .timeLimit(.minutes(2))) struct ServerProcessTests {
  @Test func sigtermSavesEveryAcknowledgedWriteAndExitsWithinTheGracePeriod() async throws {
    let directory = try temporaryDirectory()
    // No periodic save: what is on disk is what the shutdown saved.
    let server = try ServerProcess(directory: directory, saveInterval: "0", gracePeriod: "5")
    let client = HTTPClient(port: try await server.port())

    // Four writers, each writing its own keys one after another, until a write fails.
    let acknowledged = Shared<[String: String]>([:])
    var signalSent = ContinuousClock.now
    let exitTime = try await withThrowingTaskGroup(of: Void.self) { group in
      for writer in 0..<4 {
        group.addTask {
          var index = 0
          while true {
            let key = "w\(writer)-\(index)"
            let value = "value \(index) of writer \(writer)"
            guard (try? await client.put(key, value)) == 204 else { return }
            acknowledged.withLock { $0[key] = value }
            index += 1
          }
        }
      }
      // SIGTERM once the writers are well under way.
      #expect(await eventually(within: .seconds(60)) { acknowledged.withLock { $0.count } >= 400 })
      signalSent = .now
      server.signal(SIGTERM)
      let status = await server.waitForExit(within: .seconds(15))
      let exited = ContinuousClock.now
      #expect(status == 0, "the server exits cleanly, not with \(String(describing: status))")
      try await group.waitForAll()
      return exited
    }
    let shutdown = exitTime - signalSent
    #expect(shutdown < .seconds(5), "within the grace period")
    #expect(server.output.contains("stopped"))

    let written = acknowledged.withLock { $0 }
    let onDisk = try snapshotContents(directory.appending(path: "kv.snapshot"))
    let missing = written.filter { onDisk[$0.key] != $0.value }
    #expect(missing.isEmpty, "acknowledged but not on disk: \(missing.keys.sorted().prefix(10))")
    // Nothing on disk that a client did not write (unacknowledged writes may be there too).
    #expect(onDisk.allSatisfy { $0.value.hasPrefix("value ") })
    print(
      "SIGTERM: \(written.count) writes acknowledged, \(onDisk.count) entries on disk, "
        + "\(missing.count) acknowledged writes missing, stopped \(shutdown) after the signal")
  }

  @Test func sigkillLeavesTheLastSavedSnapshotWhole() async throws {
    let directory = try temporaryDirectory()
    let snapshot = directory.appending(path: "kv.snapshot")
    let server = try ServerProcess(directory: directory, saveInterval: "0.05", gracePeriod: "5")
    let client = HTTPClient(port: try await server.port())

    var first: [String: String] = [:]
    for index in 0..<50 {
      let (key, value) = ("first-\(index)", "value \(index)")
      #expect(try await client.put(key, value) == 204)
      first[key] = value
    }
    // A periodic save holds them.
    #expect(
      await eventually {
        guard let onDisk = try? snapshotContents(snapshot) else { return false }
        return first.allSatisfy { onDisk[$0.key] == $0.value }
      })
    // More writes, some of them saved perhaps, then the process dies at once.
    let writes = Task {
      var index = 0
      while (try? await client.put("later-\(index)", "value \(index)")) == 204 { index += 1 }
    }
    try await Task.sleep(for: .milliseconds(200))
    server.signal(SIGKILL)
    _ = await server.waitForExit(within: .seconds(15))
    await writes.value

    // The file is a whole snapshot (it loads), with at least what the last save we saw held.
    let onDisk = try snapshotContents(snapshot)
    #expect(first.allSatisfy { onDisk[$0.key] == $0.value })
    #expect(onDisk.keys.allSatisfy { $0.hasPrefix("first-") || $0.hasPrefix("later-") })
    let temporaries = try FileManager.default.contentsOfDirectory(atPath: directory.path)
      .filter { $0 != "kv.snapshot" && $0 != ".kv.snapshot.lock" }
    print("SIGKILL: \(onDisk.count) entries on disk; other files: \(temporaries)")
  }

  @Test func metricsAreServedForPrometheus() async throws {
    let directory = try temporaryDirectory()
    let server = try ServerProcess(directory: directory, saveInterval: "30", gracePeriod: "5")
    let client = HTTPClient(port: try await server.port())
    #expect(try await client.put("greeting", "hello") == 204)
    #expect(try await client.get("entries/greeting") == (200, "hello"))
    #expect(try await client.get("entries/absent").status == 404)
    let (status, body) = try await client.get("metrics")
    #expect(status == 200)
    for line in [
      #"memorystore_hits_total{store="kv"} 1"#,
      #"memorystore_misses_total{store="kv"} 1"#,
      #"memorystore_entries{store="kv"} 1.0"#,
      #"memorystore_load_duration_seconds_count{store="kv"} 1"#,
      #"memorystore_evictions_total{store="kv",reason="expired"} 0"#,
    ] {
      #expect(body.contains(line), "\(line) in\n\(body)")
    }
    server.signal(SIGTERM)
    #expect(await server.waitForExit(within: .seconds(15)) == 0)
  }
}

/// A `KeyValueServer` child process on a free port of loopback.
final class ServerProcess {
  private let process: Process
  private let lines = ServerOutput()

  /// Starts the server on `directory`, with the given intervals in seconds.
  init(directory: URL, saveInterval: String, gracePeriod: String) throws {
    let process = Process()
    process.executableURL = try Self.executable()
    process.arguments = [
      "--port", "0", "--directory", directory.path, "--save-interval", saveInterval,
      "--grace-period", gracePeriod, "--log-level", "warning",
    ]
    let stdout = Pipe()
    process.standardOutput = stdout
    self.process = process
    let reader = stdout.fileHandleForReading
    // Lines read on a thread of their own (reads block) until stdout closes.
    Thread.detachNewThread { [lines] in
      var pending = Data()
      while case let chunk = reader.availableData, !chunk.isEmpty {
        pending.append(chunk)
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
          let line = String(decoding: pending[..<newline], as: UTF8.self)
          pending.removeSubrange(...newline)
          lines.received(line)
        }
      }
      lines.received(nil)
    }
    try process.run()
  }

  deinit {
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
  }

  /// What the server printed so far.
  var output: [String] { lines.all }

  /// The port from the server's `listening on` line, once printed.
  ///
  /// - Throws: If the server ends without printing it.
  func port() async throws -> Int {
    guard let port = await lines.port() else {
      throw ServerFailed(description: "the server stopped before listening: \(output)")
    }
    return port
  }

  /// Sends `signal` to the process.
  func signal(_ signal: Int32) {
    kill(process.processIdentifier, signal)
  }

  /// Waits for the process to end, for up to `limit`; returns its exit status, or `nil` if it
  /// still runs (then it is killed) or was killed by a signal.
  func waitForExit(within limit: Duration) async -> Int32? {
    let deadline = ContinuousClock.now + limit
    while process.isRunning && ContinuousClock.now < deadline {
      try? await Task.sleep(for: .milliseconds(10))
    }
    guard !process.isRunning else {
      signal(SIGKILL)
      process.waitUntilExit()
      return nil
    }
    return process.terminationReason == .exit ? process.terminationStatus : nil
  }

  /// The `KeyValueServer` executable that `swift build --build-tests` puts next to the test
  /// binary (`.build/debug/`; on macOS, beside the `.xctest` bundle).
  static func executable() throws -> URL {
    let starts =
      [URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()]
      + Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" }
    for start in starts {
      var directory = start.deletingLastPathComponent()
      for _ in 0..<4 {
        let candidate = directory.appending(path: "KeyValueServer")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory.deleteLastPathComponent()
      }
    }
    throw ServerFailed(
      description: "no KeyValueServer executable next to the test binary: swift build --build-tests"
    )
  }
}

/// The lines a server printed, and the port of its `listening on` line.
final class ServerOutput: Sendable {
  private struct State {
    var lines: [String] = []
    var isListening = false
    var port: Int?
    var waiters: [CheckedContinuation<Int?, Never>] = []
  }

  private let state = Mutex(State())

  var all: [String] { state.withLock { $0.lines } }

  /// The port, once printed; `nil` if the output ended without it.
  func port() async -> Int? {
    await withCheckedContinuation { continuation in
      let ready = state.withLock { state -> Int?? in
        if state.isListening { return .some(state.port) }
        state.waiters.append(continuation)
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }

  /// Takes the next line, or the end of the output (`nil`).
  func received(_ line: String?) {
    // "listening on http://127.0.0.1:PORT"; the end of the output wakes the waiters too.
    let port = line.flatMap { line in
      line.hasPrefix("listening on ") ? line.split(separator: ":").last.flatMap { Int($0) } : nil
    }
    let waiters = state.withLock { state -> [CheckedContinuation<Int?, Never>] in
      if let line { state.lines.append(line) }
      guard !state.isListening, port != nil || line == nil else { return [] }
      state.isListening = true
      state.port = port
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume(returning: port) }
  }
}

/// A value that concurrent tasks share, behind a lock.
final class Shared<Value: Sendable>: Sendable {
  private let value: Mutex<Value>
  init(_ value: Value) { self.value = Mutex(value) }
  func withLock<R>(_ body: (inout Value) -> R) -> R { value.withLock { body(&$0) } }
}

struct ServerFailed: Error, CustomStringConvertible {
  let description: String
}

/// Requests to the server on loopback, each on a connection of its own.
struct HTTPClient: Sendable {
  let port: Int

  private static let session: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 10
    configuration.httpMaximumConnectionsPerHost = 8
    return URLSession(configuration: configuration)
  }()

  /// `PUT /entries/key` with `value`; returns the status.
  func put(_ key: String, _ value: String) async throws -> Int {
    var request = URLRequest(url: url("entries/\(key)"))
    request.httpMethod = "PUT"
    request.httpBody = Data(value.utf8)
    let (_, response) = try await Self.session.data(for: request)
    return (response as? HTTPURLResponse)?.statusCode ?? 0
  }

  /// `GET /path`; returns the status and the body.
  func get(_ path: String) async throws -> (status: Int, body: String) {
    let (data, response) = try await Self.session.data(from: url(path))
    return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
  }

  private func url(_ path: String) -> URL {
    // Safe: the tests' paths and keys are letters, digits and `-/`, valid in a URL as they are.
    URL(string: "http://127.0.0.1:\(port)/\(path)")!
  }
}
