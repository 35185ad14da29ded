// The traces the eviction section's hit rates are measured on, all generated here from fixed
// seeds so that every run (and Scripts/hitrate/reference.py, through `--export-traces`) sees the
// same keys: Zipf at four skews, Zipf 0.99 with one-pass scans, two loops slightly larger than a
// cache, and a Zipf 0.99 whose popular keys change three times.

import Foundation

/// One trace and the two cache capacities it is replayed at.
struct HitRateTrace {
  /// A short name without spaces, also the exported file's name (with `.txt`).
  var name: String
  /// What the trace is, for the report.
  var summary: String
  var keys: [Int]
  /// 1 % and 10 % of the key space: the keys that can be used again (a scan's keys are not).
  var capacities: [Int]

  /// How many different keys the trace uses.
  var distinctKeys: Int { Set(keys).count }
}

/// Every trace of the eviction section, for a key space of `keySpace` keys and traces of about
/// `length` accesses.
func hitRateTraces(length: Int, keySpace: Int) -> [HitRateTrace] {
  let capacities = [keySpace / 100, keySpace / 10]
  var traces: [HitRateTrace] = []
  for exponent in [0.6, 0.8, 0.99, 1.2] {
    traces.append(
      HitRateTrace(
        name: "zipf-\(exponent)",
        summary: "Zipf \(exponent) over \(keySpace) keys",
        keys: zipfTrace(length: length, keySpace: keySpace, exponent: exponent, seed: 0x5A1F),
        capacities: capacities))
  }
  let zipf = traces.first { $0.name == "zipf-0.99" }!.keys  // Built just above.
  let scanLength = keySpace / 50
  traces.append(
    HitRateTrace(
      name: "zipf-0.99-scans",
      summary: "Zipf 0.99 with a scan of \(scanLength) new keys every 10000 accesses",
      keys: withScans(zipf, every: 10_000, length: scanLength, keySpace: keySpace),
      capacities: capacities))
  for capacity in capacities {
    let loopKeys = capacity * 6 / 5
    traces.append(
      HitRateTrace(
        name: "loop-\(loopKeys)",
        summary: "keys 0..<\(loopKeys) in order, again and again (1.2 x capacity \(capacity))",
        keys: (0..<length).map { $0 % loopKeys },
        capacities: capacities))
  }
  traces.append(
    HitRateTrace(
      name: "shifting-zipf-0.99",
      summary: "4 phases of Zipf 0.99 over \(keySpace) keys, each ranking them differently",
      keys: shiftingTrace(length: length, keySpace: keySpace, phases: 4, exponent: 0.99),
      capacities: capacities))
  return traces
}

/// A key trace whose ranks follow a Zipf law with `exponent`; rank r is key r.
func zipfTrace(length: Int, keySpace: Int, exponent: Double, seed: UInt64) -> [Int] {
  var cumulative = [Double](repeating: 0, count: keySpace)
  var total = 0.0
  for rank in 0..<keySpace {
    total += 1 / pow(Double(rank + 1), exponent)
    cumulative[rank] = total
  }
  var random = SplitMix64(seed: seed)
  return (0..<length).map { _ in
    let target = Double(random.next() >> 11) / Double(1 << 53) * total
    var low = 0
    var high = keySpace - 1
    while low < high {
      let middle = (low + high) / 2
      if cumulative[middle] < target { low = middle + 1 } else { high = middle }
    }
    return low
  }
}

/// The same trace with a scan of never-repeated keys inserted after every `every` accesses:
/// the pattern (a batch job, a crawler) that flushes a strict LRU cache.
func withScans(_ trace: [Int], every: Int, length: Int, keySpace: Int) -> [Int] {
  var result: [Int] = []
  result.reserveCapacity(trace.count + trace.count / every * length)
  var next = keySpace
  for (index, key) in trace.enumerated() {
    result.append(key)
    if (index + 1) % every == 0 {
      for _ in 0..<length {
        result.append(next)
        next += 1
      }
    }
  }
  return result
}

