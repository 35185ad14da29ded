// The growth section: a store grown from empty to 4 000 000 entries by single writes on one
// thread, every write timed: the worst write (a table resized all at once shows up here), the
// 99.9th percentile, and where the worst happened. Each store grows in a fresh process (see
// Probe.swift).

import Foundation
import MemoryStoreKit

/// How much the growth section measures.
struct GrowthPlan {
  var entryCount: Int

  init(quick: Bool) {
    entryCount = quick ? 400_000 : 4_000_000
  }

  /// The stores grown, in report order.
  static let stores: [ProbeStoreKind] = [
    .dictionary, .nslock, .memorystore, .memorystoreLimited, .memorystoreTTL, .engine,
  ]
}

/// The target printed beside the table: no single write longer than this.
private let worstWriteTarget: UInt64 = 5_000_000

/// `850 ns`, `12.3 us`, `4.56 ms`.
private func durationText(_ nanos: Int) -> String {
  if nanos < 1_000 { return "\(nanos) ns" }
  if nanos < 1_000_000 { return "\(fixed(Double(nanos) / 1e3, 1)) us" }
  return "\(fixed(Double(nanos) / 1e6, 2)) ms"
}

/// Runs the growth section and prints its report. Returns `false` if a child process crashed.
func runGrowthBenchmark(plan: GrowthPlan) -> Bool {
  let count = plan.entryCount
  print("# Growth")
  print("")
  print(
    "- each store grown from empty to \(count) entries (Int keys 0..<\(count), Payload values) "
      + "by single writes on one thread, in a fresh process; the monotonic clock read after "
      + "every write, so a write's time includes the loop and one clock read (tens of ns)")
  print(
    "- worst at = the entry count the worst write reached; a worst write on a busy machine "
      + "may be the thread being descheduled: compare it with p99.9 and the writes over 1 ms")
  print("- stores:")
  for store in GrowthPlan.stores { print("  - \(store.rawValue): \(store.summary)") }
  print("")

  var rows: [(store: ProbeStoreKind, outcome: ProbeOutcome)] = []
  for (number, store) in GrowthPlan.stores.enumerated() {
    let outcome = runProbeProcess(
      ProbeRequest(measurement: .growth, store: store, count: count))
    rows.append((store, outcome))
    var line = "[growth \(number + 1)/\(GrowthPlan.stores.count)] \(store.rawValue): "
    if case .measured(let numbers) = outcome, numbers.count == 7 {
      line += "worst \(durationText(numbers[3])) at \(numbers[4])"
    } else {
      line += "not measured"
    }
    progress(line)
  }

  print(
    "| store | total s | mean ns/write | median | p99.9 | worst | worst at | writes > 1 ms "
      + "| worst <= 5 ms |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
  var crashed = false
  for (store, outcome) in rows {
    let name = store.rawValue
    switch outcome {
    case .measured(let numbers) where numbers.count == 7:
      let (total, median, p999, worst, worstAt, over1ms, storeCount) = (
        numbers[0], numbers[1], numbers[2], numbers[3], numbers[4], numbers[5], numbers[6]
      )
      let countNote = storeCount == count ? "" : " (WARNING: the store held \(storeCount))"
      print(
        "| \(name)\(countNote) | \(fixed(Double(total) / 1e9, 2)) "
          + "| \(fixed(Double(total) / Double(count), 1)) | \(durationText(median)) "
          + "| \(durationText(p999)) | \(durationText(worst)) | \(worstAt) | \(over1ms) "
          + "| \(UInt64(worst) <= worstWriteTarget ? "yes" : "no") |")
    case .measured:
      print("| \(name) | malformed result | | | | | | | |")
    case .unavailable:
      print("| \(name) | not measured | | | | | | | |")
    case .notStarted(let reason):
      print("| \(name) | not measured: \(reason) | | | | | | | |")
    case .failed(let reason):
      crashed = true
      print("| \(name) | FAILED: \(reason) | | | | | | | |")
    }
  }
  print("")
  print("Target (printed, not asserted): worst single write <= 5 ms.")
  print("")
  printFirstTimedWrites(entryCount: plan.entryCount / 4)
  if crashed {
    print("")
    print("ERROR: a growth probe process failed; its store was not measured (see the table).")
  }
  print("")
  return !crashed
}

/// Times the first write with a time to live, and the first with a cost, into a store of
/// `entryCount` entries written without either: the write that turns the store's policy on.
/// Three stores each; prints the median and the worst.
private func printFirstTimedWrites(entryCount: Int) {
  let entries = Dictionary(uniqueKeysWithValues: (0..<entryCount).map { ($0, Payload(key: $0)) })
  var rows: [(String, [Int])] = []
  for (name, write) in [
    (
      "first write with a time to live",
      { (store: MemoryStore<Int, Payload>) in
        _ = store.setValue(Payload(key: -1), forKey: -1, timeToLive: .seconds(60))
      }
    ),
    (
      "first write with a cost",
      { (store: MemoryStore<Int, Payload>) in
        _ = store.setValue(Payload(key: -1), forKey: -1, cost: 1)
      }
    ),
  ] {
    var times: [Int] = []
    for _ in 0..<3 {
      let store = MemoryStore<Int, Payload>()
      store.addEntries(entries)
      let start = monotonicNanos()
      write(store)
      times.append(Int(monotonicNanos() - start))
    }
    rows.append((name, times.sorted()))
  }
  print("First timed write into a store of \(entryCount) plain entries (3 stores each):")
  print("")
  print("| write | median | worst | worst <= 5 ms |")
  print("|---|---:|---:|---|")
  for (name, times) in rows {
    print(
      "| \(name) | \(durationText(times[1])) | \(durationText(times[2])) "
        + "| \(times[2] <= Int(worstWriteTarget) ? "yes" : "no") |")
  }
  print("")
}
