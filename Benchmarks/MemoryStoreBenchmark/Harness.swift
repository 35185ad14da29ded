// Lane threads, the start line, and calibration.

import Dispatch
import Foundation
import Synchronization

/// The monotonic clock, in nanoseconds.
@inline(__always)
func monotonicNanos() -> UInt64 {
  DispatchTime.now().uptimeNanoseconds
}

/// What one lane thread reports.
struct LaneOutcome: Sendable {
  var start: UInt64
  var end: UInt64
  var tally: Tally

  var nanosPerOp: Double {
    tally.ops > 0 ? Double(end - start) / Double(tally.ops) : 0
  }

  var mops: Double {
    end > start ? Double(tally.ops) / Double(end - start) * 1e3 : 0
  }
}

/// Releases the lanes of a repetition together: each lane spins until all have arrived, so
/// no lane starts its timed loop while another is still being created.
final class StartLine: Sendable {
  private let arrived = Atomic<Int>(0)
  private let parties: Int

  init(parties: Int) {
    self.parties = parties
  }

  func arriveAndWait() {
    arrived.wrappingAdd(1, ordering: .acquiringAndReleasing)
    while arrived.load(ordering: .acquiring) < parties {}
  }
}

/// A one-way flag raised by one lane and polled by another.
final class StopFlag: Sendable {
  private let raised = Atomic<Bool>(false)

  func raise() {
    raised.store(true, ordering: .releasing)
  }

  var isRaised: Bool {
    raised.load(ordering: .acquiring)
  }
}

/// Collects the lanes' outcomes.
private final class OutcomeSink: Sendable {
  private let outcomes: Mutex<[LaneOutcome?]>

  init(count: Int) {
    outcomes = Mutex([LaneOutcome?](repeating: nil, count: count))
  }

  func record(_ outcome: LaneOutcome, lane: Int) {
    outcomes.withLock { $0[lane] = outcome }
  }

  var all: [LaneOutcome] {
    outcomes.withLock { $0.map { $0! } }
  }
}

/// Runs `body(lane, startLine)` on `count` new OS threads and returns their outcomes once all
/// have finished. Lanes are always separate threads, even for one lane, so the main thread
/// never runs a timed loop.
func runLanes(
  _ count: Int, _ body: @escaping @Sendable (Int, StartLine) -> LaneOutcome
) -> [LaneOutcome] {
  let startLine = StartLine(parties: count)
  let sink = OutcomeSink(count: count)
  let finished = DispatchSemaphore(value: 0)
  for lane in 0..<count {
    let thread = Thread {
      sink.record(body(lane, startLine), lane: lane)
      finished.signal()
    }
    thread.start()
  }
  for _ in 0..<count { finished.wait() }
  return sink.all
}

// MARK: - Calibration and repetitions

/// How long and how often to measure.
struct MeasurementPlan: Sendable {
  var runs: Int
  /// The wall time one repetition should take.
  var targetSeconds: Double
  var minOps = 20_000
  var maxOps = 2_000_000
}

/// The repetitions of one store on one workload.
struct Measurement: Sendable {
  var store: StoreKind
  var workload: Workload
  /// The calibrated operation count per lane (`rw`: writer operations).
  var opsPerLane: Int
  var samples: [Sample]
  /// The warm-up and calibration probes: not reported, but checked.
  var untimed: [Sample]

  var nanosPerOp: Double { median(samples.map(\.nanosPerOp)) }
  var mops: Double { median(samples.map(\.mops)) }
  var readerNanosPerOp: Double { median(samples.map(\.readerNanosPerOp)) }
  var readerMops: Double { median(samples.map(\.readerMops)) }
  var mopsRange: ClosedRange<Double> { range(samples.map(\.mops)) }
  var readerMopsRange: ClosedRange<Double> { range(samples.map(\.readerMops)) }
  var checksum: Int { (samples + untimed).reduce(0) { $0 &+ $1.checksum } }
  var misses: Int { (samples + untimed).reduce(0) { $0 + $1.misses } }
  var errors: [String] { (samples + untimed).compactMap(\.finalStateError) }

  /// This store's throughput (its reader's, with `reader`) over `other`'s: the median over the
  /// rounds of the ratio of their repetitions in each round, which ran seconds apart (see
  /// ``measure(_:_:fixture:plan:finished:)``), so that a drift of the machine's speed between
  /// rounds cancels out; the ratio of the medians when they ran different numbers of rounds.
  func mopsRatio(over other: Measurement, reader: Bool = false) -> Double {
    guard samples.count == other.samples.count, !samples.isEmpty else {
      return reader ? readerMops / other.readerMops : mops / other.mops
    }
    return median(
      zip(samples, other.samples).map { ours, theirs in
        reader ? ours.readerMops / theirs.readerMops : ours.mops / theirs.mops
      })
  }
}

