import Logging
import MemoryStoreKit
import MemoryStorePostgres

/// The narrated run: three instances start; a flag set on one is read through on the others;
/// a change on one is dropped by the others; the server crashes and comes back; every
/// instance reads the same flags in the end.
enum Walkthrough {
  typealias Flags = [String: FeatureFlag]

  /// Runs the walkthrough; returns the exit status: 0 when everything checked held.
  static func main(logger: Logger) async -> Int32 {
    say("Three instances of a feature-flag service, each with a MemoryStore of its own that a")
    say("PostgresSync keeps coherent with the others' through PostgreSQL.")
    let server: DatabaseServer
    do {
      server = try await DatabaseServer.obtain()
    } catch {
      say("FAILED: no database: \(error)")
      return 1
    }
    let status: Int32
    do {
      try await run(on: server, logger: logger)
      say("\nEverything checked held.")
      status = 0
    } catch {
      say("\nFAILED: \(error)")
      status = 1
    }
    await server.stopIfOwned()
    return status
  }

  private static func run(on server: DatabaseServer, logger: Logger) async throws {
    let name = "feature_flags_" + String(UInt32.random(in: 0...UInt32.max), radix: 36)
    var configuration = PostgresSync<String, FeatureFlag>.Configuration(
      channel: name, table: name)
    // A read or a commit gives up after 2 s (the default is 5): the outage below is short.
    configuration.databaseTimeout = .seconds(2)
    let endpoint = try PostgresEndpoint(url: server.url)
    say("  database: \(server)")
    say("  channel and table: \(name)")
    var instances: [Instance] = []
    let started = ContinuousClock.now
    do {
      for number in 1...3 {
        var logger = logger
        logger[metadataKey: "instance"] = "\(number)"
        instances.append(
          try Instance(
            name: "instance \(number)", endpoint: endpoint, configuration: configuration,
            logger: logger))
      }
      try await scenario(instances, server: server, started: started)
    } catch {
      for instance in instances { _ = await instance.stop(within: .seconds(10)) }
      throw error
    }
    say("\n7. Stopping: each sync commits what is pending, then closes its connections.")
    for instance in instances {
      let stopped = await instance.stop(within: .seconds(10))
      try check(stopped, "\(instance.name) did not stop within 10 s")
    }
  }

  private static func scenario(
    _ instances: [Instance], server: DatabaseServer, started: ContinuousClock.Instant
  ) async throws {
    let (one, two, three) = (instances[0], instances[1], instances[2])

    say("\n1. Three instances start: each opens a pool and a listening connection of its own.")
    for instance in instances {
      try await instance.waitUntilListening(within: .seconds(20))
    }
    say("   all three listen to the channel after \((ContinuousClock.now - started).readable)")

    let initial: Flags = [
      "checkout.new-flow": .on(10), "search.semantic": .off, "banner.winter-sale": .on(100),
    ]
    try await setAndReadThrough(initial, on: one, readers: [two, three])

    let key = "checkout.new-flow"
    var expected = initial
    expected[key] = .on(50)
    try await change(key, to: .on(50), on: two, others: [one, three])

    guard server.directory != nil else {
      say("\n4-5. The outage is skipped: the server came from DATABASE_URL, and without")
      say("   MEMORYSTORE_PG_DIR (the directory Scripts/postgres-test-server started it in)")
      say("   the example cannot crash and restart it.")
      try await converge(instances, expected)
      return
    }
    try await outage(instances, server: server, key: key)
    expected[key] = .off
    expected["search.semantic"] = .on(100)
    try await converge(instances, expected)
  }

  /// Step 2: `flags` set on `writer`, read through the table on `readers`.
  private static func setAndReadThrough(
    _ flags: Flags, on writer: Instance, readers: [Instance]
  ) async throws {
    say("\n2. On \(writer.name), three flags are set: local writes, committed and announced in")
    say("   the background.")
    let received = readers.map { $0.sync.statistics.messagesReceived }
    let written = ContinuousClock.now
    for (key, flag) in flags { writer.store[key] = flag }
    let own = writer.store.values(forKeys: flags.keys)
    try check(own == flags, "\(writer.name) reads \(listing(own)) after writing \(listing(flags))")
    say("   \(writer.name) reads its writes at once: \(listing(own))")
    try await writer.sync.publishPending(timeout: .seconds(10))
    say("   committed and announced \((ContinuousClock.now - written).readable) after the writes")
    // A read of the table that the announcement of the row it read overtakes returns the row
    // but does not keep it (the store cannot tell which write the announcement was about):
    // the readers wait for it first.
    for (reader, count) in zip(readers, received) {
      let arrived = try await reader.waitForMessages(count + 1, within: .seconds(10)) - written
      say("   the announcement reached \(reader.name) \(arrived.readable) after the writes")
    }
    for reader in readers {
      let read = try await readAll(flags.keys, on: reader)
      try check(read == flags, "\(reader.name) reads \(listing(read)), not \(listing(flags))")
      say(
        "   \(reader.name) reads them through the table (\(reader.sync.statistics.tableReads) "
          + "reads); its store keeps them: \(reader.store.count) entries")
    }
    let reader = readers[0]
    let reads = reader.sync.statistics.tableReads
    _ = try await reader.sync.value(forKey: "checkout.new-flow")
    try check(
      reader.sync.statistics.tableReads == reads,
      "a second read of checkout.new-flow on \(reader.name) went to the table")
    say("   read again on \(reader.name), checkout.new-flow is a hit in its store: no table read")
  }

