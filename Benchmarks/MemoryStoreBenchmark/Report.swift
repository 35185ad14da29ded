// Plain-text, Markdown-friendly output: header, tables, ratios, targets and checks.

import Foundation

func fixed(_ value: Double, _ digits: Int) -> String {
  String(format: "%.\(digits)f", value)
}

func percent(_ share: Double) -> String {
  fixed(share * 100, 2) + "%"
}

/// `9.80x faster`, or `0.82x (1.22x slower)`.
func ratioText(_ ratio: Double) -> String {
  guard ratio.isFinite && ratio > 0 else { return "n/a" }
  return ratio >= 1
    ? "\(fixed(ratio, 2))x faster" : "\(fixed(ratio, 2))x (\(fixed(1 / ratio, 2))x slower)"
}

/// A spread above this share of the median marks a row as noisy.
private let noisySpread = 0.10

private func rangeText(_ range: ClosedRange<Double>, median: Double) -> String {
  let text = "\(fixed(range.lowerBound, 2))-\(fixed(range.upperBound, 2))"
  let spread = median > 0 ? (range.upperBound - range.lowerBound) / median : 0
  return spread > noisySpread ? text + " (noisy: \(fixed(spread * 100, 0))%)" : text
}

/// The results of a whole run, and how to print them.
struct Report {
  let measurements: [Measurement]
  let plan: MeasurementPlan

  private func find(_ store: StoreKind, _ workload: Workload) -> Measurement? {
    measurements.first { $0.store == store && $0.workload == workload }
  }

  private var workloads: [Workload] {
    Workload.allCases.filter { workload in measurements.contains { $0.workload == workload } }
  }

  func printAll() {
    printTables()
    printRatios()
    printTargets()
    printChecks()
  }

  // MARK: Tables

  private func printTables() {
    for workload in workloads {
      let rows = measurements.filter { $0.workload == workload }
      print("## \(workload.rawValue): \(workload.summary)")
      print("")
      if workload == .rw {
        print(
          "| store | N (writer) | writer ns/op | writer Mops/s | reader ns/op | reader Mops/s "
            + "| min-max writer Mops/s | min-max reader Mops/s |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in rows {
          print(
            "| \(row.store.rawValue) | \(row.opsPerLane) | \(fixed(row.nanosPerOp, 1)) "
              + "| \(fixed(row.mops, 2)) | \(fixed(row.readerNanosPerOp, 1)) "
              + "| \(fixed(row.readerMops, 2)) | \(rangeText(row.mopsRange, median: row.mops)) "
              + "| \(rangeText(row.readerMopsRange, median: row.readerMops)) |")
        }
      } else {
        print("| store | N per lane | ns/op (per thread) | Mops/s (aggregate) | min-max Mops/s |")
        print("|---|---:|---:|---:|---:|")
        for row in rows {
          print(
            "| \(row.store.rawValue) | \(row.opsPerLane) | \(fixed(row.nanosPerOp, 1)) "
              + "| \(fixed(row.mops, 2)) | \(rangeText(row.mopsRange, median: row.mops)) |")
        }
      }
      print("")
    }
  }

  // MARK: Ratios

  private func printRatios() {
    guard measurements.contains(where: { $0.store == .memorystore }) else { return }
    print("## Ratios")
    print("")
    printMutexRatios()
    print(
      "Throughput of memorystore over each baseline (the median over the rounds of each "
        + "round's ratio); above 1 is faster.")
    print("")
    print("| workload | comparison | ratio |")
    print("|---|---|---:|")
    for workload in workloads {
      guard let ours = find(.memorystore, workload) else { continue }
      for baseline in StoreKind.allCases where baseline.isBaseline && !baseline.evicts {
        guard let theirs = find(baseline, workload) else { continue }
        printRatioRows(
          workload, "memorystore / \(baseline.rawValue)", ours, over: theirs, ratioText)
      }
    }
    print("")
    let variants: [(StoreKind, String)] = [
      (.memorystoreBatches, "Throughput with change batches on (100 ms, one subscriber) over off"),
      (.memorystoreLimited, "Throughput with a count limit (recency noted by reads) over none"),
      (
        .memorystoreEvicting,
        "Throughput with a count limit of half the keys (half the writes evict) over none"
      ),
      (.memorystoreTTL, "Throughput with a time to live (reads check the clock) over none"),
      (.memorystoreDecider, "Throughput with an eviction decider (never run) over none"),
      (
        .memorystoreTicker,
        "Throughput configured as the StockTicker example (decider, batches, persistence) over "
          + "none"
      ),
      (
        .memorystoreTracked,
        "Throughput with tracksReads on (Observation), nobody observing, over off"
      ),
      (.engine, "Throughput of the engine alone (no features) over the store"),
    ]
    for (variant, title) in variants {
      guard measurements.contains(where: { $0.store == variant }) else { continue }
      print("\(title) (the median over the rounds of each round's ratio); 1 is no cost.")
      print("")
      print("| workload | comparison | ratio |")
      print("|---|---|---:|")
      for workload in workloads {
        guard let on = find(variant, workload), let off = find(.memorystore, workload)
        else { continue }
        printRatioRows(workload, "\(variant.rawValue) / memorystore", on, over: off) {
          fixed($0, 2)
        }
      }
      print("")
    }
    printPolicyRatios()
  }

