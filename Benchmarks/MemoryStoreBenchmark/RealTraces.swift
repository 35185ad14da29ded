// The real-trace section (`--trace-dir DIR`): hit rates of the count limit on published cache
// traces that Scripts/hitrate/convert-traces.py wrote to DIR, beside strict LRU and Belady's MIN,
// at 5 % and 20 % of each trace's distinct keys. Scripts/hitrate/reference.py replays the same
// directory through libCacheSim's policies.

import Foundation

/// One published trace, converted.
struct RealTrace {
  var name: String
  /// What the workload is (database, web, storage, program, …), from the manifest.
  var kind: String
  var keys: [Int]
  var distinctKeys: Int

  /// The capacities a trace is replayed at: 5 % and 20 % of its distinct keys.
  var capacities: [Int] { [max(distinctKeys / 20, 1), max(distinctKeys / 5, 1)] }
}

/// The traces of `directory`: every `.u64` file (keys as little-endian unsigned 64-bit
/// integers, as convert-traces.py writes them) and every libCacheSim oracleGeneral file
/// (`.oracleGeneral`, `.oracleGeneral.bin`: 24-byte records whose bytes 4 to 11 are the key), by
/// name; the kinds come from `manifest.tsv` when there is one.
func readRealTraces(in directory: String) throws -> [RealTrace] {
  let url = URL(filePath: directory, directoryHint: .isDirectory)
  var kinds: [String: String] = [:]
  if let manifest = try? String(contentsOf: url.appending(path: "manifest.tsv"), encoding: .utf8) {
    for line in manifest.split(separator: "\n").dropFirst() {
      let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
      if fields.count >= 2 { kinds[String(fields[0])] = String(fields[1]) }
    }
  }
  var traces: [RealTrace] = []
  for file in try FileManager.default.contentsOfDirectory(atPath: directory).sorted() {
    let recordSize: Int
    let keyOffset: Int
    let name: String
    if file.hasSuffix(".u64") {
      (recordSize, keyOffset, name) = (8, 0, String(file.dropLast(4)))
    } else if let range = file.range(of: ".oracleGeneral") {
      (recordSize, keyOffset, name) = (24, 4, String(file[..<range.lowerBound]))
    } else {
      continue
    }
    let data = try Data(contentsOf: url.appending(path: file))
    // Keys are numbered in order of first use, 0 up: what Belady's replay indexes arrays with.
    var numbers: [UInt64: Int] = [:]
    let keys = data.withUnsafeBytes { bytes in
      (0..<bytes.count / recordSize).map { index in
        let key = UInt64(
          littleEndian: bytes.loadUnaligned(
            fromByteOffset: index * recordSize + keyOffset, as: UInt64.self))
        if let number = numbers[key] { return number }
        numbers[key] = numbers.count
        return numbers.count - 1
      }
    }
    guard !keys.isEmpty else { continue }
    traces.append(
      RealTrace(name: name, kind: kinds[name] ?? "unknown", keys: keys, distinctKeys: numbers.count)
    )
  }
  return traces
}

/// The threads that replay each real trace at once, beside the single-thread replay.
let concurrentReplayThreads = 4

