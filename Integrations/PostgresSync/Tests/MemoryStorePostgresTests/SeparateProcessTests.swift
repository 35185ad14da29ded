import Foundation
import MemoryStorePostgres
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The `SeveralInstances` example run as separate processes, one instance each
/// (`SeveralInstances --instance …`), against the test database: what one process writes, the
/// others read through the table; what it changes, removes or clears, they drop and read again.
@Suite("PostgresSync: separate processes") struct SeparateProcessTests {
  // The limit includes waiting for the tests that have the server to themselves.
  @Test(.timeLimit(.minutes(5)))
  func writesRemovalsAndClearsConvergeAcrossProcesses() async throws {
    try await TestDatabase.withServer { database in
      try await withInstanceProcesses(["a", "b", "c"], database: database) { processes in
        let (a, b, c) = (processes[0], processes[1], processes[2])
        let flag = "checkout.new-flow"

        // A write in A reaches B and C through the table, and they keep it. (They wait for
        // its announcement first: a read that the announcement overtakes is not kept.)
        try await a.send("SET \(flag) on 10%", expecting: "OK")
        try await a.send("PUBLISH", expecting: "PUBLISHED")
        try await b.send("WAIT-RECEIVED 1", expecting: "RECEIVED 1")
        try await c.send("WAIT-RECEIVED 1", expecting: "RECEIVED 1")
        try await b.send("GET \(flag)", expecting: "VALUE \(flag) on 10%")
        try await c.send("GET \(flag)", expecting: "VALUE \(flag) on 10%")
        try await b.send("LOCAL \(flag)", expecting: "LOCAL \(flag) on 10%")

        // A later change in A: B and C drop their copies, and read the new value.
        try await a.send("SET \(flag) on 50%", expecting: "OK")
        try await a.send("PUBLISH", expecting: "PUBLISHED")
        for reader in [b, c] {
          try await reader.send("WAIT-DROPPED \(flag)", expectingPrefix: "DROPPED \(flag) ")
          try await reader.send("GET \(flag)", expecting: "VALUE \(flag) on 50%")
        }

        // A removal in C: A and B drop the key, and the table no longer has it.
        try await c.send("REMOVE \(flag)", expecting: "OK")
        try await c.send("PUBLISH", expecting: "PUBLISHED")
        for reader in [a, b] {
          try await reader.send("WAIT-DROPPED \(flag)", expectingPrefix: "DROPPED \(flag) ")
          try await reader.send("GET \(flag)", expecting: "VALUE \(flag) nil")
        }
        try await c.send("GET \(flag)", expecting: "VALUE \(flag) nil")

        // A clear in B: A drops its own committed writes, C what it read; the table is empty.
        try await a.send("SET search.semantic on 100%", expecting: "OK")
        try await a.send("SET banner.winter-sale off", expecting: "OK")
        try await a.send("PUBLISH", expecting: "PUBLISHED")
        try await c.send("GET search.semantic", expecting: "VALUE search.semantic on 100%")
        try await c.send("GET banner.winter-sale", expecting: "VALUE banner.winter-sale off")
        try await b.send("CLEAR", expecting: "OK")
        try await b.send("PUBLISH", expecting: "PUBLISHED")
        for reader in [a, c] {
          try await reader.send("WAIT-EMPTY", expecting: "EMPTY")
          try await reader.send("GET search.semantic", expecting: "VALUE search.semantic nil")
          try await reader.send("GET banner.winter-sale", expecting: "VALUE banner.winter-sale nil")
        }

        // Writes in two processes after the clear: each reads the other's.
        try await a.send("SET search.semantic on 25%", expecting: "OK")
        try await c.send("SET banner.winter-sale on 100%", expecting: "OK")
        try await a.send("PUBLISH", expecting: "PUBLISHED")
        try await c.send("PUBLISH", expecting: "PUBLISHED")
        for reader in [a, b, c] {
          try await reader.send("GET search.semantic", expecting: "VALUE search.semantic on 25%")
          try await reader.send(
            "GET banner.winter-sale", expecting: "VALUE banner.winter-sale on 100%")
        }
      }
    }
  }
}

/// Runs `body` with one `SeveralInstances --instance` process per name, sharing a channel and
/// a table of their own, each READY (listening); then asks each to quit and checks that it
/// exits with 0. A process still running when `body` throws, or after its bounded wait to
/// quit, is killed.
func withInstanceProcesses(
  _ names: [String], database: TestDatabase,
  _ body: ([InstanceProcess]) async throws -> Void
) async throws {
  // A write to a child's stdin after it died fails with EPIPE instead of killing the runner.
  signal(SIGPIPE, SIG_IGN)
  let executable = try InstanceProcess.executable()
  let channel = uniqueName("processes")
  var processes: [InstanceProcess] = []
  do {
    for name in names {
      processes.append(
        try InstanceProcess(
          name: name, executable: executable, channel: channel,
          url: database.url + "?sslmode=disable"))
    }
    for process in processes {
      try await process.expectLine("READY", within: .seconds(60))
    }
    try await body(processes)
  } catch {
    for process in processes { process.kill() }
    for process in processes { await process.waitForExit(within: .seconds(10)) }
    throw error
  }
  for process in processes {
    let status = await process.quit()
    #expect(status == 0, "\(process.name) exited with \(status.map(String.init) ?? "no status")")
  }
}

/// A `SeveralInstances --instance` child process, driven through its stdin and stdout: a
/// command a line, an answer a line. Its stderr is the test's.
final class InstanceProcess {
  /// The instance's name, in its command line and in failures.
  let name: String
  private let process: Process
  private let input: FileHandle
  private let output: LineReader

