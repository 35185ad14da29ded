import Foundation
import MemoryStoreKit
import PostgresNIO
import ServiceLifecycleTestKit
import Synchronization
import Testing

@testable import MemoryStorePostgres

/// Several instances of one store, each with its own connections, kept coherent through a
/// real PostgreSQL server.
@Suite("PostgresSync: coherence") struct PostgresSyncCoherenceTests {
  @Test func aWriteOnOneInstanceReachesTheOthersAndReplacesTheirCopies() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(3, database: database) { instances in
        let (a, b, c) = (instances[0], instances[1], instances[2])
        a.store["k"] = 1
        try await a.sync.publishPending()
        try await eventually("a's announcement received") {
          b.sync.statistics.messagesReceived >= 1 && c.sync.statistics.messagesReceived >= 1
        }
        #expect(try await b.sync.value(forKey: "k") == 1, "read through the table")
        #expect(try await c.sync.value(forKey: "k") == 1)
        #expect(b.store["k"] == 1, "kept after the read")
        let bInvalidations = b.store.removals.makeAsyncIterator()
        let cInvalidations = c.store.removals.makeAsyncIterator()
        a.store["k"] = 2
        try await a.sync.publishPending()
        try await expectInvalidation(of: "k", bInvalidations)
        try await expectInvalidation(of: "k", cInvalidations)
        #expect(try await b.sync.value(forKey: "k") == 2)
        #expect(try await c.sync.value(forKey: "k") == 2)
        #expect(a.store["k"] == 2, "an instance ignores its own messages")
        #expect(a.sync.statistics.messagesPublished == 2)
      }
    }
  }

  @Test func removalsAndClearsConverge() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(2, database: database) { instances in
        let (a, b) = (instances[0], instances[1])
        a.store.addEntries(["x": 1, "y": 2, "z": 3])
        try await a.sync.publishPending()
        // b hears of the keys first: a read that the announcement overtook would not be kept.
        try await eventually("a's announcement received") {
          b.sync.statistics.messagesReceived >= 1
        }
        for key in ["x", "y", "z"] { _ = try await b.sync.value(forKey: key) }
        #expect(b.store.count == 3)
        b.store["x"] = nil  // removed on the other instance
        try await b.sync.publishPending()
        try await eventually("x dropped on a") { a.store["x"] == nil }
        #expect(try await a.sync.value(forKey: "x") == nil)
        let start = b.events.count
        a.store.removeAll()
        try await a.sync.publishPending()
        try await b.events.first(from: start, "a flush requested by a") {
          if case .flushed(.requested(let origin), _) = $0 { return origin == a.sync.origin }
          return false
        }
        #expect(b.store.isEmpty)
        #expect(try await b.sync.value(forKey: "y") == nil, "the table was cleared too")
      }
    }
  }

  @Test func localWritesNotYetCommittedSurviveInvalidations() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(2, database: database) { instances in
        let (a, b) = (instances[0], instances[1])
        let table = try #require(b.sync.configuration.table)
        // Hold the table, so that b's next commit waits in flight.
        let locker = try await database.connect()
        try await locker.query("BEGIN", logger: testLogger)
        try await locker.query(
          "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: testLogger)
        b.store.addEntries(["k": 11, "j": 1])  // one write: one batch in flight
        try await waitForBlockedQuery(on: database, table: table)
        #expect(b.sync.state.withLock { $0.inFlight?.keys.count } == 2, "the blocked commit")
        // Another instance announces k and j meanwhile.
        let message = SyncMessage(origin: UUID(), epoch: 1, sequence: 1, scope: .keys(["k", "j"]))
        try await notify(b.sync.configuration.channel, message.payload(), database: database)
        try await eventually("the announcement received") {
          b.sync.statistics.keysInvalidated == 2
        }
        #expect(b.store["k"] == 11 && b.store["j"] == 1, "writes in flight are kept")
        b.store["k"] = 12  // changed again before the commit: pending after it
        try await locker.query("ROLLBACK", logger: testLogger)
        try await locker.close()
        try await b.sync.publishPending()
        // Which of the commits came last is unknown to b: a key changed elsewhere while its
        // write was in flight is dropped once it is committed, unless b changed it again.
        #expect(b.store["j"] == nil)
        #expect(try await b.sync.value(forKey: "j") == 1, "the table has b's write")
        #expect(b.store["k"] == 12)
        try await eventually("a hearing of k") { a.sync.statistics.keysInvalidated >= 3 }
        #expect(try await a.sync.value(forKey: "k") == 12)
      }
    }
  }

  @Test func instancesStartingTogetherCreateTheTableWithoutAFailure() async throws {
    try await TestDatabase.withServer { database in
      // Six instances racing on CREATE TABLE IF NOT EXISTS for one new table.
      try await withInstances(6, database: database) { instances in
        for instance in instances {
          let failures = instance.events.all.filter {
            if case .publishFailed = $0 { return true }
            return false
          }
          #expect(failures.isEmpty, "\(failures)")
        }
        instances[0].store["k"] = 1
        try await instances[0].sync.publishPending()
        #expect(try await instances[5].sync.value(forKey: "k") == 1)
      }
    }
  }

  @Test func aServiceGroupsGracefulShutdownCommitsWhatIsPendingAndEndsTheSync() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(1, database: database) { instances in
        let reader = instances[0]
        let store = MemoryStore<String, Int>(name: "service")
        let sync = try PostgresSync(
          store: store, endpoint: PostgresEndpoint(url: database.url + "?sslmode=disable"),
          configuration: reader.sync.configuration)
        let events = SyncEventLog(sync.events)
        try await testGracefulShutdown { trigger in
          let run = Task { try await sync.run() }
          try await events.first("listening") { $0 == .listening }
          store["shutdown"] = 7
          trigger.triggerGracefulShutdown()
          // Without graceful shutdown ending it, run() would go on until cancelled.
          try await withDeadline(.seconds(30), orThrow: WaitTimedOut(what: "run() to end")) {
            try await run.value
          }
        }
        #expect(sync.statistics.changesPublished >= 1)
        #expect(try await reader.sync.value(forKey: "shutdown") == 7, "committed to the table")
      }
    }
  }

  @Test func aCommitTheServerHoldsTimesOutAndStoppingStillEndsInTime() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(
        1, database: database,
        configure: {
          $0.databaseTimeout = .milliseconds(300)
          $0.shutdownGracePeriod = .seconds(1)
        }
      ) { instances in
        let a = instances[0]
        let table = try #require(a.sync.configuration.table)
        // The table locked for the whole test: every commit waits for it.
        let locker = try await database.connect()
        do {
          try await locker.query("BEGIN", logger: testLogger)
          try await locker.query(
            "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: testLogger)
          let start = a.events.count
          a.store["k"] = 1
          try await a.events.first(from: start, "the commit given up") {
            if case .publishFailed = $0 { return true }
            return false
          }
          #expect(a.store["k"] == 1, "the write stays in the store")
          #expect(a.sync.state.withLock { $0.keysToKeep } == ["k"], "and pending")
          // Stopping with the table still locked: run() gives up the last commit after the
          // grace period (1 s), instead of waiting for the lock.
          let stopped = ContinuousClock.now
          a.task.cancel()
          try await withDeadline(.seconds(30), orThrow: WaitTimedOut(what: "run() to end")) {
            _ = try? await a.task.value
          }
          let took = ContinuousClock.now - stopped
          #expect(took < .seconds(10), "run() ended \(took) after its cancellation")
        } catch {
          try? await locker.close()
          throw error
        }
        try await locker.query("ROLLBACK", logger: testLogger)
        try await locker.close()
      }
    }
  }

  @Test func aReadThatAnInvalidationOvertakesIsNotKept() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(1, database: database) { instances in
        let a = instances[0]
        let table = try #require(a.sync.configuration.table)
        a.store["k"] = 1
        try await a.sync.publishPending()
        a.store.invalidateAll()
        // Hold the table so that the read waits, announce k meanwhile from "another
        // instance", then let the read go: it returns the row it read, but must not keep it.
        let locker = try await database.connect()
        try await locker.query("BEGIN", logger: testLogger)
        try await locker.query(
          "LOCK TABLE \(unescaped: table) IN ACCESS EXCLUSIVE MODE", logger: testLogger)
        let read = Task { try await a.sync.value(forKey: "k") }
        try await eventually("the read waiting for the lock") {
          a.sync.statistics.tableReads == 0 && !read.isCancelled
        }
        try await waitForBlockedQuery(on: database, table: table)
        let message = SyncMessage(origin: UUID(), epoch: 1, sequence: 1, scope: .keys(["k"]))
        try await notify(a.sync.configuration.channel, message.payload(), database: database)
        try await eventually("the invalidation received") {
          a.sync.statistics.keysInvalidated == 1
        }
        try await locker.query("ROLLBACK", logger: testLogger)
        try await locker.close()
        #expect(try await read.value == 1, "the caller gets what was read")
        #expect(a.store["k"] == nil, "but the store does not keep it")
      }
    }
  }

  @Test func aDatabaseThatIsDownGivesTypedErrorsAndLosesNothing() async throws {
    try await TestDatabase.withExclusiveServer { database in
      try await withInstances(2, database: database) { instances in
        let (a, b) = (instances[0], instances[1])
        a.store["k"] = 1
        try await a.sync.publishPending()
        #expect(try await b.sync.value(forKey: "k") == 1)
        let bStart = b.events.count
        try await database.kill()
        try await b.events.first(from: bStart, "b losing the channel") {
          if case .connectionLost = $0 { return true }
          return false
        }
        #expect(!b.store.contains("k"), "flushed when the connection was lost")
        #expect(!b.sync.isListening)
        // Writes go on locally and stay pending; reads that miss fail with a typed error.
        a.store["k"] = 2
        a.store["new"] = 3
        #expect(a.store["k"] == 2, "read-your-writes during the outage")
        do {
          _ = try await b.sync.value(forKey: "k")
          Issue.record("a read of a database that is down succeeded")
        } catch let error as PostgresSyncError {
          #expect(error.kind == .databaseUnavailable)
        }
        let bRestart = b.events.count
        try await database.restart()
        try await a.sync.publishPending(timeout: .seconds(60))
        try await b.events.first(from: bRestart, within: .seconds(60), "b listening again") {
          $0 == .listening
        }
        #expect(try await b.sync.value(forKey: "k") == 2)
        #expect(try await b.sync.value(forKey: "new") == 3)
        // a's writes made during the outage reached the table: a reads them back too (its own
        // flush on listening again may have dropped the copies it held).
        #expect(try await a.sync.value(forKey: "k") == 2)
        #expect(try await a.sync.value(forKey: "new") == 3)
      }
    }
  }
}