/// `phases` equal parts, each a Zipf trace over the same keys under its own random ranking
/// (the first keeps rank r as key r): what a cache sees when what is popular changes.
func shiftingTrace(length: Int, keySpace: Int, phases: Int, exponent: Double) -> [Int] {
  var random = SplitMix64(seed: 0x5417)
  var ranking = Array(0..<keySpace)
  var result: [Int] = []
  result.reserveCapacity(length)
  for phase in 0..<phases {
    if phase > 0 {
      for index in stride(from: keySpace - 1, to: 0, by: -1) {
        ranking.swapAt(index, Int(random.next(below: UInt32(index + 1))))
      }
    }
    let ranks = zipfTrace(
      length: length / phases, keySpace: keySpace, exponent: exponent,
      seed: 0x5A1F &+ UInt64(phase))
    result.append(contentsOf: ranks.map { ranking[$0] })
  }
  return result
}

/// Writes every trace to `directory` as `NAME.txt`, one key per line (libCacheSim's plain-text
/// trace format), and a `manifest.tsv` naming them with their two capacities.
func exportTraces(_ traces: [HitRateTrace], to directory: String) throws {
  let folder = URL(fileURLWithPath: directory, isDirectory: true)
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  var manifest = "name\tcapacity1\tcapacity10\taccesses\tdistinct\tsummary\n"
  for trace in traces {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(trace.keys.count * 8)
    for key in trace.keys {
      bytes.append(contentsOf: String(key).utf8)
      bytes.append(UInt8(ascii: "\n"))
    }
    try Data(bytes).write(to: folder.appendingPathComponent("\(trace.name).txt"))
    manifest +=
      "\(trace.name)\t\(trace.capacities[0])\t\(trace.capacities[1])\t\(trace.keys.count)"
      + "\t\(trace.distinctKeys)\t\(trace.summary)\n"
    progress("exported \(trace.name): \(trace.keys.count) accesses")
  }
  try Data(manifest.utf8).write(to: folder.appendingPathComponent("manifest.tsv"))
}

// MARK: - A trace with sizes

/// A trace whose keys have sizes, replayed against a cost limit: what orders cost evictions.
struct SizedHitRateTrace {
  var name: String
  var summary: String
  var keys: [Int]
  /// The size of each key of the key space, by key.
  var sizes: [Int]
  /// 1 % and 10 % of the total size of the key space.
  var capacities: [Int]
}

/// Zipf 0.99 over `keySpace` keys (the same accesses as `zipf-0.99`), each key with a fixed
/// size from a Pareto law (shape 1.5, from 8, at most 2 000: most small, a few large), drawn
/// independently of its popularity.
func sizedHitRateTrace(length: Int, keySpace: Int) -> SizedHitRateTrace {
  var random = SplitMix64(seed: 0x51_2E5)
  let sizes = (0..<keySpace).map { _ in
    let uniform = (Double(random.next() >> 11) + 1) / Double(1 << 53)
    return min(2_000, Int((8 * pow(uniform, -1 / 1.5)).rounded(.up)))
  }
  let total = sizes.reduce(0, +)
  return SizedHitRateTrace(
    name: "zipf-0.99-sized",
    summary: "Zipf 0.99 over \(keySpace) keys whose sizes (8 to 2000, mean "
      + "\(fixed(Double(total) / Double(keySpace), 1))) follow a Pareto law",
    keys: zipfTrace(length: length, keySpace: keySpace, exponent: 0.99, seed: 0x5A1F),
    sizes: sizes, capacities: [total / 100, total / 10])
}

/// Writes the sized trace to `directory` as `NAME.txt`, one `key size` pair per line, and adds
/// it to `manifest.tsv` with `sized` set.
func exportSizedTrace(_ trace: SizedHitRateTrace, to directory: String) throws {
  let folder = URL(fileURLWithPath: directory, isDirectory: true)
  var bytes: [UInt8] = []
  bytes.reserveCapacity(trace.keys.count * 12)
  for key in trace.keys {
    bytes.append(contentsOf: "\(key) \(trace.sizes[key])\n".utf8)
  }
  try Data(bytes).write(to: folder.appendingPathComponent("\(trace.name).txt"))
  let manifest = folder.appendingPathComponent("manifest.tsv")
  let handle = try FileHandle(forWritingTo: manifest)
  defer { try? handle.close() }
  try handle.seekToEnd()
  try handle.write(
    contentsOf: Data(
      ("\(trace.name)\t\(trace.capacities[0])\t\(trace.capacities[1])\t\(trace.keys.count)"
        + "\t\(Set(trace.keys).count)\t\(trace.summary)\n").utf8))
  progress("exported \(trace.name): \(trace.keys.count) accesses with sizes")
}
