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

/// Measures one store on one workload: an untimed warm-up at the minimum op count, probes
/// that grow the count until a repetition lasts at least a quarter of the target, then
/// `plan.runs` repetitions at the count that should take `plan.targetSeconds`.
func measure<S: BenchmarkStore>(
  _: S.Type, _ workload: Workload, fixture: Fixture, plan: MeasurementPlan
) -> Measurement {
  // The warm-up and the probes are not reported, but their checks and checksums count.
  var untimed = [
    runRepetition(
      S.self, workload, opsPerLane: plan.minOps, fixture: fixture, verifyPrepopulation: true)
  ]
  var count = plan.minOps
  var probe = runRepetition(
    S.self, workload, opsPerLane: count, fixture: fixture, verifyPrepopulation: false)
  untimed.append(probe)
  while probe.wallSeconds < plan.targetSeconds / 4 && count < plan.maxOps {
    let growth = min(16, max(2, plan.targetSeconds / 2 / max(probe.wallSeconds, 1e-6)))
    count = min(plan.maxOps, Int(Double(count) * growth))
    probe = runRepetition(
      S.self, workload, opsPerLane: count, fixture: fixture, verifyPrepopulation: false)
    untimed.append(probe)
  }
  let secondsPerOp = probe.wallSeconds / Double(count)
  let chosen = min(
    plan.maxOps, max(plan.minOps, Int(plan.targetSeconds / max(secondsPerOp, 1e-12))))
  let samples = (0..<plan.runs).map { _ in
    runRepetition(
      S.self, workload, opsPerLane: chosen, fixture: fixture, verifyPrepopulation: false)
  }
  return Measurement(
    store: S.kind, workload: workload, opsPerLane: chosen, samples: samples, untimed: untimed)
}

/// Measures `kind` on `workload`, with the concrete store type, so that everything below is
/// specialised for it.
func measure(
  _ kind: StoreKind, _ workload: Workload, fixture: Fixture, plan: MeasurementPlan
) -> Measurement {
  switch kind {
  case .dictionary: measure(DictionaryStore.self, workload, fixture: fixture, plan: plan)
  case .ymcacheGCD: measure(GCDStore.self, workload, fixture: fixture, plan: plan)
  case .nslock: measure(NSLockStore.self, workload, fixture: fixture, plan: plan)
  case .mutex: measure(MutexStore.self, workload, fixture: fixture, plan: plan)
  case .mutexSharded: measure(ShardedMutexStore.self, workload, fixture: fixture, plan: plan)
  case .nslockLRU: measure(LRUStore<AllKeys>.self, workload, fixture: fixture, plan: plan)
  case .nslockLRUEvicting:
    measure(LRUStore<HalfTheKeys>.self, workload, fixture: fixture, plan: plan)
  case .nscache: measure(NSCacheStore.self, workload, fixture: fixture, plan: plan)
  case .memorystore:
    measure(MemoryStoreOfQuotes.self, workload, fixture: fixture, plan: plan)
  case .memorystoreBatches:
    measure(ObservedMemoryStore.self, workload, fixture: fixture, plan: plan)
  case .memorystoreLimited:
    measure(VariantMemoryStore<CountLimited>.self, workload, fixture: fixture, plan: plan)
  case .memorystoreEvicting:
    measure(VariantMemoryStore<CountEvicting>.self, workload, fixture: fixture, plan: plan)
  case .memorystoreTTL:
    measure(VariantMemoryStore<Expiring>.self, workload, fixture: fixture, plan: plan)
  case .memorystoreDecider:
    measure(VariantMemoryStore<Decided>.self, workload, fixture: fixture, plan: plan)
  case .memorystoreTicker:
    measure(TickerMemoryStore.self, workload, fixture: fixture, plan: plan)
  case .memorystoreTracked:
    measure(VariantMemoryStore<Tracked>.self, workload, fixture: fixture, plan: plan)
  case .engine: measure(EngineStore.self, workload, fixture: fixture, plan: plan)
  }
}
