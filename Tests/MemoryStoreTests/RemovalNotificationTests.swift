import Dispatch
import Foundation
import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `removals(bufferingNewest:)`: every value that leaves the store, with its cause, in order.
  @Suite("Removal notifications") struct RemovalNotifications {
    /// Takes removals from `iterator` up to the first removal of `marker`, which the caller
    /// writes and removes last (deliveries run on a background queue).
    static func take<Key, Value>(
      _ iterator: inout MemoryStore<Key, Value>.Removals.Iterator, through marker: Key
    ) async -> [Removal<Key, Value>] {
      var taken: [Removal<Key, Value>] = []
      while let removal = await iterator.next() {
        if removal.key == marker { break }
        taken.append(removal)
      }
      return taken
    }

    typealias Seen = [String]

    static func describe(_ removals: [Removal<String, Int>]) -> Seen {
      removals.map { "\($0.key)=\($0.value) \($0.cause)" }
    }

    @Test func writesReportWhatTheyReplaceAndRemoveInOrder() async {
      let store = MemoryStore<String, Int>()
      store["before"] = 0
      var removals = store.removals.makeAsyncIterator()
      store["before"] = nil  // after the subscription: reported
      store["a"] = 1
      store["a"] = 2
      store.updateValue(3, forKey: "a")
      store.addEntries(["a": 4, "b": 5])
      store.removeValue(forKey: "b")
      store.update(forKey: "a") { $0 = nil }
      store.addEntries(["c": 6, "d": 7])
      store.removeValues(forKeys: ["c"])
      store.removeAll(where: { $0.value == 7 })
      store["e"] = 8
      store.removeAll()
      store["absent"] = nil  // removes nothing: not reported
      store["end"] = 9
      store["end"] = nil
      let seen = Self.describe(await Self.take(&removals, through: "end"))
      #expect(
        seen == [
          "before=0 removed", "a=1 replaced", "a=2 replaced", "a=3 replaced", "b=5 removed",
          "a=4 removed", "c=6 removed", "d=7 removed", "e=8 removed",
        ])
    }

    @Test func anIterationReceivesTheRemovalsOfWritesAfterItsIteratorIsMade() async {
      let store = MemoryStore<String, Int>()
      store.addEntries(["before": 0, "between": 0])
      let sequence = store.removals
      store["before"] = nil  // the sequence exists, no iteration yet: no one is told
      var first = sequence.makeAsyncIterator()
      store["between"] = nil
      var second = sequence.makeAsyncIterator()  // a subscriber of its own
      store["end"] = 1
      store["end"] = nil
      await store.flush()
      #expect(
        Self.describe(await Self.take(&first, through: "end")) == ["between=0 removed"])
      #expect(Self.describe(await Self.take(&second, through: "end")) == [])
    }

    @Test func evictionsAndExpiriesReportTheirReason() async {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock) { key, _, _ in key == "judged" }
      store.countLimit = 3
      store.costLimit = 100
      var removals = store.removals.makeAsyncIterator()
      store.setValue(1, forKey: "expiring", timeToLive: .seconds(1))
      clock.advance(by: .seconds(1))
      _ = store["expiring"]
      store.setValue(2, forKey: "heavy", cost: 200)  // more than the cost limit on its own
      store["judged"] = 3
      store.purgeEvictableItems()
      store.addEntries(["x": 4, "y": 5, "z": 6])
      store["w"] = 7  // one over the count limit
      store.handleMemoryPressure(.critical)
      store.countLimit = nil
      store["end"] = 0
      store["end"] = nil
      let seen = await Self.take(&removals, through: "end")
      var causes: [String: RemovalCause] = [:]
      for removal in seen where causes[removal.key] == nil { causes[removal.key] = removal.cause }
      #expect(causes["expiring"] == .evicted(.expired))
      #expect(causes["heavy"] == .evicted(.costLimit))
      #expect(causes["judged"] == .evicted(.decider))
      #expect(seen.contains { $0.cause == .evicted(.countLimit) })
      #expect(seen.contains { $0.cause == .evicted(.memoryPressure) })
      #expect(seen.allSatisfy { $0.cause.isEviction })
    }

    @Test func aSlowConsumerKeepsTheNewestRemovalsOnly() async {
      let store = MemoryStore<String, Int>()
      var removals = store.removals(bufferingNewest: 3).makeAsyncIterator()
      for value in 0..<10 { store["k"] = value }  // 9 replacements
      await store.flush()  // every removal was handed over: the 3 newest wait
      var seen: [Int] = []
      while let removal = await removals.next() {
        seen.append(removal.value)
        if seen.count == 3 { break }
      }
      #expect(seen == [6, 7, 8])
    }

    /// A scheduler whose next `schedule` call blocks until released: it holds a writer in the
    /// user code it calls after unlocking.
    final class BlockingScheduler: StoreScheduler, @unchecked Sendable {
      // Safe: `blocksNext` and `actions` are only accessed under `lock`; the semaphores are
      // thread-safe.
      private let lock = NSLock()
      private var blocksNext = false
      private var actions: [@Sendable () -> Void] = []
      let entered = DispatchSemaphore(value: 0)
      let proceed = DispatchSemaphore(value: 0)
      var now: ContinuousClock.Instant { .now }

      func blockNextCall() { lock.withLock { blocksNext = true } }

      /// Runs the actions scheduled so far.
      func runAll() {
        let due = lock.withLock {
          defer { actions = [] }
          return actions
        }
        for action in due { action() }
      }

      func schedule(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
        let blocks = lock.withLock {
          actions.append(action)
          defer { blocksNext = false }
          return blocksNext
        }
        if blocks {
          entered.signal()
          proceed.wait()
        }
      }
    }

    @Test func flushDeliversRemovalsWhoseWriterHasNotQueuedTheirDeliveryYet() async throws {
      let scheduler = BlockingScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.notificationInterval = .seconds(1)
      store["a"] = 0
      scheduler.runAll()  // the batch is published: the next change schedules another
      let removals = store.removals.makeAsyncIterator()
      // A writer logs its removal, then blocks in the scheduler (its batch's publication)
      // before it queues the delivery.
      scheduler.blockNextCall()
      let blocked = startThread { store["a"] = 1 }
      scheduler.entered.wait()
      store["b"] = 1
      store["b"] = 2  // logged behind the blocked writer's removal
      await store.flush()
      // Both were handed over by flush(), while the first writer is still blocked: they are
      // in the stream's buffer (a generous limit only guards against a hang).
      let seen = await withTaskGroup(of: [String]?.self) { group in
        group.addTask {
          var removals = removals
          var seen: [String] = []
          while let removal = await removals.next() {
            seen.append("\(removal.key)=\(removal.value) \(removal.cause)")
            if seen.count == 2 { break }
          }
          return seen
        }
        group.addTask {
          try? await Task.sleep(for: .seconds(30))
          return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first ?? nil
      }
      scheduler.proceed.signal()
      #expect(blocked.wait(timeout: 30))
      #expect(seen == ["a=0 replaced", "b=1 replaced"])
    }

    @Test func theConsumerMayWriteTheStoreAndTheSequenceEndsWithIt() async {
      var store: MemoryStore<String, Int>? = MemoryStore()
      let removals = store!.removals.makeAsyncIterator()
      let consumer = Task { [weak store, removals] () -> Int in
        var removals = removals
        var count = 0
        while let removal = await removals.next() {
          count += 1
          // No lock is held: writing back does not deadlock.
          store?["echo-\(removal.key)"] = removal.value
        }
        return count
      }
      store!["a"] = 1
      store!["a"] = nil
      store = nil  // pending removals are delivered, then the sequence ends
      #expect(await consumer.value >= 1)
    }

    @Test func concurrentWritersReportEveryRemovalOncePerKeyInWriteOrder() async throws {
      let store = MemoryStore<Int, Int>()
      var removals = store.removals(bufferingNewest: 1_000_000).makeAsyncIterator()
      let threads = 8
      let writes = 2_000
      let finished = try #require(
        runOnThreads(threads, timeout: 60) { thread in
          // Each thread owns two keys: it replaces and removes them in turn.
          for value in 1...writes {
            let key = thread * 2 + value % 2
            if value % 5 == 0 { store[key] = nil } else { store[key] = value }
          }
          return true
        })
      #expect(finished.count == threads)
      store[-1] = 0
      store[-1] = nil
      var perKey: [Int: [Int]] = [:]
      while let removal = await removals.next() {
        if removal.key == -1 { break }
        perKey[removal.key, default: []].append(removal.value)
      }
      for thread in 0..<threads {
        for parity in 0..<2 {
          let key = thread * 2 + parity
          // Written with increasing values: removed in the order written, each once.
          let expected = (1...writes).filter { $0 % 2 == parity && $0 % 5 != 0 }
            .filter { value in
              // A value leaves when the next write of the key comes.
              let next = value + 2
              return next <= writes
            }
          let values = perKey[key] ?? []
          #expect(values == values.sorted(), "key \(key)")
          #expect(Set(values).count == values.count, "key \(key)")
          #expect(values == expected, "key \(key)")
        }
      }
    }
  }
}
