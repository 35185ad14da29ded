// Measures what PostgresSync costs and how fast it keeps two instances coherent:
//
// 1. invalidation latency between two instances, at about 1 000 and 10 000 writes/s;
// 2. the cost of a local write with the sync on and off;
// 3. the cost of a read (a hit) with the sync on and off;
// 4. a warm start of 100 000 entries from the shared table, and the memory it takes.
//
//     swift run -c release SyncBenchmark
//     swift run -c release SyncBenchmark --costs    # parts 2 and 3 alone, for a profiler
//
// Parts 2 and 3 run in five processes of their own, one after the other
// (`SyncBenchmark --costs-here URL`), and report medians over them.
//
// It uses the server DATABASE_URL names, if set (its tables named bench_… stay there);
// otherwise it starts a throw-away server with Scripts/postgres-test-server and stops it at the
// end. LOG_LEVEL=notice (or info, debug, …) shows the syncs' logs on stderr. See README.md in
// this directory for what each row measures.

import Dispatch
import Foundation
import Logging
import MemoryStoreKit
import MemoryStorePostgres
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

let logLevel =
  ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level($0) } ?? .error
LoggingSystem.bootstrap { label in
  var handler = StreamLogHandler.standardError(label: label)
  handler.logLevel = logLevel
  return handler
}

// MARK: - The benchmark

enum SyncBenchmark {
  typealias Sync = PostgresSync<String, Int>

  /// The syncs' logger (what LOG_LEVEL lets through goes to stderr).
  static let logger = Logger(label: "SyncBenchmark")

  static func main() async -> Int32 {
    let arguments = Array(CommandLine.arguments.dropFirst())
    if arguments.first == "--costs-here", arguments.count == 2 {
      do {
        try await AccessCost.measureHere(url: arguments[1])
        return 0
      } catch {
        complain("the cost measurement failed: \(error)")
        return 1
      }
    }
    if arguments.first == "--warm-start", arguments.count == 4, let entries = Int(arguments[3]) {
      do {
        try await WarmStart.measureHere(url: arguments[1], table: arguments[2], entries: entries)
        return 0
      } catch {
        complain("the warm start failed: \(error)")
        return 1
      }
    }
    let server: BenchmarkServer
    do {
      server = try await BenchmarkServer.obtain()
    } catch {
      complain("no PostgreSQL server: \(error)")
      return 1
    }
    let status: Int32
    do {
      try await run(server, costsOnly: arguments.first == "--costs")
      status = 0
    } catch {
      complain("the benchmark failed: \(error)")
      status = 1
    }
    await server.stopIfOwned()
    return status
  }

