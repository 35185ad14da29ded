/// One operation on one register (one key of a store), as the thread that issued it saw it.
struct HistoryOperation: Sendable, Hashable, CustomStringConvertible {
  enum Kind: Sendable, Hashable {
    /// A read that observed a value (`nil`: the key was absent).
    case read(observed: Int?)
    /// A write of a value (`nil`: a removal).
    case write(Int?)
    /// A write that also returned the value it replaced (`updateValue`, `removeValue`).
    case exchange(Int?, observed: Int?)
    /// A membership test (`contains`) that observed whether the key was present.
    case present(Bool)
  }

  var kind: Kind
  /// Monotonic nanoseconds taken just before the call.
  var call: UInt64
  /// Monotonic nanoseconds taken just after the return.
  var ret: UInt64
  /// The issuing thread, for diagnostics.
  var thread: Int

  init(_ kind: Kind, call: UInt64, ret: UInt64, thread: Int = 0) {
    precondition(call <= ret, "an operation cannot return before it is called")
    self.kind = kind
    self.call = call
    self.ret = ret
    self.thread = thread
  }

  static func read(_ observed: Int?, _ call: UInt64, _ ret: UInt64) -> Self {
    Self(.read(observed: observed), call: call, ret: ret)
  }

  static func write(_ value: Int?, _ call: UInt64, _ ret: UInt64) -> Self {
    Self(.write(value), call: call, ret: ret)
  }

  static func exchange(_ value: Int?, observed: Int?, _ call: UInt64, _ ret: UInt64) -> Self {
    Self(.exchange(value, observed: observed), call: call, ret: ret)
  }

  /// Applies the operation to a register holding `state`: whether it can take effect there,
  /// and the register's state afterwards.
  func step(from state: Int?) -> (legal: Bool, next: Int?) {
    switch kind {
    case .read(let observed): (observed == state, state)
    case .write(let value): (true, value)
    case .exchange(let value, let observed): (observed == state, value)
    case .present(let observed): (observed == (state != nil), state)
    }
  }

  var description: String {
    func show(_ value: Int?) -> String { value.map(String.init) ?? "nil" }
    let what =
      switch kind {
      case .read(let observed): "read \(show(observed))"
      case .write(let value): "write \(show(value))"
      case .exchange(let value, let observed):
        "exchange \(show(value)) returning \(show(observed))"
      case .present(let observed): "contains returning \(observed)"
      }
    return "thread \(thread) \(what) during [\(call), \(ret)]"
  }
}

/// An operation on one key of a store.
struct KeyedHistoryOperation: Sendable, Hashable {
  var key: Int
  var operation: HistoryOperation
}

/// The checker's verdict on the history of one register.
enum RegisterVerdict: Sendable, Equatable {
  case linearizable
  /// No linearization exists; the diagnosis tells where the search got stuck.
  case notLinearizable(diagnosis: String)
  /// The search explored more states than its budget allowed before deciding.
  case inconclusive(statesExplored: Int)

  var isViolation: Bool {
    if case .notLinearizable = self { true } else { false }
  }
}

/// The checker's verdict on a multi-key history: one verdict per key.
struct HistoryVerdict: Sendable, CustomStringConvertible {
  var verdicts: [Int: RegisterVerdict]

  /// Every key's history is linearizable (inconclusive keys do not count as linearizable).
  var isLinearizable: Bool { verdicts.values.allSatisfy { $0 == .linearizable } }
  /// Some key's history has no linearization.
  var hasViolation: Bool { verdicts.values.contains { $0.isViolation } }

  var description: String {
    let problems = verdicts.keys.sorted().compactMap { key -> String? in
      switch verdicts[key]! {
      case .linearizable: nil
      case .notLinearizable(let diagnosis): "key \(key): not linearizable: \(diagnosis)"
      case .inconclusive(let states): "key \(key): inconclusive after \(states) states"
      }
    }
    if problems.isEmpty { return "linearizable (\(verdicts.count) keys)" }
    return problems.joined(separator: "\n")
  }
}

/// Wing and Gong's linearizability check for registers, with Lowe's memoisation of visited
/// (linearized set, register state) pairs, as an iterative depth-first search: no recursion,
/// so it runs on threads with small stacks, however long the history.
///
/// Linearizability is compositional: a history of a key-value store is linearizable if and
/// only if its projection on each key is, so a history is checked one key at a time. A
/// multi-key operation contributes one operation per key, each with the whole call's interval.
///
/// Operations whose timestamps are equal (one's return and another's call) count as
/// overlapping, so coarse clocks can only hide violations, never invent them.
enum LinearizabilityChecker {
  /// The default limit on distinct search states per key.
  static let defaultStateBudget = 2_000_000

