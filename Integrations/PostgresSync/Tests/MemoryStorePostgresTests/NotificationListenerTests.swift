import Logging
import PostgresNIO
import Testing

@testable import MemoryStorePostgres

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// Against a real server (see Support/TestDatabase.swift for where it comes from). Every wait is
// bounded by EventQueue.deadline; nothing sleeps where an event can be waited for.

@Suite("NotificationListener")
struct NotificationListenerTests {
  // MARK: - Notifications

  @Test func aNotifyFromAnotherConnectionArrivesWithItsPayloadAndSender() async throws {
    try await TestDatabase.withServer { database in
      try await withRunningListener(on: database) { listener, events in
        _ = try await events.nextListening()
        try await database.withConnection { connection in
          let sender = try await backendPID(of: connection)
          let payload = "it's \"quoted\", a back\\slash,\na new line, é and ✓"
          try await notify(connection, channel: listener.channel, payload: payload)
          let received = try await events.nextNotification()
          #expect(received.payload == payload)
          #expect(received.senderPID == sender)

          for index in 0..<50 {
            try await notify(connection, channel: listener.channel, payload: "message \(index)")
          }
          for index in 0..<50 {
            #expect(try await events.nextNotification().payload == "message \(index)")
          }
          // Another channel's notifications do not arrive.
          try await notify(connection, channel: listener.channel + "_other", payload: "elsewhere")
          try await notify(connection, channel: listener.channel, payload: "marker")
          #expect(try await events.nextNotification().payload == "marker")
        }
      }
    }
  }

  @Test(arguments: ["x", "é"])
  func aPayloadOfTheServersLimitMinusOneByteArrivesWhole(filler: String) async throws {
    // 7 999 bytes: x × 7 999, or é (2 bytes) × 3 999 and an x.
    let count = 7_999 / filler.utf8.count
    let payload =
      String(repeating: filler, count: count)
      + String(repeating: "x", count: 7_999 % filler.utf8.count)
    #expect(payload.utf8.count == 7_999)
    try await TestDatabase.withServer { database in
      try await withRunningListener(on: database) { listener, events in
        _ = try await events.nextListening()
        try await database.withConnection { connection in
          try await notify(connection, channel: listener.channel, payload: payload)
          #expect(try await events.nextNotification().payload == payload)
        }
      }
    }
  }

