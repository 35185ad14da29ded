import Logging
import PostgresNIO
import Synchronization

// Design
//
// One dedicated connection LISTENs on one channel for as long as `run()` runs. Its life, in one
// loop in `run()`:
//
//   connect ─▶ LISTEN, SELECT pg_backend_pid() ─▶ yield .listening ─▶ watch ─┐
//      ▲                                                                     │ lost
//      └──── sleep: backoff with jitter ◀── yield .disconnected(error) ◀─────┘
//
// *Watch* waits for whichever comes first: the connection's close future (the server ended the
// backend or the socket saw EOF/RST: postgres-nio reads while idle, so this fires within a
// millisecond or two of the server closing its end) or the keep-alive failing (a `SELECT 1`
// every `keepAliveInterval` that must answer within `keepAliveTimeout`: the only way to notice
// a peer that is gone without closing the socket, such as a frozen server or a cut network).
//
// No wait on a query is unbounded: `LISTEN` and each keep-alive must answer within
// `keepAliveTimeout`, and the listener never waits for a query past its bound or past the
// run's cancellation. A query that the connection's loss catches in flight may never
// complete, even once the connection is closed; a task group waiting for it would keep the
// loss from being reported, and the store from being flushed, for good.
//
// Notifications arrive on postgres-nio's event loop, through `addListener`, the API that hands
// over the sender's backend PID (`listen(on:)`'s `PostgresNotification` carries only the
// payload). A `DeliveryGate` per connection orders them against `.listening` and
// `.disconnected`, which the run loop yields: before `.listening` they are held back, after the
// connection is given up they are dropped. The gate yields under its lock, which is what makes
// the order total; `AsyncStream.Continuation.yield` neither blocks nor runs the consumer's code.
//
// Events therefore follow the grammar `(.listening .notification* .disconnected)*`, possibly
// ending after a `.listening` or a `.notification` when `run()` is cancelled; then the stream
// finishes. A failed connection attempt that never reached `.listening` yields nothing (it is
// logged): the consumer is already "not listening".