  /// Starts `executable --instance name --channel channel --database-url url`.
  init(name: String, executable: URL, channel: String, url: String) throws {
    self.name = name
    process = Process()
    process.executableURL = executable
    process.arguments = ["--instance", name, "--channel", channel, "--database-url", url]
    let stdin = Pipe()
    let stdout = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    try process.run()
    input = stdin.fileHandleForWriting
    output = LineReader(stdout.fileHandleForReading)
  }

  /// Sends `command` and returns the answer.
  ///
  /// - Throws: `WaitTimedOut` if none comes within `limit`; an error if the process ended.
  @discardableResult
  func send(_ command: String, within limit: Duration = .seconds(30)) async throws -> String {
    try input.write(contentsOf: Data((command + "\n").utf8))
    return try await output.nextLine(within: limit, "\(name)'s answer to \(command)")
  }

  /// Sends `command` and expects `expected` as the answer.
  func send(
    _ command: String, expecting expected: String, within limit: Duration = .seconds(30),
    sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    let answer = try await send(command, within: limit)
    #expect(answer == expected, "\(name): \(command)", sourceLocation: sourceLocation)
  }

  /// Sends `command` and expects an answer that starts with `prefix`.
  func send(
    _ command: String, expectingPrefix prefix: String, within limit: Duration = .seconds(30),
    sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    let answer = try await send(command, within: limit)
    #expect(answer.hasPrefix(prefix), "\(name): \(command)", sourceLocation: sourceLocation)
  }

  /// Waits for the next line and expects it to be `expected`.
  func expectLine(
    _ expected: String, within limit: Duration, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws {
    let line = try await output.nextLine(within: limit, "\(name) saying \(expected)")
    try #require(line == expected, "\(name)", sourceLocation: sourceLocation)
  }

  /// Asks the process to quit, and waits (bounded) for its `BYE` and its exit; kills it if it
  /// does not. Returns its exit status, `nil` if it had to be killed.
  func quit() async -> Int32? {
    do {
      try await send("QUIT", expecting: "BYE", within: .seconds(15))
      await waitForExit(within: .seconds(10))
    } catch {
      Issue.record("\(name) did not quit: \(error)")
    }
    guard !process.isRunning else {
      kill()
      await waitForExit(within: .seconds(10))
      return nil
    }
    return process.terminationStatus
  }

  /// Kills the process (SIGKILL), if it runs.
  func kill() {
    guard process.isRunning else { return }
    #if canImport(Glibc)
      _ = Glibc.kill(process.processIdentifier, SIGKILL)
    #elseif canImport(Darwin)
      _ = Darwin.kill(process.processIdentifier, SIGKILL)
    #endif
  }

  /// Waits until the process has exited, for up to `limit`.
  func waitForExit(within limit: Duration) async {
    let deadline = ContinuousClock.now + limit
    while process.isRunning && ContinuousClock.now < deadline {
      if (try? await Task.sleep(for: .milliseconds(10))) == nil {
        usleep(10_000)  // Cancelled (the test ran out of time): still wait, without spinning.
      }
    }
  }

  /// The `SeveralInstances` executable that `swift build --build-tests` puts next to the test
  /// binary (`.build/debug/`; on macOS, beside the `.xctest` bundle).
  ///
  /// - Throws: If it is not there.
  static func executable() throws -> URL {
    var directories = [
      URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        .deletingLastPathComponent(),
      Bundle.main.bundleURL,
    ]
    directories += Bundle.allBundles.map(\.bundleURL).filter { $0.pathExtension == "xctest" }
    for start in directories {
      var directory = start
      // From .xctest/Contents/MacOS up to the build directory, at most.
      for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("SeveralInstances")
        if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        directory.deleteLastPathComponent()
      }
    }
    throw TestDatabaseError(
      "no SeveralInstances executable next to the test binary (looked from "
        + "\(directories.map(\.path))): build it with swift build --build-tests")
  }
}

/// The lines a child prints, read on a thread of their own (reads block) until its stdout
/// closes.
private final class LineReader: Sendable {
  private struct State {
    var lines: [String] = []
    var partial: [UInt8] = []
    var isClosed = false
  }

  private let state = Locked(State())

  /// Starts reading `handle` until its end.
  init(_ handle: FileHandle) {
    Thread.detachNewThread { [self] in
      while true {
        let data = handle.availableData
        let isClosed = data.isEmpty
        state.withLock { state in
          for byte in data {
            if byte == UInt8(ascii: "\n") {
              state.lines.append(String(decoding: state.partial, as: UTF8.self))
              state.partial.removeAll()
            } else {
              state.partial.append(byte)
            }
          }
          state.isClosed = isClosed
        }
        if isClosed { return }
      }
    }
  }

  /// Takes the next line, waiting for it for up to `limit`.
  ///
  /// - Throws: `WaitTimedOut` naming `what`, or an error if the output closed first.
  func nextLine(within limit: Duration, _ what: String) async throws -> String {
    let deadline = ContinuousClock.now + limit
    while true {
      let (line, isClosed) = state.withLock { state -> (String?, Bool) in
        state.lines.isEmpty ? (nil, state.isClosed) : (state.lines.removeFirst(), false)
      }
      if let line { return line }
      if isClosed { throw TestDatabaseError("the process ended before \(what)") }
      guard ContinuousClock.now < deadline else { throw WaitTimedOut(what: what) }
      try await Task.sleep(for: .milliseconds(2))
    }
  }
}
