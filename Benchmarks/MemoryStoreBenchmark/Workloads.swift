// The workloads: their timed loops and one repetition of each.

import Dispatch
import Foundation
import Synchronization

enum Workload: String, CaseIterable, Sendable {
  case read1, read2, mixed2, rw, write1

  /// The number of lane threads.
  var laneCount: Int {
    switch self {
    case .read1, .write1: 1
    case .read2, .mixed2, .rw: 2
    }
  }

  /// Whether the workload uses the store from several threads.
  var isConcurrent: Bool { laneCount > 1 }

  var summary: String {
    switch self {
    case .read1: "gets on 1 thread"
    case .read2: "gets on 2 threads; Mops/s is the aggregate"
    case .mixed2:
      "90% get / 10% set on 2 threads, each lane flushes at its end (included)"
    case .rw:
      "1 writer thread does N sets then flush; 1 reader thread gets until the writer is done"
    case .write1: "N sets on 1 thread, timed until flush returns"
    }
  }
}

/// What a lane's loop observed: its operation count, a checksum of everything it read (so no
/// read can be optimised away) and the number of reads that found no value.
struct Tally: Sendable {
  var ops = 0
  var checksum = 0
  var misses = 0

  @inline(__always)
  mutating func consume(_ quote: Quote?) {
    if let quote {
      checksum &+= quote.volume
    } else {
      misses &+= 1
    }
  }
}

// MARK: - Timed loops
//
// Each loop is `@inline(never)` so it stays one visible, specialised function per store.

/// `count` gets, following the lane's stream.
@inline(never)
func getLoop<S: BenchmarkStore>(
  _ store: S, _ keys: UnsafeBufferPointer<S.KeyHandle>, _ ops: UnsafeBufferPointer<UInt32>,
  count: Int
) -> Tally {
  var tally = Tally(ops: count)
  for position in 0..<count {
    tally.consume(store.fetch(keys[Int(ops[position] & Op.indexMask)]))
  }
  return tally
}

/// Gets following the lane's stream (wrapping around) until `stop` is raised; the flag is
/// looked at every 64 operations.
@inline(never)
func getUntilLoop<S: BenchmarkStore>(
  _ store: S, _ keys: UnsafeBufferPointer<S.KeyHandle>, _ ops: UnsafeBufferPointer<UInt32>,
  until stop: StopFlag
) -> Tally {
  var tally = Tally()
  var position = 0
  while true {
    if position & 63 == 0 && stop.isRaised { break }
    let op = ops[position & AccessPattern.lengthMask]
    tally.consume(store.fetch(keys[Int(op & Op.indexMask)]))
    position &+= 1
  }
  tally.ops = position
  return tally
}

/// `count` sets, following the lane's stream; operation `i` writes `Quote.written(byOp: i)`.
@inline(never)
func putLoop<S: BenchmarkStore>(
  _ store: S, _ keys: UnsafeBufferPointer<S.KeyHandle>, _ ops: UnsafeBufferPointer<UInt32>,
  count: Int
) -> Tally {
  for position in 0..<count {
    store.put(keys[Int(ops[position] & Op.indexMask)], Quote.written(byOp: position))
  }
  return Tally(ops: count)
}

/// `count` operations following the lane's stream: a set where the write mark is on, a get
/// otherwise.
@inline(never)
func mixedLoop<S: BenchmarkStore>(
  _ store: S, _ keys: UnsafeBufferPointer<S.KeyHandle>, _ ops: UnsafeBufferPointer<UInt32>,
  count: Int
) -> Tally {
  var tally = Tally(ops: count)
  for position in 0..<count {
    let op = ops[position]
    let key = keys[Int(op & Op.indexMask)]
    if op & Op.writeBit != 0 {
      store.put(key, Quote.written(byOp: position))
    } else {
      tally.consume(store.fetch(key))
    }
  }
  return tally
}

// MARK: - One repetition

/// The numbers of one repetition.
struct Sample: Sendable {
  /// The lanes' own time per operation, averaged over lanes (`rw`: the writer's).
  var nanosPerOp: Double
  /// Aggregate throughput: all lanes' operations over the wall time (`rw`: the writer's).
  var mops: Double
  /// `rw` only: the reader's time per operation and throughput.
  var readerNanosPerOp = 0.0
  var readerMops = 0.0
  /// From the first lane's start to the last lane's end.
  var wallSeconds: Double
  var checksum: Int
  var misses: Int
  /// A description of what the final-state check found wrong, if anything.
  var finalStateError: String?
}

