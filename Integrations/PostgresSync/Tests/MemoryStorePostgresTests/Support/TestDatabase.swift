import Dispatch
import Foundation
import Logging
import MemoryStorePostgres
import PostgresNIO
import Synchronization
import Testing

/// The PostgreSQL server the tests use, and what a test may do to it.
///
/// Where the server comes from, decided once per test process:
/// - `DATABASE_URL` set (`postgres://user[:password]@host[:port]/database`): that server. It can
///   be killed and restarted only when `MEMORYSTORE_PG_DIR` names the directory
///   `Scripts/postgres-test-server start` was given for it (CI sets both).
/// - Otherwise a server of its own, started with `Scripts/postgres-test-server` in a temporary
///   directory the first time a test asks, and stopped (and the directory removed) when the test
///   process exits.
/// - When neither works, a test that asks for the server fails if `CI` is set, and is skipped
///   (cancelled, with the reason) otherwise.
///
/// Tests reach the server through ``withServer(_:)``, which many tests may hold at once, or
/// ``withExclusiveServer(_:)``, which waits for all of them and lets its body ``kill()`` and
/// ``restart()`` the server without failing tests that merely use it.
///
/// ```swift
/// try await TestDatabase.withServer { database in
///   let connection = try await database.connect()
///   defer { Task { try? await connection.close() } }
/// }
/// ```
struct TestDatabase: Sendable {
  /// The server's URL, as given or as the script printed it.
  let url: String

  /// The URL as a connection configuration (TLS off).
  let configuration: PostgresConnection.Configuration

  /// The script's directory for this server, when the tests may kill and restart it.
  let directory: String?

  /// The URL as a `PostgresClient` configuration (TLS off), for code that uses a pool.
  var clientConfiguration: PostgresClient.Configuration {
    PostgresClient.Configuration(
      host: configuration.host ?? "127.0.0.1",
      port: configuration.port ?? 5432,
      username: configuration.username,
      password: configuration.password,
      database: configuration.database,
      tls: .disable
    )
  }

  /// Runs `body` with the server, alongside other tests that use it; it waits while a test
  /// holds the server exclusively (one that kills it).
  ///
  /// - Throws: The reason when there is no server and `CI` is set; cancels the test (a skip)
  ///   when there is none otherwise; rethrows what `body` throws.
  static func withServer<Result>(
    _ body: (TestDatabase) async throws -> Result
  ) async throws -> Result {
    let database = try await available()
    await ServerAccess.shared.acquire(exclusive: false)
    do {
      let result = try await body(database)
      await ServerAccess.shared.release(exclusive: false)
      return result
    } catch {
      await ServerAccess.shared.release(exclusive: false)
      throw error
    }
  }

  /// Runs `body` with the server to itself: it waits until no other test uses it, and no
  /// test starts using it until `body` returns; `body` may ``kill()`` and ``restart()`` it.
  ///
  /// The server is restarted after `body` if `body` left it killed.
  ///
  /// - Throws: As ``withServer(_:)``, and also when the server cannot be restarted (it came
  ///   from `DATABASE_URL` without `MEMORYSTORE_PG_DIR`): a failure under `CI`, a skip
  ///   otherwise.
  static func withExclusiveServer<Result>(
    _ body: (TestDatabase) async throws -> Result
  ) async throws -> Result {
    let database = try await available()
    guard database.directory != nil else {
      try unavailable(
        "the server from DATABASE_URL cannot be killed and restarted: "
          + "set MEMORYSTORE_PG_DIR to the directory Scripts/postgres-test-server started it in")
    }
    await ServerAccess.shared.acquire(exclusive: true)
    do {
      let result = try await body(database)
      try await database.ensureRunning()
      await ServerAccess.shared.release(exclusive: true)
      return result
    } catch {
      try? await database.ensureRunning()
      await ServerAccess.shared.release(exclusive: true)
      throw error
    }
  }