  /// Runs the benchmark against `server`: every part, or with `costsOnly` the cost of a write
  /// and of a read alone (parts 2 and 3), for a profiler.
  static func run(_ server: BenchmarkServer, costsOnly: Bool) async throws {
    #if DEBUG
      let build = "debug"
    #else
      let build = "release"
    #endif
    let endpoint = try PostgresEndpoint(url: server.url)
    let table = Table()
    say("SyncBenchmark: \(ProcessInfo.processInfo.activeProcessorCount) cores (nproc), \(build)")
    say("server: \(server)")
    let started = monotonicNanoseconds()

    // 1. Invalidation latency between two instances.
    let latencies =
      costsOnly
      ? []
      : try await InvalidationLatency.measure(
        endpoint: endpoint, rates: [1_000, 10_000], seconds: 5)
    for result in latencies {
      let rate = "\(result.targetRate)/s"
      table.add("latency p50 @ \(rate)", milliseconds(result.p50), "ms")
      table.add("latency p99 @ \(rate)", milliseconds(result.p99), "ms")
      table.add("latency max @ \(rate)", milliseconds(result.max), "ms")
      table.add("achieved write rate @ \(rate)", format(result.achievedRate, 0), "writes/s")
      table.add("invalidations seen @ \(rate)", "\(result.observed)/\(result.writes)", "writes")
      table.add("writes per message @ \(rate)", format(result.changesPerMessage, 1), "writes")
      table.add("messages published @ \(rate)", "\(result.messages)", "messages")
    }

    // 2. and 3. The cost of a write and of a read, with the sync on and off, in processes of
    // their own.
    let costs = try await AccessCost.measureInProcesses(url: server.url)
    table.add("cost processes", "\(AccessCost.processes)", "processes")
    for cost in costs {
      table.add("write \(cost.mode)", format(cost.writeNanoseconds, 1), "ns/write")
      if let ratio = cost.writeRatio {
        table.add("write \(cost.mode) / plain", format(ratio, 2), "×")
      }
    }
    for cost in costs {
      table.add(
        "write, writer's CPU, \(cost.mode)", format(cost.writeCPUNanoseconds, 1), "ns/write")
      if let ratio = cost.writeCPURatio {
        table.add("write, writer's CPU, \(cost.mode) / plain", format(ratio, 2), "×")
      }
    }
    for cost in costs {
      table.add("read \(cost.mode)", format(cost.readNanoseconds, 1), "ns/read")
      if let ratio = cost.readRatio {
        table.add("read \(cost.mode) / plain", format(ratio, 3), "×")
      }
    }

    guard !costsOnly else {
      say()
      table.print()
      return
    }

    // 4. A warm start of 100 000 entries.
    let warm = try await WarmStart.measure(endpoint: endpoint, url: server.url, entries: 100_000)
    table.add("table fill (100 000 writes, publishPending)", format(warm.fillSeconds, 2), "s")
    table.add("warm start: run() until listening", milliseconds(warm.untilListening), "ms")
    table.add("warm start: run() until 100 000 entries", milliseconds(warm.untilFull), "ms")
    table.add("warm start: entries stored", "\(warm.entries)", "entries")
    table.add("warm start process RSS before", mebibytes(warm.rssBefore), "MiB")
    table.add("warm start process RSS after", mebibytes(warm.rssAfter), "MiB")
    table.add(
      "RSS growth per entry",
      format(Double(warm.rssAfter - warm.rssBefore) / Double(max(warm.entries, 1)), 0),
      "bytes")

    let total = Double(monotonicNanoseconds() - started) / 1e9
    table.add("whole run", format(total, 1), "s")
    say()
    table.print()
  }
}

// MARK: - 1. Invalidation latency

/// Instance A writes keys at a paced rate; instance B holds every one of them (warmed from the
/// table), and timestamps each removal with cause `.invalidated`. A write's latency runs from
/// just before A's `store[key] = value` to the moment B's removal reaches its consumer.
enum InvalidationLatency {
  struct Result {
    let targetRate: Int
    let writes: Int
    let observed: Int
    let p50: UInt64
    let p99: UInt64
    let max: UInt64
    let achievedRate: Double
    let messages: UInt64
    let changesPerMessage: Double
  }

  static func measure(endpoint: PostgresEndpoint, rates: [Int], seconds: Int) async throws
    -> [Result]
  {
    let name = uniqueName("bench_latency")
    let writer = try Node(name: "A", endpoint: endpoint, channel: name, table: name)
    let reader = try Node(name: "B", endpoint: endpoint, channel: name, table: name)
    do {
      let results = try await measure(
        writer: writer, reader: reader, rates: rates, seconds: seconds)
      await writer.stop()
      await reader.stop()
      return results
    } catch {
      await writer.stop()
      await reader.stop()
      throw error
    }
  }