  /// The comparisons the targets read against, first: memorystore over `mutex` (a
  /// `Mutex<[String: Quote]>`, what a Swift client would write instead) on every workload, and
  /// write1 with change batches on over off. Each row also shows the two medians it divides.
  private func printMutexRatios() {
    var pairs = workloads.map { ($0, StoreKind.memorystore, StoreKind.mutex) }
    pairs.append((.write1, .memorystoreBatches, .memorystore))
    let rows = pairs.compactMap { workload, store, baseline in
      find(store, workload).flatMap { ours in find(baseline, workload).map { (ours, $0) } }
    }
    guard !rows.isEmpty else { return }
    print(
      "Against mutex: throughput of memorystore over mutex, and of memorystore-batches over "
        + "memorystore on write1 (the median over the rounds of each round's ratio of the "
        + "first over the second, beside each one's median Mops/s); above 1 is faster.")
    print("")
    print("| workload | comparison | ratio | Mops/s (first / second) |")
    print("|---|---|---:|---:|")
    for (ours, theirs) in rows {
      let comparison = "\(ours.store.rawValue) / \(theirs.store.rawValue)"
      func row(_ label: String, reader: Bool) {
        let ourRate = reader ? ours.readerMops : ours.mops
        let theirRate = reader ? theirs.readerMops : theirs.mops
        print(
          "| \(label) | \(comparison) | \(ratioText(ours.mopsRatio(over: theirs, reader: reader))) "
            + "| \(fixed(ourRate, 2)) / \(fixed(theirRate, 2)) |")
      }
      if ours.workload == .rw {
        row("rw writer", reader: false)
        row("rw reader", reader: true)
      } else {
        row(ours.workload.rawValue, reader: false)
      }
    }
    print("")
  }

  /// Prints the rows of one comparison in a ratio table: one row per workload, two for `rw`
  /// (its writer and its reader).
  private func printRatioRows(
    _ workload: Workload, _ comparison: String, _ ours: Measurement, over theirs: Measurement,
    _ format: (Double) -> String
  ) {
    if workload == .rw {
      print("| rw writer | \(comparison) | \(format(ours.mopsRatio(over: theirs))) |")
      print(
        "| rw reader | \(comparison) | \(format(ours.mopsRatio(over: theirs, reader: true))) |")
    } else {
      print("| \(workload.rawValue) | \(comparison) | \(format(ours.mopsRatio(over: theirs))) |")
    }
  }

  /// The stores with an eviction or expiry policy against the YYMemoryCache-style LRU store.
  private func printPolicyRatios() {
    let pairs = Self.policyStores.filter { store, lru in
      measurements.contains { $0.store == store } && measurements.contains { $0.store == lru }
    }
    guard !pairs.isEmpty else { return }
    print(
      "Policy stores against the LRU baseline with the same limit (the median over the rounds "
        + "of each round's ratio); above 1 is faster.")
    print("")
    print("| workload | comparison | ratio |")
    print("|---|---|---:|")
    for workload in workloads {
      for (store, baseline) in pairs {
        guard let ours = find(store, workload), let lru = find(baseline, workload) else {
          continue
        }
        printRatioRows(
          workload, "\(store.rawValue) / \(baseline.rawValue)", ours, over: lru, ratioText)
      }
    }
    print("")
  }

  /// Each store with a policy, and the LRU baseline it is held against (the one with the same
  /// count limit; the others evict nothing, like `nslock-lru`).
  static let policyStores: [(StoreKind, StoreKind)] = [
    (.memorystoreLimited, .nslockLRU), (.memorystoreEvicting, .nslockLRUEvicting),
    (.memorystoreTTL, .nslockLRU), (.memorystoreDecider, .nslockLRU),
    (.memorystoreTicker, .nslockLRU),
  ]