  /// Simulates a crash: `pg_ctl stop -m immediate` (the server's processes quit at once,
  /// without a checkpoint; every connection drops). Only within ``withExclusiveServer(_:)``.
  func kill() async throws {
    _ = try await Self.runScript(["kill", try requireDirectory()])
  }

  /// Starts the server again on the same port after ``kill()``; returns once it accepts
  /// connections (crash recovery included). Only within ``withExclusiveServer(_:)``.
  func restart() async throws {
    _ = try await Self.runScript(["restart", try requireDirectory()])
  }

  /// Opens a connection of the test's own; close it with `close()`.
  func connect(logger: Logger = Logger(label: "TestDatabase")) async throws -> PostgresConnection {
    try await PostgresConnection.connect(
      configuration: configuration, id: Self.connectionIDs.add(1, ordering: .relaxed).newValue,
      logger: logger)
  }

  /// Runs `body` with a connection of its own, closed afterwards.
  func withConnection<Result: Sendable>(
    _ body: (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    let connection = try await connect()
    do {
      let result = try await body(connection)
      try? await connection.close()
      return result
    } catch {
      try? await connection.close()
      throw error
    }
  }

  // MARK: - Finding the server

  private static let connectionIDs = Atomic<Int>(1_000)

  private func requireDirectory() throws -> String {
    guard let directory else {
      throw TestDatabaseError("this server cannot be killed or restarted (no script directory)")
    }
    return directory
  }

  private func ensureRunning() async throws {
    if let directory {
      _ = try await Self.runScript(["start", directory])
    }
  }

  /// The server, found or started once per process; a failure is remembered too.
  private static func available() async throws -> TestDatabase {
    do {
      return try await Provider.shared.database()
    } catch {
      try unavailable(String(describing: error))
    }
  }

  /// Fails the test under CI; cancels it (a skip) otherwise.
  private static func unavailable(_ reason: String) throws -> Never {
    let isCI = !(ProcessInfo.processInfo.environment["CI"] ?? "").isEmpty
    if isCI {
      throw TestDatabaseError("no usable PostgreSQL server (CI is set, so this fails): \(reason)")
    }
    try Test.cancel("Skipped: no usable PostgreSQL server: \(reason)")
  }

  private actor Provider {
    static let shared = Provider()
    private var task: Task<TestDatabase, any Error>?

    func database() async throws -> TestDatabase {
      if task == nil {
        task = Task { try await TestDatabase.obtain() }
      }
      return try await task!.value  // Set just above when it was nil.
    }
  }

  private static func obtain() async throws -> TestDatabase {
    let environment = ProcessInfo.processInfo.environment
    if let url = environment["DATABASE_URL"], !url.isEmpty {
      let directory = environment["MEMORYSTORE_PG_DIR"].flatMap { $0.isEmpty ? nil : $0 }
      return try TestDatabase(url: url, directory: directory)
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("memorystore-pg-\(UUID().uuidString.lowercased())").path
    ownedDirectory.withLock { $0 = directory }
    atexit { TestDatabase.stopOwnedServer() }
    let output = try await runScript(["start", directory])
    guard
      let line = output.split(separator: "\n").last(where: { $0.hasPrefix("DATABASE_URL=") })
    else {
      throw TestDatabaseError("Scripts/postgres-test-server printed no DATABASE_URL: \(output)")
    }
    return try TestDatabase(
      url: String(line.dropFirst("DATABASE_URL=".count)), directory: directory)
  }

  private init(url: String, directory: String?) throws {
    guard let components = URLComponents(string: url),
      ["postgres", "postgresql"].contains(components.scheme ?? "")
    else {
      throw TestDatabaseError(
        "DATABASE_URL \"\(url)\" is not a postgres://user@host:port/database URL")
    }
    let database = String(components.path.drop(while: { $0 == "/" }))
    self.url = url
    self.directory = directory
    self.configuration = PostgresConnection.Configuration(
      host: components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1",
      port: components.port ?? 5432,
      username: components.user ?? "postgres",
      password: components.password,
      database: database.isEmpty ? nil : database,
      tls: .disable
    )
  }

  // MARK: - The script

  /// The directory of the server this process started, stopped at exit.
  private static let ownedDirectory = Locked<String?>(nil)

  private static var scriptPath: String {
    // #filePath: Integrations/PostgresSync/Tests/MemoryStorePostgresTests/Support/TestDatabase.swift
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<6 { url.deleteLastPathComponent() }
    return url.appendingPathComponent("Scripts/postgres-test-server").path
  }

  private static func stopOwnedServer() {
    guard let directory = ownedDirectory.withLock({ $0 }) else { return }
    _ = try? runScriptBlocking(["stop", directory])
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// Runs the script off the cooperative pool (it takes up to seconds) and returns its output.
  private static func runScript(_ arguments: [String]) async throws -> String {
    accessTrace("script \(arguments)")
    defer { accessTrace("script done \(arguments)") }
    return try await withCheckedThrowingContinuation { continuation in
      DispatchQueue.global().async {
        continuation.resume(with: Result { try runScriptBlocking(arguments) })
      }
    }
  }

  private static func runScriptBlocking(_ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: scriptPath)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    do {
      try process.run()
    } catch {
      throw TestDatabaseError("could not run \(scriptPath): \(error)")
    }
    // The script prints a line or two; reading stdout to its end cannot fill stderr's pipe.
    let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    let complaint = String(
      decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw TestDatabaseError(
        "Scripts/postgres-test-server \(arguments.joined(separator: " ")) exited with "
          + "\(process.terminationStatus): \(complaint)\(printed)")
    }
    return printed
  }
}

/// Why the tests have no server, or a script run failed.
struct TestDatabaseError: Error, CustomStringConvertible {
  /// What went wrong.
  let description: String

  init(_ description: String) {
    self.description = description
  }
}

/// A readers–writer gate, first come first served: tests that use the server share it, a test
/// that kills it has it alone.
private actor ServerAccess {
  static let shared = ServerAccess()

  private var sharing = 0
  private var exclusive = false
  private var waiting: [(exclusive: Bool, continuation: CheckedContinuation<Void, Never>)] = []

  func acquire(exclusive wantsExclusive: Bool) async {
    accessTrace(
      "acquire exclusive=\(wantsExclusive) sharing=\(sharing) exclusive=\(exclusive) "
        + "waiting=\(waiting.count)")
    defer { accessTrace("acquired exclusive=\(wantsExclusive)") }
    if waiting.isEmpty && canGrant(exclusive: wantsExclusive) {
      grant(exclusive: wantsExclusive)
      return
    }
    await withCheckedContinuation { waiting.append((wantsExclusive, $0)) }
  }

  func release(exclusive wasExclusive: Bool) {
    accessTrace("release exclusive=\(wasExclusive) sharing=\(sharing) waiting=\(waiting.count)")
    if wasExclusive { exclusive = false } else { sharing -= 1 }
    while let first = waiting.first, canGrant(exclusive: first.exclusive) {
      waiting.removeFirst()
      grant(exclusive: first.exclusive)
      first.continuation.resume()
    }
  }

  private func canGrant(exclusive wantsExclusive: Bool) -> Bool {
    wantsExclusive ? !exclusive && sharing == 0 : !exclusive
  }

  private func grant(exclusive wantsExclusive: Bool) {
    if wantsExclusive { exclusive = true } else { sharing += 1 }
  }
}

/// Writes `line` to the standard error, with the test's name, when `MEMORYSTORE_TEST_TRACE`
/// is set: who waits for the server and who holds it, for a run that does not end.
func accessTrace(_ line: String) {
  guard ProcessInfo.processInfo.environment["MEMORYSTORE_TEST_TRACE"] != nil else { return }
  FileHandle.standardError.write(Data("[access] \(Test.current?.name ?? "-") \(line)\n".utf8))
}