  private static func measure(writer: Node, reader: Node, rates: [Int], seconds: Int)
    async throws -> [Result]
  {
    try await writer.waitUntilListening()
    try await reader.waitUntilListening()

    // Every key of every phase is written once, committed, and loaded by B.
    let counts = rates.map { $0 * seconds }
    let total = counts.reduce(0, +)
    let keys = (0..<total).map { key($0) }
    for key in keys { writer.store[key] = 0 }
    try await writer.sync.publishPending(timeout: .seconds(120))
    try await eventually(within: .seconds(60), "B received the first writes") {
      reader.sync.statistics.keysInvalidated >= UInt64(total)
    }
    let warmed = try await reader.sync.warmUp(limit: total)
    guard warmed == total, reader.store.count == total else {
      throw BenchmarkFailed("B warmed \(warmed) of \(total) keys, holds \(reader.store.count)")
    }

    var results: [Result] = []
    var offset = 0
    for (rate, count) in zip(rates, counts) {
      let phaseKeys = Array(keys[offset..<offset + count])
      results.append(
        try await phase(
          rate: rate, keys: phaseKeys, firstIndex: offset, writer: writer, reader: reader))
      offset += count
    }
    return results
  }

  private static func key(_ index: Int) -> String {
    "k" + String(index).leftPadded(to: 6)
  }

  private static func phase(
    rate: Int, keys: [String], firstIndex: Int, writer: Node, reader: Node
  ) async throws -> Result {
    let count = keys.count
    let before = writer.sync.statistics
    let received = Counter()
    // Subscribed here, before the first write.
    let removals = reader.store.removals(bufferingNewest: 1_000_000).makeAsyncIterator()
    let consumer = Task {
      var iterator = removals
      var times = [UInt64](repeating: 0, count: count)
      while let removal = await iterator.next() {
        let time = monotonicNanoseconds()
        guard removal.cause == .invalidated, let index = Int(removal.key.dropFirst()) else {
          continue
        }
        let position = index - firstIndex
        guard times.indices.contains(position), times[position] == 0 else { continue }
        times[position] = time
        if received.value.add(1, ordering: .relaxed).newValue == count { break }
      }
      return times
    }

    let (writeTimes, writesStart, writesEnd) = await pacedWrites(
      keys, rate: rate, into: writer.store)
    // Wait for the last invalidations: up to 5 s after the last write.
    let deadline = ContinuousClock.now + .seconds(5)
    while received.value.load(ordering: .relaxed) < count && ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(2))
    }
    consumer.cancel()
    let removalTimes = await consumer.value
    try await writer.sync.publishPending(timeout: .seconds(30))
    let after = writer.sync.statistics

    var latencies: [UInt64] = []
    latencies.reserveCapacity(count)
    for (written, removed) in zip(writeTimes, removalTimes) where removed != 0 {
      latencies.append(removed &- written)
    }
    latencies.sort()
    let messages = after.messagesPublished - before.messagesPublished
    let changes = after.changesPublished - before.changesPublished
    return Result(
      targetRate: rate, writes: count, observed: latencies.count,
      p50: percentile(latencies, 0.50), p99: percentile(latencies, 0.99),
      max: latencies.last ?? 0,
      achievedRate: Double(count) / (Double(writesEnd - writesStart) / 1e9),
      messages: messages,
      changesPerMessage: messages == 0 ? 0 : Double(changes) / Double(messages))
  }

  /// Writes `keys` from a thread of its own, write *i* due at `start + i / rate` (those that
  /// fall behind are written at once); returns each write's start time, and when the writes
  /// started and ended.
  private static func pacedWrites(_ keys: [String], rate: Int, into store: MemoryStore<String, Int>)
    async -> ([UInt64], UInt64, UInt64)
  {
    await withCheckedContinuation { continuation in
      let thread = Thread {
        let interval = 1_000_000_000 / UInt64(rate)
        var times = [UInt64](repeating: 0, count: keys.count)
        let start = monotonicNanoseconds() + 1_000_000
        for (index, key) in keys.enumerated() {
          let due = start + UInt64(index) * interval
          if monotonicNanoseconds() < due { sleepUntil(due) }
          times[index] = monotonicNanoseconds()
          store[key] = 1
        }
        continuation.resume(returning: (times, start, monotonicNanoseconds()))
      }
      thread.start()
    }
  }

  private static func percentile(_ sorted: [UInt64], _ fraction: Double) -> UInt64 {
    guard !sorted.isEmpty else { return 0 }
    let index = Int((Double(sorted.count) * fraction).rounded(.up)) - 1
    return sorted[min(max(index, 0), sorted.count - 1)]
  }
}

