// MemoryStoreBenchmark: MemoryStore against four baselines (a plain Dictionary, a YMCache-style
// GCD store, NSLock around a Dictionary, and NSCache), all in one process, on the same 10 000
// keys and the same pre-generated access pattern; then persistence: PersistenceManager's save
// and load for each snapshot coder against raw JSONEncoder / JSONDecoder, and how long a save
// of 1 000 000 entries blocks a writer and a reader. Prints Markdown tables, ratios and the
// performance targets, MET or NOT MET. Always build with optimisation:
//
//     swift run -c release MemoryStoreBenchmark [--quick] [--runs N]
//         [--workloads read1,read2,mixed2,rw,write1]
//         [--stores dictionary,ymcache-gcd,nslock,nscache,memorystore,memorystore-batches]
//         [--persistence-only | --skip-persistence] [--eviction-only | --skip-eviction]
//
// Throughput: each store x workload is calibrated (warm-up, then an op count so that one
// repetition takes about 0.25 s), repeated (5 times by default) on a fresh pre-populated store
// each time, and reported as the median. `--quick` aims at 0.03 s per repetition and 3
// repetitions, for CI.
//
// Persistence (after the throughput section, see PersistenceBenchmark.swift): 100 000 entries
// saved and loaded 5 times, medians reported, then the blocking measurement on 1 000 000
// entries; `--quick` uses 10 000 entries and 3 repetitions and skips the blocking measurement.
//
// Eviction (last, see EvictionBenchmark.swift): the count limit's hit rate against strict LRU on
// Zipf traces, and how long a purge and a trim of 1 000 000 entries make a writer and a reader
// wait (`--quick`: shorter traces, 100 000 entries, one run).
//
// The exit code is 0 whether or not the targets are met: this is a measurement, not a test.

import Foundation

struct Options {
  var quick = false
  var runs: Int?
  var workloads = Workload.allCases
  var stores = StoreKind.allCases
  var persistenceOnly = false
  var skipPersistence = false
  var evictionOnly = false
  var skipEviction = false

  static let usage = """
    usage: MemoryStoreBenchmark [--quick] [--runs N] [--workloads LIST] [--stores LIST]
                                [--persistence-only | --skip-persistence]
                                [--eviction-only | --skip-eviction]
      --quick            about 0.03 s per repetition and 3 repetitions (for CI); persistence
                         with 10000 entries and no blocking measurement
      --runs N           repetitions per store and workload, and per persistence measurement
                         (default 5, or 3 with --quick)
      --workloads LIST   comma-separated subset of: \
    \(Workload.allCases.map(\.rawValue).joined(separator: ","))
      --stores LIST      comma-separated subset of: \
    \(StoreKind.allCases.map(\.rawValue).joined(separator: ","))
      --persistence-only run only the persistence section
      --skip-persistence skip the persistence section
      --eviction-only    run only the eviction section
      --skip-eviction    skip the eviction section
    """

  struct UsageError: Error {
    var message: String
  }

  init(arguments: [String]) throws(UsageError) {
    var remaining = arguments[...]
    while let argument = remaining.popFirst() {
      var name = argument
      var inlineValue: String?
      if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
        name = String(argument[..<equals])
        inlineValue = String(argument[argument.index(after: equals)...])
      }
      func value() throws(UsageError) -> String {
        if let inlineValue { return inlineValue }
        guard let next = remaining.popFirst() else {
          throw UsageError(message: "\(name) needs a value")
        }
        return next
      }
      switch name {
      case "--quick":
        quick = true
      case "--runs":
        let text = try value()
        guard let runs = Int(text), runs >= 1 else {
          throw UsageError(message: "--runs needs a positive integer, not '\(text)'")
        }
        self.runs = runs
      case "--workloads":
        workloads = try Self.list(try value(), option: name)
      case "--stores":
        stores = try Self.list(try value(), option: name)
      case "--persistence-only":
        persistenceOnly = true
      case "--skip-persistence":
        skipPersistence = true
      case "--eviction-only":
        evictionOnly = true
      case "--skip-eviction":
        skipEviction = true
      case "--help", "-h":
        print(Self.usage)
        exit(0)
      default:
        throw UsageError(message: "unknown argument '\(argument)'")
      }
    }
    if persistenceOnly && skipPersistence {
      throw UsageError(message: "--persistence-only and --skip-persistence exclude each other")
    }
    if evictionOnly && (skipEviction || persistenceOnly) {
      throw UsageError(message: "--eviction-only excludes --skip-eviction and --persistence-only")
    }
  }

  var runsThroughput: Bool { !persistenceOnly && !evictionOnly }
  var runsPersistence: Bool { !skipPersistence && !evictionOnly }
  var runsEviction: Bool { !skipEviction && !persistenceOnly }

  var sectionNames: String {
    [("throughput", runsThroughput), ("persistence", runsPersistence), ("eviction", runsEviction)]
      .filter(\.1).map(\.0).joined(separator: ", ")
  }

  /// Parses a comma-separated list of raw values, keeping the canonical order.
  private static func list<T: RawRepresentable & CaseIterable & Equatable>(
    _ text: String, option: String
  ) throws(UsageError) -> [T] where T.RawValue == String {
    var chosen: [T] = []
    for name in text.split(separator: ",") {
      guard let item = T(rawValue: String(name)) else {
        throw UsageError(message: "\(option): unknown name '\(name)'")
      }
      chosen.append(item)
    }
    guard !chosen.isEmpty else { throw UsageError(message: "\(option) needs at least one name") }
    return T.allCases.filter { chosen.contains($0) }
  }
}