/// Runs `workload` once on a fresh, pre-populated store, with `opsPerLane` operations per lane
/// (`rw`: writer operations), then checks the store's final contents outside the timing.
func runRepetition<S: BenchmarkStore>(
  _: S.Type, _ workload: Workload, opsPerLane count: Int, fixture: Fixture,
  verifyPrepopulation: Bool
) -> Sample {
  let store = S(prepopulated: fixture.initialEntries)
  var prepopulationError: String?
  if verifyPrepopulation {
    prepopulationError = verifyContents(of: store, fixture: fixture, workload: nil, count: 0)
  }

  let outcomes: [LaneOutcome]
  switch workload {
  case .read1, .read2:
    outcomes = runLanes(workload.laneCount) { lane, startLine in
      fixture.withLane(lane, for: S.self) { keys, ops in
        startLine.arriveAndWait()
        let start = monotonicNanos()
        let tally = getLoop(store, keys, ops, count: count)
        return LaneOutcome(start: start, end: monotonicNanos(), tally: tally)
      }
    }
  case .mixed2, .write1:
    let mixed = workload == .mixed2
    outcomes = runLanes(workload.laneCount) { lane, startLine in
      fixture.withLane(lane, for: S.self) { keys, ops in
        startLine.arriveAndWait()
        let start = monotonicNanos()
        let tally: Tally
        if mixed {
          tally = mixedLoop(store, keys, ops, count: count)
        } else {
          tally = putLoop(store, keys, ops, count: count)
        }
        store.drain()
        return LaneOutcome(start: start, end: monotonicNanos(), tally: tally)
      }
    }
  case .rw:
    let writerDone = StopFlag()
    outcomes = runLanes(workload.laneCount) { lane, startLine in
      fixture.withLane(lane, for: S.self) { keys, ops in
        startLine.arriveAndWait()
        let start = monotonicNanos()
        if lane == 0 {
          let tally = putLoop(store, keys, ops, count: count)
          store.drain()
          let end = monotonicNanos()
          writerDone.raise()
          return LaneOutcome(start: start, end: end, tally: tally)
        } else {
          let tally = getUntilLoop(store, keys, ops, until: writerDone)
          return LaneOutcome(start: start, end: monotonicNanos(), tally: tally)
        }
      }
    }
  }

  let finalError = verifyContents(of: store, fixture: fixture, workload: workload, count: count)
  let wallNanos = Double(
    (outcomes.map(\.end).max() ?? 0) - (outcomes.map(\.start).min() ?? 0))
  var sample = Sample(
    nanosPerOp: 0, mops: 0, wallSeconds: wallNanos / 1e9,
    checksum: outcomes.reduce(0) { $0 &+ $1.tally.checksum },
    misses: outcomes.reduce(0) { $0 + $1.tally.misses },
    finalStateError: prepopulationError ?? finalError)
  if workload == .rw {
    let writer = outcomes[0]
    let reader = outcomes[1]
    sample.nanosPerOp = writer.nanosPerOp
    sample.mops = writer.mops
    sample.readerNanosPerOp = reader.nanosPerOp
    sample.readerMops = reader.mops
  } else {
    sample.nanosPerOp = outcomes.map(\.nanosPerOp).reduce(0, +) / Double(outcomes.count)
    let totalOps = outcomes.reduce(0) { $0 + $1.tally.ops }
    sample.mops = Double(totalOps) / wallNanos * 1e3
  }
  return sample
}

/// Checks, outside any timing, that `store` holds exactly what it should: the initial entries
/// (`workload == nil`, or a read-only workload), or after a writing workload, for every key,
/// the last value a writing lane wrote to it (either lane's, for `mixed2`), or the initial
/// value if no lane wrote it; a store whose limit is below the key count may have evicted any
/// key. Returns a description of the first mismatch.
func verifyContents<S: BenchmarkStore>(
  of store: S, fixture: Fixture, workload: Workload?, count: Int
) -> String? {
  // For each key, the candidate final values.
  var lastWrites = [[Int]](repeating: [], count: fixture.keys.count)
  // Which lanes wrote, and whether only their write-marked operations were sets.
  let (writingLanes, onlyMarked): (Int, Bool) =
    switch workload {
    case nil, .read1?, .read2?: (0, false)
    case .write1?, .rw?: (1, false)
    case .mixed2?: (2, true)
    }
  for lane in 0..<writingLanes {
    var last = [Int](repeating: -1, count: fixture.keys.count)
    let ops = fixture.pattern.lanes[lane]
    for position in 0..<count where !onlyMarked || ops[position] & Op.writeBit != 0 {
      last[Int(ops[position] & Op.indexMask)] = position
    }
    for (index, position) in last.enumerated() where position >= 0 {
      lastWrites[index].append(position)
    }
  }
  return fixture.withLane(0, for: S.self) { keys, _ in
    for index in 0..<keys.count {
      let found = store.fetch(keys[index])
      let expected =
        lastWrites[index].isEmpty
        ? [Quote.initial(forKeyAt: index)] : lastWrites[index].map(Quote.written(byOp:))
      if let found, expected.contains(found) { continue }
      if found == nil && S.kind.evicts { continue }  // Evicted.
      let what = workload.map { "after \($0.rawValue)" } ?? "after pre-population"
      return "\(what): key \(fixture.keys[index]) holds \(found.map(describe) ?? "nothing"), "
        + "expected \(expected.map(describe).joined(separator: " or "))"
    }
    return nil
  }
}

private func describe(_ quote: Quote) -> String {
  "Quote(volume: \(quote.volume))"
}