// MARK: - 2. and 3. The cost of a write and of a read

/// Single-threaded writes and reads on a store of 10 000 `String` keys `SYM0000`…`SYM9999`,
/// in four settings measured round-robin in one process, five runs each; the whole repeated
/// in ``processes`` processes, one after the other. Each number is the median over the
/// processes of each process's median, and each ratio the median of each process's ratio: on
/// a shared machine, one process's stores can run a quarter faster or slower than another's.
enum AccessCost {
  enum Mode: String, CustomStringConvertible, CaseIterable {
    case plain = "plain store"
    case feed = "change feed drained"
    case syncInvalidation = "PostgresSync, table nil"
    case syncTable = "PostgresSync, table"

    var description: String { rawValue }
  }

  struct Result {
    let mode: Mode
    /// Wall-clock time per write: what the writing thread waits, including the time the
    /// sync's background work (and the database, on this machine) takes its core away.
    let writeNanoseconds: Double
    /// CPU time of the writing thread per write: the cost on the writer's own path.
    let writeCPUNanoseconds: Double
    let readNanoseconds: Double
  }

  /// A mode's results over several processes, and its ratios to the plain store's (`nil` for
  /// the plain store).
  struct Summary {
    let mode: Mode
    let writeNanoseconds: Double
    let writeCPUNanoseconds: Double
    let readNanoseconds: Double
    let writeRatio: Double?
    let writeCPURatio: Double?
    let readRatio: Double?
  }

  /// The processes the measurement runs in.
  static let processes = 5

  /// Runs ``measureHere(url:)`` in ``processes`` new processes of this executable, one after
  /// the other, against the server at `url`, and summarises them.
  static func measureInProcesses(url: String) async throws -> [Summary] {
    var runs: [[Result]] = []
    for _ in 0..<processes {
      let numbers = try await runThisExecutable(["--costs-here", url], resultLine: "costs")
        .compactMap { Double($0) }
      guard numbers.count == 3 * Mode.allCases.count else {
        throw BenchmarkFailed("a cost measurement printed no result")
      }
      runs.append(
        Mode.allCases.enumerated().map { index, mode in
          Result(
            mode: mode, writeNanoseconds: numbers[3 * index],
            writeCPUNanoseconds: numbers[3 * index + 1], readNanoseconds: numbers[3 * index + 2])
        })
    }
    return Mode.allCases.indices.map { index in
      let mode = Mode.allCases[index]
      func summary(_ value: (Result) -> Double) -> (Double, Double?) {
        let values = runs.map { value($0[index]) }
        let ratios = runs.map { value($0[index]) / value($0[0]) }
        return (median(values), mode == .plain ? nil : median(ratios))
      }
      let write = summary(\.writeNanoseconds)
      let writeCPU = summary(\.writeCPUNanoseconds)
      let read = summary(\.readNanoseconds)
      return Summary(
        mode: mode, writeNanoseconds: write.0, writeCPUNanoseconds: writeCPU.0,
        readNanoseconds: read.0, writeRatio: write.1, writeCPURatio: writeCPU.1,
        readRatio: read.1)
    }
  }

  /// `SyncBenchmark --costs-here URL`: measures the four settings against the server at URL;
  /// prints `costs` and, for each mode in order, its write time, its writer's CPU time and
  /// its read time (ns).
  static func measureHere(url: String) async throws {
    let results = try await measure(endpoint: try PostgresEndpoint(url: url))
    let numbers = results.flatMap {
      [$0.writeNanoseconds, $0.writeCPUNanoseconds, $0.readNanoseconds]
    }
    say("costs " + numbers.map { String($0) }.joined(separator: " "))
  }

  static let keys = (0..<10_000).map { "SYM" + String($0).leftPadded(to: 4) }
  static let writesPerRun = 1_000_000
  static let readsPerRun = 4_000_000
  static let runs = 5

