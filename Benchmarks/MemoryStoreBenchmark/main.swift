// MemoryStoreBenchmark: MemoryStore against seven baselines (a plain Dictionary, a YMCache-style
// GCD store, NSLock around a Dictionary, a Synchronization Mutex around a Dictionary, 16 such
// Mutex shards chosen by the key's hash, a YYMemoryCache-style LRU store (NSLock, a Dictionary
// and a linked recency list), and NSCache), all in one process, on the same 10 000
// keys and the same pre-generated access pattern; then persistence: PersistenceManager's save
// and load for each snapshot coder against raw JSONEncoder / JSONDecoder, and how long a save
// of 1 000 000 entries blocks a writer and a reader. Prints Markdown tables, ratios (first
// memorystore against mutex) and the performance targets, MET or NOT MET. Always build with
// optimisation:
//
//     swift run -c release --package-path Benchmarks MemoryStoreBenchmark [--quick] [--runs N]
//         [--workloads read1,read2,mixed2,rw,write1]
//         [--stores dictionary,ymcache-gcd,nslock,mutex,mutex-sharded,nslock-lru,
//                   nslock-lru-evicting,nscache,
//                   memorystore,memorystore-batches,memorystore-limited,
//                   memorystore-evicting,memorystore-ttl,memorystore-decider,
//                   memorystore-ticker,memorystore-tracked,engine]
//         [--persistence-only | --skip-persistence] [--eviction-only | --skip-eviction]
//         [--memory-only | --skip-memory] [--growth-only | --skip-growth]
//         [--observation-only | --skip-observation]
//         [--export-traces DIR]
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
// Eviction (last, see EvictionBenchmark.swift): the count limit's hit rate against strict LRU and
// Belady's MIN on Zipf, scan, loop and shifting traces (HitRateTraces.swift), and how long a purge and a trim of 1 000 000 entries make a writer and a reader
// wait (`--quick`: shorter traces, 100 000 entries, one run).
//
// Memory (see MemoryBenchmark.swift): resident bytes per entry of each store holding 1 000 000
// Int keys and 24-byte values (`--quick`: 100 000), each store filled in a fresh process.
//
// Observation (see ObservationBenchmark.swift): what `tracksReads` costs a read and a write on
// one thread: off, on with nobody observing, inside a tracking scope, and a write that fires.
//
// Growth (see GrowthBenchmark.swift): the worst single write, and its 99.9th percentile, while a
// store grows from empty to 4 000 000 entries (`--quick`: 400 000), each store in a fresh process.
//
// Those fresh processes are this executable run again with a hidden `--memory-probe STORE COUNT`
// or `--growth-probe STORE COUNT` (see Probe.swift).
//
// The exit code is 0 whether or not the targets are met: this is a measurement, not a test. It is
// 1 only when a memory or growth measurement process crashed.

import Foundation

struct Options {
  /// The sections of a run, in the order they run.
  enum Section: String, CaseIterable {
    case throughput, persistence, eviction, memory, growth, observation
  }

  var quick = false
  var runs: Int?
  var workloads = Workload.allCases
  var stores = StoreKind.allCases
  /// The one section `--X-only` asked for.
  var only: Section?
  var skipped: Set<Section> = []
  /// Where `--export-traces` writes the eviction section's traces (and then stops).
  var exportDirectory: String?
  /// The directory of real traces `--trace-dir` replays (and then stops).
  var traceDirectory: String?
  /// The directory of traces with sizes `--sized-trace-dir` replays (and then stops).
  var sizedTraceDirectory: String?
  /// Set in a child process the benchmark started to measure one store (see Probe.swift).
  var probe: ProbeRequest?

