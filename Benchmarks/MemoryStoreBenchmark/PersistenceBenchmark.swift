// The persistence section: PersistenceManager's save and load for every coder in
// `persistenceCoders`, against a raw JSONEncoder / JSONDecoder baseline that does the same file
// work, and how much a save of 1 000 000 entries blocks a writer and a reader of the store.
// Prints Markdown tables, ratios and the persistence targets, MET or NOT MET.

import Dispatch
import Foundation
import MemoryStoreKit
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The snapshot coders measured, in report order. "json" must be in the list: the other coders'
/// targets compare their files with its file.
let persistenceCoders: [(name: String, coder: any SnapshotCoder)] = [
  ("json", JSONSnapshotCoder()),
  ("binary", BinarySnapshotCoder()),
]

/// How much the persistence section measures.
struct PersistencePlan {
  /// Entries saved and loaded by the save/load measurements.
  var entryCount: Int
  /// Repetitions of every save/load measurement; the median is reported.
  var runs: Int
  /// Entries of the store saved by the blocking measurement; `nil` skips it.
  var blockingEntryCount: Int?

  init(quick: Bool, runs: Int?) {
    entryCount = quick ? 10_000 : 100_000
    self.runs = runs ?? (quick ? 3 : 5)
    blockingEntryCount = quick ? nil : 1_000_000
  }
}

/// Runs the whole persistence section and prints its report.
func runPersistenceBenchmark(plan: PersistencePlan) {
  let directory = FileManager.default.temporaryDirectory.appending(
    path: "MemoryStoreBenchmark-persistence-\(UUID().uuidString)", directoryHint: .isDirectory)
  do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  } catch {
    print("The persistence section could not create its directory \(directory.path): \(error)")
    return
  }
  defer { try? FileManager.default.removeItem(at: directory) }

  print("# Persistence")
  print("")
  do {
    let results = try measureSaveAndLoad(plan: plan, directory: directory)
    printSaveAndLoad(results, plan: plan, directory: directory)
    var blocking: BlockingResult?
    if let count = plan.blockingEntryCount {
      blocking = try measureBlocking(entryCount: count, directory: directory)
      printBlocking(blocking!)
    } else {
      print("## Blocking during a save")
      print("")
      print("Skipped under --quick (it saves a store of 1 000 000 entries).")
      print("")
    }
    printPersistenceTargets(results, blocking: blocking)
  } catch {
    print("")
    print("**The persistence section failed: \(error)**")
    print("")
  }
}

// MARK: - Data

/// The entries saved and loaded: keys `"SYM000000"`, `"SYM000001"`, … (9 UTF-8 bytes, small
/// strings) and quotes drawn from a seeded SplitMix64.
enum PersistenceData {
  static let seed: UInt64 = 0x5065_7273_6973_7421

  static func key(_ index: Int) -> String {
    precondition(index >= 0 && index < 1_000_000)
    let digits = String(index)
    return "SYM" + String(repeating: "0", count: 6 - digits.count) + digits
  }

  static func entries(count: Int) -> [String: Quote] {
    var rng = SplitMix64(seed: seed)
    var entries = [String: Quote](minimumCapacity: count)
    for index in 0..<count {
      let cents = Int(rng.next(below: 1_000_000)) + 100
      let spread = Int(rng.next(below: 50)) + 1
      entries[key(index)] = Quote(
        bid: Double(cents) / 100, ask: Double(cents + spread) / 100,
        volume: Int(rng.next(below: 10_000_000)))
    }
    return entries
  }
}