  /// One store and what runs beside it.
  private struct Subject {
    let mode: Mode
    let store: MemoryStore<String, Int>
    let node: Node?
    let drain: Task<Void, Never>?
    let feed: LocalChangeFeed<String, Int>?

    /// Lets the background work of the previous run finish.
    func settle() async throws {
      if let node { try await node.sync.publishPending(timeout: .seconds(60)) }
      try await Task.sleep(for: .milliseconds(20))
    }

    func stop() async {
      feed?.close()
      await drain?.value
      await node?.stop()
    }
  }

  static func measure(endpoint: PostgresEndpoint) async throws -> [Result] {
    var subjects: [Subject] = []
    for mode in Mode.allCases {
      subjects.append(try await makeSubject(mode, endpoint: endpoint))
    }
    do {
      let results = try await measure(subjects)
      for subject in subjects { await subject.stop() }
      return results
    } catch {
      for subject in subjects { await subject.stop() }
      throw error
    }
  }

  private static func measure(_ subjects: [Subject]) async throws -> [Result] {
    for subject in subjects {
      for (index, key) in keys.enumerated() { subject.store[key] = index }
      try await subject.settle()
    }
    // One run of each, not counted, to warm caches and the allocator.
    for subject in subjects {
      _ = timeWrites(subject.store, base: 1)
      try await subject.settle()
      _ = timeReads(subject.store)
    }
    var writes = [Mode: [Double]]()
    var writeCPU = [Mode: [Double]]()
    var reads = [Mode: [Double]]()
    for run in 0..<runs {
      for subject in subjects {
        try await subject.settle()
        let (wall, cpu) = timeWrites(subject.store, base: (run + 2) * writesPerRun)
        writes[subject.mode, default: []].append(wall)
        writeCPU[subject.mode, default: []].append(cpu)
        try await subject.settle()
        reads[subject.mode, default: []].append(timeReads(subject.store))
      }
    }
    return subjects.map { subject in
      Result(
        mode: subject.mode, writeNanoseconds: median(writes[subject.mode]!),
        writeCPUNanoseconds: median(writeCPU[subject.mode]!),
        readNanoseconds: median(reads[subject.mode]!))
    }
  }

  private static func makeSubject(_ mode: Mode, endpoint: PostgresEndpoint) async throws
    -> Subject
  {
    switch mode {
    case .plain:
      return Subject(
        mode: mode, store: MemoryStore(name: "plain"), node: nil, drain: nil, feed: nil)
    case .feed:
      let store = MemoryStore<String, Int>(name: "feed")
      let feed = store.openLocalChangeFeed()
      let drain = Task { for await _ in feed {} }
      return Subject(mode: mode, store: store, node: nil, drain: drain, feed: feed)
    case .syncInvalidation, .syncTable:
      let name = uniqueName("bench_write")
      let node = try Node(
        name: mode.rawValue, endpoint: endpoint, channel: name,
        table: mode == .syncTable ? name : nil)
      try await node.waitUntilListening()
      return Subject(mode: mode, store: node.store, node: node, drain: nil, feed: nil)
    }
  }

  /// Nanoseconds per `store[key] = value`, cycling over the keys, every value new: wall-clock
  /// and the writing thread's CPU time. (The loop never suspends, so one thread runs it.)
  private static func timeWrites(_ store: MemoryStore<String, Int>, base: Int) -> (
    wall: Double, cpu: Double
  ) {
    let keys = Self.keys
    var position = 0
    let startCPU = threadCPUNanoseconds()
    let start = monotonicNanoseconds()
    for operation in 0..<writesPerRun {
      store[keys[position]] = base &+ operation
      position += 1
      if position == keys.count { position = 0 }
    }
    let wall = Double(monotonicNanoseconds() - start) / Double(writesPerRun)
    return (wall, Double(threadCPUNanoseconds() - startCPU) / Double(writesPerRun))
  }