  static let usage = """
    usage: MemoryStoreBenchmark [--quick] [--runs N] [--workloads LIST] [--stores LIST]
                                [--persistence-only | --skip-persistence]
                                [--eviction-only | --skip-eviction]
                                [--memory-only | --skip-memory]
                                [--growth-only | --skip-growth]
                                [--observation-only | --skip-observation]
                                [--export-traces DIR] [--trace-dir DIR]
                                [--sized-trace-dir DIR]
      --quick            about 0.03 s per repetition and 3 repetitions (for CI); persistence
                         with 10000 entries and no blocking measurement; memory with 100000
                         entries, growth to 400000
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
      --memory-only      run only the memory section: resident bytes per entry of every store
                         holding 1000000 entries (100000 with --quick), each in a fresh process
      --skip-memory      skip the memory section
      --growth-only      run only the growth section: the worst single write while a store
                         grows to 4000000 entries (400000 with --quick), each in a fresh process
      --skip-growth      skip the growth section
      --observation-only run only the observation section: what tracksReads costs a read
                         and a write, on one thread
      --skip-observation skip the observation section
      --export-traces DIR
                         write the eviction section's hit-rate traces (shorter with --quick) to
                         DIR as one key per line, with a manifest.tsv, and measure nothing (for
                         Scripts/hitrate/reference.py)
      --trace-dir DIR    replay the real traces of DIR (written by
                         Scripts/hitrate/convert-traces.py, or libCacheSim oracleGeneral files)
                         at 5 % and 20 % of their distinct keys: the count limit beside strict
                         LRU and Belady's MIN; nothing else is measured
      --sized-trace-dir DIR
                         replay the traces with sizes of DIR (key and size per line, a
                         manifest.tsv with two capacities; Scripts/hitrate/sized-traces.py)
                         against a cost limit: object and byte hit rates beside size-aware
                         strict LRU; nothing else is measured
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
      case "--export-traces":
        exportDirectory = try value()
      case "--trace-dir":
        traceDirectory = try value()
      case "--sized-trace-dir":
        sizedTraceDirectory = try value()
      case "--help", "-h":
        print(Self.usage)
        exit(0)
      default:
        if let measurement = ProbeRequest.Measurement(rawValue: name) {
          let storeName = try value()
          let countText = try value()
          guard let store = ProbeStoreKind(rawValue: storeName) else {
            throw UsageError(message: "\(name): unknown store '\(storeName)'")
          }
          guard let count = Int(countText), count >= 1 else {
            throw UsageError(message: "\(name) needs a positive count, not '\(countText)'")
          }
          probe = ProbeRequest(measurement: measurement, store: store, count: count)
        } else if let section = Self.section(name, suffix: "-only") {
          if let only, only != section {
            throw UsageError(
              message: "--\(only.rawValue)-only and --\(section.rawValue)-only exclude each other")
          }
          only = section
        } else if let section = Self.section(name, prefix: "--skip-") {
          skipped.insert(section)
        } else {
          throw UsageError(message: "unknown argument '\(argument)'")
        }
      }
    }
    if let only, skipped.contains(only) {
      throw UsageError(
        message: "--\(only.rawValue)-only and --skip-\(only.rawValue) exclude each other")
    }
  }

  /// The section named by `--NAME-only` or `--skip-NAME` (not throughput, which has neither).
  private static func section(_ name: String, prefix: String = "--", suffix: String = "")
    -> Section?
  {
    guard name.hasPrefix(prefix) && name.hasSuffix(suffix) else { return nil }
    let core = name.dropFirst(prefix.count).dropLast(suffix.count)
    guard let section = Section(rawValue: String(core)), section != .throughput else {
      return nil
    }
    return section
  }

  func runs(_ section: Section) -> Bool {
    if let only { return section == only }
    return !skipped.contains(section)
  }

  var sectionNames: String {
    Section.allCases.filter(runs).map(\.rawValue).joined(separator: ", ")
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

if let probe = options.probe {
  exit(runProbe(probe))
}

if let directory = options.exportDirectory {
  let plan = EvictionPlan(quick: options.quick, runs: options.runs)
  do {
    try exportTraces(
      hitRateTraces(length: plan.traceLength, keySpace: plan.keySpace), to: directory)
    try exportSizedTrace(
      sizedHitRateTrace(length: plan.traceLength, keySpace: plan.keySpace), to: directory)
  } catch {
    progress("MemoryStoreBenchmark: could not export the traces to \(directory): \(error)")
    exit(1)
  }
  exit(0)
}

if let directory = options.traceDirectory {
  exit(printRealTraceHitRates(directory: directory) ? 0 : 1)
}

if let directory = options.sizedTraceDirectory {
  exit(printSizedTraceHitRates(directory: directory) ? 0 : 1)
}

let runStart = monotonicNanos()

print("# MemoryStore benchmark")
print("")
#if DEBUG
  print("**WARNING: DEBUG BUILD, compiled without optimisation. These numbers are meaningless;**")
  print("**run `swift run -c release --package-path Benchmarks MemoryStoreBenchmark`.**")
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

if options.runs(.throughput) {
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

  // Only the thread-safe stores run the workloads of several threads.
  let jobs = options.workloads.map { workload in
    (workload, options.stores.filter { $0.isThreadSafe || !workload.isConcurrent })
  }
  let jobCount = jobs.reduce(0) { $0 + $1.1.count }
  var measurements: [Measurement] = []
  for (workload, stores) in jobs {
    measure(stores, workload, fixture: fixture, plan: plan) { result in
      measurements.append(result)
      var line =
        "[\(measurements.count)/\(jobCount)] \(workload.rawValue) \(result.store.rawValue): "
        + "N \(result.opsPerLane), \(fixed(result.nanosPerOp, 1)) ns/op, "
        + "\(fixed(result.mops, 2)) Mops/s"
      if workload == .rw { line += ", reader \(fixed(result.readerMops, 2)) Mops/s" }
      progress(line)
    }
  }

  Report(measurements: measurements, plan: plan).printAll()
  TickerMemoryStore.removeSnapshotDirectory()
} else {
  print("")
}

if options.runs(.persistence) {
  runPersistenceBenchmark(plan: PersistencePlan(quick: options.quick, runs: options.runs))
}

if options.runs(.eviction) {
  runEvictionBenchmark(plan: EvictionPlan(quick: options.quick, runs: options.runs))
}

if options.runs(.observation) {
  runObservationBenchmark(plan: ObservationPlan(quick: options.quick, runs: options.runs))
}

var everyProbeFinished = true
if options.runs(.memory) {
  everyProbeFinished =
    runMemoryBenchmark(plan: MemoryPlan(quick: options.quick))
    && everyProbeFinished
}

if options.runs(.growth) {
  everyProbeFinished =
    runGrowthBenchmark(plan: GrowthPlan(quick: options.quick))
    && everyProbeFinished
}

let elapsed = Double(monotonicNanos() - runStart) / 1e9
print("Total time: \(fixed(elapsed, 1)) s.")
#if DEBUG
  print("")
  print("**WARNING: DEBUG BUILD. The numbers above are meaningless; use `-c release`.**")
#endif
if !everyProbeFinished {
  progress("MemoryStoreBenchmark: a measurement process crashed; see the memory or growth section.")
  exit(1)
}
