// The observation section: what `tracksReads` costs a read and a write, on one thread, in ns per
// operation (median of the repetitions): off; on with nobody observing; inside a tracking scope;
// and a write that fires an observation, which is then registered again.

import Dispatch
import MemoryStoreKit
import Observation

/// How much the observation section measures.
struct ObservationPlan {
  var operations: Int
  var runs: Int

  init(quick: Bool, runs: Int?) {
    operations = quick ? 200_000 : 2_000_000
    self.runs = runs ?? (quick ? 3 : 5)
  }
}

/// The median time per operation of `body(count)`, which performs `count` operations.
private func nanosPerOperation(
  _ plan: ObservationPlan, count: Int, _ body: (Int) -> Int
) -> Double {
  var times: [Double] = []
  var sink = 0
  _ = body(count / 10)
  for _ in 0..<plan.runs {
    let start = DispatchTime.now().uptimeNanoseconds
    sink &+= body(count)
    times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / Double(count))
  }
  if sink == 42 { print("") }
  return median(times)
}

/// Runs the observation section and prints its report.
func runObservationBenchmark(plan: ObservationPlan) {
  let keys = (0..<1_024).map { "Q\($0)" }
  func filledStore(tracking: Bool) -> MemoryStore<String, Int> {
    let store = MemoryStore<String, Int>(name: "observation", tracksReads: tracking)
    for (index, key) in keys.enumerated() { store[key] = index }
    return store
  }
  let off = filledStore(tracking: false)
  let on = filledStore(tracking: true)
  let count = plan.operations

  func reads(_ store: MemoryStore<String, Int>) -> (Int) -> Int {
    { count in
      var sum = 0
      for index in 0..<count { sum &+= store[keys[index & 1_023]] ?? 0 }
      return sum
    }
  }
  let readOff = nanosPerOperation(plan, count: count, reads(off))
  let readOn = nanosPerOperation(plan, count: count, reads(on))
  // 100 reads per scope: the scope's own cost (registering, then cancelling) is spread.
  let readTracked = nanosPerOperation(plan, count: count / 10) { count in
    var sum = 0
    for scope in 0..<(count / 100) {
      withObservationTracking {
        for index in 0..<100 { sum &+= on[keys[(scope &* 100 &+ index) & 1_023]] ?? 0 }
      } onChange: {
      }
    }
    return sum
  }
  func writes(_ store: MemoryStore<String, Int>) -> (Int) -> Int {
    { count in
      for index in 0..<count { store[keys[index & 1_023]] = index }
      return count
    }
  }
  let writeOff = nanosPerOperation(plan, count: count, writes(filledStore(tracking: false)))
  let writeOn = nanosPerOperation(plan, count: count, writes(filledStore(tracking: true)))
  // Every key read once inside a scope that ended: every write of each hands a notice over
  // (the first fires the observation), as an `@Observable` setter notifies every time.
  let readBefore = filledStore(tracking: true)
  withObservationTracking {
    for key in keys { _ = readBefore[key] }
  } onChange: {
  }
  let writeReadBefore = nanosPerOperation(plan, count: count, writes(readBefore))
  // One key observed: each write fires its observation, which registers again (a read).
  let observed = filledStore(tracking: true)
  let writeFiring = nanosPerOperation(plan, count: count / 10) { count in
    for index in 0..<count {
      withObservationTracking {
        _ = observed["Q0"]
      } onChange: {
      }
      observed["Q0"] = index
    }
    return count
  }

  print("# Observation")
  print("")
  print(
    "- MemoryStore<String, Int> of 1 024 keys, one thread, ns per operation (median of "
      + "\(plan.runs)); `tracksReads` off, on with nobody observing, and on inside a tracking "
      + "scope")
  print("")
  print("| operation | ns | over off |")
  print("|---|---:|---:|")
  let rows: [(String, Double, Double)] = [
    ("read, tracksReads off", readOff, readOff),
    ("read, on, outside any tracking scope", readOn, readOff),
    ("read inside withObservationTracking (100 reads per scope)", readTracked, readOff),
    ("write, tracksReads off", writeOff, writeOff),
    ("write, on, no key observed", writeOn, writeOff),
    (
      "write, on, every key read before (each write hands a notice over)", writeReadBefore,
      writeOff
    ),
    ("write that fires an observation, then registering it again", writeFiring, writeOff),
  ]
  for (name, nanos, base) in rows {
    print("| \(name) | \(fixed(nanos, 1)) | \(fixed(nanos / base, 2))x |")
  }
  print("")
}