/// The monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds.
@inline(__always)
func clockNanos() -> UInt64 {
  var now = timespec()
  clock_gettime(CLOCK_MONOTONIC, &now)
  return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

private func millis(_ nanos: UInt64) -> Double { Double(nanos) / 1e6 }

private func mebibytes(_ bytes: Int) -> String {
  "\(fixed(Double(bytes) / 1_048_576, 2)) MiB"
}

/// CPU time of the whole machine and of this process, from `/proc` (Linux only), to tell how
/// much of the machine other processes and the hypervisor took during a measurement.
struct CPUSnapshot {
  /// Ticks of all CPUs: not idle (steal included), and in total.
  var busy: UInt64
  var total: UInt64
  /// Ticks of this process (user and system, all threads).
  var own: UInt64

  static func now() -> CPUSnapshot? {
    guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
      let line = stat.split(separator: "\n").first, line.hasPrefix("cpu "),
      let mine = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
      let parenthesis = mine.lastIndex(of: ")")
    else { return nil }
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let ticks = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
    // After the command name: state is field 3, utime field 14, stime field 15.
    let fields = mine[mine.index(after: parenthesis)...].split(separator: " ")
    guard ticks.count == 8, fields.count > 12, let user = UInt64(fields[11]),
      let system = UInt64(fields[12])
    else { return nil }
    let idle = ticks[3] + ticks[4]
    let total = ticks.reduce(0, +)
    return CPUSnapshot(busy: total - idle, total: total, own: user + system)
  }

  /// The share of all CPUs' time that others used from `earlier` to `later`.
  static func othersShare(_ earlier: CPUSnapshot?, _ later: CPUSnapshot?) -> Double? {
    guard let earlier, let later, later.total > earlier.total else { return nil }
    let busy = Double(later.busy) - Double(earlier.busy)
    let own = Double(later.own) - Double(earlier.own)
    return max(0, busy - own) / Double(later.total - earlier.total)
  }
}

private func shareText(_ share: Double?) -> String {
  share.map { "\(fixed($0 * 100, 0))%" } ?? "n/a"
}

// MARK: - Raw JSON baseline

/// A failed system call of the raw baseline's atomic write.
struct SystemCallError: Error, CustomStringConvertible {
  var step: String
  var path: String
  var code: Int32

  var description: String { "\(step) \(path): \(String(cString: strerror(code)))" }
}

/// Replaces the file at `path` with `data` the way PersistenceManager does: a temporary file
/// in the same directory, written, `fsync`ed, closed and renamed over `path`, then the
/// directory `fsync`ed.
func atomicWrite(_ data: Data, to path: String) throws(SystemCallError) {
  let directory = (path as NSString).deletingLastPathComponent
  var template = Array((path + ".tmp-XXXXXX").utf8CString)
  let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
  let temporary = String(
    decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
  guard descriptor >= 0 else {
    throw SystemCallError(step: "creating", path: temporary, code: errno)
  }
  var isOpen = true
  var isRenamed = false
  defer {
    if isOpen { close(descriptor) }
    if !isRenamed { unlink(temporary) }
  }
  let failure = data.withUnsafeBytes { bytes -> Int32? in
    var offset = 0
    while offset < bytes.count {
      let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
      if written < 0 {
        if errno == EINTR { continue }
        return errno
      }
      offset += written
    }
    return nil
  }
  if let failure { throw SystemCallError(step: "writing", path: temporary, code: failure) }
  guard fsync(descriptor) == 0 else {
    throw SystemCallError(step: "flushing", path: temporary, code: errno)
  }
  isOpen = false
  guard close(descriptor) == 0 else {
    throw SystemCallError(step: "closing", path: temporary, code: errno)
  }
  guard rename(temporary, path) == 0 else {
    throw SystemCallError(step: "renaming", path: temporary, code: errno)
  }
  isRenamed = true
  let directoryDescriptor = open(directory, O_RDONLY | O_CLOEXEC)
  guard directoryDescriptor >= 0 else {
    throw SystemCallError(step: "opening", path: directory, code: errno)
  }
  defer { close(directoryDescriptor) }
  guard fsync(directoryDescriptor) == 0 || errno == EINVAL else {
    throw SystemCallError(step: "flushing", path: directory, code: errno)
  }
}

/// One repetition of the raw JSON baseline, in nanoseconds.
struct RawSample {
  var encode: UInt64
  var write: UInt64
  var read: UInt64
  var decode: UInt64
  var bytes: Int
  var roundTrips: Bool

  var save: UInt64 { encode + write }
  var load: UInt64 { read + decode }
}

/// A raw save (encode, then atomic write) and a raw load (read, then decode) of `entries`.
func rawJSONRepetition(_ entries: [String: Quote], path: String) throws -> RawSample {
  let start = clockNanos()
  let data = try JSONEncoder().encode(entries)
  let encoded = clockNanos()
  try atomicWrite(data, to: path)
  let written = clockNanos()
  let read = try Data(contentsOf: URL(fileURLWithPath: path))
  let readEnd = clockNanos()
  let decoded = try JSONDecoder().decode([String: Quote].self, from: read)
  let decodedEnd = clockNanos()
  return RawSample(
    encode: encoded - start, write: written - encoded, read: readEnd - written,
    decode: decodedEnd - readEnd, bytes: data.count, roundTrips: decoded == entries)
}

// MARK: - PersistenceManager

/// One repetition of a coder through PersistenceManager, in nanoseconds.
struct ManagerSample {
  var save: UInt64
  var load: UInt64
  var bytes: Int
  var roundTrips: Bool
}

/// A save of `store` (which holds `entries`), then a load of that file into a fresh, empty
/// store. Creating the managers and the empty store is not timed.
func managerRepetition(
  store: MemoryStoreOfQuotes, entries: [String: Quote], coder: any SnapshotCoder, url: URL,
  checkContents: Bool
) throws -> ManagerSample {
  let saver = try PersistenceManager(store: store, fileURL: url, coder: coder)
  let saveStart = clockNanos()
  let report = try saver.save()
  let saveEnd = clockNanos()

  let target = MemoryStoreOfQuotes(name: "persistence-load")
  let loader = try PersistenceManager(store: target, fileURL: url, coder: coder)
  let loadStart = clockNanos()
  let loaded = try loader.load()
  let loadEnd = clockNanos()
  let roundTrips =
    report.entryCount == entries.count && loaded == entries.count
    && (!checkContents || target.allItems == entries)
  return ManagerSample(
    save: saveEnd - saveStart, load: loadEnd - loadStart, bytes: report.byteCount,
    roundTrips: roundTrips)
}

/// A store holding `entries` in storage of its own, with the values replaced meanwhile freed.
func populatedStore(_ entries: [String: Quote], name: String) -> MemoryStoreOfQuotes {
  let store = MemoryStoreOfQuotes(name: name)
  store.addEntries(entries)
  store.drain()
  return store
}

// MARK: - Save and load

/// The repetitions of the save/load measurements.
struct SaveLoadResults {
  var entryCount: Int
  var raw: [RawSample] = []
  /// Per repetition: the share of the CPUs that other processes used meanwhile.
  var othersShare: [Double?] = []
  /// Per coder, in `persistenceCoders` order.
  var managers: [(name: String, samples: [ManagerSample])]

  var rawSave: Double { median(raw.map { millis($0.save) }) }
  var rawLoad: Double { median(raw.map { millis($0.load) }) }

  func save(_ index: Int) -> Double { median(managers[index].samples.map { millis($0.save) }) }
  func load(_ index: Int) -> Double { median(managers[index].samples.map { millis($0.load) }) }
  func bytes(_ index: Int) -> Int { managers[index].samples.last?.bytes ?? 0 }

  var jsonIndex: Int? { managers.firstIndex { $0.name == "json" } }
}

/// Runs `plan.runs` repetitions, each of them the raw baseline then every coder in turn (so
/// that slow drifts of the machine hit all of them alike), after an untimed warm-up of every
/// path with a tenth of the entries.
func measureSaveAndLoad(plan: PersistencePlan, directory: URL) throws -> SaveLoadResults {
  let entries = PersistenceData.entries(count: plan.entryCount)
  let rawPath = directory.appending(path: "raw.json").path
  let urls = persistenceCoders.map { directory.appending(path: "\($0.name).snapshot") }
  let stores = persistenceCoders.map { populatedStore(entries, name: "persistence-\($0.name)") }

  // Warm-up: every code path once, on a tenth of the entries, untimed.
  let small = PersistenceData.entries(count: max(1, plan.entryCount / 10))
  let smallStore = populatedStore(small, name: "persistence-warm-up")
  _ = try rawJSONRepetition(small, path: directory.appending(path: "warm-up.json").path)
  for (index, (name, coder)) in persistenceCoders.enumerated() {
    _ = try managerRepetition(
      store: smallStore, entries: small, coder: coder,
      url: directory.appending(path: "warm-up.\(name).snapshot"), checkContents: index == 0)
  }

  var results = SaveLoadResults(
    entryCount: entries.count, managers: persistenceCoders.map { ($0.name, []) })
  for run in 0..<plan.runs {
    let before = CPUSnapshot.now()
    let raw = try rawJSONRepetition(entries, path: rawPath)
    results.raw.append(raw)
    var line =
      "[persistence \(run + 1)/\(plan.runs)] JSON raw: save \(fixed(millis(raw.save), 1)) ms, "
      + "load \(fixed(millis(raw.load), 1)) ms"
    for (index, (name, coder)) in persistenceCoders.enumerated() {
      let sample = try managerRepetition(
        store: stores[index], entries: entries, coder: coder, url: urls[index],
        checkContents: run == 0)
      results.managers[index].samples.append(sample)
      line +=
        "; \(name): save \(fixed(millis(sample.save), 1)) ms, "
        + "load \(fixed(millis(sample.load), 1)) ms"
    }
    let share = CPUSnapshot.othersShare(before, CPUSnapshot.now())
    results.othersShare.append(share)
    progress(line + "; others used \(shareText(share)) of the CPUs")
  }
  return results
}

private func rangeText(_ values: [Double]) -> String {
  let range = range(values)
  let middle = median(values)
  let text = "\(fixed(range.lowerBound, 1))-\(fixed(range.upperBound, 1))"
  let spread = middle > 0 ? (range.upperBound - range.lowerBound) / middle : 0
  return spread > 0.10 ? text + " (noisy: \(fixed(spread * 100, 0))%)" : text
}

func printSaveAndLoad(_ results: SaveLoadResults, plan: PersistencePlan, directory: URL) {
  let first = PersistenceData.key(0)
  let last = PersistenceData.key(results.entryCount - 1)
  print("## Save and load, \(results.entryCount) entries")
  print("")
  print(
    "- data: [String: Quote], keys \(first)...\(last) (\(first.utf8.count) UTF-8 bytes), "
      + "quotes from SplitMix64 seed 0x\(String(PersistenceData.seed, radix: 16))")
  print(
    "- \(plan.runs) repetitions, median reported; each repetition runs JSON raw, then every "
      + "coder; one untimed warm-up with \(max(1, plan.entryCount / 10)) entries first")
  print(
    "- JSON raw: save = `JSONEncoder().encode` + atomic write (temporary file, write, fsync, "
      + "rename, fsync of the directory); load = `Data(contentsOf:)` + `JSONDecoder().decode`")
  print(
    "- coders: `PersistenceManager.save()` of a populated store; `load()` into a fresh, empty "
      + "store. Files in \(directory.path), removed at the end")
  print(
    "- share of the CPUs used by other processes during each repetition: "
      + results.othersShare.map(shareText).joined(separator: ", "))
  print("")
  print(
    "| format | save ms | load ms | encode ms | write ms | read ms | decode ms | file "
      + "| min-max save ms | min-max load ms |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  let raw = results.raw
  print(
    "| JSON raw | \(fixed(results.rawSave, 1)) | \(fixed(results.rawLoad, 1)) "
      + "| \(fixed(median(raw.map { millis($0.encode) }), 1)) "
      + "| \(fixed(median(raw.map { millis($0.write) }), 1)) "
      + "| \(fixed(median(raw.map { millis($0.read) }), 1)) "
      + "| \(fixed(median(raw.map { millis($0.decode) }), 1)) "
      + "| \(mebibytes(raw.last?.bytes ?? 0)) "
      + "| \(rangeText(raw.map { millis($0.save) })) "
      + "| \(rangeText(raw.map { millis($0.load) })) |")
  for (index, manager) in results.managers.enumerated() {
    print(
      "| \(manager.name) (PersistenceManager) | \(fixed(results.save(index), 1)) "
        + "| \(fixed(results.load(index), 1)) | n/a | n/a | n/a | n/a "
        + "| \(mebibytes(results.bytes(index))) "
        + "| \(rangeText(manager.samples.map { millis($0.save) })) "
        + "| \(rangeText(manager.samples.map { millis($0.load) })) |")
  }
  print("")
  print(
    "Each coder's median time over JSON raw's (below 1 is faster), and its file over "
      + "JSON raw's.")
  print("")
  print("| coder | save / JSON raw save | load / JSON raw load | file / JSON raw file |")
  print("|---|---:|---:|---:|")
  let rawBytes = Double(raw.last?.bytes ?? 0)
  for (index, manager) in results.managers.enumerated() {
    print(
      "| \(manager.name) | \(fixed(results.save(index) / results.rawSave, 2)) "
        + "| \(fixed(results.load(index) / results.rawLoad, 2)) "
        + "| \(fixed(Double(results.bytes(index)) / rawBytes, 3)) |")
  }
  print("")
  let broken =
    (raw.contains { !$0.roundTrips } ? ["JSON raw"] : [])
    + results.managers.filter { $0.samples.contains { !$0.roundTrips } }.map(\.name)
  if broken.isEmpty {
    print(
      "- every load returned all \(results.entryCount) entries; the first repetition's "
        + "loads (every one for JSON raw) equal the saved entries")
  } else {
    print("- WARNING: wrong round trip for \(broken.joined(separator: ", "))")
  }
  print("")
}

// MARK: - Blocking during a save

/// The windows the probe threads attribute their operations to, set by the main thread.
enum ProbeWindow: Int, CaseIterable {
  case warmUp, duringSave, afterSave, idleControl, busyControl

  /// Not a window: the probe threads stop.
  static let stop = allCases.count
}

/// What one probe thread saw during one window.
struct WindowStats: Sendable {
  var ops = 0
  var maxNanos: UInt64 = 0
  /// Operations that took 1 ms or more.
  var slowOps = 0
  /// The latency of the window's first operation.
  var firstNanos: UInt64 = 0
  var checksum = 0
  var misses = 0
  /// The writer, during the save: how many distinct keys it wrote.
  var distinctKeys = 0
  /// The three longest operations: when they started, and how long they took.
  var longest: [(start: UInt64, nanos: UInt64)] = []
  private var longestThreshold: UInt64 = 0

  @inline(__always)
  mutating func record(start: UInt64, _ nanos: UInt64) {
    if ops == 0 { firstNanos = nanos }
    ops += 1
    if nanos > maxNanos { maxNanos = nanos }
    if nanos >= 1_000_000 { slowOps += 1 }
    if nanos > longestThreshold { keep(start: start, nanos) }
  }

  @inline(never)
  private mutating func keep(start: UInt64, _ nanos: UInt64) {
    longest.append((start, nanos))
    longest.sort { $0.nanos > $1.nanos }
    if longest.count > 3 { longest.removeLast() }
    if longest.count == 3 { longestThreshold = longest[2].nanos }
  }
}

/// Shared by the main thread and the two probe threads.
final class ProbeControl: Sendable {
  let window = Atomic<Int>(ProbeWindow.warmUp.rawValue)
  let started = Atomic<Int>(0)
  private let results = Mutex<[String: [WindowStats]]>([:])

  func record(_ stats: [WindowStats], for role: String) {
    results.withLock { $0[role] = stats }
  }

  func stats(for role: String) -> [WindowStats] {
    results.withLock { $0[role] ?? [] }
  }
}

/// Writes random existing keys until told to stop, timing every write.
@inline(never)
func writerProbe(
  _ store: MemoryStoreOfQuotes, _ keys: UnsafeBufferPointer<String>, _ control: ProbeControl
) -> [WindowStats] {
  var stats = [WindowStats](repeating: WindowStats(), count: ProbeWindow.allCases.count)
  var rng = SplitMix64(seed: PersistenceData.seed ^ 0x5752_4954_4552)
  let bound = UInt32(keys.count)
  var op = 0
  var writtenDuringSave = [UInt64](repeating: 0, count: (keys.count + 63) / 64)
  control.started.wrappingAdd(1, ordering: .acquiringAndReleasing)
  while true {
    let window = control.window.load(ordering: .relaxed)
    if window == ProbeWindow.stop { break }
    let index = Int(rng.next(below: bound))
    op &+= 1
    let start = clockNanos()
    store[keys[index]] = Quote.written(byOp: op)
    stats[window].record(start: start, clockNanos() &- start)
    if window == ProbeWindow.duringSave.rawValue {
      writtenDuringSave[index >> 6] |= 1 << UInt64(index & 63)
    }
  }
  stats[ProbeWindow.duringSave.rawValue].distinctKeys = writtenDuringSave.reduce(0) {
    $0 + $1.nonzeroBitCount
  }
  return stats
}

/// Reads random keys until told to stop, timing every read.
@inline(never)
func readerProbe(
  _ store: MemoryStoreOfQuotes, _ keys: UnsafeBufferPointer<String>, _ control: ProbeControl
) -> [WindowStats] {
  var stats = [WindowStats](repeating: WindowStats(), count: ProbeWindow.allCases.count)
  var rng = SplitMix64(seed: PersistenceData.seed ^ 0x5245_4144_4552)
  let bound = UInt32(keys.count)
  control.started.wrappingAdd(1, ordering: .acquiringAndReleasing)
  while true {
    let window = control.window.load(ordering: .relaxed)
    if window == ProbeWindow.stop { break }
    let key = keys[Int(rng.next(below: bound))]
    let start = clockNanos()
    let quote = store[key]
    stats[window].record(start: start, clockNanos() &- start)
    if let quote {
      stats[window].checksum &+= quote.volume
    } else {
      stats[window].misses += 1
    }
  }
  return stats
}

/// The blocking measurement.
struct BlockingResult {
  var entryCount: Int
  var coderName: String
  var fileBytes: Int
  var savedEntries: Int
  var saveNanos: UInt64
  /// When `save()` returned.
  var saveEnd: UInt64
  /// The main thread's write right after `save()` returned.
  var firstWriteStart: UInt64
  var firstWriteNanos: UInt64
  /// Window lengths, by `ProbeWindow`.
  var windowNanos: [UInt64]
  /// The share of the CPUs other processes used in each window, by `ProbeWindow`.
  var othersShare: [Double?]
  var writer: [WindowStats]
  var reader: [WindowStats]
  var finalCount: Int

  func writeMops(_ window: ProbeWindow) -> Double {
    Double(writer[window.rawValue].ops) / Double(windowNanos[window.rawValue]) * 1e3
  }

  func readMops(_ window: ProbeWindow) -> Double {
    Double(reader[window.rawValue].ops) / Double(windowNanos[window.rawValue]) * 1e3
  }

  /// The longest a write waited during and after the save, the main thread's first write
  /// after it included.
  var maxWriteBlocking: UInt64 {
    max(
      writer[ProbeWindow.duringSave.rawValue].maxNanos,
      writer[ProbeWindow.afterSave.rawValue].maxNanos, firstWriteNanos)
  }
}

/// How long the window after the save lasts after the first write following the save returns.
private let afterSaveNanos: UInt64 = 200_000_000

private func sleepUntil(_ deadline: UInt64) {
  while true {
    let now = clockNanos()
    if now >= deadline { return }
    usleep(useconds_t(min((deadline - now) / 1000 + 1, 100_000)))
  }
}

/// Keeps the calling thread busy until `deadline`, without touching the store.
@inline(never)
private func spinUntil(_ deadline: UInt64) -> UInt64 {
  var rng = SplitMix64(seed: 1)
  var sink: UInt64 = 0
  while clockNanos() < deadline {
    for _ in 0..<256 { sink ^= rng.next() }
  }
  return sink
}

/// A store of `entryCount` entries, one writer thread and one reader thread on random keys,
/// and the main thread saving the store; then, for comparison, windows as long as the save
/// with the main thread idle, and busy spinning.
func measureBlocking(entryCount: Int, directory: URL) throws -> BlockingResult {
  let chosen =
    persistenceCoders.first { $0.name == "binary" }
    ?? persistenceCoders.first { $0.name == "json" } ?? persistenceCoders[0]
  progress("persistence: building a store of \(entryCount) entries")
  let keys = (0..<entryCount).map(PersistenceData.key)
  // The entries go out of scope here: the store shares no storage with them.
  let store = populatedStore(PersistenceData.entries(count: entryCount), name: "blocking")
  let manager = try PersistenceManager(
    store: store, fileURL: directory.appending(path: "blocking.\(chosen.name).snapshot"),
    coder: chosen.coder)

  let control = ProbeControl()
  let finished = DispatchSemaphore(value: 0)
  for role in ["writer", "reader"] {
    let thread = Thread {
      let stats = keys.withUnsafeBufferPointer { keys in
        role == "writer"
          ? writerProbe(store, keys, control) : readerProbe(store, keys, control)
      }
      control.record(stats, for: role)
      finished.signal()
    }
    thread.start()
  }
  var stopped = false
  func stop() {
    guard !stopped else { return }
    stopped = true
    control.window.store(ProbeWindow.stop, ordering: .relaxed)
    finished.wait()
    finished.wait()
  }
  defer { stop() }
  while control.started.load(ordering: .acquiring) < 2 { usleep(1000) }

  var windowNanos = [UInt64](repeating: 0, count: ProbeWindow.allCases.count)
  var cpu = [CPUSnapshot?](repeating: nil, count: ProbeWindow.allCases.count + 1)
  func enter(_ window: ProbeWindow) -> UInt64 {
    control.window.store(window.rawValue, ordering: .relaxed)
    cpu[window.rawValue] = CPUSnapshot.now()
    return clockNanos()
  }

  let warmUpStart = enter(.warmUp)
  sleepUntil(warmUpStart + 300_000_000)

  progress("persistence: saving \(entryCount) entries with \(chosen.name) under load")
  let saveStart = enter(.duringSave)
  let report = try manager.save()
  let saveEnd = clockNanos()
  // The first write right away; the CPU snapshot of the window only after it.
  control.window.store(ProbeWindow.afterSave.rawValue, ordering: .relaxed)
  let firstWriteStart = clockNanos()
  store[keys[0]] = Quote(bid: 1, ask: 1.05, volume: 1)
  let firstWriteEnd = clockNanos()
  let firstWriteNanos = firstWriteEnd - firstWriteStart
  cpu[ProbeWindow.afterSave.rawValue] = CPUSnapshot.now()
  let saveNanos = saveEnd - saveStart
  windowNanos[ProbeWindow.duringSave.rawValue] = saveNanos
  sleepUntil(firstWriteEnd + afterSaveNanos)

  progress("persistence: control windows of \(fixed(millis(saveNanos), 0)) ms, no save")
  let idleStart = enter(.idleControl)
  windowNanos[ProbeWindow.afterSave.rawValue] = idleStart - saveEnd
  sleepUntil(idleStart + saveNanos)
  let busyStart = enter(.busyControl)
  windowNanos[ProbeWindow.idleControl.rawValue] = busyStart - idleStart
  _ = spinUntil(busyStart + saveNanos)
  windowNanos[ProbeWindow.busyControl.rawValue] = clockNanos() - busyStart
  stop()
  cpu[ProbeWindow.stop] = CPUSnapshot.now()
  let othersShare = ProbeWindow.allCases.map {
    CPUSnapshot.othersShare(cpu[$0.rawValue], cpu[$0.rawValue + 1])
  }

  return BlockingResult(
    entryCount: entryCount, coderName: chosen.name, fileBytes: report.byteCount,
    savedEntries: report.entryCount, saveNanos: saveNanos, saveEnd: saveEnd,
    firstWriteStart: firstWriteStart, firstWriteNanos: firstWriteNanos,
    windowNanos: windowNanos, othersShare: othersShare, writer: control.stats(for: "writer"),
    reader: control.stats(for: "reader"), finalCount: store.count)
}

private func micros(_ nanos: UInt64) -> String { fixed(Double(nanos) / 1e3, 1) }

func printBlocking(_ result: BlockingResult) {
  print("## Blocking during a save, \(result.entryCount) entries")
  print("")
  print(
    "- a store of \(result.entryCount) entries; a writer thread sets random existing keys and "
      + "a reader thread gets random keys, both in tight loops timing every operation "
      + "(`clock_gettime(CLOCK_MONOTONIC)`), while the main thread runs `save()` with the "
      + "\(result.coderName) coder; one repetition")
  let distinct = result.writer[ProbeWindow.duringSave.rawValue].distinctKeys
  print(
    "- save: \(fixed(millis(result.saveNanos), 1)) ms, \(result.savedEntries) entries, "
      + "\(mebibytes(result.fileBytes)); meanwhile the writer wrote \(distinct) distinct keys "
      + "(\(fixed(Double(distinct) / Double(result.entryCount) * 100, 1))% of the store)")
  print(
    "- first write after `save()` returned (main thread): \(micros(result.firstWriteNanos)) µs; "
      + "the writer thread's first write after it: "
      + "\(micros(result.writer[ProbeWindow.afterSave.rawValue].firstNanos)) µs")
  print(
    "- control windows as long as the save, no save running: the main thread idle (sleeping), "
      + "then the main thread busy spinning (the same CPU contention as a save on "
      + "\(ProcessInfo.processInfo.activeProcessorCount) cores, without the store)")
  print(
    "- CPUs used by others: the share of all CPU time (`/proc/stat`) not used by this process; "
      + "the save's share also covers the first write after it")
  print("")
  print(
    "| window | ms | writes | write Mops/s | max write µs | writes >= 1 ms | reads "
      + "| read Mops/s | max read µs | reads >= 1 ms | CPUs used by others |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  let rows: [(ProbeWindow, String)] = [
    (.duringSave, "during the save"),
    (.afterSave, "after the save (until \(afterSaveNanos / 1_000_000) ms after the first write)"),
    (.idleControl, "no save, main thread idle"),
    (.busyControl, "no save, main thread spinning"),
  ]
  for (window, name) in rows {
    let writer = result.writer[window.rawValue]
    let reader = result.reader[window.rawValue]
    print(
      "| \(name) | \(fixed(millis(result.windowNanos[window.rawValue]), 1)) | \(writer.ops) "
        + "| \(fixed(result.writeMops(window), 2)) | \(micros(writer.maxNanos)) "
        + "| \(writer.slowOps) | \(reader.ops) | \(fixed(result.readMops(window), 2)) "
        + "| \(micros(reader.maxNanos)) | \(reader.slowOps) "
        + "| \(shareText(result.othersShare[window.rawValue])) |")
  }
  print("")
  func offset(_ time: UInt64) -> String {
    let millis = (Double(time) - Double(result.saveEnd)) / 1e6
    return (millis >= 0 ? "+" : "") + fixed(millis, 1)
  }
  var longest = [
    "main thread's first write: \(micros(result.firstWriteNanos)) µs at "
      + "\(offset(result.firstWriteStart)) ms"
  ]
  for (window, name) in [(ProbeWindow.duringSave, "during"), (.afterSave, "after")] {
    for (role, stats) in [("writer", result.writer), ("reader", result.reader)] {
      let items = stats[window.rawValue].longest.map {
        "\(micros($0.nanos)) µs at \(offset($0.start)) ms"
      }
      longest.append("\(role) \(name): " + items.joined(separator: ", "))
    }
  }
  print("The longest operations during and after the save (start relative to the save's end):")
  print("")
  for line in longest { print("- \(line)") }
  print("")
  print("Throughput during the save over the same window length without a save:")
  print("")
  print("| comparison | writes | reads |")
  print("|---|---:|---:|")
  for (control, name) in [(ProbeWindow.idleControl, "main idle"), (.busyControl, "main spinning")] {
    print(
      "| during save / no save, \(name) "
        + "| \(fixed(result.writeMops(.duringSave) / result.writeMops(control), 2)) "
        + "| \(fixed(result.readMops(.duringSave) / result.readMops(control), 2)) |")
  }
  print("")
  let misses = result.reader.reduce(0) { $0 + $1.misses }
  print(
    "- reader misses: \(misses) (every key is always present); store count after: "
      + "\(result.finalCount)" + (result.finalCount == result.entryCount ? "" : "  <-- WRONG"))
  print("")
}

// MARK: - Targets

private struct PersistenceTarget {
  var name: String
  /// `nil` when not evaluated.
  var met: Bool?
  var detail: String
}

func printPersistenceTargets(_ results: SaveLoadResults, blocking: BlockingResult?) {
  var targets: [PersistenceTarget] = []
  if let json = results.jsonIndex {
    for (what, ours, raw) in [
      ("save", results.save(json), results.rawSave), ("load", results.load(json), results.rawLoad),
    ] {
      let ratio = ours / raw
      targets.append(
        PersistenceTarget(
          name: "\(what): json manager <= 1.2 x JSON raw", met: ratio <= 1.2,
          detail: "json \(fixed(ours, 1)) ms, JSON raw \(fixed(raw, 1)) ms: "
            + "\(fixed(ratio, 2))x (limit 1.20x)"))
    }
  }
  let jsonBytes = results.jsonIndex.map(results.bytes) ?? results.raw.last?.bytes ?? 0
  let others = results.managers.indices.filter { results.managers[$0].name != "json" }
  for index in others {
    let name = results.managers[index].name
    for (what, ours, raw) in [
      ("save", results.save(index), results.rawSave),
      ("load", results.load(index), results.rawLoad),
    ] {
      let speedup = raw / ours
      targets.append(
        PersistenceTarget(
          name: "\(what): \(name) manager >= 5x faster than JSON raw", met: speedup >= 5,
          detail: "\(name) \(fixed(ours, 1)) ms, JSON raw \(fixed(raw, 1)) ms: "
            + "\(fixed(speedup, 2))x faster (needs 5.00x)"))
    }
    let bytes = results.bytes(index)
    targets.append(
      PersistenceTarget(
        name: "file: \(name) smaller than json", met: bytes < jsonBytes,
        detail: "\(name) \(bytes) bytes, json \(jsonBytes) bytes: "
          + "\(fixed(Double(bytes) / Double(jsonBytes), 3))x"))
  }
  if others.isEmpty {
    targets.append(
      PersistenceTarget(
        name: "binary: save and load >= 5x faster than JSON raw, file smaller than json",
        met: nil, detail: "skipped: binary coder not built"))
  }
  let blockingNames = [
    "blocking: max write latency during + after the save < 5 ms",
    "first write after the save < 5 ms (no full copy of the store)",
  ]
  if let blocking {
    let during = blocking.writer[ProbeWindow.duringSave.rawValue].maxNanos
    let after = blocking.writer[ProbeWindow.afterSave.rawValue].maxNanos
    targets.append(
      PersistenceTarget(
        name: blockingNames[0], met: blocking.maxWriteBlocking < 5_000_000,
        detail: "\(fixed(millis(blocking.maxWriteBlocking), 2)) ms (during "
          + "\(fixed(millis(during), 2)), after \(fixed(millis(after), 2)), first write "
          + "\(fixed(millis(blocking.firstWriteNanos), 2)); \(blocking.entryCount) entries, "
          + "\(blocking.coderName)); without a save: max write "
          + "\(fixed(millis(blocking.writer[ProbeWindow.idleControl.rawValue].maxNanos), 2)) ms "
          + "(main idle), "
          + "\(fixed(millis(blocking.writer[ProbeWindow.busyControl.rawValue].maxNanos), 2)) ms "
          + "(main spinning)"))
    targets.append(
      PersistenceTarget(
        name: blockingNames[1], met: blocking.firstWriteNanos < 5_000_000,
        detail: "\(fixed(millis(blocking.firstWriteNanos), 3)) ms"))
  } else {
    for name in blockingNames {
      targets.append(
        PersistenceTarget(name: name, met: nil, detail: "skipped: not measured under --quick"))
    }
  }

  print("## Persistence targets")
  print("")
  print("| target | result | measured |")
  print("|---|---|---|")
  for target in targets {
    let result =
      switch target.met {
      case true?: "MET"
      case false?: "NOT MET"
      case nil: "skipped"
      }
    print("| \(target.name) | \(result) | \(target.detail) |")
  }
  print("")
  let evaluated = targets.filter { $0.met != nil }
  print(
    "\(evaluated.filter { $0.met == true }.count) of \(evaluated.count) evaluated persistence "
      + "targets met.")
  let skipped = targets.count - evaluated.count
  if skipped > 0 { print("\(skipped) persistence targets skipped.") }
  print("")
}
