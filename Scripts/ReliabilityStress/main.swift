// ReliabilityStress: N threads × S seconds of a random mix of every store operation on one
// MemoryStore (reads, writes, batches, get-or-create, subscriptions, flushes, saves and loads),
// then checks invariants. Built with ThreadSanitizer by Scripts/reliability tsan, and plainly
// (release) by Scripts/reliability soak, which samples its memory.
//
//     swift build -c release --sanitize=thread --product ReliabilityStress --scratch-path .build-tsan
//     .build-tsan/release/ReliabilityStress --threads 16 --seconds 20
//
// Checked during the run, on every read: a thread's own keys hold what it last wrote (unless a
// removeAll or a load ran meanwhile); a group written by one addEntries and removed by one
// removeValues is whole or absent, with one stamp, in values(forKeys:), allItems and every
// loaded snapshot; every value is its key's; saves and loads succeed.
// Checked at the end: a mirror built from an observe handler's batches, and one built from a
// changes iteration, equal allItems after flush, with no batch missing; allItems and
// count agree; a final save loads back into a fresh store equal to allItems.
// Exits 0 if everything holds, 1 otherwise, 64 on a usage error.

import Foundation
import MemoryStoreKit

let usage = """
  usage: ReliabilityStress [--threads N] [--seconds S] [--interval-ms M] [--json] [--seed X]
                           [--sample-rss] [--skip NAME,...] [--weight NAME=N,...]
    --threads N      worker threads (default 16)
    --seconds S      how long they run (default 20)
    --interval-ms M  the store's notificationInterval (default 5; 0: change batches off, and
                     the mirrors are not checked)
    --json           save with the JSON coder (default: binary)
    --seed X         the seed of the workers' random choices (default 1)
    --sample-rss     print, every second, the resident set size and the lowest of ten samples
                     of the heap in use taken in that second ("rss t=<s> kb=<KiB> heap=<KiB>")
    --skip NAMES     leave these operations (comma-separated names, as printed) out of the mix
    --weight N=W     give operation N the weight W instead of the table's (comma-separated)
  """

struct Options {
  var threads = 16
  var seconds = 20
  var intervalMilliseconds = 5
  var json = false
  var seed: UInt64 = 1
  var sampleRSS = false
  /// Weights that replace the table's, by operation name; 0 leaves an operation out.
  var weights: [String: Int] = [:]

  /// The operations left out.
  var skipped: Set<String> { Set(weights.filter { $0.value == 0 }.keys) }
}

func parseOptions() -> Options {
  var options = Options()
  var arguments = CommandLine.arguments.dropFirst()
  func value(_ name: String, minimum: Int = 1) -> Int {
    guard let text = arguments.popFirst(), let number = Int(text), number >= minimum else {
      FileHandle.standardError.write(
        Data("\(name) needs an integer of at least \(minimum)\n\(usage)\n".utf8))
      exit(64)
    }
    return number
  }
  while let argument = arguments.popFirst() {
    switch argument {
    case "--threads": options.threads = value(argument)
    case "--seconds": options.seconds = value(argument)
    case "--interval-ms": options.intervalMilliseconds = value(argument, minimum: 0)
    case "--seed": options.seed = UInt64(value(argument))
    case "--json": options.json = true
    case "--sample-rss": options.sampleRSS = true
    case "--skip", "--weight":
      guard let list = arguments.popFirst() else {
        FileHandle.standardError.write(Data("\(argument) needs a value\n\(usage)\n".utf8))
        exit(64)
      }
      for item in list.split(separator: ",").map(String.init) {
        var name = item
        var weight = 0
        if argument == "--weight" {
          let parts = item.split(separator: "=", maxSplits: 1).map(String.init)
          guard parts.count == 2, let number = Int(parts[1]), number >= 0 else {
            FileHandle.standardError.write(Data("--weight needs NAME=N, not '\(item)'\n".utf8))
            exit(64)
          }
          (name, weight) = (parts[0], number)
        }
        guard operations.contains(where: { $0.name == name }) else {
          FileHandle.standardError.write(Data("unknown operation '\(name)'\n".utf8))
          exit(64)
        }
        options.weights[name] = weight
      }
    case "-h", "--help":
      print(usage)
      exit(0)
    default:
      FileHandle.standardError.write(Data("unknown argument \(argument)\n\(usage)\n".utf8))
      exit(64)
    }
  }
  return options
}