/// Payloads on the channel that are not messages of the sync, or that show missed messages.
@Suite("PostgresSync: messages") struct PostgresSyncMessageTests {
  @Test func payloadsThatAreNotOursAreIgnoredAndReported() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(1, database: database) { instances in
        let a = instances[0]
        a.store.addEntries(["k": 1, "j": 2])
        let channel = a.sync.configuration.channel
        let hostile = [
          "", "hello", "{", "{}", "[1,2]", #"{"ms":99,"o":"x"}"#,
          #"{"ms":1,"o":"not-a-uuid","e":1,"s":1,"k":["k"]}"#,
          #"{"ms":1,"o":"\#(UUID())","e":1,"s":0,"k":["k"]}"#,
          #"{"ms":1,"o":"\#(UUID())","e":1,"s":1}"#,
          #"{"ms":1,"o":"\#(UUID())","e":1,"s":1,"k":"k"}"#,
          #"{"ms":1,"o":"\#(UUID())","e":1,"s":1,"k":[1]}"#,
          String(repeating: "x", count: 7_999),
          "{" + String(repeating: " ", count: 7_998),
        ]
        for payload in hostile { try await notify(channel, payload, database: database) }
        try await eventually("every payload rejected") {
          a.sync.statistics.payloadsRejected == UInt64(hostile.count)
        }
        #expect(a.store.count == 2, "no hostile payload dropped anything")
        #expect(a.sync.isListening)
      }
    }
  }

  @Test func aKeyThatDoesNotDecodeRejectsTheMessage() async throws {
    try await TestDatabase.withServer { database in
      let endpoint = try PostgresEndpoint(url: database.url + "?sslmode=disable")
      let store = MemoryStore<Int, Int>()
      let name = uniqueName("intkeys")
      let sync = try PostgresSync(
        store: store, endpoint: endpoint, configuration: .init(channel: name))
      let events = SyncEventLog(sync.events)
      let task = Task { try await sync.run() }
      defer { task.cancel() }
      try await events.first("listening") { $0 == .listening }
      store[1] = 1
      let message = SyncMessage(origin: UUID(), epoch: 1, sequence: 1, scope: .keys(["one"]))
      try await notify(name, message.payload(), database: database)
      try await events.first("the rejection") {
        if case .ignoredPayload = $0 { return true }
        return false
      }
      #expect(store[1] == 1)
    }
  }

  @Test func aGapOrANewEpochFlushes() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(1, database: database) { instances in
        let a = instances[0]
        let channel = a.sync.configuration.channel
        let other = UUID()
        func send(epoch: UInt64, sequence: UInt64, _ keys: [String]) async throws {
          let message = SyncMessage(
            origin: other, epoch: epoch, sequence: sequence, scope: .keys(keys))
          try await notify(channel, message.payload(), database: database)
        }
        a.store.addEntries(["a": 1, "b": 2, "c": 3])
        // Committed first: an invalidation never drops a local write on its way out.
        try await a.sync.publishPending()
        try await send(epoch: 1, sequence: 1, ["a"])
        try await eventually("a invalidated") { a.store["a"] == nil }
        #expect(a.store.count == 2, "one key, not a flush")
        let start = a.events.count
        try await send(epoch: 1, sequence: 3, ["b"])  // 2 is missing
        try await a.events.first(from: start, "a gap") {
          $0 == .flushed(.sequenceGap(origin: other, expected: 2, got: 3), dropped: 2)
        }
        #expect(a.store.isEmpty)
        a.store["d"] = 4
        try await a.sync.publishPending()
        let again = a.events.count
        try await send(epoch: 2, sequence: 1, ["x"])
        try await a.events.first(from: again, "a new epoch") {
          if case .flushed(.epochChanged(let origin), _) = $0 { return origin == other }
          return false
        }
        #expect(a.store.isEmpty, "the committed write was flushed too")
        #expect(try await a.sync.value(forKey: "d") == 4, "and reads back from the table")
      }
    }
  }

  @Test func manyKeysSplitOverMessagesAndAHugeKeyAnnouncesEverything() async throws {
    try await TestDatabase.withServer { database in
      try await withInstances(2, database: database, table: false) { instances in
        let (a, b) = (instances[0], instances[1])
        let keys = (0..<2_000).map { "a-rather-long-key-\($0)" }
        b.store.addEntries(Dictionary(uniqueKeysWithValues: keys.map { ($0, 0) }))
        b.store["untouched"] = 1
        // Committed first: an invalidation never drops a local write on its way out.
        try await b.sync.publishPending()
        let published = b.sync.statistics.messagesPublished
        try await eventually("b's announcements received") {
          a.sync.statistics.messagesReceived >= published
        }
        a.store.addEntries(Dictionary(uniqueKeysWithValues: keys.map { ($0, 1) }))
        try await a.sync.publishPending()
        try await eventually("every key dropped on b") { b.store.count == 1 }
        #expect(a.sync.statistics.messagesPublished > 1, "split over several messages")
        #expect(b.sync.statistics.flushes == 1, "no flush but the first listening one")
        let start = b.events.count
        a.store[String(repeating: "k", count: 10_000)] = 1
        try await a.sync.publishPending()
        try await b.events.first(from: start, "everything announced") {
          if case .flushed(.requested, _) = $0 { return true }
          return false
        }
        #expect(b.store.isEmpty)
      }
    }
  }
}

