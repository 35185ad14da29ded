import Dispatch
import Foundation
import MemoryStorePostgres

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The PostgreSQL server of the example: the one `DATABASE_URL` names, or a throw-away one it
/// starts with `Scripts/postgres-test-server` in a temporary directory and stops at the end.
struct DatabaseServer: Sendable, CustomStringConvertible {
  /// The URL the syncs connect with.
  let url: String
  /// The script's directory for this server: only with it can the example crash and restart
  /// the server.
  let directory: String?
  /// Whether the example started the server, and so stops it at the end.
  let isOwned: Bool

  var description: String {
    switch (isOwned, directory) {
    case (true, let directory?): "\(url) (a throw-away server in \(directory))"
    case (false, let directory?): "\(url) (DATABASE_URL, started in \(directory))"
    case (_, nil): "\(url) (DATABASE_URL)"
    }
  }

  /// The server of `DATABASE_URL` (and `MEMORYSTORE_PG_DIR`), or a new throw-away one.
  ///
  /// - Throws: ``ServerScriptFailed`` if the script is missing or fails.
  static func obtain() async throws -> DatabaseServer {
    let environment = ProcessInfo.processInfo.environment
    if let url = environment["DATABASE_URL"], !url.isEmpty {
      let directory = environment["MEMORYSTORE_PG_DIR"].flatMap { $0.isEmpty ? nil : $0 }
      return DatabaseServer(url: url, directory: directory, isOwned: false)
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("several-instances-\(UUID().uuidString.lowercased())").path
    stopOnInterrupt(directory)
    let output = try await runScript("start", directory)
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("DATABASE_URL=") })
    else {
      throw ServerScriptFailed("Scripts/postgres-test-server printed no DATABASE_URL: \(output)")
    }
    // The throw-away server listens on the loopback only, without TLS.
    let url = line.dropFirst("DATABASE_URL=".count) + "?sslmode=disable"
    return DatabaseServer(url: String(url), directory: directory, isOwned: true)
  }

  /// Crashes the server: `pg_ctl stop -m immediate`; every connection drops.
  func kill() async throws {
    guard let directory else { throw ServerScriptFailed("this server cannot be crashed") }
    _ = try await Self.runScript("kill", directory)
  }

  /// Starts the server again, on the same port, once it accepts connections.
  func restart() async throws {
    guard let directory else { throw ServerScriptFailed("this server cannot be restarted") }
    _ = try await Self.runScript("restart", directory)
  }

  /// Stops the server and removes its directory, if the example started it.
  func stopIfOwned() async {
    guard isOwned, let directory else { return }
    do {
      _ = try await Self.runScript("stop", directory)
      try FileManager.default.removeItem(atPath: directory)
    } catch {
      complain("could not stop the server in \(directory): \(error)")
    }
  }

  // MARK: - The script

  /// `Scripts/postgres-test-server`, found from this file's path in the repository, else from
  /// the current directory (`Integrations/PostgresSync`).
  static var scriptPath: String? {
    // #filePath: <repository>/Integrations/PostgresSync/Examples/SeveralInstances/DatabaseServer.swift
    var repository = URL(fileURLWithPath: #filePath)
    for _ in 0..<5 { repository.deleteLastPathComponent() }
    let candidates = [
      repository.appendingPathComponent("Scripts/postgres-test-server").path,
      URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        .appendingPathComponent("../../Scripts/postgres-test-server").standardized.path,
    ]
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
  }

  /// Runs the script off the cooperative pool (it takes up to seconds); returns what it
  /// printed.
  private static func runScript(_ command: String, _ directory: String) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
      DispatchQueue.global().async {
        continuation.resume(with: Result { try runScriptBlocking(command, directory) })
      }
    }
  }

  /// Runs the script and waits for it. Its own waits are bounded (`pg_ctl -w -t …`).
  private static func runScriptBlocking(_ command: String, _ directory: String) throws -> String {
    guard let scriptPath else {
      throw ServerScriptFailed(
        "Scripts/postgres-test-server was not found: run the example from "
          + "Integrations/PostgresSync, or set DATABASE_URL")
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: scriptPath)
    process.arguments = [command, directory]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // The server the script starts inherits none of the script's descriptors: this read ends
    // when the script does.
    let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw ServerScriptFailed(
        "postgres-test-server \(command) \(directory) exited with \(process.terminationStatus): "
          + printed)
    }
    return printed
  }

  /// Stops the throw-away server in `directory` (and removes the directory) when the example
  /// is interrupted (Ctrl-C) or terminated, rather than leaving it running.
  private static func stopOnInterrupt(_ directory: String) {
    for signalNumber in [SIGINT, SIGTERM] {
      signal(signalNumber, SIG_IGN)
      signalSources.withLock { sources in
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler {
          complain("interrupted: stopping the server in \(directory)")
          _ = try? runScriptBlocking("stop", directory)
          try? FileManager.default.removeItem(atPath: directory)
          exit(128 + signalNumber)
        }
        source.resume()
        sources.append(source)
      }
    }
  }

  /// The signal sources: kept for as long as the process runs.
  private static let signalSources = Locked<[any DispatchSourceSignal]>([])
}

/// `Scripts/postgres-test-server` is missing, or failed.
struct ServerScriptFailed: Error, CustomStringConvertible {
  /// What failed, with what the script printed.
  let description: String

  init(_ description: String) {
    self.description = description
  }
}
