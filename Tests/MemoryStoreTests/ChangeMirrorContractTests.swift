import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// Applying every batch in order to a mirror reproduces the store: nothing is lost,
  /// duplicated or reordered across batches, under concurrent writes and publications.
  @Suite("Change batches: mirror invariant") struct ChangeMirror {
    static let threads = 8
    static let operationsPerThread = 3_000
    static let keySpace = 64

    /// One thread's share of a random workload of every kind of write; with `parking`, the
    /// thread now and then keeps a reader parked, so that writes race a reader that stays.
    static func writeRandomly(
      _ store: MemoryStore<Int, Int>, thread: Int, parking: Bool, evicting: Bool = false
    ) {
      var random = SplitMix64(seed: UInt64(thread) &* 0x9E37_79B9 &+ 17)
      func step(_ index: Int) {
        let key = random.below(keySpace)
        let value = thread * 1_000_000 + index
        if evicting {
          // Writes with a cost and a time to live of their own, and purges by the decider.
          switch random.below(100) {
          case 0..<10:
            store.setValue(
              value, forKey: key, cost: random.below(8),
              timeToLive: random.below(2) == 0 ? nil : .milliseconds(random.below(6)))
            return
          case 10..<12:
            store.purgeEvictableItems()
            return
          default: break
          }
        }
        switch random.below(100) {
        case 0..<40: store[key] = value
        case 40..<60: store[key] = nil
        case 60..<70:
          store.addEntries(
            Dictionary(
              uniqueKeysWithValues: random.distinct(4, below: keySpace).map { ($0, value) }))
        case 70..<80: store.removeValues(forKeys: random.distinct(3, below: keySpace))
        case 80..<90: _ = store.valueOrInsert(forKey: key) { value }
        case 90..<99: _ = store.updateValue(value, forKey: key)
        default: store.removeAll()
        }
      }
      var index = 0
      while index < operationsPerThread {
        if parking && random.below(50) == 0 {
          store._withReaderParked {
            for _ in 0..<8 where index < operationsPerThread {
              step(index)
              index += 1
            }
          }
        } else {
          step(index)
          index += 1
        }
      }
    }

    @Test(arguments: [false, true])
    func everyBatchAppliedInOrderReproducesTheStore(parking: Bool) async throws {
      try await Self.checkMirror(parking: parking, evicting: false)
    }

    /// The same with every kind of removal the store makes on its own racing the writes:
    /// evictions by a count and a cost limit, expiries (the clock advances all along) and
    /// purges by a decider.
    @Test(arguments: [false, true])
    func everyBatchAppliedInOrderReproducesAStoreThatEvicts(parking: Bool) async throws {
      try await Self.checkMirror(parking: parking, evicting: true)
    }

    static func checkMirror(parking: Bool, evicting: Bool) async throws {
      let scheduler = ManualScheduler()
      let store: MemoryStore<Int, Int>
      if evicting {
        store = MemoryStore(scheduler: scheduler) { _, value, _ in value % 5 == 0 }
        store.countLimit = keySpace / 2
        store.costLimit = 12
        store.defaultTimeToLive = .milliseconds(20)
      } else {
        store = MemoryStore(scheduler: scheduler)
      }
      store.notificationInterval = .milliseconds(1)
      let handled = BatchCollector<Int, Int>()
      let subscription = store.observe { handled.append($0) }
      // A consumer that reads nothing until the end: everything merges into one batch.
      let idle = store.changes.makeAsyncIterator()
      // A consumer that keeps up, as far as it can, until it sees the end marker.
      let active = store.changes.makeAsyncIterator()
      let reader = Task { () -> (mirror: [Int: Int], contiguous: Bool) in
        var iterator = active
        var mirror: [Int: Int] = [:]
        var last: UInt64 = 0
        var contiguous = true
        while let batch = await iterator.next() {
          contiguous = contiguous && batch.sequenceNumbers.lowerBound == last + 1
          last = batch.sequenceNumbers.upperBound
          batch.apply(to: &mirror)
          if batch.updated[-1] != nil { break }
        }
        return (mirror, contiguous)
      }

      // Publications run concurrently with the writers.
      let writersDone = Atomic(false)
      let advances = Atomic(0)
      let publisher = startThread {
        while !writersDone.load(ordering: .acquiring) {
          scheduler.advance(by: .milliseconds(1))
          advances.wrappingAdd(1, ordering: .releasing)
        }
      }
      let finished: [Void]? = runOnThreads(threads, timeout: 120) { thread in
        writeRandomly(store, thread: thread, parking: parking && thread == 0, evicting: evicting)
        // However fast the writes were, they go on until the publisher has run a few times,
        // so that publications certainly race them (bounded: 10 s).
        let deadline = monotonicNanoseconds() + 10_000_000_000
        var value = 0
        while advances.load(ordering: .acquiring) < 8 && monotonicNanoseconds() < deadline {
          store[thread] = value
          value += 1
        }
      }
      writersDone.store(true, ordering: .releasing)
      #expect(publisher.wait(timeout: 60))
      try #require(finished != nil)
      await store.flush()
      store[-1] = 1  // the end marker
      await store.flush()

      let expected = store.allItems
      var handledMirror: [Int: Int] = [:]
      for batch in handled.batches {
        // A published batch is never empty; batches merged for a handler that fell behind
        // may cancel out (a key added in one and removed in the next), and are still
        // delivered so that the numbers stay contiguous.
        #expect(!batch.isEmpty || batch.sequenceNumbers.count > 1)
        batch.apply(to: &handledMirror)
      }
      #expect(handled.isContiguous)
      #expect(handled.batches.first?.sequenceNumbers.lowerBound == 1)
      // Sequence numbers count publications (the handler may have received some merged):
      // beyond the end marker's, at least two ran while the writers wrote.
      #expect(
        (handled.batches.last?.sequenceNumbers.upperBound ?? 0) > 2,
        "publications ran during the writes")
      #expect(handledMirror == expected)
      store._checkInvariants()
      if evicting {
        // Every kind of removal happened, so the mirror went through all of them.
        let evictions = store.statistics.evictions
        #expect(evictions[.countLimit] > 0)
        #expect(evictions[.costLimit] > 0)
        #expect(evictions[.expired] > 0)
        #expect(evictions[.decider] > 0)
      }

      let (activeMirror, contiguous) = await reader.value
      #expect(contiguous)
      #expect(activeMirror == expected)

      let everything = try #require(await nextBatch(idle))
      #expect(
        everything.sequenceNumbers == 1...(handled.batches.last?.sequenceNumbers.upperBound ?? 0))
      var idleMirror: [Int: Int] = [:]
      everything.apply(to: &idleMirror)
      #expect(idleMirror == expected)
      #expect(everything.addedKeys == Set(everything.updated.keys), "the store started empty")
      subscription.cancel()
    }
  }

  /// `changes(includingInitialSnapshot:)`: a mirror seeded from the first element and kept
  /// with the rest equals the store, however busy the writers were when it started.
  @Suite("Change batches: initial snapshot") struct InitialSnapshot {
    @Test func theFirstElementIsTheWholeStoreAndTheRestFollowIt() async throws {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.notificationInterval = .seconds(1)
      store.addEntries(["a": 1, "b": 2])
      await store.flush()  // batch 1
      store["c"] = 3  // logged, not yet published
      // The snapshot is taken where a batch ends: starting the iteration publishes c (batch 2).
      let iterator = store.changes(includingInitialSnapshot: true).makeAsyncIterator()
      store["a"] = nil
      store["b"] = 20
      scheduler.advance(by: .seconds(1))  // batch 3: a removed, b replaced
      let first = try #require(await nextBatch(iterator))
      // The consumer took nothing until now: the snapshot comes merged with batch 3.
      #expect(first.isInitialSnapshot)
      #expect(first.sequenceNumbers == 2...3)
      var mirror = ["stale": 0]
      first.apply(to: &mirror)
      #expect(mirror == ["b": 20, "c": 3])
      #expect(mirror == store.allItems)
      store["d"] = 4
      scheduler.advance(by: .seconds(1))
      let next = try #require(await nextBatch(iterator))
      #expect(!next.isInitialSnapshot)
      #expect(next.sequenceNumbers == 4...4)
      next.apply(to: &mirror)
      #expect(mirror == store.allItems)
    }

    @Test func anIterationThatKeepsUpGetsTheSnapshotAlone() async throws {
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler())
      store.notificationInterval = .seconds(1)
      store["a"] = 1
      let iterator = store.changes(includingInitialSnapshot: true).makeAsyncIterator()
      let first = try #require(await nextBatch(iterator))
      #expect(first.isInitialSnapshot)
      #expect(first.updated == ["a": 1])
      #expect(first.addedKeys == ["a"])
      // Starting the iteration published a as batch 1.
      #expect(first.sequenceNumbers == 1...1)
      // Without the option, an iteration starts with the next published batch, which may hold
      // changes logged before it started.
      store["b"] = 2
      let plain = store.changes.makeAsyncIterator()
      store["c"] = 3
      await store.flush()
      let published = try #require(await nextBatch(plain))
      #expect(!published.isInitialSnapshot)
      #expect(published.updated == ["b": 2, "c": 3])
      #expect(published.sequenceNumbers == 2...2)
    }

    /// Mirrors started part-way through while eight threads write, and publications race
    /// them, all end equal to the store. Each key is written once and maybe removed once, so a
    /// change a mirror missed would never be overwritten: it would stay wrong to the end.
    @Test func mirrorsStartedDuringWritesReproduceTheStore() async throws {
      let scheduler = ManualScheduler()
      let store = MemoryStore<Int, Int>(scheduler: scheduler)
      store.notificationInterval = .milliseconds(1)
      let mirrors = 4
      let readers = (0..<mirrors).map { _ in Locked<Task<[Int: Int], Never>?>(nil) }
      let writersDone = Atomic(false)
      let publisher = startThread {
        while !writersDone.load(ordering: .acquiring) {
          scheduler.advance(by: .milliseconds(1))
        }
      }
      let writes = 4_000
      let finished: [Void]? = runOnThreads(8, timeout: 120) { thread in
        for index in 0..<writes {
          let key = thread * 1_000_000 + index
          if index % 3 == 2 {
            store.addEntries([key: index, key + 1: index])
          } else if index % 3 == 0 {
            store[key] = index
          } else {
            store[key - 1] = nil
          }
          // The first threads each start a mirror part-way through.
          if thread < mirrors && index == (thread + 1) * writes / (mirrors + 1) {
            let iterator = store.changes(includingInitialSnapshot: true).makeAsyncIterator()
            readers[thread].withLock {
              $0 = Task {
                var iterator = iterator
                var mirror: [Int: Int] = [:]
                var first = true
                while let batch = await iterator.next() {
                  #expect(batch.isInitialSnapshot == first)
                  first = false
                  batch.apply(to: &mirror)
                  if batch.updated[-1] != nil { break }
                }
                return mirror
              }
            }
          }
        }
      }
      writersDone.store(true, ordering: .releasing)
      #expect(publisher.wait(timeout: 60))
      try #require(finished != nil)
      store[-1] = 1  // the end marker
      await store.flush()
      let expected = store.allItems
      for reader in readers {
        let task = try #require(reader.withLock { $0 })
        let mirror = await task.value
        // The keys on which they differ, not the whole dictionaries.
        let wrong = Set(mirror.keys).union(expected.keys).filter { mirror[$0] != expected[$0] }
        #expect(wrong.isEmpty, "the mirror differs from the store on \(wrong.sorted().prefix(8))")
      }
    }
  }

  /// `ChangeBatch.merged(with:)`, exhaustively on one key: for every pair of consecutive
  /// changes, merging agrees with the net difference between the first and last state.
  @Suite("Change batches: merging") struct ChangeMerging {
    /// A key's state: absent, or present with a value.
    static let states: [Int?] = [nil, 1, 2]

    /// The batches a store publishes while its key "k" goes through `states`, one batch per
    /// step (`nil` where a step changes nothing).
    static func batches(through states: [Int?]) async -> [ChangeBatch<String, Int>?] {
      let store = MemoryStore<String, Int>(scheduler: ManualScheduler())
      store["k"] = states[0]
      store.notificationInterval = .seconds(1)
      let collector = BatchCollector<String, Int>()
      let subscription = store.observe { collector.append($0) }
      var result: [ChangeBatch<String, Int>?] = []
      for state in states.dropFirst() {
        let before = collector.batches.count
        store["k"] = state
        await store.flush()
        result.append(collector.batches.count > before ? collector.batches.last : nil)
      }
      subscription.cancel()
      return result
    }

    @Test func mergingAgreesWithTheNetDifferenceForEveryPairOfSteps() async {
      var merges = 0
      for first in Self.states {
        for second in Self.states {
          for third in Self.states {
            let steps = await Self.batches(through: [first, second, third])
            guard let a = steps[0], let b = steps[1] else { continue }
            let merged = a.merged(with: b)
            let direct = await Self.batches(through: [first, third])[0]
            let path =
              "\(String(describing: first)) → \(String(describing: second)) → \(String(describing: third))"
            #expect(merged.updated == (direct?.updated ?? [:]), "\(path)")
            #expect(merged.addedKeys == (direct?.addedKeys ?? []), "\(path)")
            #expect(merged.removed == (direct?.removed ?? []), "\(path)")
            #expect(merged.sequenceNumbers == 1...2)
            merges += 1
          }
        }
      }
      #expect(merges == 22, "every pair of real changes was merged")
    }
  }
}