  // MARK: Targets

  private struct Target {
    var name: String
    /// `nil` when a needed measurement was filtered out.
    var met: Bool?
    var detail: String
  }

  private func mops(_ value: Double) -> String { "\(fixed(value, 2)) Mops/s" }

  private func targets() -> [Target] {
    var targets: [Target] = []
    func skipped(_ name: String, needs: String) -> Target {
      Target(name: name, met: nil, detail: "not measured (needs \(needs))")
    }

    // read1
    var name = "read1: memorystore ns/op <= 1.2 x dictionary ns/op"
    if let ours = find(.memorystore, .read1), let floor = find(.dictionary, .read1) {
      let limit = 1.2 * floor.nanosPerOp
      targets.append(
        Target(
          name: name, met: ours.nanosPerOp <= limit,
          detail: "memorystore \(fixed(ours.nanosPerOp, 1)) ns/op, dictionary "
            + "\(fixed(floor.nanosPerOp, 1)) ns/op, limit \(fixed(limit, 1)) ns/op "
            + "(\(fixed(ours.nanosPerOp / floor.nanosPerOp, 2)) x dictionary)"))
    } else {
      targets.append(skipped(name, needs: "read1 on memorystore and dictionary"))
    }
    targets.append(
      speedup(.read1, over: .ymcacheGCD, atLeast: 6, name: "read1: memorystore >= 6x ymcache-gcd"))

    // read2
    name = "read2: memorystore read2 aggregate >= 1.7 x memorystore read1"
    if let two = find(.memorystore, .read2), let one = find(.memorystore, .read1) {
      targets.append(
        Target(
          name: name, met: two.mops >= 1.7 * one.mops,
          detail: "read2 \(mops(two.mops)), read1 \(mops(one.mops)): "
            + "\(fixed(two.mops / one.mops, 2))x (needs 1.70x)"))
    } else {
      targets.append(skipped(name, needs: "read1 and read2 on memorystore"))
    }

    // write1
    targets.append(
      speedup(
        .write1, over: .ymcacheGCD, atLeast: 5,
        name: "write1 (incl. flush): memorystore >= 5x ymcache-gcd"))
    targets.append(
      speedup(
        .write1, over: .nslock, atLeast: 1 / 1.2,
        name: "write1 (incl. flush): memorystore ns/op <= 1.2 x nslock"))

    // mixed2 and rw
    let baselines = StoreKind.allCases.filter { $0.isBaseline && $0.isThreadSafe && !$0.evicts }
    for baseline in baselines {
      targets.append(
        speedup(
          .mixed2, over: baseline, atLeast: 1,
          name: "mixed2: memorystore faster than \(baseline.rawValue)"))
    }
    for baseline in baselines {
      targets.append(
        speedup(
          .rw, over: baseline, atLeast: 1,
          name: "rw writer: memorystore faster than \(baseline.rawValue)"))
      targets.append(
        speedup(
          .rw, over: baseline, atLeast: 1, reader: true,
          name: "rw reader: memorystore faster than \(baseline.rawValue)"))
    }

    // Change batches
    targets.append(
      speedup(
        .write1, of: .memorystoreBatches, over: .memorystore, atLeast: 0.8,
        name: "write1 (incl. flush) with batches on >= 0.8x batches off"))
    targets.append(
      speedup(
        .mixed2, of: .memorystoreBatches, over: .memorystore, atLeast: 0.7,
        name: "mixed2 with batches on >= 0.7x batches off"))
    targets.append(
      speedup(
        .read1, of: .memorystoreBatches, over: .memorystore, atLeast: 0.9,
        name: "read1 with batches on unchanged (>= 0.9x batches off)"))

    // Eviction: a limited store's reads keep the core read targets.
    targets.append(
      speedup(
        .read1, of: .memorystoreLimited, over: .ymcacheGCD, atLeast: 6,
        name: "read1 with a count limit: >= 6x ymcache-gcd (the core read target)"))
    targets.append(
      speedup(
        .read2, of: .memorystoreLimited, over: .nslock, atLeast: 1,
        name: "read2 with a count limit: faster than nslock"))

    // Each policy against the plain store, and against the LRU baseline with the same limit.
    for (store, lru) in Self.policyStores where store != .memorystoreTicker {
      targets.append(
        speedup(
          .read1, of: store, over: .memorystore, atLeast: 1 / 1.2,
          name: "read1 of \(store.rawValue): ns/op <= 1.2 x memorystore"))
      targets.append(
        speedup(
          .write1, of: store, over: .memorystore, atLeast: 1 / 1.5,
          name: "write1 of \(store.rawValue): ns/op <= 1.5 x memorystore"))
      targets.append(
        speedup(
          .write1, of: store, over: lru, atLeast: 1,
          name: "write1 of \(store.rawValue) faster than \(lru.rawValue)"))
      guard store == .memorystoreLimited || store == .memorystoreEvicting else { continue }
      targets.append(
        speedup(
          .mixed2, of: store, over: lru, atLeast: 1,
          name: "mixed2 of \(store.rawValue) ahead of \(lru.rawValue)"))
      name = "rw writer and reader of \(store.rawValue) ahead of \(lru.rawValue)"
      if let ours = find(store, .rw), let theirs = find(lru, .rw) {
        let writer = ours.mopsRatio(over: theirs)
        let reader = ours.mopsRatio(over: theirs, reader: true)
        targets.append(
          Target(
            name: name, met: writer > 1 && reader > 1,
            detail: "writer: \(mops(ours.mops)) against \(mops(theirs.mops)): "
              + "\(fixed(writer, 2))x; reader: \(mops(ours.readerMops)) against "
              + "\(mops(theirs.readerMops)): \(fixed(reader, 2))x"))
      } else {
        targets.append(skipped(name, needs: "rw on \(store.rawValue) and \(lru.rawValue)"))
      }
    }
    return targets
  }