  /// Step 3: `key` changed on `writer`; `others` drop their copies and read the new value.
  private static func change(
    _ key: String, to flag: FeatureFlag, on writer: Instance, others: [Instance]
  ) async throws {
    say("\n3. On \(writer.name), \(key) changes to \(flag).")
    let watchers = others.map { other in
      Task { try await other.waitUntilDropped(key, within: .seconds(10)) }
    }
    let entriesBefore = others.map { $0.store.count }
    let changed = ContinuousClock.now
    writer.store[key] = flag
    try await writer.sync.publishPending(timeout: .seconds(10))
    say("   committed and announced \((ContinuousClock.now - changed).readable) after the write")
    for (other, watcher) in zip(others, watchers) {
      let dropped = try await watcher.value - changed
      say("   \(other.name) dropped its copy \(dropped.readable) after the write")
      try check(dropped < .seconds(1), "\(other.name) took \(dropped.readable) to drop \(key)")
    }
    for (other, before) in zip(others, entriesBefore) {
      try check(
        other.store.count == before - 1,
        "\(other.name) holds \(other.store.count) entries, not the \(before - 1) it did not drop")
    }
    say("   only that key: each still holds its \(entriesBefore[0] - 1) other flags")
    for other in others {
      let read = try await other.sync.value(forKey: key)
      try check(read == flag, "\(other.name) reads \(key) = \(text(read)), not \(flag)")
    }
    say("   both read it again through the table: \(key) = \(flag)")
  }

  /// Steps 4 and 5: the server crashes, and comes back.
  private static func outage(_ instances: [Instance], server: DatabaseServer, key: String)
    async throws
  {
    let (one, three) = (instances[0], instances[2])
    say("\n4. The server crashes (pg_ctl stop -m immediate).")
    let beforeCrash = instances.map { $0.events.count }
    try await server.kill()
    for (instance, start) in zip(instances, beforeCrash) {
      let event = try await instance.events.first(
        after: start, within: .seconds(15), "\(instance.name) flushing on the lost connection"
      ) {
        if case .flushed(.connectionLost, _) = $0 { return true }
        return false
      }
      guard case .flushed(_, let dropped) = event else { preconditionFailure("matched above") }
      try check(!instance.sync.isListening, "\(instance.name) says it listens")
      say("   \(instance.name) lost the channel and flushed its store: \(dropped) entries dropped")
    }

    let writes: Flags = [key: .off, "search.semantic": .on(100)]
    say("   on \(one.name), \(key) is switched off and search.semantic on, meanwhile:")
    for (key, flag) in writes { one.store[key] = flag }
    let local = try await readAll(writes.keys, on: one)
    try check(local == writes, "\(one.name) reads \(listing(local)), not \(listing(writes))")
    say("   \(one.name) reads them back: \(listing(local)) (pending, kept in its store)")

    let missed = ContinuousClock.now
    do {
      let read = try await three.sync.value(forKey: "banner.winter-sale")
      throw CheckFailed(
        "\(three.name) read banner.winter-sale = \(text(read)) while the database is down")
    } catch let error as PostgresSyncError {
      try check(
        error.kind == .databaseUnavailable,
        "\(three.name)'s read failed with \(error), not databaseUnavailable")
      say(
        "   \(three.name) misses banner.winter-sale: its read of the table fails after "
          + "\((ContinuousClock.now - missed).readable)")
      say("   with PostgresSyncError.\(error.kind): \(error.detail)")
    }

    say("\n5. The server is restarted, on the same port.")
    let beforeRestart = instances.map { $0.events.count }
    let restarting = ContinuousClock.now
    try await server.restart()
    say("   it accepts connections again after \((ContinuousClock.now - restarting).readable)")
    try await one.sync.publishPending(timeout: .seconds(30))
    say(
      "   \(one.name) committed its pending writes \((ContinuousClock.now - restarting).readable) "
        + "after the restart began")
    for (instance, start) in zip(instances, beforeRestart) {
      try await instance.waitUntilListening(after: start, within: .seconds(30))
      try check(instance.sync.isListening, "\(instance.name) does not say it listens")
    }
    say(
      "   all three listen to the channel again \((ContinuousClock.now - restarting).readable) "
        + "after the restart began (each flushed its store once more)")
  }

  /// Step 6: every instance reads `expected`.
  private static func converge(_ instances: [Instance], _ expected: Flags) async throws {
    say("\n6. What each instance reads now:")
    for instance in instances {
      let read = try await readAll(expected.keys, on: instance)
      say("   \(instance.name): \(listing(read))")
      try check(
        read == expected, "\(instance.name) reads \(listing(read)), not \(listing(expected))")
    }
  }

  /// The flags of `keys` that `instance` reads: from its store, else from the table.
  private static func readAll(_ keys: some Collection<String>, on instance: Instance)
    async throws -> Flags
  {
    var flags: Flags = [:]
    for key in keys {
      flags[key] = try await instance.sync.value(forKey: key)
    }
    return flags
  }

  /// `banner.winter-sale = on 100%, checkout.new-flow = off, …`
  private static func listing(_ flags: Flags) -> String {
    guard !flags.isEmpty else { return "nothing" }
    return flags.sorted { $0.key < $1.key }.map { "\($0.key) = \($0.value)" }
      .joined(separator: ", ")
  }

  private static func text(_ flag: FeatureFlag?) -> String {
    flag.map(String.init(describing:)) ?? "nil"
  }
}
