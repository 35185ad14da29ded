import MemoryStoreKit
import Testing

extension StoreContractTests {
  /// No reader ever sees part of an `addEntries`, `removeValues` or `removeAll`.
  @Suite("Batch atomicity") struct BatchAtomicity {
    @Test func readersNeverSeeHalfABatchFromOneWriter() throws {
      let store = MemoryStore<Int, Int>()
      let workload = BatchAtomicityWorkload(writers: 1, readers: 4, generations: 302)
      let report = try #require(workload.run(on: store), "the threads did not finish in time")
      #expect(report.violationCount == 0, "\(report.examples)")
      #expect(report.reads >= 4 * workload.minimumReadsPerReader)
      // The last generation (302) ends with a plain addEntries.
      let last = Dictionary(uniqueKeysWithValues: (0..<64).map { ($0, 302) })
      #expect(report.finalContents == last)
      #expect(store.count == 64)
    }

    @Test func readersNeverSeeHalfABatchFromCompetingWriters() throws {
      let store = MemoryStore<Int, Int>()
      let workload = BatchAtomicityWorkload(writers: 3, readers: 5, generations: 152)
      let report = try #require(workload.run(on: store), "the threads did not finish in time")
      #expect(report.violationCount == 0, "\(report.examples)")
      // Every writer ends with a plain addEntries: the store holds the last one in full.
      #expect(report.finalContents.count == 64)
      #expect(BatchAtomicityWorkload.violation(in: report.finalContents, keyCount: 64) == nil)
      #expect(Set(report.finalContents.values).isSubset(of: [152, 1_000_152, 2_000_152]))
    }

    @Test(arguments: TornBatchStore.TornOperation.allCases)
    func theWorkloadCatchesAStoreThatAppliesABatchInTwoHalves(
      _ torn: TornBatchStore.TornOperation
    ) throws {
      let workload = BatchAtomicityWorkload(writers: 1, readers: 3, generations: 12)
      let report = try #require(workload.run(on: TornBatchStore(tearing: torn)))
      #expect(report.violationCount > 0)
    }

    @Test func theObservationCheckAcceptsAllOrNothing() {
      let all = Dictionary(uniqueKeysWithValues: (0..<4).map { ($0, 7) })
      #expect(BatchAtomicityWorkload.violation(in: all, keyCount: 4) == nil)
      #expect(BatchAtomicityWorkload.violation(in: [:], keyCount: 4) == nil)
      #expect(BatchAtomicityWorkload.violation(in: [0: 7, 1: 7, 2: 7], keyCount: 4) != nil)
      #expect(BatchAtomicityWorkload.violation(in: [0: 7, 1: 7, 2: 7, 3: 6], keyCount: 4) != nil)
      #expect(BatchAtomicityWorkload.violation(in: [0: 7, 1: 7, 2: 7, 9: 7], keyCount: 4) != nil)
    }
  }

  /// `allItems` and `values(forKeys:)` are snapshots of one point of the write order.
  @Suite("Snapshot consistency") struct SnapshotConsistency {
    @Test func snapshotsNeverMixBeforeAndAfterAWrite() throws {
      let store = MemoryStore<Int, Int>()
      let workload = SnapshotConsistencyWorkload(readers: 4, generations: 150)
      let report = try #require(workload.run(on: store), "the threads did not finish in time")
      #expect(report.violationCount == 0, "\(report.examples)")
      #expect(report.reads >= 4 * workload.minimumReadsPerReader)
      // The writer wrote 150 generations, or more if the readers needed longer.
      #expect(report.lastGeneration >= 150)
      let last = Dictionary(uniqueKeysWithValues: (0..<64).map { ($0, report.lastGeneration) })
      #expect(report.finalContents == last)
    }

    @Test func theWorkloadCatchesASnapshotTakenInTwoHalves() throws {
      let store = TornSnapshotStore(writesBetweenHalves: 3 * 64)
      let workload = SnapshotConsistencyWorkload(
        readers: 2, generations: 100, minimumReadsPerReader: 5)
      let report = try #require(workload.run(on: store))
      #expect(report.violationCount > 0)
    }