  /// memorystore's throughput on `workload` is at least `factor` x `baseline`'s (strictly
  /// more when `orEqual` is false and `factor` is 1).
  private func speedup(
    _ workload: Workload, of store: StoreKind = .memorystore, over baseline: StoreKind,
    atLeast factor: Double, orEqual: Bool = false, reader: Bool = false, name: String
  ) -> Target {
    guard let ours = find(store, workload), let theirs = find(baseline, workload) else {
      return Target(
        name: name, met: nil,
        detail: "not measured (needs \(workload.rawValue) on \(store.rawValue) and "
          + "\(baseline.rawValue))")
    }
    let ourRate = reader ? ours.readerMops : ours.mops
    let theirRate = reader ? theirs.readerMops : theirs.mops
    let ratio = ours.mopsRatio(over: theirs, reader: reader)
    let met = factor == 1 && !orEqual ? ratio > 1 : ratio >= factor
    return Target(
      name: name, met: met,
      detail: "\(store.rawValue) \(mops(ourRate)), \(baseline.rawValue) \(mops(theirRate)): "
        + "\(fixed(ratio, 2))x" + (factor == 1 ? "" : " (needs \(fixed(factor, 2))x)"))
  }

  private func printTargets() {
    let results = targets()
    let evaluated = results.filter { $0.met != nil }
    let met = evaluated.filter { $0.met == true }.count
    print("## Targets")
    print("")
    print("| target | result | measured |")
    print("|---|---|---|")
    for target in evaluated {
      print("| \(target.name) | \(target.met == true ? "MET" : "NOT MET") | \(target.detail) |")
    }
    print("")
    print("\(met) of \(evaluated.count) evaluated targets met.")
    let skipped = results.count - evaluated.count
    if skipped > 0 {
      print("\(skipped) targets not evaluated: the stores or workloads they compare were not run.")
    }
    print("")
  }

  // MARK: Checks

  private func printChecks() {
    print("## Checks")
    print("")
    let missing = measurements.filter { $0.misses > 0 && !$0.store.evicts }
    if missing.isEmpty {
      print("- every read found its key (0 misses), except in the stores that evict")
    } else {
      for row in missing {
        print(
          "- WARNING: \(row.store.rawValue) \(row.workload.rawValue): \(row.misses) reads "
            + "found no value, although every key is always present")
      }
    }
    let wrong = measurements.filter { !$0.errors.isEmpty }
    if wrong.isEmpty {
      print(
        "- after every repetition, every store held exactly the expected final value "
          + "for every key")
    } else {
      for row in wrong {
        print(
          "- WARNING: \(row.store.rawValue) \(row.workload.rawValue): wrong contents in "
            + "\(row.errors.count) repetitions; first: \(row.errors[0])")
      }
    }
    let checksum = measurements.reduce(0) { $0 &+ $1.checksum }
    print("- checksum of everything read: \(checksum)")
    print("")
  }
}
