import MemoryStore
import Testing

@Suite struct LinearizabilityCheckerTests {
  private func op(_ isWrite: Bool, _ value: Int, _ call: UInt64, _ ret: UInt64) -> RegisterOperation {
    RegisterOperation(isWrite: isWrite, value: value, call: call, ret: ret)
  }

  @Test func acceptsASequentialHistory() {
    let history = [op(true, 1, 0, 1), op(false, 1, 2, 3), op(true, -1, 4, 5), op(false, -1, 6, 7)]
    #expect(checkRegister(history) == .linearizable)
  }

  @Test func rejectsAStaleReadAfterACompletedWrite() {
    let history = [op(true, 1, 0, 1), op(true, 2, 2, 3), op(false, 1, 4, 5)]
    #expect(checkRegister(history) == .notLinearizable)
  }

  @Test func rejectsAReadOfAValueNeverWritten() {
    #expect(checkRegister([op(true, 1, 0, 1), op(false, 7, 2, 3)]) == .notLinearizable)
  }

  @Test func acceptsEitherOrderForOverlappingOperations() {
    // The read overlaps the write: it may see the old or the new value.
    #expect(checkRegister([op(true, 1, 0, 10), op(false, -1, 1, 2)]) == .linearizable)
    #expect(checkRegister([op(true, 1, 0, 10), op(false, 1, 1, 2)]) == .linearizable)
    // Two overlapping writes, then reads that pin down an order.
    let history = [op(true, 1, 0, 10), op(true, 2, 0, 10), op(false, 1, 11, 12)]
    #expect(checkRegister(history) == .linearizable)
  }

  @Test func rejectsReadsThatDisagreeOnTheOrderOfTwoWrites() {
    let history = [
      op(true, 1, 0, 10), op(true, 2, 0, 10),
      op(false, 1, 11, 12), op(false, 2, 13, 14), op(false, 1, 15, 16),
    ]
    #expect(checkRegister(history) == .notLinearizable)
  }
}

@Suite struct LinearizabilityTests {
  @Test(arguments: [1, 2, 3] as [UInt64])
  func concurrentHistoriesOfTheStoreAreLinearizable(seed: UInt64) {
    let store = MemoryStore<Int, Int>()
    let history = recordHistory(of: store, seed: seed)
    #expect(history.reduce(0) { $0 + $1.count } >= 16_000)
    #expect(verdict(history) == .linearizable)
  }

  @Test(arguments: [4, 5] as [UInt64])
  func historiesStayLinearizableWhileReadersArePreemptedInsideACopy(seed: UInt64) {
    let store = MemoryStore<Int, Int>()
    let history = recordHistory(of: store, seed: seed, parkReaders: true)
    #expect(verdict(history) == .linearizable)
  }

  @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
  func theCheckerCatchesAStoreWhoseWritesShowUpLate(seed: UInt64) {
    let history = recordHistory(of: LaggingStore(), seed: seed)
    #expect(verdict(history) == .notLinearizable)
  }
}