    @Test func thePositionCheckAcceptsExactlyThePointsOfTheWriteOrder() {
      typealias Workload = SnapshotConsistencyWorkload
      #expect(Workload.position(of: [0: 0, 1: 0, 2: 0], keyCount: 3) == 0)
      #expect(Workload.position(of: [0: 1, 1: 0, 2: 0], keyCount: 3) == 1)
      #expect(Workload.position(of: [0: 1, 1: 1, 2: 0], keyCount: 3) == 2)
      #expect(Workload.position(of: [0: 1, 1: 1, 2: 1], keyCount: 3) == 3)
      #expect(Workload.position(of: [0: 2, 1: 1, 2: 1], keyCount: 3) == 4)
      #expect(Workload.position(of: [0: 1, 1: 0, 2: 1], keyCount: 3) == nil)
      #expect(Workload.position(of: [0: 0, 1: 1, 2: 1], keyCount: 3) == nil)
      #expect(Workload.position(of: [0: 3, 1: 1, 2: 1], keyCount: 3) == nil)
      #expect(Workload.position(of: [0: 1, 1: 1], keyCount: 3) == nil)
    }

    /// A read of one key takes its key's newest node without loading the version when the
    /// node is older than a version its thread saw published: a node staged by a batch not yet
    /// published must never pass. Single-key reads, one after another, of keys that every
    /// batch writes together must then never go back a generation: once a read returned
    /// generation *g*, the batch of *g* was published, and every later read sees it.
    @Test(arguments: [false, true])
    func readsOfOneKeyAtATimeNeverSeeABatchBeforeItIsPublished(timed: Bool) throws {
      let store = MemoryStore<Int, Int>()
      if timed { store.defaultTimeToLive = .seconds(3_600) }
      let keys = Array(0..<64)
      store.addEntries(Dictionary(uniqueKeysWithValues: keys.map { ($0, 0) }))
      let generations = 2_000
      let writing = Locked(true)
      let results: [(reads: Int, violations: [String])]? = runOnThreads(3) { thread in
        guard thread > 0 else {
          for generation in 1...generations {
            store.addEntries(Dictionary(uniqueKeysWithValues: keys.map { ($0, generation) }))
          }
          writing.withLock { $0 = false }
          return (0, [])
        }
        var reads = 0
        var violations: [String] = []
        var order = keys
        var random = SplitMix64(seed: UInt64(thread))
        repeat {
          order.shuffle(using: &random)
          var highest = 0
          var highestKey = -1
          for key in order {
            let generation = store[key] ?? -1
            reads += 1
            if generation < highest && violations.count < 5 {
              violations.append(
                "key \(highestKey) read \(highest), then key \(key) read \(generation)")
            }
            if generation > highest { (highest, highestKey) = (generation, key) }
          }
        } while writing.withLock({ $0 })
        return (reads, violations)
      }
      let threads = try #require(results, "the threads did not finish in time")
      #expect(threads.flatMap(\.violations) == [])
      #expect(threads.dropFirst().allSatisfy { $0.reads >= keys.count })
      #expect(store.values(forKeys: keys).values.allSatisfy { $0 == generations })
    }

    @Test func countMatchesAllItemsOnceTheThreadsAreDone() throws {
      let store = MemoryStore<Int, Int>()
      let finished: [Void]? = runOnThreads(8) { thread in
        var random = SplitMix64(seed: UInt64(thread))
        for step in 0..<2_000 {
          let key = random.below(200)
          switch random.below(4) {
          case 0: store[key] = nil
          case 1: store.addEntries([key: step, (key + 1) % 200: step])
          case 2: store.removeValues(forKeys: [key, (key + 7) % 200])
          default: store[key] = step
          }
        }
      }
      #expect(finished != nil)
      let items = store.allItems
      #expect(store.count == items.count)
      #expect(store.isEmpty == items.isEmpty)
      #expect(store.values(forKeys: 0..<200) == items)
      store._checkInvariants()
    }
  }
}
