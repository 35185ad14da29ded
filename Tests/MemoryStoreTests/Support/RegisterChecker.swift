/// One operation on one key of a register history: a read that returned `value`, or a write
/// of `value`. `value == -1` stands for "absent" (a read miss, or a removal).
struct RegisterOperation: Sendable, Equatable {
  var isWrite: Bool
  var value: Int
  /// Monotonic nanoseconds just before the call and just after the return.
  var call: UInt64
  var ret: UInt64
}

enum LinearizabilityVerdict: Equatable {
  case linearizable
  case notLinearizable
  /// The search exceeded its step budget.
  case inconclusive
}

/// Wing & Gong's linearizability check for a single register, with memoisation of visited
/// (linearized set, register value) pairs, as an iterative depth-first search.
///
/// Linearizability is compositional, so a multi-key history is checked one key at a time.
func checkRegister(
  _ history: [RegisterOperation], initialValue: Int = -1, stepBudget: Int = 20_000_000
) -> LinearizabilityVerdict {
  let ops = history.sorted { $0.call < $1.call }
  let n = ops.count
  if n == 0 { return .linearizable }
  var done = [UInt64](repeating: 0, count: (n + 63) / 64)
  func isDone(_ i: Int) -> Bool { done[i >> 6] & (1 << UInt64(i & 63)) != 0 }
  func flip(_ i: Int) { done[i >> 6] ^= 1 << UInt64(i & 63) }

  struct Visit: Hashable {
    var done: [UInt64]
    var value: Int
  }
  var visited = Set<Visit>()
  // Each frame: the operation linearized at this depth and the register value before it.
  var stack: [(op: Int, valueBefore: Int)] = []
  stack.reserveCapacity(n)
  var value = initialValue
  var firstPending = 0
  var resume = 0
  var steps = 0

  while true {
    if stack.count == n { return .linearizable }
    steps += 1
    if steps > stepBudget { return .inconclusive }
    // Operations are sorted by call time: only those called before the earliest pending
    // return may be linearized next.
    var minReturn = UInt64.max
    var index = firstPending
    while index < n && ops[index].call <= minReturn {
      if !isDone(index) { minReturn = min(minReturn, ops[index].ret) }
      index += 1
    }
    var chosen: Int?
    var candidate = max(resume, firstPending)
    while candidate < n && ops[candidate].call <= minReturn {
      defer { candidate += 1 }
      if isDone(candidate) { continue }
      let op = ops[candidate]
      if !op.isWrite && op.value != value { continue }
      let newValue = op.isWrite ? op.value : value
      flip(candidate)
      if visited.insert(Visit(done: done, value: newValue)).inserted {
        chosen = candidate
        stack.append((candidate, value))
        value = newValue
        break
      }
      flip(candidate)
    }
    if chosen != nil {
      while firstPending < n && isDone(firstPending) { firstPending += 1 }
      resume = 0
      continue
    }
    guard let last = stack.popLast() else { return .notLinearizable }
    flip(last.op)
    value = last.valueBefore
    firstPending = min(firstPending, last.op)
    resume = last.op + 1
  }
}