/// Keeps one dedicated PostgreSQL connection listening on one channel, reconnecting forever
/// with backoff, until the task running ``run()`` is cancelled.
///
/// The consumer reads ``events``: `.listening` each time `LISTEN` is established on a fresh
/// connection, each `.notification` after it in the order the server sent them, and
/// `.disconnected` as soon as the connection is found lost. A cache kept coherent by the
/// notifications must be flushed on `.listening` (changes may have been missed while no
/// connection listened) and on `.disconnected` (changes are being missed now), and it must be
/// treated as uncovered until the first `.listening` and after the stream ends.
///
/// ```swift
/// let listener = try NotificationListener(
///   channel: "store_changes",
///   configuration: .init(connection: connectionConfiguration),
///   logger: logger
/// )
/// try await withThrowingDiscardingTaskGroup { group in
///   group.addTask { try await listener.run() }
///   for await event in listener.events {
///     switch event {
///     case .listening, .disconnected: cache.removeAll()
///     case .notification(let payload, _): cache[payload] = nil
///     }
///   }
/// }
/// ```
///
/// The events are an `AsyncStream` rather than a callback so that the consumer decides where
/// and when they are handled (its own task, its own isolation) and postgres-nio's event loop
/// never runs consumer code. The stream buffers without bound: a notification dropped for want
/// of room would leave a stale cache entry, so a slow consumer costs memory instead.
package final class NotificationListener: Sendable {
  /// What the listener reports, in order, through ``NotificationListener/events``.
  package enum Event: Sendable {
    /// `LISTEN` is established on a fresh connection whose server process is `backendPID`.
    ///
    /// Every notification sent after this point reaches the stream. Anything sent before it
    /// and after the previous `.disconnected` (or before the first `.listening`) may have been
    /// missed: flush what the notifications keep coherent.
    case listening(backendPID: Int32)

    /// A notification on the channel, with its payload and the server process that sent it.
    case notification(payload: String, senderPID: Int32)

    /// The connection was lost: the error says how (usually a ``ListenerError``). Notifications
    /// are being missed until the next `.listening`.
    case disconnected(any Error)
  }

  /// How the listener connects, reconnects and checks its connection.
  package struct Configuration: Sendable {
    /// The server to connect to.
    package var connection: PostgresConnection.Configuration

    /// The delays between connection attempts after a loss or a failed attempt.
    package var reconnectBackoff: Backoff

    /// How long the connection may sit idle before a keep-alive `SELECT 1` checks it; `nil`
    /// turns the keep-alive off.
    ///
    /// A server that ends the connection (a crash, `pg_terminate_backend`, a restart) is noticed
    /// without it, from the socket closing. The keep-alive is for a peer that vanishes without
    /// closing the socket: a frozen server, a cut network, a host that lost power.
    package var keepAliveInterval: Duration?

    /// How long a keep-alive `SELECT 1` may take before the connection is given up.
    package var keepAliveTimeout: Duration

    /// Creates a configuration with the defaults: a backoff from 50 ms doubling to 2 s, and a
    /// keep-alive every second that must answer within 2 s.
    ///
    /// - Parameter connection: The server to connect to.
    package init(connection: PostgresConnection.Configuration) {
      self.connection = connection
      self.reconnectBackoff = Backoff()
      self.keepAliveInterval = .seconds(1)
      self.keepAliveTimeout = .seconds(2)
    }
  }

  /// Exponential backoff with jitter: the delay before the next connection attempt.
  ///
  /// After `n` consecutive failures (counting the loss itself as the first), the delay is
  /// drawn uniformly from the upper half of `min(maximum, initial × 2ⁿ⁻¹)`: with the defaults
  /// 25–50 ms, then 50–100 ms, … up to 1–2 s. Keeping the lower half out bounds the retry rate;
  /// the jitter spreads out instances that lost the same server at the same moment.
  package struct Backoff: Sendable, Equatable {
    /// The delay's upper bound after the first failure.
    package var initial: Duration

    /// The largest delay.
    package var maximum: Duration

    /// Creates a backoff.
    ///
    /// - Parameters:
    ///   - initial: The delay's upper bound after the first failure; 50 ms by default.
    ///   - maximum: The largest delay; 2 s by default.
    package init(initial: Duration = .milliseconds(50), maximum: Duration = .seconds(2)) {
      self.initial = initial
      self.maximum = maximum
    }

    /// The delay before the next attempt after `failures` consecutive failures.
    ///
    /// - Parameters:
    ///   - failures: Consecutive failures so far, at least 1.
    ///   - generator: The source of the jitter.
    /// - Returns: A delay between half the bound and the bound, the bound being
    ///   `min(maximum, initial × 2^(failures − 1))`.
    package func delay(
      afterFailures failures: Int,
      using generator: inout some RandomNumberGenerator
    ) -> Duration {
      let bound = upperBound(afterFailures: failures)
      let nanoseconds = Self.nanoseconds(bound)
      guard nanoseconds > 1 else { return bound }
      let half = nanoseconds / 2
      return .nanoseconds(half + Int64.random(in: 0...(nanoseconds - half), using: &generator))
    }

    /// The largest delay after `failures` consecutive failures: `min(maximum, initial ×
    /// 2^(failures − 1))`.
    ///
    /// - Parameter failures: Consecutive failures so far, at least 1.
    /// - Returns: The bound the jittered delay is drawn under.
    package func upperBound(afterFailures failures: Int) -> Duration {
      let maximum = Self.nanoseconds(self.maximum)
      var bound = Self.nanoseconds(initial)
      var doublings = max(0, failures - 1)
      while doublings > 0 && bound < maximum {
        bound = bound > maximum / 2 ? maximum : bound * 2
        doublings -= 1
      }
      return .nanoseconds(min(bound, maximum))
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
      let (seconds, attoseconds) = duration.components
      return max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
  }

  /// The channel listened on.
  package let channel: String

  /// The events, in order; the stream finishes when ``run()`` returns.
  ///
  /// Iterate it once, from one task. It buffers without bound until read.
  package let events: AsyncStream<Event>

  private let continuation: AsyncStream<Event>.Continuation
  private let configuration: Configuration
  private let logger: Logger
  private let hasRun = Atomic<Bool>(false)
  private let connectionIDs = Atomic<Int>(0)

  /// Creates a listener; it connects when ``run()`` is called.
  ///
  /// - Parameters:
  ///   - channel: The channel: 1 to 63 characters from `[a-z0-9_]`, not starting with a digit.
  ///   - configuration: The server, the backoff and the keep-alive.
  ///   - logger: Where the listener reports losses (warning), recoveries (notice) and failed
  ///     attempts (info).
  /// - Throws: ``ListenerError`` with ``ListenerError/Code/invalidChannelName`` for a channel
  ///   name of another form.
  package init(
    channel: String,
    configuration: Configuration,
    logger: Logger = Logger(label: "MemoryStorePostgres.NotificationListener")
  ) throws(ListenerError) {
    try Self.validate(channel: channel)
    self.channel = channel
    self.configuration = configuration
    var logger = logger
    logger[metadataKey: "pg.channel"] = "\(channel)"
    self.logger = logger
    (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
  }

  /// Checks that `channel` is a name `LISTEN` can take unquoted and case-preserved:
  /// `[a-z_][a-z0-9_]{0,62}`.
  ///
  /// - Parameter channel: The name to check.
  /// - Throws: ``ListenerError`` with ``ListenerError/Code/invalidChannelName`` otherwise.
  /// - Complexity: O(*n*) in the name's length.
  package static func validate(channel: String) throws(ListenerError) {
    let bytes = channel.utf8
    let isValid =
      (1...63).contains(bytes.count)
      && bytes.enumerated().allSatisfy { index, byte in
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "_"): true
        case UInt8(ascii: "0")...UInt8(ascii: "9"): index > 0
        default: false
        }
      }
    guard isValid else {
      throw ListenerError(code: .invalidChannelName, channel: channel)
    }
  }

  /// Listens until the calling task is cancelled, then closes the connection, finishes
  /// ``events`` and returns.
  ///
  /// Connection failures never end it: it reconnects with ``Configuration/reconnectBackoff``
  /// forever. Call it once (a second call stops the program), typically as a child task or as
  /// a service of a service group.
  ///
  /// - Throws: Nothing today; the signature leaves room for unrecoverable errors.
  package func run() async throws {
    guard !hasRun.exchange(true, ordering: .relaxed) else {
      preconditionFailure("NotificationListener.run() called twice")
    }
    defer { continuation.finish() }

    var random = SystemRandomNumberGenerator()
    var failures = 0
    var lostAt: ContinuousClock.Instant?
    while !Task.isCancelled {
      let connectionID = connectionIDs.add(1, ordering: .relaxed).newValue
      var logger = logger
      logger[metadataKey: "pg.listener.connection"] = "\(connectionID)"
      let gate = DeliveryGate(continuation: continuation)
      do {
        try await listenOnce(id: connectionID, gate: gate, logger: logger) { backendPID in
          if let lost = lostAt {
            logger.notice(
              "Listening again",
              metadata: [
                "pg.backend": "\(backendPID)",
                "pg.listener.outage": "\(ContinuousClock.now - lost)",
                "pg.listener.attempts": "\(failures)",
              ])
          } else {
            logger.info("Listening", metadata: ["pg.backend": "\(backendPID)"])
          }
          failures = 0
          lostAt = nil
        }
      } catch {
        let wasListening = gate.close(reporting: Task.isCancelled ? nil : error)
        if Task.isCancelled { break }
        failures += 1
        if wasListening {
          lostAt = .now
          logger.warning(
            "Connection lost; notifications are missed until it is back",
            metadata: ["error": "\(String(reflecting: error))"])
        } else {
          logger.info(
            "Connection attempt failed",
            metadata: [
              "error": "\(String(reflecting: error))", "pg.listener.attempt": "\(failures)",
            ]
          )
        }
      }
      let delay = configuration.reconnectBackoff.delay(afterFailures: failures, using: &random)
      do {
        try await Task.sleep(for: delay)
      } catch {
        break
      }
    }
  }

  /// One connection's life: connect, LISTEN, report, then watch until it is lost. Throws
  /// when the connection is lost or could not be set up; the connection is closed by then.
  private func listenOnce(
    id: Int,
    gate: DeliveryGate,
    logger: Logger,
    onListening: (Int32) -> Void
  ) async throws {
    let connection = try await PostgresConnection.connect(
      configuration: configuration.connection, id: id, logger: logger)
    do {
      try await withTaskCancellationHandler {
        // Bounded, and not waiting for the queries past the bound: a query that the
        // connection's loss catches in flight may never complete.
        let channel = channel
        let backendPID = try await withDeadline(
          configuration.keepAliveTimeout,
          orThrow: ListenerError(code: .listenTimedOut, channel: channel),
          endsWhenCancelled: true,
          onTimeout: { connection.closeSoon() }
        ) { [self] in
          try await listen(on: connection, gate: gate, logger: logger)
        }
        gate.open(backendPID: backendPID)
        onListening(backendPID)
        try await watch(connection, backendPID: backendPID, logger: logger)
      } onCancel: {
        // Ends the waits on the close future and on in-flight queries, neither of which
        // notices cancellation by itself.
        connection.closeSoon()
      }
    } catch {
      try? await connection.close()
      throw error
    }
  }

  /// Starts delivery to `gate`, makes sure `LISTEN` is in effect and returns the backend PID.
  private func listen(
    on connection: PostgresConnection,
    gate: DeliveryGate,
    logger: Logger
  ) async throws -> Int32 {
    // addListener queues its own LISTEN; the explicit one below runs after it on the same
    // connection, so once it returns the server has registered the channel (and an error,
    // such as LISTEN refused on a hot standby, surfaces here instead of being swallowed).
    connection.addListener(channel: channel) { _, notification in
      gate.deliver(payload: notification.payload, senderPID: notification.backendPID)
    }
    // The name is validated by init: [a-z_][a-z0-9_]*, so the quoting cannot be escaped.
    try await connection.query(PostgresQuery(unsafeSQL: #"LISTEN "\#(channel)";"#), logger: logger)
    var backendPID: Int32?
    for try await pid in try await connection.query("SELECT pg_backend_pid()", logger: logger)
      .decode(Int32.self)
    {
      backendPID = pid
    }
    return backendPID ?? 0
  }

  /// Returns (by throwing) when the connection is found lost; closes it before returning.
  private func watch(
    _ connection: PostgresConnection,
    backendPID: Int32,
    logger: Logger
  ) async throws {
    let channel = channel
    let keepAliveTiming = configuration.keepAliveInterval.map {
      ($0, configuration.keepAliveTimeout)
    }
    // A keep-alive that gives up closes the connection, and the close future may then finish
    // first: the cause is recorded before the close so that the loss reports it.
    let cause = LossCause()
    try await withThrowingTaskGroup(of: Void.self) { group in
      group.addTask {
        try await connection.closeFuture.get()
        throw cause.recorded
          ?? ListenerError(code: .connectionClosed, channel: channel, backendPID: backendPID)
      }
      if case (let interval, let timeout)? = keepAliveTiming {
        group.addTask {
          while true {
            try await Task.sleep(for: interval)
            try await Self.keepAlive(
              within: timeout, channel: channel, backendPID: backendPID, cause: cause,
              close: { connection.closeSoon() },
              query: {
                for try await _ in try await connection.query("SELECT 1", logger: logger) {}
              })
          }
        }
      }
      do {
        // Both children end only by throwing.
        _ = try await group.next()
      } catch {
        connection.closeSoon()
        group.cancelAll()
        throw error
      }
    }
  }

  /// Runs `query`, a keep-alive (the watch's `SELECT 1`); throws
  /// ``ListenerError/Code/keepAliveFailed`` when it fails, or
  /// ``ListenerError/Code/keepAliveTimedOut`` once `timeout` has passed, recording that cause
  /// and calling `close` first; throws `CancellationError` as soon as the calling task is
  /// cancelled. It does not wait for a query that ran out of time or was cancelled: one that
  /// the connection's loss catches in flight may never complete, even once the connection is
  /// closed, and waiting for it would keep the loss from being reported.
  static func keepAlive(
    within timeout: Duration,
    channel: String,
    backendPID: Int32,
    cause: LossCause,
    close: @escaping @Sendable () -> Void,
    query: @escaping @Sendable () async throws -> Void
  ) async throws {
    let timedOut = ListenerError(code: .keepAliveTimedOut, channel: channel, backendPID: backendPID)
    let onTimeout: @Sendable () -> Void = {
      cause.record(timedOut)
      close()
    }
    try await withDeadline(
      timeout, orThrow: timedOut, endsWhenCancelled: true, onTimeout: onTimeout
    ) {
      do {
        try await query()
      } catch {
        throw ListenerError(
          code: .keepAliveFailed, channel: channel, backendPID: backendPID, underlying: error)
      }
    }
  }
}

extension PostgresConnection {
  /// Starts closing the connection without waiting. (In an async context, a plain `close()`
  /// would resolve to the async overload.)
  func closeSoon() {
    let _: EventLoopFuture<Void> = close()
  }
}

/// The first known reason a connection was given up, when the listener gave it up itself.
final class LossCause: Sendable {
  private let error = Locked<ListenerError?>(nil)

  /// The recorded reason, if any.
  var recorded: ListenerError? { error.withLock { $0 } }

  /// Records `reason` unless one is recorded already.
  func record(_ reason: ListenerError) {
    error.withLock { $0 = $0 ?? reason }
  }
}

/// Orders one connection's notifications, which postgres-nio delivers on its event loop,
/// against the `.listening` and `.disconnected` events the run loop yields.
///
/// Notifications that arrive before ``open(backendPID:)`` (between the server registering the
/// LISTEN and the run loop learning it) are held and yielded right after `.listening`; those
/// that arrive after ``close(reporting:)`` are dropped: the consumer flushes on the next
/// `.listening` anyway.
private final class DeliveryGate: Sendable {
  private enum Phase {
    case opening(held: [(payload: String, senderPID: Int32)])
    case open
    case closed
  }

  private let phase = Locked(Phase.opening(held: []))
  private let continuation: AsyncStream<NotificationListener.Event>.Continuation

  init(continuation: AsyncStream<NotificationListener.Event>.Continuation) {
    self.continuation = continuation
  }

  // Each method yields under the lock: yield neither blocks nor runs consumer code, and the
  // lock is what orders a notification from the event loop against the run loop's events.

  func deliver(payload: String, senderPID: Int32) {
    phase.withLock { phase in
      switch phase {
      case .opening(var held):
        held.append((payload, senderPID))
        phase = .opening(held: held)
      case .open:
        continuation.yield(.notification(payload: payload, senderPID: senderPID))
      case .closed:
        break
      }
    }
  }

  func open(backendPID: Int32) {
    phase.withLock { phase in
      guard case .opening(let held) = phase else {
        preconditionFailure("Internal inconsistency: DeliveryGate opened twice or after closing")
      }
      continuation.yield(.listening(backendPID: backendPID))
      for notification in held {
        continuation.yield(
          .notification(payload: notification.payload, senderPID: notification.senderPID))
      }
      phase = .open
    }
  }

  /// Closes the gate; yields `.disconnected(error)` when it was open and `error` is given.
  /// Returns whether it was open.
  func close(reporting error: (any Error)?) -> Bool {
    phase.withLock { phase in
      let wasOpen: Bool
      if case .open = phase { wasOpen = true } else { wasOpen = false }
      phase = .closed
      if wasOpen, let error {
        continuation.yield(.disconnected(error))
      }
      return wasOpen
    }
  }
}