  /// Nanoseconds per `store[key]`, every one a hit.
  private static func timeReads(_ store: MemoryStore<String, Int>) -> Double {
    let keys = Self.keys
    var position = 0
    var sum = 0
    let start = monotonicNanoseconds()
    for _ in 0..<readsPerRun {
      sum &+= store[keys[position]] ?? 0
      position += 1
      if position == keys.count { position = 0 }
    }
    let elapsed = monotonicNanoseconds() - start
    keep(sum)
    return Double(elapsed) / Double(readsPerRun)
  }
}

// MARK: - 4. Warm start

/// One instance fills the table with 100 000 rows and stops; a new instance with
/// `warmStartLimit = 100_000` is timed from `run()` until its store holds them all.
enum WarmStart {
  struct Result {
    let fillSeconds: Double
    let untilListening: UInt64
    let untilFull: UInt64
    let entries: Int
    let rssBefore: Int
    let rssAfter: Int
  }

  /// Fills a table, then measures the warm start in a new process of this executable (see
  /// ``measureHere(url:table:entries:)``), so that its resident memory is the warm start's
  /// alone.
  static func measure(endpoint: PostgresEndpoint, url: String, entries: Int) async throws
    -> Result
  {
    let name = uniqueName("bench_warm")
    let fillStart = monotonicNanoseconds()
    let filler = try Node(name: "filler", endpoint: endpoint, channel: name, table: name)
    do {
      try await filler.waitUntilListening()
      for index in 0..<entries { filler.store["w" + String(index).leftPadded(to: 6)] = index }
      try await filler.sync.publishPending(timeout: .seconds(120))
      await filler.stop()
    } catch {
      await filler.stop()
      throw error
    }
    let fillSeconds = Double(monotonicNanoseconds() - fillStart) / 1e9

    let numbers = try await runThisExecutable(
      ["--warm-start", url, name, String(entries)], resultLine: "warm-start"
    ).compactMap { UInt64($0) }
    guard numbers.count == 5 else {
      throw BenchmarkFailed("the warm start process printed no result")
    }
    return Result(
      fillSeconds: fillSeconds, untilListening: numbers[0], untilFull: numbers[1],
      entries: Int(numbers[2]), rssBefore: Int(numbers[3]), rssAfter: Int(numbers[4]))
  }

  /// `SyncBenchmark --warm-start URL TABLE ENTRIES`: a new store and sync with
  /// `warmStartLimit = ENTRIES`, timed from `run()` until it listens and until the store holds
  /// ENTRIES entries; prints `warm-start` and the two times (ns), the entries stored, and the
  /// resident memory (bytes) before the store was made and once it was full.
  static func measureHere(url: String, table name: String, entries: Int) async throws {
    let rssBefore = residentBytes()
    let endpoint = try PostgresEndpoint(url: url)
    var configuration = SyncBenchmark.Sync.Configuration(channel: name, table: name)
    configuration.warmStartLimit = entries
    let store = MemoryStore<String, Int>(name: "warm")
    let sync = try SyncBenchmark.Sync(
      store: store, endpoint: endpoint, configuration: configuration, logger: SyncBenchmark.logger)
    let start = monotonicNanoseconds()
    let task = Task { try await sync.run() }
    var listening: UInt64 = 0
    let deadline = ContinuousClock.now + .seconds(60)
    while store.count < entries && ContinuousClock.now < deadline {
      if listening == 0 && sync.isListening { listening = monotonicNanoseconds() - start }
      try await Task.sleep(for: .milliseconds(1))
    }
    let full = monotonicNanoseconds() - start
    let rssAfter = residentBytes()
    let stored = store.count
    task.cancel()
    _ = try? await task.value
    say("warm-start \(listening) \(full) \(stored) \(rssBefore) \(rssAfter)")
  }
}

// MARK: - Instances

/// A store and the running sync that keeps it coherent through the benchmark's channel.
struct Node: Sendable {
  let store: MemoryStore<String, Int>
  let sync: SyncBenchmark.Sync
  let task: Task<Void, any Error>