/// Waits for the next removal of `key` by an invalidation.
func expectInvalidation(
  of key: String, _ iterator: MemoryStore<String, Int>.Removals.Iterator,
  within limit: Duration = .seconds(30)
) async throws {
  let found = try await withTimeout(limit, orThrow: WaitTimedOut(what: "\(key) invalidated")) {
    var iterator = iterator
    while let removal = await iterator.next() {
      if removal.key == key && removal.cause == .invalidated { return true }
    }
    return false
  }
  #expect(found)
}

/// Waits until a query on `table` waits for a lock.
func waitForBlockedQuery(on database: TestDatabase, table: String) async throws {
  try await database.withConnection { connection in
    let deadline = ContinuousClock.now + .seconds(30)
    while ContinuousClock.now < deadline {
      let rows = try await connection.query(
        """
        SELECT count(*)::int8 FROM pg_stat_activity
        WHERE wait_event_type = 'Lock' AND query LIKE '%' || \(table) || '%'
        """, logger: testLogger)
      for try await (count) in rows.decode(Int64.self) where count > 0 { return }
      try await Task.sleep(for: .milliseconds(5))
    }
    throw WaitTimedOut(what: "a read blocked on the table")
  }
}

/// The time limits on work with the database.
@Suite("PostgresSync: time limits") struct DeadlineTests {
  /// An operation that ignores cancellation, as a query on a connection that died at the
  /// wrong moment may: the deadline still ends the wait, and the operation is cancelled and
  /// left to end on its own.
  @Test func aDeadlineEndsTheWaitForAnOperationThatIgnoresCancellation() async throws {
    let release = AsyncSignal()
    let ended = AsyncSignal()
    let timedOut = Atomic<Bool>(false)
    let start = ContinuousClock.now
    let noteTimeout: @Sendable () -> Void = { timedOut.store(true, ordering: .relaxed) }
    await #expect(throws: WaitTimedOut.self) {
      try await withDeadline(
        .milliseconds(100), orThrow: WaitTimedOut(what: "the operation"), onTimeout: noteTimeout
      ) {
        // Ignores cancellation: the task that resumes it is not a child.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
          Task {
            await release.wait()
            continuation.resume()
          }
        }
        ended.signal()
      }
    }
    let took = ContinuousClock.now - start
    #expect(took < .seconds(10), "the wait ended after \(took)")
    let calledOnTimeout = timedOut.load(ordering: .relaxed)
    #expect(calledOnTimeout, "onTimeout was called")
    release.signal()
    try await withTimeout(.seconds(30), orThrow: WaitTimedOut(what: "the operation to end")) {
      await ended.wait()
    }
  }

  @Test func aDeadlineReturnsTheOperationsResultOrError() async throws {
    let value = try await withDeadline(.seconds(30), orThrow: WaitTimedOut(what: "")) { 42 }
    #expect(value == 42)
    await #expect(throws: CancellationError.self) {
      try await withDeadline(.seconds(30), orThrow: WaitTimedOut(what: "")) {
        throw CancellationError()
      }
    }
  }

  /// A keep-alive query that the connection's loss catches in flight may never complete, even
  /// once the connection is closed: the listener still gives the connection up at the
  /// keep-alive's timeout, closing it and recording why, and reports the loss.
  @Test func aKeepAliveWhoseQueryNeverEndsGivesUpAtItsTimeout() async throws {
    let closed = Atomic<Bool>(false)
    let cause = LossCause()
    let start = ContinuousClock.now
    let error = await #expect(throws: ListenerError.self) {
      try await NotificationListener.keepAlive(
        within: .milliseconds(100), channel: "c", backendPID: 7, cause: cause,
        close: { closed.store(true, ordering: .relaxed) }, query: Self.neverEnding)
    }
    let took = ContinuousClock.now - start
    #expect(error?.code == .keepAliveTimedOut)
    #expect(cause.recorded?.code == .keepAliveTimedOut, "the cause is recorded")
    let wasClosed = closed.load(ordering: .relaxed)
    #expect(wasClosed, "the connection is closed")
    #expect(took < .seconds(10), "gave up after \(took)")
  }

  /// Stopping the listener while a keep-alive query hangs: the keep-alive ends at once, without
  /// waiting for the query or for its timeout.
  @Test func aKeepAliveEndsWhenItsTaskIsCancelledWithoutWaitingForItsQuery() async throws {
    let started = AsyncSignal()
    let keepAlive = Task {
      try await NotificationListener.keepAlive(
        within: .seconds(3_600), channel: "c", backendPID: 7, cause: LossCause(), close: {}
      ) {
        started.signal()
        await Self.neverEnding()
      }
    }
    await started.wait()
    keepAlive.cancel()
    let outcome = try await withTimeout(.seconds(30), orThrow: WaitTimedOut(what: "the end")) {
      await keepAlive.result
    }
    #expect(throws: CancellationError.self) { try outcome.get() }
  }

  /// An operation that never ends and ignores cancellation, as a query the server's loss left
  /// behind may.
  @Sendable static func neverEnding() async {
    await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
  }
}