  @Test func aPayloadOf8000BytesOrMoreIsRefusedByTheServer() async throws {
    try await TestDatabase.withServer { database in
      try await withRunningListener(on: database) { listener, events in
        _ = try await events.nextListening()
        try await database.withConnection { connection in
          for size in [8_000, 8_001, 100_000] {
            let error = await #expect(throws: PSQLError.self) {
              try await notify(
                connection, channel: listener.channel,
                payload: String(repeating: "x", count: size))
            }
            // invalid_parameter_value: "payload string too long"
            #expect(error?.serverInfo?[.sqlState] == "22023")
            #expect(error?.serverInfo?[.message] == "payload string too long")
          }
          try await notify(connection, channel: listener.channel, payload: "marker")
          #expect(try await events.nextNotification().payload == "marker")
        }
      }
    }
  }

  @Test func aNotifyInATransactionThatRollsBackNeverArrives() async throws {
    struct RollBack: Error {}
    try await TestDatabase.withServer { database in
      try await withRunningListener(on: database) { listener, events in
        _ = try await events.nextListening()
        try await database.withConnection { connection in
          let channel = listener.channel
          await #expect(throws: PostgresTransactionError.self) {
            try await connection.withTransaction(logger: Self.quietLogger) { connection in
              try await notify(connection, channel: channel, payload: "rolled back")
              throw RollBack()
            }
          }
          // NOTIFYs in a committed transaction arrive at the commit, in order, and the server
          // folds identical ones (same channel and payload) into one.
          try await connection.withTransaction(logger: Self.quietLogger) { connection in
            try await notify(connection, channel: channel, payload: "committed 1")
            try await notify(connection, channel: channel, payload: "committed 2")
            try await notify(connection, channel: channel, payload: "committed 1")
          }
          try await notify(connection, channel: channel, payload: "marker")
          #expect(try await events.nextNotification().payload == "committed 1")
          #expect(try await events.nextNotification().payload == "committed 2")
          #expect(try await events.nextNotification().payload == "marker")
        }
      }
    }
  }

  // MARK: - Losing the connection

  @Test(arguments: [true, false])
  func terminatingTheListenersBackendReportsDisconnectedThenListeningAgain(
    keepAlive: Bool
  ) async throws {
    let log = RecordingLogHandler.Log()
    try await TestDatabase.withServer { database in
      try await withRunningListener(on: database, keepAlive: keepAlive, log: log) {
        listener, events in
        let firstBackend = try await events.nextListening()
        try await database.withConnection { connection in
          let start = ContinuousClock.now
          let terminated = try await connection.query(
            "SELECT pg_terminate_backend(\(firstBackend))", logger: Self.quietLogger
          ).collect().first?.decode(Bool.self)
          #expect(terminated == true)
          let (error, arrival) = try await events.nextDisconnected()
          report("pg_terminate_backend", keepAlive: keepAlive, detectedIn: arrival - start)
          let listenerError = try #require(error as? ListenerError)
          #expect([.connectionClosed, .keepAliveFailed].contains(listenerError.code))
          #expect(listenerError.backendPID == firstBackend)

          let secondBackend = try await events.nextListening()
          #expect(secondBackend != firstBackend)
          try await notify(connection, channel: listener.channel, payload: "after the loss")
          #expect(try await events.nextNotification().payload == "after the loss")
        }
      }
    }
    let entries = log.entries
    #expect(entries.contains { $0.level == .warning && $0.message.hasPrefix("Connection lost") })
    #expect(entries.contains { $0.level == .notice && $0.message == "Listening again" })
  }

  @Test(arguments: [true, false])
  func killingTheServerReportsDisconnectedAndARestartBringsListeningBack(
    keepAlive: Bool
  ) async throws {
    try await TestDatabase.withExclusiveServer { database in
      try await withRunningListener(on: database, keepAlive: keepAlive) { listener, events in
        let firstBackend = try await events.nextListening()
        let start = ContinuousClock.now
        try await database.kill()
        let killed = ContinuousClock.now
        let (error, arrival) = try await events.nextDisconnected()
        report(
          "pg_ctl stop -m immediate (which took \(milliseconds(killed - start)) ms)",
          keepAlive: keepAlive, detectedIn: arrival - start)
        #expect((error as? ListenerError)?.backendPID == firstBackend)

        let restarting = ContinuousClock.now
        try await database.restart()
        let restarted = ContinuousClock.now
        let secondBackend = try await events.nextListening()
        print(
          "NotificationListener: listening again \(milliseconds(.now - restarting)) ms after "
            + "the restart began (the restart script took \(milliseconds(restarted - restarting)) ms)"
        )
        #expect(secondBackend != firstBackend)
        try await database.withConnection { connection in
          try await notify(connection, channel: listener.channel, payload: "after the restart")
        }
        #expect(try await events.nextNotification().payload == "after the restart")
      }
    }
  }

  @Test func aFrozenBackendIsCaughtByTheKeepAlive() async throws {
    try await TestDatabase.withServer { database in
      let host = database.configuration.host ?? ""
      guard ["127.0.0.1", "localhost", "::1"].contains(host) else {
        try Test.cancel(
          "the server at \(host) is not on this machine: its backend cannot be frozen")
      }
      try await withRunningListener(
        on: database,
        configure: {
          $0.keepAliveInterval = .milliseconds(200)
          $0.keepAliveTimeout = .milliseconds(500)
        }
      ) { listener, events in
        let frozen = try await events.nextListening()
        // SIGSTOP keeps the backend's socket open but unanswered, like a server that hangs or
        // a network that drops packets: only the keep-alive can tell.
        guard kill(pid_t(frozen), SIGSTOP) == 0 else {
          try Test.cancel(
            "cannot signal backend \(frozen) (errno \(errno)): not the server's owner")
        }
        let start = ContinuousClock.now
        do {
          let (error, arrival) = try await events.nextDisconnected()
          print(
            "NotificationListener: a frozen backend detected by the keep-alive (every 200 ms, "
              + "500 ms timeout) in \(milliseconds(arrival - start)) ms")
          #expect((error as? ListenerError)?.code == .keepAliveTimedOut)
          #expect(try await events.nextListening() != frozen)
          kill(pid_t(frozen), SIGCONT)
        } catch {
          kill(pid_t(frozen), SIGCONT)
          throw error
        }
        try await database.withConnection { connection in
          try await notify(connection, channel: listener.channel, payload: "after the thaw")
        }
        #expect(try await events.nextNotification().payload == "after the thaw")
      }
    }
  }

  // MARK: - Shutting down

  @Test func cancellingRunEndsTheStreamAndClosesTheConnection() async throws {
    try await TestDatabase.withServer { database in
      let configuration = NotificationListener.Configuration(connection: database.configuration)
      let listener = try NotificationListener(
        channel: uniqueChannel(), configuration: configuration, logger: Self.quietLogger)
      let events = EventQueue(listener.events)
      let runner = Task { try await listener.run() }
      let backend = try await events.nextListening()
      runner.cancel()
      try await runner.value
      #expect(try await events.next() == nil)
      // The server ends the backend once it sees the connection closed; poll, bounded.
      try await database.withConnection { connection in
        let deadline = ContinuousClock.now + EventQueue.deadline
        var alive = true
        while alive && ContinuousClock.now < deadline {
          let rows = try await connection.query(
            "SELECT count(*)::int4 FROM pg_stat_activity WHERE pid = \(backend)",
            logger: Self.quietLogger
          ).collect()
          alive = try rows.first?.decode(Int32.self) != 0
          if alive { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(!alive, "backend \(backend) still there after the listener shut down")
      }
    }
  }

  @Test func cancellingRunWhileTheServerIsUnreachableEndsTheStreamWithoutEvents() async throws {
    // A port nothing listens on: every attempt is refused at once.
    var configuration = NotificationListener.Configuration(
      connection: .init(
        host: "127.0.0.1", port: 1, username: "postgres", password: nil, database: nil,
        tls: .disable))
    configuration.reconnectBackoff = .init(initial: .milliseconds(10), maximum: .milliseconds(40))
    let log = RecordingLogHandler.Log()
    let listener = try NotificationListener(
      channel: uniqueChannel(), configuration: configuration,
      logger: Logger(label: "test") { _ in RecordingLogHandler(log: log) })
    let events = EventQueue(listener.events)
    let runner = Task { try await listener.run() }
    // Wait (bounded) for a few failed attempts to be logged.
    let deadline = ContinuousClock.now + EventQueue.deadline
    while log.entries.filter({ $0.message == "Connection attempt failed" }).count < 3
      && ContinuousClock.now < deadline
    {
      try await Task.sleep(for: .milliseconds(10))
    }
    runner.cancel()
    try await runner.value
    #expect(log.entries.filter { $0.message == "Connection attempt failed" }.count >= 3)
    #expect(log.entries.allSatisfy { $0.level == .info || $0.level < .info })
    // Failed attempts that never reached LISTEN yield nothing: the stream just ends.
    #expect(try await events.next() == nil)
  }

  // MARK: - Channel names and backoff

  @Test(arguments: [
    "", "Upper", "1starts_with_digit", "with-dash", "with space", "quote\"d", "semi;colon", "é",
    String(repeating: "a", count: 64),
  ])
  func channelNamesOutsideTheSafeSetAreRefused(name: String) {
    let error = #expect(throws: ListenerError.self) {
      try NotificationListener.validate(channel: name)
    }
    #expect(error?.code == .invalidChannelName)
    #expect(error?.channel == name)
  }

  @Test(arguments: ["a", "_", "store_changes", "_1", "z9_", String(repeating: "a", count: 63)])
  func channelNamesInTheSafeSetAreAccepted(name: String) throws {
    let configuration = NotificationListener.Configuration(
      connection: .init(
        host: "127.0.0.1", username: "postgres", password: nil, database: nil, tls: .disable))
    let listener = try NotificationListener(channel: name, configuration: configuration)
    #expect(listener.channel == name)
  }

  @Test func backoffDoublesFromTheInitialDelayToTheCapWithJitterInTheUpperHalf() {
    let backoff = NotificationListener.Backoff()
    let expectedBounds: [Duration] = [
      .milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400),
      .milliseconds(800), .milliseconds(1_600), .seconds(2), .seconds(2),
    ]
    for (index, bound) in expectedBounds.enumerated() {
      #expect(backoff.upperBound(afterFailures: index + 1) == bound)
    }
    #expect(backoff.upperBound(afterFailures: 10_000) == .seconds(2))
    #expect(backoff.upperBound(afterFailures: 0) == .milliseconds(50))

    var generator = SplitMix64(seed: 42)
    for failures in [1, 3, 7, 64] {
      let bound = backoff.upperBound(afterFailures: failures)
      let delays = (0..<200).map { _ in
        backoff.delay(afterFailures: failures, using: &generator)
      }
      #expect(delays.allSatisfy { $0 >= bound / 2 && $0 <= bound })
      #expect(Set(delays.map { $0.components.attoseconds }).count > 100, "the delays vary")
    }
  }

  // MARK: - Helpers

  static let quietLogger: Logger = {
    var logger = Logger(label: "MemoryStorePostgresTests")
    logger.logLevel = .error
    return logger
  }()

  /// Runs a listener on a fresh channel while `body` runs, then cancels it and checks that
  /// `run()` returns and the stream ends.
  private func withRunningListener(
    on database: TestDatabase,
    keepAlive: Bool = true,
    log: RecordingLogHandler.Log = .init(),
    configure: (inout NotificationListener.Configuration) -> Void = { _ in },
    _ body: (NotificationListener, EventQueue) async throws -> Void
  ) async throws {
    var configuration = NotificationListener.Configuration(connection: database.configuration)
    configuration.reconnectBackoff = .init(initial: .milliseconds(50), maximum: .milliseconds(500))
    if !keepAlive { configuration.keepAliveInterval = nil }
    configure(&configuration)
    let listener = try NotificationListener(
      channel: uniqueChannel(), configuration: configuration,
      logger: Logger(label: "test") { _ in RecordingLogHandler(log: log) })
    let events = EventQueue(listener.events)
    let runner = Task { try await listener.run() }
    do {
      try await body(listener, events)
    } catch {
      runner.cancel()
      _ = try? await runner.value
      throw error
    }
    runner.cancel()
    try await runner.value
    while try await events.next() != nil {}
  }
}

