import Foundation
import Logging
import MemoryStoreKit
import NIOCore
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Keeps a ``MemoryStoreKit/MemoryStore`` coherent with the stores of other instances (other
/// processes, other machines) through PostgreSQL: each instance's local writes are committed
/// to a shared table and announced on a channel with `NOTIFY`, and each instance drops the
/// keys the others announce, so that its next read loads the current value.
///
/// ```swift
/// let quotes = MemoryStore<String, Quote>(name: "quotes")
/// let sync = try PostgresSync(
///   store: quotes,
///   endpoint: PostgresEndpoint(url: "postgres://app@db:5432/app"),
///   configuration: .init(channel: "quotes", table: "quotes"))
/// Task { try await sync.run() }        // or as a service of a service group
///
/// quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)   // a local write: published
/// let msft = try await sync.value(forKey: "MSFT")    // a hit, or a read of the table
/// ```
///
/// ## The promise
/// - **Read-your-writes here.** A write is applied to the local store before its call
///   returns, as always; the sync commits it to the table and announces it afterwards, in the
///   background (write-behind), batching what accumulates while a commit is in flight.
///   Until it is committed, invalidations from other instances never drop it, and
///   ``value(forKey:)`` answers with it.
/// - **Other instances, within the staleness bound.** Once a write is committed, another
///   instance that listens to the channel drops the key when the announcement arrives (a
///   `NOTIFY` is delivered on commit: typically a millisecond on a LAN). Its readers may see
///   the old value until then, and never after. If two instances write one key at once, the
///   commit that comes last is what the table holds, and both instances end up dropping the
///   key, so that the next read of either loads the table's value.
/// - **Outages.** An instance that loses the channel's connection flushes its store at once
///   (keeping its own uncommitted writes), reconnects with backoff, flushes again when it
///   listens again, and until then keeps nothing it reads: ``value(forKey:)`` reads the table
///   each time. A lost connection is noticed within ``Configuration/keepAliveInterval`` plus
///   its timeout. A sequence gap, or another instance's new epoch, flushes too. While the
///   database is down, local writes stay in the store and pending; they are committed when
///   it is back, and reads that miss fail with ``PostgresSyncError/Kind/databaseUnavailable``.
/// - **What is not shared.** Evictions and expiries stay local (the table's row keeps its own
///   time to live); values a get-or-load stored stay local copies. A read-modify-write
///   (``MemoryStoreKit/MemoryStore/update(forKey:_:)``) works on the local copy: for counters
///   that several instances increment, use the database.
///
/// ## Messages
/// Every message carries this instance's ``origin``, its epoch and a sequence number; an
/// instance ignores its own messages, and a payload that is not a message of this format
/// (anyone may `NOTIFY` the channel) is ignored and reported on ``events``, never a crash.
/// Keys that do not fit in one payload are split over several messages, and a key too long
/// for any announces everything instead.
///
/// ## In a service group
/// The sync is a `Service` of `swift-service-lifecycle`: list it in a `ServiceGroup` before
/// the services that write to the store (the HTTP server), which the group stops first. On
/// graceful shutdown (SIGTERM, with the group's signals), as on cancellation, ``run()``
/// commits what is pending, for up to ``Configuration/shutdownGracePeriod``, and returns.
///
/// ```swift
/// let group = ServiceGroup(
///   services: [sync, server], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try await group.run()
/// ```
///
/// Thread safety: every method may be called from any thread. The sync calls no user code
/// but the store's cost and time-to-live functions (through the store) and the coder, never
/// while it holds its lock.
public final class PostgresSync<Key: Hashable & Sendable & Codable, Value: Sendable & Codable>:
  Service, Sendable
{
  /// The store kept coherent.
  public let store: MemoryStore<Key, Value>
  /// The settings.
  public let configuration: Configuration
  /// This instance's id in messages and in the table's `origin` column: new for every sync.
  public let origin: UUID
  /// What the sync did or met that an operator may want to see (see ``PostgresSyncEvent``);
  /// it keeps the newest 1 000 not yet read. Iterate it from one task.
  public let events: AsyncStream<PostgresSyncEvent>

  let endpoint: PostgresEndpoint
  let client: PostgresClient
  let table: SharedTable?
  let logger: Logger
  let state: Locked<SyncState<Key, Value>>
  let feed: LocalChangeFeed<Key, Value>
  let eventContinuation: AsyncStream<PostgresSyncEvent>.Continuation
  /// Wakes the publisher: local changes, or a caller of ``publishPending(timeout:)``.
  let publisherWake = AsyncSignal()
  /// Given by the publisher when it finds nothing to publish: only then does the feed's
  /// wake-up matter, so only then does the forwarder wait for it again.
  let publisherIdle = AsyncSignal()
  /// Callers of ``publishPending(timeout:)`` waiting for a number of changes to be committed.
  let commitWaiters = Locked<[(target: UInt64, signal: AsyncSignal)]>([])
  /// The publisher's own connection, on which commits run one at a time.
  let commitConnection = Locked<PostgresConnection?>(nil)
  /// Reads of the table in flight, one per key.
  let reads = Locked<[Key: Task<Value?, any Error>]>([:])
  let lifecycle = Locked(Lifecycle.created)

  enum Lifecycle {
    case created, running, stopped
  }

  /// Creates a sync for `store`: from now on, its local writes are kept to be published when
  /// ``run()`` runs.
  ///
  /// - Parameters:
  ///   - store: The store; it has one sync at most (its local change feed).
  ///   - endpoint: The database.
  ///   - configuration: The channel, the table and the rest.
  ///   - logger: Where connection losses, flushes, failed publications and rejected
  ///     payloads are logged.
  /// - Throws: ``PostgresSyncError`` with ``PostgresSyncError/Kind/invalidConfiguration`` for
  ///   a channel or table name that is not a plain lowercase identifier.
  @inlinable
  public convenience init(
    store: MemoryStore<Key, Value>, endpoint: PostgresEndpoint, configuration: Configuration,
    logger: Logger = Logger(label: "MemoryStorePostgres")
  ) throws(PostgresSyncError) {
    // Made here, where the key and value types are known: compiled for them.
    try self.init(
      store: store, endpoint: endpoint, configuration: configuration, logger: logger,
      coalescing: { changes, pending in pending.add(changes) })
  }

  /// ``init(store:endpoint:configuration:logger:)``, adding the feed's changes to the pending
  /// ones with `coalescing`.
  @usableFromInline
  init(
    store: MemoryStore<Key, Value>, endpoint: PostgresEndpoint, configuration: Configuration,
    logger: Logger, coalescing: @escaping SyncState<Key, Value>.Coalescing
  ) throws(PostgresSyncError) {
    guard SharedTable.isValidIdentifier(configuration.channel, allowingSchema: false) else {
      throw PostgresSyncError(
        .invalidConfiguration,
        "the channel \"\(configuration.channel)\" is not a name of [a-z0-9_], 1 to 63 long")
    }
    if let table = configuration.table,
      !SharedTable.isValidIdentifier(table, allowingSchema: true)
    {
      throw PostgresSyncError(
        .invalidConfiguration,
        "the table \"\(table)\" is not a name of [a-z0-9_], optionally schema-qualified")
    }
    self.store = store
    self.configuration = configuration
    self.endpoint = endpoint
    origin = UUID()
    table = configuration.table.map(SharedTable.init(name:))
    var logger = logger
    logger[metadataKey: "memorystore.channel"] = "\(configuration.channel)"
    self.logger = logger
    var clientConfiguration = endpoint.clientConfiguration
    clientConfiguration.options.connectTimeout = configuration.databaseTimeout
    clientConfiguration.options.additionalStartupParameters = Self.statementTimeout(
      configuration.databaseTimeout)
    client = PostgresClient(configuration: clientConfiguration, backgroundLogger: logger)
    state = Locked(SyncState(origin: origin, coalescing: coalescing))
    feed = store.openLocalChangeFeed()
    (events, eventContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1_000))
  }

  deinit {
    feed.close()
    eventContinuation.finish()
  }

  /// Counters since the sync was created.
  public var statistics: PostgresSyncStatistics {
    state.withLock { $0.statistics }
  }

  /// Whether the sync listens to the channel now: only then does the store keep what
  /// ``value(forKey:)`` reads.
  public var isListening: Bool {
    state.withLock { $0.isListening }
  }

  // MARK: Running

  /// Runs the sync until the calling task is cancelled or, in a service group, until graceful
  /// shutdown: creates the table if asked, listens to the channel (reconnecting with backoff),
  /// and publishes local changes. Then it commits what is pending (for up to
  /// ``Configuration/shutdownGracePeriod``), closes its connections and returns.
  ///
  /// Call it once. Connection failures never end it; they are retried and reported.
  ///
  /// - Throws: ``PostgresSyncError`` with ``PostgresSyncError/Kind/notRunning`` if it runs
  ///   already or ran before.
  public func run() async throws {
    try lifecycle.withLock { lifecycle throws(PostgresSyncError) in
      guard case .created = lifecycle else {
        throw PostgresSyncError(.notRunning, "run() was called twice on one PostgresSync")
      }
      lifecycle = .running
    }
    // Not a child task: it must outlive the cancellation of `run()` for the last commit.
    let clientTask = Task { await client.run() }
    let listener = try NotificationListener(
      channel: configuration.channel,
      configuration: listenerConfiguration(),
      logger: logger)
    await cancelWhenGracefulShutdown {
      await withTaskGroup(of: Void.self) { group in
        group.addTask { try? await listener.run() }
        group.addTask { await self.listen(to: listener) }
        group.addTask { await self.publishUntilCancelled() }
        group.addTask { await self.forwardLocalChanges() }
      }
    }
    // Cancelled, or shutting down: commit what is pending, without the caller's cancellation.
    let grace = configuration.shutdownGracePeriod
    await Task { await self.publishRemaining(within: grace) }.value
    await dropCommitConnection()
    state.withLock { $0.isListening = false }
    lifecycle.withLock { $0 = .stopped }
    clientTask.cancel()
    // Bounded: a pool's connection whose server vanished may keep a query that never ends.
    try? await withDeadline(grace, orThrow: CancellationError()) { await clientTask.value }
    resumeCommitWaiters(all: true)
  }

  private func listenerConfiguration() throws -> NotificationListener.Configuration {
    var listenerConfiguration = NotificationListener.Configuration(
      connection: try endpoint.connectionConfiguration())
    listenerConfiguration.reconnectBackoff = .init(
      initial: configuration.retryDelay, maximum: configuration.maximumRetryDelay)
    listenerConfiguration.keepAliveInterval = configuration.keepAliveInterval
    return listenerConfiguration
  }

  // MARK: Listening

  private func listen(to listener: NotificationListener) async {
    for await event in listener.events {
      switch event {
      case .listening:
        state.withLock {
          $0.isListening = true
          $0.forgetOrigins()
        }
        flush(.listening)
        emit(.listening, level: .notice, "listening to the channel")
        if let limit = configuration.warmStartLimit, table != nil {
          Task { await self.warmAfterListening(limit: limit) }
        }
      case .notification(let payload, let senderPID):
        receive(payload, from: senderPID)
      case .disconnected(let error):
        state.withLock { $0.isListening = false }
        emit(
          .connectionLost(String(reflecting: error)), level: .warning,
          "the channel's connection was lost")
        flush(.connectionLost)
      }
    }
  }

  private func warmAfterListening(limit: Int) async {
    do {
      let count = try await warmUp(limit: limit)
      logger.info("warmed the store from the table", metadata: ["entries": "\(count)"])
    } catch {
      logger.warning("warming the store failed", metadata: ["error": "\(error)"])
    }
  }

  /// Drops every entry but those with uncommitted local changes.
  private func flush(_ reason: PostgresSyncEvent.FlushReason) {
    let dropped = state.withLock { state in
      state.noteInvalidation(.flush(reason))
      return store.invalidateAll(except: state.keysToKeep)
    }
    emit(.flushed(reason, dropped: dropped), level: .notice, "flushed the store")
  }

  func receive(_ payload: String, from senderPID: Int32) {
    let message: SyncMessage
    do {
      message = try SyncMessage.parse(payload)
    } catch {
      reject(payload, error.description)
      return
    }
    guard message.origin != origin else { return }
    var keys: [Key] = []
    if case .keys(let texts) = message.scope {
      keys.reserveCapacity(texts.count)
      for text in texts {
        guard let key = configuration.keyCoding.decode(text) else {
          reject(payload, "a key does not decode: \(text.prefix(64))")
          return
        }
        keys.append(key)
      }
    }
    var flushed: (PostgresSyncEvent.FlushReason, Int)?
    state.withLock { state in
      switch state.receive(message, keys: keys) {
      case .ignore: break
      case .invalidate(let keys):
        store.invalidateValues(forKeys: keys, except: state.keysToKeep(among: keys))
      case .flush(let reason):
        flushed = (reason, store.invalidateAll(except: state.keysToKeep))
      }
    }
    if let (reason, dropped) = flushed {
      emit(.flushed(reason, dropped: dropped), level: .notice, "flushed the store")
    }
  }

  private func reject(_ payload: String, _ reason: String) {
    state.withLock { $0.statistics.payloadsRejected += 1 }
    emit(
      .ignoredPayload(reason: reason), level: .warning,
      "ignored a payload on the channel: \(reason)")
  }

  // MARK: Publishing

  /// Wakes the idle publisher when the feed has changes. While the publisher is busy, it takes
  /// the feed again after each commit anyway; then nobody waits on the feed, so a write that
  /// gives the feed its first change since a take only notes it, and resumes no task.
  private func forwardLocalChanges() async {
    while !Task.isCancelled && feed.isOpen {
      await feed.waitForChanges()
      publisherWake.signal()
      await publisherIdle.wait()
    }
  }

  private func publishUntilCancelled() async {
    var failures = 0
    while table != nil && configuration.createsTable && !Task.isCancelled {
      do {
        try await createTable()
        emit(.tableReady, level: .info, "the shared table is ready")
        break
      } catch {
        failures += 1
        emit(
          .publishFailed(String(reflecting: error)), level: .warning,
          "creating the shared table failed; retrying")
        try? await Task.sleep(for: retryDelay(afterFailures: failures))
      }
    }
    failures = 0
    while !Task.isCancelled {
      switch await publishBatch() {
      case .none:
        publisherIdle.signal()
        await publisherWake.wait()
      case .committed:
        failures = 0
      case .failed:
        failures += 1
        let delay = retryDelay(afterFailures: failures)
        try? await Task.sleep(for: delay)
      }
    }
  }

  /// Creates the shared table and its index, if missing.
  func createTable() async throws {
    guard let table else { return }
    let logger = self.logger
    try await withPooledConnection(
      within: configuration.databaseTimeout,
      orThrow: PostgresSyncError(.databaseUnavailable, "creating \(table.name) took too long")
    ) { connection in
      do {
        try await table.create(on: connection, logger: logger)
      } catch {
        // Instances of this package wait for each other (``SharedTable/create(on:logger:)``);
        // something else creating the table at the same moment ends in a unique violation on
        // the catalog (or "already exists"). Once more, for what this attempt did not reach.
        guard ["23505", "42P07"].contains(Self.sqlState(of: error)) else { throw error }
        try await table.create(on: connection, logger: logger)
      }
    }
  }

  /// Runs `body` with a connection of the pool for at most `limit`, or throws
  /// `timeoutError` (leaving `body` to end on its own). The pool's connections carry
  /// `statement_timeout` (``Configuration/databaseTimeout``): the server itself ends a
  /// statement held behind a lock, which frees the connection.
  func withPooledConnection<Result: Sendable>(
    within limit: Duration,
    orThrow timeoutError: @autoclosure @escaping @Sendable () -> PostgresSyncError,
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    try await withDeadline(limit, orThrow: timeoutError()) { [client] in
      try await client.withConnection { connection in try await body(connection) }
    }
  }

  /// Runs `body` in a transaction on the publisher's own connection (opened first if there is
  /// none) for at most `limit`, and commits. Past the limit, or on any failure, the connection
  /// is closed and dropped: a statement the server holds (behind a lock, on a frozen backend)
  /// fails at once, a transaction not yet committed rolls back, and the next commit connects
  /// anew. Commits never use the pool: closing a connection the pool has lent is not allowed.
  func withCommitConnection<Result: Sendable>(
    within limit: Duration,
    orThrow timeoutError: @autoclosure @escaping @Sendable () -> PostgresSyncError,
    _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
  ) async throws -> Result {
    // Past the limit, the statement in flight fails as its connection closes.
    let closeConnection: @Sendable () -> Void = { [self] in
      commitConnection.withLock { $0 }?.closeSoon()
    }
    do {
      return try await withDeadline(limit, orThrow: timeoutError(), onTimeout: closeConnection) {
        [self, logger] in
        let connection = try await openCommitConnection()
        _ = try await connection.query("BEGIN", logger: logger).collect()
        let result = try await body(connection)
        _ = try await connection.query("COMMIT", logger: logger).collect()
        return result
      }
    } catch {
      await dropCommitConnection()
      throw error
    }
  }

  /// The publisher's connection, opened if there is none or it was lost.
  private func openCommitConnection() async throws -> PostgresConnection {
    if let connection = commitConnection.withLock({ $0 }), !connection.isClosed {
      return connection
    }
    var connectionConfiguration = try endpoint.connectionConfiguration()
    connectionConfiguration.options.connectTimeout = TimeAmount(configuration.databaseTimeout)
    connectionConfiguration.options.additionalStartupParameters = Self.statementTimeout(
      configuration.databaseTimeout)
    let connection = try await PostgresConnection.connect(
      configuration: connectionConfiguration,
      id: commitConnectionIDs.add(1, ordering: .relaxed).newValue, logger: logger)
    // A commit that ran out of time while connecting has been given up: its connection too.
    guard !Task.isCancelled else {
      try? await connection.close()
      throw CancellationError()
    }
    commitConnection.withLock { $0 = connection }
    return connection
  }

  /// Closes the publisher's connection, if open.
  func dropCommitConnection() async {
    let connection = commitConnection.withLock { connection in
      defer { connection = nil }
      return connection
    }
    try? await connection?.close()
  }

  /// The startup parameter that has the server end any statement running longer than `limit`
  /// (``Configuration/databaseTimeout``), in whole milliseconds, at least 1.
  static func statementTimeout(_ limit: Duration) -> [(String, String)] {
    let milliseconds = max(1, Int((seconds(limit) * 1_000).rounded(.up)))
    return [("statement_timeout", "\(milliseconds)")]
  }

  /// Whether `error` says that the table does not exist (SQLSTATE 42P01).
  static func isUndefinedTable(_ error: any Error) -> Bool {
    sqlState(of: error) == "42P01"
  }

  /// The SQLSTATE code of the server's error behind `error`, if it is one.
  static func sqlState(of error: any Error) -> String? {
    let underlying = (error as? PostgresTransactionError)?.closureError ?? error
    return (underlying as? PSQLError)?.serverInfo?[.sqlState]
  }

  enum BatchOutcome {
    case none, committed, failed
  }

  /// Takes the feed's changes, and commits one batch of what is pending, if any.
  func publishBatch() async -> BatchOutcome {
    let started = state.withLock { state in
      state.add(feed.take())
      return state.beginBatch(maximumKeys: configuration.maximumBatchKeys)
    }
    guard let (batch, epoch, sequence) = started else { return .none }
    let messages: Int
    do {
      messages = try await commit(batch, epoch: epoch, firstSequence: sequence)
    } catch {
      _ = state.withLock { $0.endBatch(committedWith: nil) }
      emit(
        .publishFailed(String(reflecting: error)), level: .warning,
        "publishing local changes failed; they stay pending")
      // The table is gone (dropped, or a database restored without it): made again.
      if Self.isUndefinedTable(error) && configuration.createsTable,
        (try? await createTable()) != nil
      {
        emit(.tableReady, level: .notice, "the shared table was missing and is created again")
      }
      return .failed
    }
    state.withLock { state in
      // None of them has a change pending here: `endBatch` leaves those out.
      let overtaken = state.endBatch(committedWith: messages)
      if !overtaken.isEmpty { store.invalidateValues(forKeys: overtaken) }
    }
    resumeCommitWaiters(all: false)
    return .committed
  }

  /// Writes `batch` to the table and announces it, in one transaction; returns the number of
  /// messages sent.
  private func commit(_ batch: SyncState<Key, Value>.Changes, epoch: UInt64, firstSequence: UInt64)
    async throws -> Int
  {
    var rows: [SharedTable.Row] = []
    var removed: [String] = []
    var announced: [String] = []
    var announcesEverything = batch.clears
    for (key, change) in batch.keys {
      guard let text = try? configuration.keyCoding.encode(key) else {
        reportRejected(key, "the key cannot be written as text")
        announcesEverything = true
        continue
      }
      announced.append(text)
      switch change {
      case .remove:
        removed.append(text)
      case .set(let value):
        switch encodeRow(key, text, value) {
        case .success(let row): rows.append(row)
        case .failure(let error):
          reportRejected(key, error.detail)
          removed.append(text)
        }
      }
    }
    let messages =
      announcesEverything
      ? [SyncMessage(origin: origin, epoch: epoch, sequence: firstSequence, scope: .everything)]
      : SyncMessage.messages(
        announcing: announced, origin: origin, epoch: epoch, firstSequence: firstSequence)
    let channel = configuration.channel
    let logger = self.logger
    let table = self.table
    let origin = self.origin
    try await withCommitConnection(
      within: configuration.databaseTimeout,
      orThrow: PostgresSyncError(.databaseUnavailable, "the commit did not finish in time")
    ) { [rows, removed] connection in
      if let table {
        if batch.clears { try await table.deleteAll(on: connection, logger: logger) }
        try await table.upsert(rows, origin: origin, on: connection, logger: logger)
        try await table.delete(removed, on: connection, logger: logger)
      }
      for message in messages {
        _ = try await connection.query(
          "SELECT pg_notify(\(channel), \(message.payload()))", logger: logger
        ).collect()
      }
    }
    return messages.count
  }

  private func encodeRow(_ key: Key, _ text: String, _ value: Value) -> Result<
    SharedTable.Row, PostgresSyncError
  > {
    let data: Data
    do {
      data = try configuration.coder.encode([key: value])
    } catch {
      return .failure(
        PostgresSyncError(
          .encodingFailed, "the value failed to encode", key: String(reflecting: key),
          underlying: error))
    }
    guard data.count <= configuration.maximumValueBytes else {
      return .failure(
        PostgresSyncError(
          .valueTooLarge,
          "the value takes \(data.count) bytes, more than the \(configuration.maximumValueBytes) "
            + "a row may hold", key: String(reflecting: key)))
    }
    let terms = store.terms(forKey: key)
    let secondsToLive = terms?.timeToLive.map(Self.seconds) ?? -1
    return .success(
      SharedTable.Row(
        key: text, value: ByteBuffer(bytes: data), cost: Int64(terms?.cost ?? 0),
        secondsToLive: secondsToLive))
  }

  private func reportRejected(_ key: Key, _ reason: String) {
    emit(
      .valueRejected(key: String(reflecting: key), reason: reason), level: .error,
      "a local value was not shared: \(reason)")
  }

  /// Commits what is pending, one batch after another, until nothing is or `limit` has
  /// passed.
  private func publishRemaining(within limit: Duration) async {
    let deadline = ContinuousClock.now + limit
    var failures = 0
    while ContinuousClock.now < deadline {
      switch await publishBatch() {
      case .none: return
      case .committed: failures = 0
      case .failed:
        failures += 1
        try? await Task.sleep(for: min(retryDelay(afterFailures: failures), deadline - .now))
      }
    }
    let left = state.withLock { $0.keysToKeep.count }
    if left > 0 {
      logger.error(
        "stopped with local changes not committed", metadata: ["keys": "\(left)"])
    }
  }

  /// Returns once every local change made before the call is committed to the database and
  /// announced to the other instances.
  ///
  /// ```swift
  /// quotes["AAPL"] = quote
  /// try await sync.publishPending()   // the other instances drop AAPL from now on
  /// ```
  ///
  /// - Parameter timeout: How long to wait at most.
  /// - Throws: ``PostgresSyncError`` with ``PostgresSyncError/Kind/databaseUnavailable`` if
  ///   they are not committed in time (they stay pending), or
  ///   ``PostgresSyncError/Kind/notRunning`` if the sync stops first.
  public func publishPending(timeout: Duration = .seconds(10)) async throws {
    let target = state.withLock { state in
      state.add(feed.take())
      return state.taken
    }
    let signal = AsyncSignal()
    let isDone = state.withLock { $0.committed >= target }
    if isDone { return }
    commitWaiters.withLock { $0.append((target, signal)) }
    publisherWake.signal()
    let deadline = ContinuousClock.now + timeout
    while true {
      if state.withLock({ $0.committed >= target }) { return }
      guard lifecycle.withLock({ if case .stopped = $0 { false } else { true } }) else {
        throw PostgresSyncError(.notRunning, "the sync stopped before the changes were committed")
      }
      guard ContinuousClock.now < deadline else {
        throw PostgresSyncError(
          .databaseUnavailable, "the local changes were not committed within \(timeout)")
      }
      try? await withTimeout(deadline - .now, orThrow: CancellationError()) {
        await signal.wait()
      }
    }
  }

  private func resumeCommitWaiters(all: Bool) {
    let committed = state.withLock { $0.committed }
    let due = commitWaiters.withLock { waiters in
      let due = waiters.filter { all || $0.target <= committed }
      waiters.removeAll { all || $0.target <= committed }
      return due
    }
    for waiter in due { waiter.signal.signal() }
  }

  /// The jittered delay before retrying after `failures` consecutive failures: the same rule
  /// as the listener's reconnections.
  private func retryDelay(afterFailures failures: Int) -> Duration {
    var random = SystemRandomNumberGenerator()
    return NotificationListener.Backoff(
      initial: configuration.retryDelay, maximum: configuration.maximumRetryDelay
    ).delay(afterFailures: max(failures, 1), using: &random)
  }

  // MARK: Reading

  /// The value of `key`: the store's, or, on a miss, the table's, which the store then keeps
  /// (while the channel is listened to). One read of the table per key at a time: callers
  /// that miss meanwhile wait for it.
  ///
  /// ```swift
  /// if let session = try await sync.value(forKey: token) { … }
  /// ```
  ///
  /// A key with a local change not yet committed answers with that change, which the table
  /// does not have yet. Without a table, a miss is `nil`.
  ///
  /// - Throws: ``PostgresSyncError`` with ``PostgresSyncError/Kind/databaseUnavailable`` if
  ///   the table cannot be read in time, ``PostgresSyncError/Kind/decodingFailed`` if its row
  ///   does not decode.
  public func value(forKey key: Key) async throws -> Value? {
    if let value = store[key] { return value }
    if let change = state.withLock({ $0.uncommitted(key) }) {
      guard case .set(let value)? = change else { return nil }
      return value
    }
    guard table != nil else { return nil }
    let read = reads.withLock { reads in
      if let running = reads[key] { return running }
      let read = Task { try await self.readThrough(key) }
      reads[key] = read
      return read
    }
    return try await read.value
  }

  private func readThrough(_ key: Key) async throws -> Value? {
    defer { _ = reads.withLock { $0.removeValue(forKey: key) } }
    guard let table else { return nil }
    let mark = store.loadMark()
    let text = try configuration.keyCoding.encode(key)
    let row: SharedTable.StoredRow?
    do {
      row = try await withPooledConnection(
        within: configuration.databaseTimeout,
        orThrow: PostgresSyncError(
          .databaseUnavailable, "reading the table took too long", key: text)
      ) { [logger] connection in
        try await table.row(text, on: connection, logger: logger)
      }
    } catch let error as PostgresSyncError {
      throw error
    } catch {
      throw PostgresSyncError(
        .databaseUnavailable, "reading \(table.name) failed", key: String(reflecting: key),
        underlying: error)
    }
    state.withLock { $0.statistics.tableReads += 1 }
    guard let row else { return nil }
    let value = try decode(row, as: key)
    if state.withLock({ $0.isListening }) {
      store.insertLoaded(
        value, forKey: key, cost: Int(row.cost),
        timeToLive: row.secondsToLive.map { Duration.seconds($0) }, after: mark)
    }
    return value
  }

  private func decode(_ row: SharedTable.StoredRow, as key: Key) throws(PostgresSyncError) -> Value
  {
    let entries: [Key: Value]
    do {
      entries = try configuration.coder.decode(
        Data(row.value.readableBytesView), as: [Key: Value].self)
    } catch {
      throw PostgresSyncError(
        .decodingFailed, "the row of \(row.key) in \(table?.name ?? "the table") does not decode",
        key: String(reflecting: key), underlying: error)
    }
    guard entries.count == 1, let value = entries[key] else {
      throw PostgresSyncError(
        .decodingFailed,
        "the row of \(row.key) in \(table?.name ?? "the table") holds another key's value",
        key: String(reflecting: key))
    }
    return value
  }

  /// Fills the store with the `limit` rows of the table written last (newest first), those
  /// not expired, without replacing what the store holds; returns how many it stored. What
  /// an invalidation drops while it runs is not stored.
  ///
  /// ``run()`` does it once the channel is listened to when
  /// ``Configuration/warmStartLimit`` is set.
  ///
  /// - Throws: ``PostgresSyncError`` with ``PostgresSyncError/Kind/databaseUnavailable`` if
  ///   the table cannot be read.
  @discardableResult
  public func warmUp(limit: Int) async throws -> Int {
    guard let table, limit > 0 else { return 0 }
    let mark = store.loadMark()
    let rows: [SharedTable.StoredRow]
    do {
      rows = try await client.withConnection { [logger] connection in
        try await table.newestRows(limit: limit, on: connection, logger: logger)
      }
    } catch {
      throw PostgresSyncError(
        .databaseUnavailable, "reading \(table.name) to warm the store failed", underlying: error)
    }
    var stored = 0
    for row in rows {
      guard let key = configuration.keyCoding.decode(row.key),
        let value = try? decode(row, as: key)
      else {
        logger.warning("a row of the table does not decode", metadata: ["key": "\(row.key)"])
        continue
      }
      let isStored = store.insertLoaded(
        value, forKey: key, cost: Int(row.cost),
        timeToLive: row.secondsToLive.map { Duration.seconds($0) }, after: mark)
      if isStored { stored += 1 }
    }
    return stored
  }

  // MARK: Events

  private func emit(_ event: PostgresSyncEvent, level: Logger.Level, _ message: String) {
    eventContinuation.yield(event)
    logger.log(level: level, "\(message)", metadata: ["event": "\(event)"])
  }

  static func seconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}

/// Ids of the publishers' connections, for their logs.
private let commitConnectionIDs = Atomic<Int>(0)
