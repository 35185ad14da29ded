// The memory section: resident bytes per entry of each store holding 1 000 000 `Int` keys and
// 24-byte values, each store filled by single writes in a fresh process (see Probe.swift),
// against a plain Dictionary.

import Foundation

/// How much the memory section measures.
struct MemoryPlan {
  var entryCount: Int

  init(quick: Bool) {
    entryCount = quick ? 100_000 : 1_000_000
  }
}

/// What one store costs, as a child process measured it.
private struct Footprint {
  var store: ProbeStoreKind
  var outcome: ProbeOutcome

  /// Resident bytes added by the store and its entries, and the store's final count.
  var delta: (bytes: Int, count: Int)? {
    guard case .measured(let numbers) = outcome, numbers.count == 3 else { return nil }
    return (numbers[1] - numbers[0], numbers[2])
  }
}

/// The upper bound the section prints beside each store, as a multiple of the dictionary.
private func target(_ store: ProbeStoreKind) -> Double? {
  switch store {
  case .memorystore: 1.5
  case .memorystoreEvicting: 1.6
  case .memorystoreLimited, .memorystoreTTL, .memorystoreDecider: 2
  case .memorystoreBatches: 2.5
  case .dictionary, .nslock, .engine: nil
  }
}

/// Runs the memory section and prints its report. Returns `false` if a child process crashed.
func runMemoryBenchmark(plan: MemoryPlan) -> Bool {
  let count = plan.entryCount
  print("# Memory")
  print("")
  print(
    "- \(count) entries: Int keys 0..<\(count), Payload values (\(MemoryLayout<Payload>.size) "
      + "bytes), written one at a time on one thread")
  print(
    "- each store in a fresh process: resident set size (RSS) read before the store is "
      + "created and after the fill (and the store's flush, where it has one), with the store "
      + "alive; bytes/entry = the difference / \(count)")
  print(
    "- RSS as the system reports it (\(residentSizeSource)); malloc_trim(0) is not called, so "
      + "memory a store freed while growing and the allocator kept counts too")
  let floor = dictionaryStorageBytes(count: count)
  print(
    "- for scale: a [Int: Payload] of \(count) entries allocates \(floor.buckets) buckets, "
      + "\(fixed(Double(floor.bytes) / Double(count), 1)) bytes/entry")
  print("- stores:")
  for store in ProbeStoreKind.allCases { print("  - \(store.rawValue): \(store.summary)") }
  print("")

  var footprints: [Footprint] = []
  for (number, store) in ProbeStoreKind.allCases.enumerated() {
    let outcome = runProbeProcess(
      ProbeRequest(measurement: .memory, store: store, count: count))
    let footprint = Footprint(store: store, outcome: outcome)
    footprints.append(footprint)
    var line = "[memory \(number + 1)/\(ProbeStoreKind.allCases.count)] \(store.rawValue): "
    if let delta = footprint.delta {
      line += "\(fixed(Double(delta.bytes) / Double(count), 1)) bytes/entry"
    } else {
      line += "not measured"
    }
    progress(line)
  }

  let dictionary = footprints.first { $0.store == .dictionary }?.delta
  print("| store | RSS added (MiB) | bytes/entry | x dictionary | target | within target |")
  print("|---|---:|---:|---:|---|---|")
  var crashed = false
  for footprint in footprints {
    let name = footprint.store.rawValue
    let targetText = target(footprint.store).map { "<= \(fixed($0, 1))x" } ?? "-"
    switch footprint.outcome {
    case .measured:
      guard let delta = footprint.delta else {
        print("| \(name) | malformed result | | | \(targetText) | |")
        continue
      }
      let perEntry = Double(delta.bytes) / Double(count)
      var ratio: Double?
      if let dictionary, dictionary.bytes > 0 {
        ratio = Double(delta.bytes) / Double(dictionary.bytes)
      }
      var within = "-"
      if let limit = target(footprint.store), let ratio { within = ratio <= limit ? "yes" : "no" }
      let countNote = delta.count == count ? "" : " (WARNING: the store held \(delta.count))"
      print(
        "| \(name)\(countNote) | \(fixed(Double(delta.bytes) / 1_048_576, 1)) "
          + "| \(fixed(perEntry, 1)) | \(ratio.map { fixed($0, 2) } ?? "n/a") "
          + "| \(targetText) | \(within) |")
    case .unavailable:
      print("| \(name) | not measured: RSS unavailable on this platform | | | \(targetText) | |")
    case .notStarted(let reason):
      print("| \(name) | not measured: \(reason) | | | \(targetText) | |")
    case .failed(let reason):
      crashed = true
      print("| \(name) | FAILED: \(reason) | | | \(targetText) | |")
    }
  }
  print("")
  print(
    "Targets (printed, not asserted): memorystore <= 1.5x dictionary; evicting at its count "
      + "limit <= 1.6x; with a count limit not reached, a time to live or a decider <= 2x; with "
      + "change batches on <= 2.5x.")
  if crashed {
    print("")
    print("ERROR: a memory probe process failed; its store was not measured (see the table).")
  }
  print("")
  return !crashed
}

/// Where the resident size comes from on this platform.
private var residentSizeSource: String {
  #if os(Linux)
    "/proc/self/statm resident pages x page size"
  #elseif canImport(Darwin)
    "task_info MACH_TASK_BASIC_INFO resident_size"
  #else
    "not available on this platform"
  #endif
}

/// The storage a native `Dictionary<Int, Payload>` allocates for `count` entries: a power of
/// two buckets, at most three quarters full, each with a key and a value, plus one bit each.
private func dictionaryStorageBytes(count: Int) -> (buckets: Int, bytes: Int) {
  var buckets = 1
  while buckets * 3 / 4 < count { buckets *= 2 }
  let perBucket = MemoryLayout<Int>.stride + MemoryLayout<Payload>.stride
  return (buckets, buckets * perBucket + buckets / 8)
}