// MARK: - Free helpers

private func uniqueChannel() -> String {
  "test_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
}

/// Sends a notification the way the sync engine should: `pg_notify` with both the channel
/// and the payload bound as parameters, so neither is spliced into SQL.
///
/// The rows are read to the end: postgres-nio's `query` returns once the server has described
/// the result, and an error raised while executing (such as "payload string too long") only
/// surfaces from the row sequence.
private func notify(_ connection: PostgresConnection, channel: String, payload: String)
  async throws
{
  _ = try await connection.query(
    "SELECT pg_notify(\(channel), \(payload))", logger: NotificationListenerTests.quietLogger
  ).collect()
}

private func backendPID(of connection: PostgresConnection) async throws -> Int32 {
  let rows = try await connection.query(
    "SELECT pg_backend_pid()", logger: NotificationListenerTests.quietLogger
  ).collect()
  return try #require(rows.first).decode(Int32.self)
}

private func milliseconds(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  let value = Double(seconds) * 1_000 + Double(attoseconds) / 1e15
  return String(Int(value.rounded()))
}

private func report(_ what: String, keepAlive: Bool, detectedIn elapsed: Duration) {
  print(
    "NotificationListener: \(what) detected in \(milliseconds(elapsed)) ms "
      + "(keep-alive \(keepAlive ? "every 1 s" : "off"))")
}

/// A seeded generator, so the backoff test is repeatable.
private struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) {
    state = seed
  }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