  init(name: String, endpoint: PostgresEndpoint, channel: String, table: String?) throws {
    store = MemoryStore(name: name)
    let sync = try SyncBenchmark.Sync(
      store: store, endpoint: endpoint,
      configuration: .init(channel: channel, table: table), logger: SyncBenchmark.logger)
    self.sync = sync
    task = Task { try await sync.run() }
  }

  func waitUntilListening() async throws {
    try await eventually(within: .seconds(30), "\(store.name ?? "a store") listening") {
      sync.isListening
    }
  }

  func stop() async {
    task.cancel()
    _ = try? await task.value
  }
}

/// A channel and table name of their own for one measurement.
func uniqueName(_ prefix: String) -> String {
  prefix + "_" + String(UInt64.random(in: 0...UInt64.max), radix: 36)
}

/// Waits until `condition` holds, checking every 2 ms, up to `limit`.
func eventually(within limit: Duration, _ what: String, _ condition: () -> Bool) async throws {
  let deadline = ContinuousClock.now + limit
  while !condition() {
    guard ContinuousClock.now < deadline else { throw BenchmarkFailed("timed out: \(what)") }
    try await Task.sleep(for: .milliseconds(2))
  }
}

/// A measurement could not be made.
struct BenchmarkFailed: Error, CustomStringConvertible {
  let description: String

  init(_ description: String) {
    self.description = description
  }
}

// MARK: - Time, memory, numbers, output