func median(_ values: [Double]) -> Double {
  guard !values.isEmpty else { return 0 }
  let sorted = values.sorted()
  let middle = sorted.count / 2
  return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

func range(_ values: [Double]) -> ClosedRange<Double> {
  (values.min() ?? 0)...(values.max() ?? 0)
}

/// One store's repetitions, specialised for its concrete type: a repetition of a workload at
/// an op count per lane, checking the store's contents before it when asked.
typealias StoreRunner = (Workload, _ opsPerLane: Int, Fixture, _ verifyPrepopulation: Bool) ->
  Sample

/// The runner of `S`, everything below it specialised for the concrete store type.
func runner<S: BenchmarkStore>(_: S.Type) -> StoreRunner {
  { workload, count, fixture, verify in
    runRepetition(
      S.self, workload, opsPerLane: count, fixture: fixture, verifyPrepopulation: verify)
  }
}

/// Calibrates `run` on `workload`: an untimed warm-up at the minimum op count, then probes
/// that grow the count until a repetition lasts at least a quarter of the target. Returns the
/// count that should take `plan.targetSeconds`, and the untimed repetitions.
func calibrate(
  _ run: StoreRunner, _ workload: Workload, fixture: Fixture, plan: MeasurementPlan
) -> (opsPerLane: Int, untimed: [Sample]) {
  // The warm-up and the probes are not reported, but their checks and checksums count.
  var untimed = [run(workload, plan.minOps, fixture, true)]
  var count = plan.minOps
  var probe = run(workload, count, fixture, false)
  untimed.append(probe)
  while probe.wallSeconds < plan.targetSeconds / 4 && count < plan.maxOps {
    let growth = min(16, max(2, plan.targetSeconds / 2 / max(probe.wallSeconds, 1e-6)))
    count = min(plan.maxOps, Int(Double(count) * growth))
    probe = run(workload, count, fixture, false)
    untimed.append(probe)
  }
  let secondsPerOp = probe.wallSeconds / Double(count)
  let chosen = min(
    plan.maxOps, max(plan.minOps, Int(plan.targetSeconds / max(secondsPerOp, 1e-12))))
  return (chosen, untimed)
}

/// Measures `stores` on `workload`: each store is calibrated, then the repetitions run in
/// rounds, one of each store per round, in an order that rotates from round to round. A
/// machine whose speed drifts over seconds (another process, a neighbour on the host, the
/// clock's frequency) then slows every store alike, and the ratios between them hold, where
/// running one store's repetitions after another's would compare different moments. Calls
/// `finished` with each store's measurement, in the order of `stores`.
func measure(
  _ stores: [StoreKind], _ workload: Workload, fixture: Fixture, plan: MeasurementPlan,
  finished: (Measurement) -> Void
) {
  let runners = stores.map { runner(for: $0) }
  let calibrations = runners.map { calibrate($0, workload, fixture: fixture, plan: plan) }
  var samples = Array(repeating: [Sample](), count: stores.count)
  for round in 0..<plan.runs {
    for offset in 0..<stores.count {
      let index = (round + offset) % stores.count
      samples[index].append(
        runners[index](workload, calibrations[index].opsPerLane, fixture, false))
    }
  }
  for index in stores.indices {
    finished(
      Measurement(
        store: stores[index], workload: workload,
        opsPerLane: calibrations[index].opsPerLane, samples: samples[index],
        untimed: calibrations[index].untimed))
  }
}

/// The runner of `kind`, with the concrete store type, so that everything below is
/// specialised for it.
func runner(for kind: StoreKind) -> StoreRunner {
  switch kind {
  case .dictionary: runner(DictionaryStore.self)
  case .ymcacheGCD: runner(GCDStore.self)
  case .nslock: runner(NSLockStore.self)
  case .mutex: runner(MutexStore.self)
  case .mutexSharded: runner(ShardedMutexStore.self)
  case .nslockLRU: runner(LRUStore<AllKeys>.self)
  case .nslockLRUEvicting: runner(LRUStore<HalfTheKeys>.self)
  case .nscache: runner(NSCacheStore.self)
  case .memorystore: runner(MemoryStoreOfQuotes.self)
  case .memorystoreBatches: runner(ObservedMemoryStore.self)
  case .memorystoreLimited: runner(VariantMemoryStore<CountLimited>.self)
  case .memorystoreEvicting: runner(VariantMemoryStore<CountEvicting>.self)
  case .memorystoreTTL: runner(VariantMemoryStore<Expiring>.self)
  case .memorystoreDecider: runner(VariantMemoryStore<Decided>.self)
  case .memorystoreTicker: runner(TickerMemoryStore.self)
  case .memorystoreTracked: runner(VariantMemoryStore<Tracked>.self)
  case .engine: runner(EngineStore.self)
  }
}
