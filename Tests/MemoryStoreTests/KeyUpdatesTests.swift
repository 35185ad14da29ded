import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `updates(of:)`: one key's value now, then after each batch that changes it.
  @Suite("Change batches: one key") struct KeyUpdates {
    /// What an iterator's `next()` gave.
    enum Next: Equatable, Sendable {
      case value(Int?)
      case ended
      case timedOut
    }

    /// The iterator's next element, as a ``Next``.
    func next(
      _ iterator: MemoryStore<String, Int>.Updates.Iterator,
      within limit: Duration = .seconds(30)
    ) async -> Next {
      await withTaskGroup(of: Next.self) { group in
        group.addTask {
          var iterator = iterator
          guard let update = await iterator.next() else { return .ended }
          return .value(update.value)
        }
        group.addTask {
          try? await Task.sleep(for: limit)
          return .timedOut
        }
        let first = await group.next() ?? .timedOut
        group.cancelAll()
        return first
      }
    }

    @Test func theFirstElementIsTheCurrentValueThenEachChange() async throws {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.notificationInterval = .seconds(1)
      store["AAPL"] = 1
      let iterator = store.updates(of: "AAPL").makeAsyncIterator()
      #expect(await next(iterator) == .value(1))
      // Unrelated keys yield nothing; several writes in one interval yield the latest value.
      store["MSFT"] = 9
      store["AAPL"] = 2
      store["AAPL"] = 3
      scheduler.advance(by: .seconds(1))
      #expect(await next(iterator) == .value(3))
      store["AAPL"] = nil
      scheduler.advance(by: .seconds(1))
      #expect(await next(iterator) == .value(nil))
      store["MSFT"] = 10
      scheduler.advance(by: .seconds(1))
      store["AAPL"] = 4
      scheduler.advance(by: .seconds(1))
      #expect(await next(iterator) == .value(4))
      // An absent key starts with nil.
      let absent = store.updates(of: "NVDA").makeAsyncIterator()
      #expect(await next(absent) == .value(nil))
    }

    @Test func anAbsentKeyAndTheEndOfTheSequenceDoNotLookAlike() async throws {
      var store: MemoryStore<String, Int>? = MemoryStore(scheduler: ManualScheduler())
      var iterator = store!.updates(of: "k").makeAsyncIterator()
      // The key is absent: an element that says so, not the end.
      let absent = try #require(await iterator.next())
      #expect(absent == KeyUpdate(key: "k", value: nil))
      #expect(!absent.isPresent)
      store = nil
      // The store is gone: the end.
      #expect(await iterator.next() == nil)
    }

    @Test func aSlowConsumerGetsOnlyTheLatestValue() async {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      store.notificationInterval = .seconds(1)
      let iterator = store.updates(of: "k").makeAsyncIterator()
      for value in 1...5 {
        store["k"] = value
        scheduler.advance(by: .seconds(1))
      }
      #expect(await next(iterator) == .value(5))
      // Nothing older waited behind it: the next element is the next change.
      store["k"] = 6
      scheduler.advance(by: .seconds(1))
      #expect(await next(iterator) == .value(6))
    }

    @Test func theIterationEndsWhenTheStoreIsFreedOrTheSubscriptionEnds() async {
      var store: MemoryStore<String, Int>? = MemoryStore(scheduler: ManualScheduler())
      let iterator = store!.updates(of: "k").makeAsyncIterator()
      #expect(await next(iterator) == .value(nil))
      #expect(store!._subscriberCount == 1)
      store = nil
      #expect(await next(iterator) == .ended)
      // A sequence whose store is gone ends at once.
      let gone: MemoryStore<String, Int>.Updates = {
        let store = MemoryStore<String, Int>()
        return store.updates(of: "k")
      }()
      var ended = gone.makeAsyncIterator()
      #expect(await ended.next() == nil)
    }

    @Test func valuesFollowAWriterInOrderAndEndAtItsLastWrite() async throws {
      let store = MemoryStore<String, Int>()
      store.notificationInterval = .milliseconds(1)
      let last = 20_000
      let consumer = Task { () -> (increasing: Bool, count: Int) in
        var increasing = true
        var previous = -1
        var count = 0
        for await update in store.updates(of: "k") {
          let value = update.value ?? -1
          increasing = increasing && value > previous || (count == 0 && value == -1)
          previous = value
          count += 1
          if value == last { break }
        }
        return (increasing, count)
      }
      // Writes start while the consumer subscribes: whatever it saw first, later values grow.
      let writer = try #require(
        runOnThreads(1, timeout: 60) { _ in
          for value in 0...last { store["k"] = value }
          return true
        })
      #expect(writer == [true])
      let (increasing, count) = await consumer.value
      #expect(increasing)
      #expect(count >= 1)
      #expect(store._subscriberCount == 0, "leaving the loop ended the subscription")
    }
  }
}