/// `CLOCK_MONOTONIC`, in nanoseconds: the one clock of every timestamp here.
func monotonicNanoseconds() -> UInt64 {
  var time = timespec()
  clock_gettime(CLOCK_MONOTONIC, &time)
  return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`), in nanoseconds.
func threadCPUNanoseconds() -> UInt64 {
  var time = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
  return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Sleeps the calling thread until `CLOCK_MONOTONIC` reads `nanoseconds`.
func sleepUntil(_ nanoseconds: UInt64) {
  var time = timespec(
    tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
  while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &time, nil) == EINTR {}
}

/// The process's resident set (`VmRSS` of `/proc/self/status`), in bytes; 0 where there is
/// none.
func residentBytes() -> Int {
  guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
    let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
    let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
  else { return 0 }
  return kilobytes * 1024
}

/// A counter that tasks share.
final class Counter: Sendable {
  /// Where ``keep(_:)`` puts results.
  static let sink = Counter()

  let value = Atomic<Int>(0)
}

/// Keeps a result alive, so that the loop computing it is not optimised away.
@inline(never)
func keep(_ value: Int) {
  Counter.sink.value.store(value, ordering: .relaxed)
}

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

func milliseconds(_ nanoseconds: UInt64) -> String {
  format(Double(nanoseconds) / 1e6, 3)
}

func mebibytes(_ bytes: Int) -> String {
  format(Double(bytes) / 1_048_576, 1)
}

func format(_ value: Double, _ decimals: Int) -> String {
  String(format: "%.\(decimals)f", value)
}

extension String {
  func leftPadded(to width: Int) -> String {
    String(repeating: "0", count: Swift.max(0, width - count)) + self
  }
}

/// The rows of the results table, printed at the end.
final class Table: Sendable {
  private let rows = Locked<[(String, String, String)]>([])

  func add(_ name: String, _ value: String, _ unit: String) {
    rows.withLock { $0.append((name, value, unit)) }
  }

  func print() {
    let rows = rows.withLock { $0 }
    let nameWidth = rows.map(\.0.count).max() ?? 0
    let valueWidth = rows.map(\.1.count).max() ?? 0
    for (name, value, unit) in rows {
      let paddedName = name + String(repeating: " ", count: nameWidth - name.count)
      let paddedValue = String(repeating: " ", count: valueWidth - value.count) + value
      say("| \(paddedName) | \(paddedValue) | \(unit) |")
    }
  }
}

func say(_ line: String = "") {
  Swift.print(line)
  fflush(nil)  // every stream: stdout, which print writes to, among them
}

func complain(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

// MARK: - The server

/// The server `DATABASE_URL` names, or a throw-away one started with
/// `Scripts/postgres-test-server` in a temporary directory and stopped at the end.
struct BenchmarkServer: Sendable, CustomStringConvertible {
  let url: String
  let directory: String?

  var description: String {
    directory.map { "\(url) (a throw-away server in \($0))" } ?? "\(url) (DATABASE_URL)"
  }

  static func obtain() async throws -> BenchmarkServer {
    if let url = ProcessInfo.processInfo.environment["DATABASE_URL"], !url.isEmpty {
      return BenchmarkServer(url: url, directory: nil)
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("sync-benchmark-\(UUID().uuidString.lowercased())").path
    let output = try await runScript("start", directory)
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("DATABASE_URL=") })
    else {
      throw BenchmarkFailed("Scripts/postgres-test-server printed no DATABASE_URL: \(output)")
    }
    // The throw-away server listens on the loopback only, without TLS.
    let url = line.dropFirst("DATABASE_URL=".count) + "?sslmode=disable"
    return BenchmarkServer(url: String(url), directory: directory)
  }

  func stopIfOwned() async {
    guard let directory else { return }
    do {
      _ = try await Self.runScript("stop", directory)
      try FileManager.default.removeItem(atPath: directory)
    } catch {
      complain("could not stop the server in \(directory): \(error)")
    }
  }

  /// `Scripts/postgres-test-server`, found from this file's path in the repository, else from
  /// the current directory (`Integrations/PostgresSync`).
  private static var scriptPath: String? {
    // #filePath: <repository>/Integrations/PostgresSync/Benchmarks/SyncBenchmark/main.swift
    var repository = URL(fileURLWithPath: #filePath)
    for _ in 0..<5 { repository.deleteLastPathComponent() }
    let candidates = [
      repository.appendingPathComponent("Scripts/postgres-test-server").path,
      URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
        .appendingPathComponent("../../Scripts/postgres-test-server").standardized.path,
    ]
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
  }

  /// Runs the script; returns what it printed.
  private static func runScript(_ command: String, _ directory: String) async throws -> String {
    guard let scriptPath else {
      throw BenchmarkFailed(
        "Scripts/postgres-test-server was not found: run from Integrations/PostgresSync, "
          + "or set DATABASE_URL")
    }
    return try await runBlocking(scriptPath, [command, directory])
  }
}

/// Runs this executable with `arguments` (see ``runBlocking(_:_:)``) and returns the fields of
/// the last line it printed that starts with `resultLine`, after that word.
///
/// - Throws: ``BenchmarkFailed`` if it fails, or prints no such line.
func runThisExecutable(_ arguments: [String], resultLine: String) async throws -> [Substring] {
  let executable =
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    ?? CommandLine.arguments[0]
  let output = try await runBlocking(executable, arguments)
  guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix(resultLine + " ") })
  else {
    throw BenchmarkFailed("\(arguments.joined(separator: " ")) printed no result: \(output)")
  }
  return Array(line.split(separator: " ").dropFirst())
}

/// Runs `executable` off the cooperative pool and waits for it; returns what it printed on
/// stdout and stderr.
///
/// - Throws: ``BenchmarkFailed`` if it does not exit with 0.
func runBlocking(_ executable: String, _ arguments: [String]) async throws -> String {
  try await withCheckedThrowingContinuation { continuation in
    DispatchQueue.global().async {
      continuation.resume(
        with: Result {
          let process = Process()
          process.executableURL = URL(fileURLWithPath: executable)
          process.arguments = arguments
          let output = Pipe()
          process.standardOutput = output
          process.standardError = output
          process.standardInput = FileHandle.nullDevice
          try process.run()
          let printed = String(
            decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
          process.waitUntilExit()
          guard process.terminationStatus == 0 else {
            throw BenchmarkFailed(
              "\(executable) \(arguments.joined(separator: " ")) exited with "
                + "\(process.terminationStatus): \(printed)")
          }
          return printed
        })
    }
  }
}

exit(await SyncBenchmark.main())