func progress(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

let options: Options
do {
  options = try Options(arguments: Array(CommandLine.arguments.dropFirst()))
} catch {
  progress("MemoryStoreBenchmark: \(error.message)\n\(Options.usage)")
  exit(64)
}

let runStart = monotonicNanos()

print("# MemoryStore benchmark")
print("")
#if DEBUG
  print("**WARNING: DEBUG BUILD, compiled without optimisation. These numbers are meaningless;**")
  print("**run `swift run -c release MemoryStoreBenchmark`.**")
  print("")
#endif
let info = ProcessInfo.processInfo
print(
  "- machine: \(info.activeProcessorCount) active cores (\(info.processorCount) total); "
    + info.operatingSystemVersionString)
#if DEBUG
  print("- build: DEBUG (unoptimised) -- NOT representative")
#else
  print("- build: release (optimised)")
#endif
print("- sections: \(options.sectionNames)")

if options.runsThroughput {
  let plan = MeasurementPlan(
    runs: options.runs ?? (options.quick ? 3 : 5), targetSeconds: options.quick ? 0.03 : 0.25)
  let seed: UInt64 = 0x4D65_6D53_746F_7265
  let fixture = Fixture(seed: seed)
  let sanity = fixture.pattern.sanityCheck(
    keyCount: fixture.keys.count, shortestPrefix: plan.minOps)
  let keysAreSmall =
    Set(fixture.keys).count == KeySpace.count && fixture.keys.allSatisfy { $0.utf8.count == 7 }

  print(
    "- mode: \(options.quick ? "quick" : "default"), \(plan.runs) repetitions per cell, "
      + "median reported; about \(fixed(plan.targetSeconds, 2)) s per repetition, "
      + "N per lane calibrated within \(plan.minOps)...\(plan.maxOps)")
  print(
    "- keys: \(fixture.keys.count) distinct String keys \(fixture.keys[0])...\(fixture.keys.last!)"
      + (keysAreSmall ? ", 7 UTF-8 bytes each" : " (NOT all distinct 7-byte keys)")
      + "; values: Quote (bid, ask, volume), \(MemoryLayout<Quote>.size) bytes")
  print(
    "- access pattern: SplitMix64, seed 0x\(String(seed, radix: 16)), "
      + "\(AccessPattern.laneCount) lanes x \(AccessPattern.length) ops, uniform keys, "
      + "write mark on \(fixture.pattern.writePercent)% (mixed2); same prefixes for every store")
  for line in sanity.lines { print("  - \(line)") }
  print("- stores:")
  for store in options.stores { print("  - \(store.rawValue): \(store.summary)") }
  print("")

  guard sanity.passed && keysAreSmall else {
    print("The access pattern failed its sanity check; nothing was measured.")
    exit(1)
  }

  let jobs = options.workloads.flatMap { workload in
    options.stores.filter { $0.isThreadSafe || !workload.isConcurrent }.map { (workload, $0) }
  }
  var measurements: [Measurement] = []
  for (number, (workload, store)) in jobs.enumerated() {
    let result = measure(store, workload, fixture: fixture, plan: plan)
    measurements.append(result)
    var line =
      "[\(number + 1)/\(jobs.count)] \(workload.rawValue) \(store.rawValue): "
      + "N \(result.opsPerLane), \(fixed(result.nanosPerOp, 1)) ns/op, "
      + "\(fixed(result.mops, 2)) Mops/s"
    if workload == .rw { line += ", reader \(fixed(result.readerMops, 2)) Mops/s" }
    progress(line)
  }

  Report(measurements: measurements, plan: plan).printAll()
} else {
  print("")
}

if options.runsPersistence {
  runPersistenceBenchmark(plan: PersistencePlan(quick: options.quick, runs: options.runs))
}

if options.runsEviction {
  runEvictionBenchmark(plan: EvictionPlan(quick: options.quick, runs: options.runs))
}

let elapsed = Double(monotonicNanos() - runStart) / 1e9
print("Total time: \(fixed(elapsed, 1)) s.")
#if DEBUG
  print("")
  print("**WARNING: DEBUG BUILD. The numbers above are meaningless; use `-c release`.**")
#endif