/// Replays every trace of `directory` at its two capacities and prints the table.
func printRealTraceHitRates(directory: String) -> Bool {
  guard let traces = readTraces(in: directory, with: readRealTraces) else { return false }
  guard !traces.isEmpty else {
    progress("MemoryStoreBenchmark: no .u64 or .oracleGeneral trace in \(directory)")
    return false
  }
  print("## Hit rate on real traces: count limit against strict LRU and Belady's MIN")
  print("")
  print(
    "Traces from \(directory) (Scripts/hitrate/convert-traces.py); a miss inserts the key. "
      + "Capacities are 5 % and 20 % of each trace's distinct keys. Each trace is replayed on one "
      + "thread, then by strict LRU behind a Mutex and by MemoryStore on "
      + "\(concurrentReplayThreads) threads at once (each takes the next 64 accesses from one "
      + "shared index; LRU's change is what the reordering costs any cache). Higher is better; "
      + "differences are in percentage points. Scripts/hitrate/reference.py --trace-dir replays the same files "
      + "through libCacheSim's policies.")
  print("")
  for trace in traces {
    print(
      "- \(trace.name): \(trace.kind); \(trace.keys.count) requests, \(trace.distinctKeys) "
        + "distinct keys")
  }
  print("")
  print(
    "| trace | capacity | strict LRU | MemoryStore | MemoryStore, .lru | Belady "
      + "| MemoryStore - LRU | gap to Belady "
      + "| \(concurrentReplayThreads) threads: LRU | \(concurrentReplayThreads) threads: "
      + "MemoryStore | change: LRU | change: MemoryStore |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
  var sums = (
    lru: 0.0, store: 0.0, storeLRU: 0.0, belady: 0.0, threadedLRU: 0.0, threadedStore: 0.0
  )
  var rows = 0
  var belowLRU: [String] = []
  var limitHeld = true
  for trace in traces {
    for capacity in trace.capacities {
      let (lru, store, storeLRU, belady, held) = hitRateRow(trace.keys, capacity: capacity)
      let concurrent = concurrentHitRates(
        trace.keys, capacity: capacity, threads: concurrentReplayThreads)
      let (threadedLRU, threadedStore) = (concurrent.lru * 100, concurrent.store * 100)
      limitHeld = limitHeld && held && concurrent.withinLimit
      sums.lru += lru
      sums.store += store
      sums.storeLRU += storeLRU
      sums.belady += belady
      sums.threadedLRU += threadedLRU
      sums.threadedStore += threadedStore
      rows += 1
      if store < lru - 0.005 { belowLRU.append("\(trace.name) at \(capacity)") }
      print(
        "| \(trace.name) | \(capacity) | \(fixed(lru, 2)) % | \(fixed(store, 2)) % "
          + "| \(fixed(storeLRU, 2)) % | \(fixed(belady, 2)) % | \(signed(store - lru)) "
          + "| \(fixed(belady - store, 2)) "
          + "| \(fixed(threadedLRU, 2)) % | \(fixed(threadedStore, 2)) % "
          + "| \(signed(threadedLRU - lru)) | \(signed(threadedStore - store)) |")
      progress(
        "real trace \(trace.name) capacity \(capacity): LRU \(fixed(lru, 2)), MemoryStore "
          + "\(fixed(store, 2)), Belady \(fixed(belady, 2))")
    }
  }
  let count = Double(rows)
  print("")
  print(
    "- Mean over the \(rows) rows: strict LRU \(fixed(sums.lru / count, 2)) %, MemoryStore "
      + "\(fixed(sums.store / count, 2)) % (with .lru \(fixed(sums.storeLRU / count, 2)) %), Belady \(fixed(sums.belady / count, 2)) %; on "
      + "\(concurrentReplayThreads) threads, strict LRU \(fixed(sums.threadedLRU / count, 2)) % "
      + "and MemoryStore \(fixed(sums.threadedStore / count, 2)) %")
  print(
    "- Target: never below LRU: **\(belowLRU.isEmpty ? "MET" : "NOT MET")**"
      + (belowLRU.isEmpty ? "" : " (\(belowLRU.count) rows: \(belowLRU.joined(separator: ", ")))"))
  print(
    "- Target: within 1.5 points of the best of ARC, S3-FIFO, SIEVE, W-TinyLFU and LIRS on "
      + "every row, and a mean at least the best single policy's: Scripts/hitrate/reference.py "
      + "--trace-dir measures them")
  print("- The count limit held after every trace: \(limitHeld ? "yes" : "**NO**")")
  print("")
  return true
}

// MARK: - Traces with sizes

/// The traces with sizes of `directory`, in the format `--export-traces` writes for
/// `zipf-0.99-sized` (and Scripts/hitrate/sized-traces.py for real traces): `NAME.txt` of
/// `key size` lines, named in `manifest.tsv` with its two capacities, total sizes. Keys are
/// numbered in order of first use; a key keeps the size of its first access.
func readSizedTraces(in directory: String) throws -> [SizedHitRateTrace] {
  let url = URL(filePath: directory, directoryHint: .isDirectory)
  let manifest = try String(contentsOf: url.appending(path: "manifest.tsv"), encoding: .utf8)
  var traces: [SizedHitRateTrace] = []
  for line in manifest.split(separator: "\n").dropFirst() {
    let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    guard fields.count >= 3, let capacity1 = Int(fields[1]), let capacity10 = Int(fields[2])
    else { continue }
    let text = try String(contentsOf: url.appending(path: fields[0] + ".txt"), encoding: .utf8)
    var numbers: [Int: Int] = [:]
    var keys: [Int] = []
    var sizes: [Int] = []
    for record in text.split(separator: "\n") {
      let parts = record.split(separator: " ")
      guard parts.count == 2, let key = Int(parts[0]), let size = Int(parts[1]) else { continue }
      if let number = numbers[key] {
        keys.append(number)
      } else {
        numbers[key] = sizes.count
        keys.append(sizes.count)
        sizes.append(size)
      }
    }
    guard !keys.isEmpty else { continue }
    traces.append(
      SizedHitRateTrace(
        name: fields[0], summary: fields.count >= 6 ? fields[5] : "", keys: keys, sizes: sizes,
        capacities: [capacity1, capacity10]))
  }
  return traces
}

/// Prints the cost limit's object and byte hit rates on the traces with sizes of `directory`
/// beside size-aware strict LRU; returns whether the cost limit held after every run.
func printSizedTraceHitRates(directory: String) -> Bool {
  guard let traces = readTraces(in: directory, with: readSizedTraces) else { return false }
  print("## Hit rate with sizes: cost limit against size-aware strict LRU")
  print("")
  for trace in traces {
    print("- \(trace.name): \(trace.summary); \(trace.keys.count) accesses")
  }
  print("")
  return printSizedHitRateTable(traces)
}

/// The traces `read` finds in `directory`, or `nil` after saying why it could not.
func readTraces<Trace>(in directory: String, with read: (String) throws -> [Trace]) -> [Trace]? {
  do {
    return try read(directory)
  } catch {
    progress("MemoryStoreBenchmark: could not read the traces in \(directory): \(error)")
    return nil
  }
}