  /// Checks every key's history. With `stopAtFirstViolation`, keys after the first violation
  /// are not checked (and are missing from the verdict).
  static func check(
    _ history: [KeyedHistoryOperation], initialValue: Int? = nil,
    stateBudget: Int = defaultStateBudget, stopAtFirstViolation: Bool = false
  ) -> HistoryVerdict {
    let byKey = Dictionary(grouping: history, by: \.key)
    var verdicts: [Int: RegisterVerdict] = [:]
    for key in byKey.keys.sorted() {
      let operations = byKey[key]!.map(\.operation)
      let verdict = checkRegister(
        operations, initialValue: initialValue, stateBudget: stateBudget)
      verdicts[key] = verdict
      if stopAtFirstViolation && verdict.isViolation { break }
    }
    return HistoryVerdict(verdicts: verdicts)
  }

  /// Checks the history of a single register that starts out holding `initialValue`.
  static func checkRegister(
    _ operations: [HistoryOperation], initialValue: Int? = nil,
    stateBudget: Int = defaultStateBudget
  ) -> RegisterVerdict {
    let count = operations.count
    guard count > 0 else { return .linearizable }

    // Events in time order: event `2 * i` is the call of operation `i`, `2 * i + 1` its
    // return. At equal times calls sort first, so touching intervals overlap.
    func sortKey(_ event: Int) -> (UInt64, Int, Int) {
      let operation = operations[event / 2]
      let isReturn = event % 2
      return (isReturn == 1 ? operation.ret : operation.call, isReturn, event)
    }
    let events = (0..<(2 * count)).sorted { sortKey($0) < sortKey($1) }

    // A doubly linked list of the events not yet linearized: node 0 is the head, nodes
    // 1...2n the events in time order, node 2n+1 the tail.
    let tail = 2 * count + 1
    var next = Array(1...(tail + 1))
    var previous = Array(-1...tail - 1)
    var operationOfNode = [Int](repeating: -1, count: tail + 1)
    var isReturnNode = [Bool](repeating: false, count: tail + 1)
    var returnNodeOfOperation = [Int](repeating: 0, count: count)
    for (position, event) in events.enumerated() {
      let node = position + 1
      operationOfNode[node] = event / 2
      isReturnNode[node] = event % 2 == 1
      if event % 2 == 1 { returnNodeOfOperation[event / 2] = node }
    }

    // Removes a call node and its return node from the list; `unlift` undoes it exactly
    // (dancing links), provided lifts are undone in reverse order.
    func lift(_ callNode: Int) {
      let returnNode = returnNodeOfOperation[operationOfNode[callNode]]
      next[previous[callNode]] = next[callNode]
      previous[next[callNode]] = previous[callNode]
      next[previous[returnNode]] = next[returnNode]
      previous[next[returnNode]] = previous[returnNode]
    }
    func unlift(_ callNode: Int) {
      let returnNode = returnNodeOfOperation[operationOfNode[callNode]]
      next[previous[returnNode]] = returnNode
      previous[next[returnNode]] = returnNode
      next[previous[callNode]] = callNode
      previous[next[callNode]] = callNode
    }

    struct SearchState: Hashable {
      var linearized: [UInt64]
      var register: Int?
    }
    var linearized = [UInt64](repeating: 0, count: (count + 63) / 64)
    func toggle(_ operation: Int) {
      linearized[operation >> 6] ^= 1 << UInt64(operation & 63)
    }
    var register = initialValue
    var seen = Set<SearchState>()
    // The call nodes linearized so far, each with the register state before it.
    var stack: [(callNode: Int, registerBefore: Int?)] = []
    stack.reserveCapacity(count)
    var deepest = 0
    var stuckOperation = operationOfNode[next[0]]

    var node = next[0]
    while next[0] != tail {
      if !isReturnNode[node] {
        let operation = operationOfNode[node]
        let (legal, after) = operations[operation].step(from: register)
        if legal {
          toggle(operation)
          if seen.insert(SearchState(linearized: linearized, register: after)).inserted {
            if seen.count > stateBudget { return .inconclusive(statesExplored: seen.count) }
            stack.append((node, register))
            register = after
            lift(node)
            node = next[0]
            continue
          }
          toggle(operation)
        }
        node = next[node]
      } else {
        // This operation returned before it could take effect: undo the last choice.
        if stack.count >= deepest {
          deepest = stack.count
          stuckOperation = operationOfNode[node]
        }
        guard let (callNode, registerBefore) = stack.popLast() else {
          let stuck = operations[stuckOperation]
          return .notLinearizable(
            diagnosis: "at most \(deepest) of \(count) operations take effect in an order "
              + "consistent with real time; then \(stuck) cannot take effect")
        }
        toggle(operationOfNode[callNode])
        register = registerBefore
        unlift(callNode)
        node = next[callNode]
      }
    }
    return .linearizable
  }
}
