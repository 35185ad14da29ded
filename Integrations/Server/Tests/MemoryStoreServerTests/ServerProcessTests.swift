import Foundation
import Testing

@testable import MemoryStoreServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The `KeyValueServer` example run as a child process, written to over HTTP on loopback,
/// then stopped by a signal.
@Suite(.serialized, .timeLimit(.minutes(3))) struct ServerProcessTests {
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
      let underWay = await eventually(within: .seconds(60)) {
        acknowledged.withLock { $0.count } >= 400
      }
      signalSent = .now
      server.signal(SIGTERM)
      let status = await server.waitForExit(within: .seconds(15))
      let exited = ContinuousClock.now
      try #require(underWay, "400 writes acknowledged before the signal")
      #expect(status == 0, "the server exits cleanly, not with \(String(describing: status))")
      try await group.waitForAll()
      return exited
    }
    let shutdown = exitTime - signalSent
    #expect(shutdown < .seconds(5), "within the grace period")
    #expect(await server.stdout.waitForEnd(within: .seconds(10)))
    #expect(server.stdout.lines.last == "stopped")

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

  @Test func sigkillLeavesTheLastSavedSnapshotWholeRoundAfterRound() async throws {
    let directory = try temporaryDirectory()
    let snapshot = directory.appending(path: "kv.snapshot")
    // Values of 16 KiB: a save of a few hundred takes long enough for a kill to land in one.
    let filler = String(repeating: "x", count: 16 << 10)
    var saved: [String: String] = [:]
    for round in 0..<4 {
      let server = try ServerProcess(directory: directory, saveInterval: "0.02", gracePeriod: "5")
      let client = HTTPClient(port: try await server.port())
      // The server starts from the last snapshot: whole, and with what the last save held.
      let (status, count) = try await client.get("entries")
      #expect(status == 200)
      #expect((Int(count) ?? -1) >= saved.count, "round \(round) restored \(count) entries")

      var written: [String: String] = [:]
      for index in 0..<50 {
        let (key, value) = ("r\(round)-\(index)", "\(index) \(filler)")
        #expect(try await client.put(key, value) == 204)
        written[key] = value
      }
      // A periodic save holds them.
      try #require(
        await eventually {
          guard let onDisk = try? snapshotContents(snapshot) else { return false }
          return written.allSatisfy { onDisk[$0.key] == $0.value }
        })
      saved.merge(written) { $1 }
      // More writes while saves run, then the process dies at once.
      let later = Shared(0)
      let writes = Task {
        var index = 0
        while (try? await client.put("r\(round)-later-\(index)", "\(index) \(filler)")) == 204 {
          index += 1
          later.withLock { $0 = index }
        }
      }
      try #require(await eventually { later.withLock { $0 } >= 20 })
      server.signal(SIGKILL)
      _ = await server.waitForExit(within: .seconds(15))
      await writes.value

      // The file is a whole snapshot (it loads) holding at least what the last save we saw held.
      let onDisk = try snapshotContents(snapshot)
      #expect(saved.allSatisfy { onDisk[$0.key] == $0.value })
      #expect(onDisk.keys.allSatisfy { $0.hasPrefix("r") })
    }
    // The next start removes what an interrupted save left behind.
    let server = try ServerProcess(directory: directory, saveInterval: "30", gracePeriod: "5")
    _ = try await server.port()
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
      .filter { $0 != "kv.snapshot" && $0 != ".kv.snapshot.lock" }
    #expect(leftovers.isEmpty, "\(leftovers)")
    server.signal(SIGTERM)
    #expect(await server.waitForExit(within: .seconds(15)) == 0)
    print("SIGKILL: 4 rounds, \(saved.count) entries saved before the kills, all on disk")
  }

  @Test func aLastSaveThatFailsEndsTheServerWithAnError() async throws {
    let directory = try temporaryDirectory().appending(path: "data", directoryHint: .isDirectory)
    let server = try ServerProcess(directory: directory, saveInterval: "0", gracePeriod: "5")
    let client = HTTPClient(port: try await server.port())
    #expect(try await client.put("greeting", "hello") == 204)
    // The snapshot's directory becomes a file: the last save cannot write there.
    try FileManager.default.removeItem(at: directory)
    try Data("not a directory".utf8).write(to: directory)
    server.signal(SIGTERM)
    #expect(await server.waitForExit(within: .seconds(15)) == 1, "exit status 1")
    #expect(await server.stderr.waitForEnd(within: .seconds(10)))
    let errors = server.stderr.lines
    #expect(errors.contains { $0.contains("final save failed") }, "\(errors)")
    #expect(errors.contains { $0.contains("stopped with an error") }, "\(errors)")
    #expect(!server.stdout.lines.contains("stopped"))
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
  /// What it prints on its standard output, and on its standard error (its logs).
  let stdout = ServerOutput()
  let stderr = ServerOutput()

  /// Starts the server on `directory`, with the given intervals in seconds.
  init(directory: URL, saveInterval: String, gracePeriod: String) throws {
    let process = Process()
    process.executableURL = try Self.executable()
    process.arguments = [
      "--port", "0", "--directory", directory.path, "--save-interval", saveInterval,
      "--grace-period", gracePeriod, "--log-level", "warning",
    ]
    process.standardOutput = stdout.pipe
    process.standardError = stderr.pipe
    self.process = process
    stdout.startReading()
    stderr.startReading()
    try process.run()
  }

  deinit {
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
  }

  /// The port from the server's `listening on` line.
  ///
  /// - Throws: If the server ends, or says nothing within `limit`.
  func port(within limit: Duration = .seconds(60)) async throws -> Int {
    let prefix = "listening on "
    let line = await stdout.firstLine(within: limit) { $0.hasPrefix(prefix) }
    guard let port = line?.split(separator: ":").last.flatMap({ Int($0) }) else {
      throw ServerFailed(
        description: "the server did not listen: \(stdout.lines) \(stderr.lines.suffix(20))")
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

/// The lines a child process prints on one of its outputs, read on a thread of their own
/// (reads block) until the output closes.
final class ServerOutput: Sendable {
  let pipe = Pipe()
  private let state = Shared<(lines: [String], isEnded: Bool)>(([], false))

  /// Everything printed so far.
  var lines: [String] { state.withLock { $0.lines } }

  func startReading() {
    let reader = pipe.fileHandleForReading
    Thread.detachNewThread { [state] in
      var pending = Data()
      while case let chunk = reader.availableData, !chunk.isEmpty {
        pending.append(chunk)
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
          let line = String(decoding: pending[..<newline], as: UTF8.self)
          pending.removeSubrange(...newline)
          state.withLock { $0.lines.append(line) }
        }
      }
      state.withLock { $0.isEnded = true }
    }
  }

  /// The first line that satisfies `predicate`, waiting for it up to `limit`; `nil` if the
  /// output ends, or the time runs out, without one.
  func firstLine(within limit: Duration, where predicate: (String) -> Bool) async -> String? {
    var found: String?
    _ = await eventually(within: limit) {
      let (lines, isEnded) = state.withLock { ($0.lines, $0.isEnded) }
      found = lines.first(where: predicate)
      return found != nil || isEnded
    }
    return found
  }

  /// Waits until the output has ended (the process closed it), up to `limit`; returns whether
  /// it has.
  func waitForEnd(within limit: Duration) async -> Bool {
    await eventually(within: limit) { state.withLock { $0.isEnded } }
  }
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
