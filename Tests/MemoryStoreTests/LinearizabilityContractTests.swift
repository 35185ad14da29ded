import MemoryStoreKit
import Testing

extension StoreContractTests {
  /// Read-your-writes, proved the strong way: histories recorded on eight OS threads are
  /// checked for linearizability, and deliberately stale stores are caught every time.
  @Suite("Linearizability") struct Linearizability {
    static let trials = 5

    @Test(arguments: 1...trials)
    func everyRecordedHistoryOfTheStoreIsLinearizable(trial: Int) throws {
      let workload = RegisterWorkload(
        threads: 8, operationsPerThread: 2_000, keys: 8, seed: UInt64(trial))
      let history = try #require(
        workload.record(on: MemoryStore<Int, Int>()),
        "the workload's threads did not finish in time")
      #expect(history.count >= 8 * 2_000)
      let verdict = LinearizabilityChecker.check(history)
      #expect(verdict.verdicts.count == 8)
      #expect(verdict.isLinearizable, "\(verdict)")
    }

    /// The same proof while one thread keeps a read section open now and then, as a preempted
    /// reader would: the writes made meanwhile go on, and what they replace stays allocated.
    @Test(arguments: 1...3)
    func historiesStayLinearizableWhileAReaderIsParked(trial: Int) throws {
      let workload = RegisterWorkload(
        threads: 8, operationsPerThread: 2_000, keys: 8, seed: UInt64(50 + trial),
        parkingThread: 0)
      let history = try #require(
        workload.record(on: MemoryStore<Int, Int>()),
        "the workload's threads did not finish in time")
      let verdict = LinearizabilityChecker.check(history)
      #expect(verdict.isLinearizable, "\(verdict)")
    }

    /// The same proof on a store with a count limit it never reaches: its writes of keys
    /// present skip the transaction (staged, logged and published directly), the others go
    /// through one, all under the same lock.
    @Test(arguments: 1...3)
    func historiesOfAStoreWithALimitAreLinearizable(trial: Int) throws {
      let store = MemoryStore<Int, Int>()
      store.countLimit = 1_000
      let workload = RegisterWorkload(
        threads: 8, operationsPerThread: 2_000, keys: 8, seed: UInt64(90 + trial))
      let history = try #require(
        workload.record(on: store), "the workload's threads did not finish in time")
      let verdict = LinearizabilityChecker.check(history)
      #expect(verdict.isLinearizable, "\(verdict)")
      #expect(store.statistics.evictions.total == 0)
      #expect(store._policyMismatch() == nil)
    }

    /// The same proof with read-modify-writes (`update(forKey:)`) and membership tests in the
    /// mix, and a store whose read-modify-write is a read and a write caught every time.
    @Test(arguments: 1...3)
    func historiesWithReadModifyWritesAreLinearizable(trial: Int) throws {
      let workload = RegisterWorkload(
        threads: 8, operationsPerThread: 2_000, keys: 8, seed: UInt64(70 + trial),
        readModifyWrites: true)
      let history = try #require(
        workload.record(on: MemoryStore<Int, Int>()),
        "the workload's threads did not finish in time")
      #expect(history.contains { if case .present = $0.operation.kind { true } else { false } })
      let verdict = LinearizabilityChecker.check(history)
      #expect(verdict.isLinearizable, "\(verdict)")
    }

    @Test func theCheckerFlagsEveryTrialOfATornReadModifyWrite() throws {
      var flagged = 0
      for trial in 1...Self.trials {
        let workload = RegisterWorkload(
          threads: 8, operationsPerThread: 2_000, keys: 8, seed: UInt64(200 + trial),
          readModifyWrites: true)
        let history = try #require(workload.record(on: TornUpdateStore()))
        let verdict = LinearizabilityChecker.check(history, stopAtFirstViolation: true)
        if verdict.hasViolation { flagged += 1 }
      }
      #expect(flagged == Self.trials, "only \(flagged) of \(Self.trials) trials were flagged")
    }

    enum BrokenStore: String, Sendable, CaseIterable, CustomTestStringConvertible {
      case writesAppliedEveryEighthWrite
      case readsFromASnapshotRefreshedEveryFifthWrite
      case ownWritesSeenAtOnceOthersEveryEighthWrite

      func make() -> any StoreUnderTest {
        switch self {
        case .writesAppliedEveryEighthWrite: DeferredWriteStore(groupSize: 8)
        case .readsFromASnapshotRefreshedEveryFifthWrite: StaleSnapshotStore(refreshInterval: 5)
        case .ownWritesSeenAtOnceOthersEveryEighthWrite: OwnWritesFirstStore(groupSize: 8)
        }
      }

      var testDescription: String { rawValue }
    }

    @Test(arguments: BrokenStore.allCases)
    func theCheckerFlagsEveryTrialOfAStaleStore(_ broken: BrokenStore) throws {
      var flagged = 0
      for trial in 1...Self.trials {
        let workload = RegisterWorkload(
          threads: 8, operationsPerThread: 2_000, keys: 8, seed: UInt64(100 + trial))
        let recorded = workload.record(on: broken.make())
        let history = try #require(recorded)
        let verdict = LinearizabilityChecker.check(history, stopAtFirstViolation: true)
        if verdict.hasViolation { flagged += 1 }
      }
      #expect(flagged == Self.trials, "only \(flagged) of \(Self.trials) trials were flagged")
    }

    /// One thread alone cannot catch a store that shows each thread its own writes at once:
    /// catching it above takes the concurrent workload.
    @Test func aSingleThreadCannotCatchAStoreThatShowsItsOwnWritesFirst() throws {
      let workload = RegisterWorkload(threads: 1, operationsPerThread: 2_000, keys: 8, seed: 9)
      let recorded = workload.record(on: OwnWritesFirstStore(groupSize: 8))
      let history = try #require(recorded)
      #expect(LinearizabilityChecker.check(history).isLinearizable)
    }
  }
}
