import Testing

extension StoreContractTests {
  /// The checker itself, on small hand-written histories whose answer is known.
  @Suite("Linearizability checker") struct LinearizabilityCheckerTests {
    typealias Op = HistoryOperation

    func check(_ history: [Op], initialValue: Int? = nil) -> RegisterVerdict {
      LinearizabilityChecker.checkRegister(history, initialValue: initialValue)
    }

    @Test func anEmptyHistoryIsLinearizable() {
      #expect(check([]) == .linearizable)
    }

    @Test func aSequentialHistoryIsLinearizable() {
      let history: [Op] = [
        .read(nil, 0, 1), .write(1, 2, 3), .read(1, 4, 5), .exchange(2, observed: 1, 6, 7),
        .read(2, 8, 9), .write(nil, 10, 11), .read(nil, 12, 13),
      ]
      #expect(check(history) == .linearizable)
    }

    @Test func aLinearizableConcurrentHistoryIsAccepted() {
      // Four threads; only one order works: w1, r1, w2, r2 (the read of nil goes first).
      let history: [Op] = [
        .write(1, 0, 10),
        .read(nil, 1, 3),
        .read(1, 5, 15),
        .write(2, 12, 20),
        .read(2, 18, 30),
        .read(2, 25, 26),
      ]
      #expect(check(history) == .linearizable)
      // The same operations listed in another order: the answer does not depend on it.
      #expect(check(history.reversed()) == .linearizable)
    }

    @Test func aMembershipTestMustMatchThePresenceOfAValue() {
      let present = Op(.present(true), call: 4, ret: 5)
      let absent = Op(.present(false), call: 4, ret: 5)
      #expect(check([.write(1, 0, 1), present]) == .linearizable)
      #expect(check([.write(nil, 0, 1), absent]) == .linearizable)
      #expect(check([.write(1, 0, 1), absent]).isViolation)
      #expect(check([.write(1, 0, 1), .write(nil, 2, 3), present]).isViolation)
    }

    @Test func aStaleReadAfterACompletedWriteIsRejected() {
      let history: [Op] = [.write(1, 0, 1), .write(2, 2, 3), .read(1, 4, 5)]
      #expect(check(history).isViolation)
    }

    @Test func aReadThatMissesACompletedWriteIsRejected() {
      #expect(check([.write(1, 0, 1), .read(nil, 2, 3)]).isViolation)
      #expect(check([.write(1, 0, 1), .write(nil, 2, 3), .read(1, 4, 5)]).isViolation)
    }

    @Test func aReadOfAValueNeverWrittenIsRejected() {
      #expect(check([.write(1, 0, 1), .read(7, 2, 3)]).isViolation)
      #expect(check([.read(7, 0, 100)]).isViolation)
    }

    @Test func overlappingOperationsMayTakeEffectInEitherOrder() {
      // A read overlapping a write may see the value before or after it.
      #expect(check([.write(1, 0, 10), .read(nil, 1, 2)]) == .linearizable)
      #expect(check([.write(1, 0, 10), .read(1, 1, 2)]) == .linearizable)
      // Two overlapping writes: a later read may see either of them...
      #expect(check([.write(1, 0, 10), .write(2, 1, 9), .read(1, 11, 12)]) == .linearizable)
      #expect(check([.write(1, 0, 10), .write(2, 1, 9), .read(2, 11, 12)]) == .linearizable)
      // ...but once both are done, all later reads must agree on which came last.
      let disagreeing: [Op] = [
        .write(1, 0, 10), .write(2, 1, 9), .read(1, 11, 12), .read(2, 13, 14),
      ]
      #expect(check(disagreeing).isViolation)
    }

    @Test func readsMayNotSeeAnOverlappingWriteComeAndGo() {
      // The write overlaps both reads, but the second read starts after the first ended:
      // once a read has seen the new value, a later read cannot see the old one.
      #expect(check([.write(1, 0, 100), .read(1, 10, 20), .read(nil, 30, 40)]).isViolation)
      #expect(check([.write(1, 0, 100), .read(nil, 10, 20), .read(1, 30, 40)]) == .linearizable)
    }

    @Test func anExchangeMustReturnTheValueItReplaced() {
      #expect(check([.write(1, 0, 1), .exchange(2, observed: 1, 2, 3)]) == .linearizable)
      #expect(check([.write(1, 0, 1), .exchange(2, observed: nil, 2, 3)]).isViolation)
      // Two exchanges cannot both replace the same value.
      let both: [Op] = [
        .write(1, 0, 1), .exchange(2, observed: 1, 2, 10), .exchange(3, observed: 1, 3, 9),
      ]
      #expect(check(both).isViolation)
    }

    @Test func operationsWithTouchingTimestampsCountAsOverlapping() {
      // The read is called at the very nanosecond the write returned: either order is fine.
      #expect(check([.write(1, 0, 5), .read(nil, 5, 6)]) == .linearizable)
    }

    @Test func theInitialValueIsRespected() {
      #expect(check([.read(42, 0, 1)], initialValue: 42) == .linearizable)
      #expect(check([.read(nil, 0, 1)], initialValue: 42).isViolation)
    }

    @Test func aSearchThatExceedsItsBudgetIsInconclusiveNotLinearizable() {
      // Twenty concurrent writes and a read of a value none of them wrote: proving that no
      // order works means trying the subsets of the writes.
      var history: [Op] = (1...20).map { .write($0, 0, 100) }
      history.append(.read(999, 50, 150))
      let verdict = LinearizabilityChecker.checkRegister(history, stateBudget: 1_000)
      #expect(verdict == .inconclusive(statesExplored: 1_001))
      let report = HistoryVerdict(verdicts: [0: verdict])
      #expect(!report.isLinearizable)
      #expect(!report.hasViolation)
    }

    @Test func aLongHistoryIsCheckedWithoutRecursion() throws {
      // 20 000 operations in a row, checked on a thread with a 1 MiB stack: a search that
      // recursed once per operation would overflow it.
      let history: [Op] = (0..<20_000).map { index in
        let time = UInt64(2 * index)
        return index % 2 == 0 ? .write(index, time, time + 1) : .read(index - 1, time, time + 1)
      }
      let verdicts = try #require(
        runOnThreads(1) { _ in LinearizabilityChecker.checkRegister(history) })
      #expect(verdicts == [.linearizable])
    }

    @Test func aHistoryIsCheckedKeyByKey() {
      let history: [KeyedHistoryOperation] = [
        KeyedHistoryOperation(key: 1, operation: .write(1, 0, 1)),
        KeyedHistoryOperation(key: 2, operation: .write(2, 0, 1)),
        KeyedHistoryOperation(key: 1, operation: .read(1, 2, 3)),
        // Key 2 holds 2, not 1: a value written to another key does not count.
        KeyedHistoryOperation(key: 2, operation: .read(1, 2, 3)),
        KeyedHistoryOperation(key: 3, operation: .read(nil, 2, 3)),
      ]
      let verdict = LinearizabilityChecker.check(history)
      #expect(verdict.verdicts[1] == .linearizable)
      #expect(verdict.verdicts[2]?.isViolation == true)
      #expect(verdict.verdicts[3] == .linearizable)
      #expect(verdict.hasViolation)
      #expect(!verdict.isLinearizable)
      #expect(verdict.description.contains("key 2"))
    }
  }
}