/// A mirror of the store built from change batches, and the batches' numbering.
struct MirrorState: Sendable {
  var items: [Int: Payload] = [:]
  var lastSequence: UInt64 = 0
  var batches = 0
  var gaps: [String] = []

  mutating func apply(_ batch: ChangeBatch<Int, Payload>) {
    if batch.sequenceNumbers.lowerBound != lastSequence + 1 {
      gaps.append("batch \(batch.sequenceNumbers) after \(lastSequence)")
    }
    batch.apply(to: &items)
    lastSequence = batch.sequenceNumbers.upperBound
    batches += 1
  }
}

/// The resident set size in KiB, from /proc/self/statm.
func residentKiB() -> Int? {
  guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else {
    return nil
  }
  let fields = text.split(separator: " ")
  guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
  return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

/// The bytes the program holds in malloc'd blocks, in KiB: what it allocated and has not freed
/// yet, whatever the allocator keeps from the system meanwhile. From glibc's `malloc_info` (its
/// totals over every arena: what the arenas hold from the system, less their free chunks, plus
/// the blocks mapped on their own); `nil` where that is missing.
func heapInUseKiB() -> Int? {
  #if canImport(Glibc)
    guard let symbol = dlsym(nil, "malloc_info") else { return nil }
    typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
    let mallocInfo = unsafeBitCast(symbol, to: MallocInfo.self)
    var buffer: UnsafeMutablePointer<CChar>?
    var length = 0
    guard let stream = open_memstream(&buffer, &length) else { return nil }
    let status = mallocInfo(0, stream)
    fclose(stream)
    defer { free(buffer) }
    guard status == 0, let buffer else { return nil }
    let xml = String(cString: buffer)
    // The totals follow the last arena's <heap> element.
    guard let totals = xml.range(of: "</heap>", options: .backwards).map({ xml[$0.upperBound...] })
    else { return nil }
    func size(_ prefix: String) -> Int? {
      guard let start = totals.range(of: prefix) else { return nil }
      let rest = totals[start.upperBound...]
      guard let sizeStart = rest.range(of: "size=\"") else { return nil }
      return Int(rest[sizeStart.upperBound...].prefix { $0.isNumber })
    }
    guard let fast = size("<total type=\"fast\""), let rest = size("<total type=\"rest\""),
      let mapped = size("<total type=\"mmap\""), let current = size("<system type=\"current\"")
    else { return nil }
    return (current - fast - rest + mapped) / 1024
  #else
    return nil
  #endif
}

func run(_ options: Options) async -> Int32 {
  let directory = FileManager.default.temporaryDirectory.appending(
    path: "reliability-stress-\(getpid())", directoryHint: .isDirectory)
  defer { try? FileManager.default.removeItem(at: directory) }
  let file = directory.appending(path: "store.snapshot")

  // A decider, so that purges run in the mix and every write goes through the eviction policy.
  // It spares the groups: a purge that removed part of a group, then a load (merge) of a
  // snapshot taken before a later addEntries of that group, would mix two addEntries in it, as
  // the contract allows; the check of whole groups could then no longer tell a fault from it.
  let store = MemoryStore<Int, Payload>(name: "stress") { key, _, _ in
    key % 16 == 0 && KeySpace.group(of: key) == nil
  }
  store.notificationInterval = .milliseconds(options.intervalMilliseconds)
  let manager: PersistenceManager<Int, Payload>
  do {
    manager =
      options.json
      ? try PersistenceManager(store: store, fileURL: file, coder: .json)
      : try PersistenceManager(store: store, fileURL: file, coder: .binary)
  } catch {
    print("FAIL: cannot create the persistence manager: \(error)")
    return 1
  }
  guard (cumulativeWeights(overriding: options.weights).last ?? 0) > 0 else {
    print("FAIL: every operation has the weight 0")
    return 64
  }
  let context: Context
  do {
    context =
      options.json
      ? try Context(
        threads: options.threads, store: store, manager: manager, coder: .json,
        weights: options.weights)
      : try Context(
        threads: options.threads, store: store, manager: manager, coder: .binary,
        weights: options.weights)
  } catch {
    print("FAIL: cannot create a replica's persistence manager: \(error)")
    return 1
  }

  // Two mirrors, subscribed before the first write.
  let handlerMirror = Locked(MirrorState())
  let subscription = store.observe { batch in handlerMirror.withLock { $0.apply(batch) } }
  let streamMirror = Locked(MirrorState())
  let iterator = store.changes.makeAsyncIterator()
  let streamTask = Task.detached {
    var iterator = iterator
    while let batch = await iterator.next() {
      streamMirror.withLock { $0.apply(batch) }
    }
  }

  var workers = (0..<options.threads).map {
    Worker(index: $0, context: context, seed: options.seed)
  }

  print(
    "ReliabilityStress: \(options.threads) threads × \(options.seconds) s, "
      + "\(operations.count) operations, notificationInterval \(options.intervalMilliseconds) ms, "
      + "\(options.json ? "JSON" : "binary") coder, seed \(options.seed)"
      + (options.weights.isEmpty
        ? ""
        : ", weights changed: "
          + options.weights.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
          .joined(separator: ", ")))
  fflush(nil)

  let clock = ContinuousClock()
  let start = clock.now
  let deadline = start + .seconds(options.seconds)
  /// Per thread: the operation counts, the time spent in each, and the snapshots it held.
  let results = Locked<[(counts: [Int], nanoseconds: [Int64], held: [[Int: Payload]])]>(
    Array(repeating: ([], [], []), count: options.threads))
  let finished = DispatchGroup()
  for worker in workers {
    finished.enter()
    let thread = Thread { [worker] in
      var worker = worker
      worker.run(until: deadline)
      results.withLock {
        $0[worker.index] = (worker.counts, worker.nanoseconds, worker.heldSnapshots)
      }
      finished.leave()
    }
    thread.stackSize = 1 << 20
    thread.start()
  }
  workers = []

  var rssSamples: [Int] = []
  if options.sampleRSS {
    // The heap every 100 ms, and each second the lowest of those ten samples with the RSS.
    var next = start + .milliseconds(100)
    var tick = 1
    var lowestHeap: Int?
    while next <= deadline {
      try? await Task.sleep(until: next, clock: .continuous)
      if let heap = heapInUseKiB() { lowestHeap = min(lowestHeap ?? heap, heap) }
      if tick % 10 == 0, let kib = residentKiB() {
        rssSamples.append(kib)
        print("rss t=\(tick / 10) kb=\(kib)" + (lowestHeap.map { " heap=\($0)" } ?? ""))
        fflush(nil)
        lowestHeap = nil
      }
      next += .milliseconds(100)
      tick += 1
    }
  }
  await withCheckedContinuation { continuation in
    finished.notify(queue: .global()) { continuation.resume() }
  }
  let elapsed = clock.now - start

  // Counts, and the snapshots the workers held, released now that they all finished.
  let (counts, nanoseconds) = results.withLock { perThread in
    let finishedThreads = perThread.filter { !$0.counts.isEmpty }
    let counts = (0..<operations.count).map { index in
      finishedThreads.reduce(0) { $0 + $1.counts[index] }
    }
    let nanoseconds = (0..<operations.count).map { index in
      finishedThreads.reduce(Int64(0)) { $0 + $1.nanoseconds[index] }
    }
    for index in perThread.indices { perThread[index].held = [] }
    return (counts, nanoseconds)
  }
  let total = counts.reduce(0, +)
  let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
  print(
    String(format: "operations: %d in %.1f s (%.0f/s)", total, seconds, Double(total) / seconds))
  for (index, operation) in operations.enumerated() {
    let mean = counts[index] == 0 ? 0 : Double(nanoseconds[index]) / Double(counts[index]) / 1e3
    let name = operation.name.padding(toLength: 22, withPad: " ", startingAt: 0)
    print("  " + name + String(format: "%10d   mean %10.1f µs", counts[index], mean))
  }

  // End-of-run invariants.
  var failures: [String] = []
  let missing = zip(operations, counts)
    .filter { $0.1 == 0 && !options.skipped.contains($0.0.name) }.map(\.0.name)
  if !missing.isEmpty {
    failures.append("operations that never ran: \(missing.joined(separator: ", "))")
  }
  await store.flush()
  let items = store.allItems
  if items.count != store.count {
    failures.append("allItems holds \(items.count) entries, count says \(store.count)")
  }
  let handler = handlerMirror.withLock { $0 }
  // The iteration gets the last batches when it next resumes: wait for it (bounded).
  let waitLimit = clock.now + .seconds(30)
  while streamMirror.withLock({ $0.lastSequence }) < handler.lastSequence && clock.now < waitLimit {
    try? await Task.sleep(for: .milliseconds(10))
  }
  let stream = streamMirror.withLock { $0 }
  let mirrors =
    options.intervalMilliseconds > 0
    ? [("observe handler", handler), ("changes iteration", stream)] : []
  for (name, mirror) in mirrors {
    print("\(name): \(mirror.batches) batches, last sequence number \(mirror.lastSequence)")
    if !mirror.gaps.isEmpty {
      failures.append("\(name) missed batches: \(mirror.gaps.prefix(5).joined(separator: "; "))")
    }
    if mirror.items != items {
      let differing =
        Set(mirror.items.keys).symmetricDifference(items.keys).count
        + items.filter { mirror.items[$0.key] != nil && mirror.items[$0.key] != $0.value }.count
      failures.append(
        "the \(name)'s mirror differs from allItems in \(differing) keys "
          + "(\(mirror.items.count) entries against \(items.count))")
    }
  }
  if handler.batches == 0 && !mirrors.isEmpty {
    failures.append("no change batch was published")
  }
  subscription.cancel()
  streamTask.cancel()

  // A final save loads back into a fresh store as allItems.
  do {
    let report = try manager.save()
    let fresh = MemoryStore<Int, Payload>(name: "fresh")
    let loader =
      options.json
      ? try PersistenceManager(store: fresh, fileURL: file, coder: .json)
      : try PersistenceManager(store: fresh, fileURL: file, coder: .binary)
    let loaded = try loader.load()
    if report.entryCount != items.count || loaded != items.count || fresh.allItems != items {
      failures.append(
        "the final snapshot does not round-trip: saved \(report.entryCount), loaded \(loaded), "
          + "the store holds \(items.count)")
    } else {
      print("final snapshot: \(report.entryCount) entries, \(report.byteCount) bytes, round-trips")
    }
  } catch {
    failures.append("the final save or load failed: \(error)")
  }

  let during = context.failures.withLock { $0 }
  if during.count > 0 {
    failures.append(
      "\(during.count) failures during the run, the first: \(during.first.joined(separator: " | "))"
    )
  }
  if let first = rssSamples.first, let low = rssSamples.min(), let high = rssSamples.max() {
    print(
      "rss: first \(first) KiB, min \(low) KiB, max \(high) KiB over \(rssSamples.count) samples")
  }
  if failures.isEmpty {
    print("PASS")
    return 0
  }
  for failure in failures { print("FAIL: \(failure)") }
  return 1
}

/// SplitMix64 (Steele, Lea and Flood 2014): a small seeded generator, one per thread.
struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

let status = await run(parseOptions())
exit(status)
