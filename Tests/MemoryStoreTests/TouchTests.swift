import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `touch(_:timeToLive:)`: renews an entry's time to live and counts a use, without a write
  /// of its value, and never brings back an entry that is gone.
  @Suite("Eviction: touch") struct Touch {
    @Test func touchRenewsTheTimeToLiveFromNow() {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "session", timeToLive: .seconds(10))
      clock.advance(by: .seconds(8))
      #expect(store.touch("session", timeToLive: .seconds(10)))
      clock.advance(by: .seconds(8))
      #expect(store["session"] == 1, "16 s after the write, 8 s after the touch")
      clock.advance(by: .seconds(2))
      #expect(store["session"] == nil, "10 s after the touch")
      #expect(store.statistics.evictions[.expired] == 1)
    }

    @Test func withoutATimeToLiveTouchUsesTheDefaultOrKeepsTheExpiry() {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      // No default: the entry's own expiry stays.
      store.setValue(1, forKey: "a", timeToLive: .seconds(10))
      clock.advance(by: .seconds(5))
      #expect(store.touch("a"))
      clock.advance(by: .seconds(5))
      #expect(store["a"] == nil)
      // With a default, the touch renews to it.
      store.defaultTimeToLive = .seconds(10)
      store["b"] = 2
      clock.advance(by: .seconds(8))
      #expect(store.touch("b"))
      clock.advance(by: .seconds(8))
      #expect(store["b"] == 2)
      clock.advance(by: .seconds(2))
      #expect(store["b"] == nil)
    }

    @Test func touchNeverBringsBackAnEntryThatIsGone() {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      #expect(!store.touch("absent", timeToLive: .seconds(10)))
      store["removed"] = 1
      store["removed"] = nil
      #expect(!store.touch("removed", timeToLive: .seconds(10)))
      store.setValue(1, forKey: "expired", timeToLive: .seconds(1))
      clock.advance(by: .seconds(1))
      #expect(!store.touch("expired", timeToLive: .seconds(10)))
      #expect(store.allItems.isEmpty)
      // A store without a policy: present or not, nothing to renew.
      let plain = MemoryStore<String, Int>()
      plain["a"] = 1
      #expect(plain.touch("a"))
      #expect(!plain.touch("b"))
      #expect(plain.allItems == ["a": 1])
    }

    @Test func touchIsNotAChangeNorALookup() async {
      let clock = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.setValue(1, forKey: "a", cost: 7, timeToLive: .seconds(10))
      store.notificationInterval = .seconds(1)
      let collector = BatchCollector<String, Int>()
      let subscription = store.observe { collector.append($0) }
      #expect(store.touch("a", timeToLive: .seconds(20)))
      await store.flush()
      #expect(collector.batches.isEmpty)
      #expect(store.statistics.hits == 0 && store.statistics.misses == 0)
      // Value and cost are kept.
      #expect(store["a"] == 1)
      #expect(store.statistics.totalCost == 7)
      subscription.cancel()
    }

    @Test func aTouchCountsAsAUseForEviction() {
      // A new key in a full store is evicted within a few writes unless used (see the policy
      // tests); a touch is a use.
      let store = MemoryStore<Int, Int>()
      store.countLimit = 100
      for key in 0..<100 { store[key] = key }
      store[1_000] = 1_000
      // Two uses: the write that brought a key in does not count against keys written once.
      #expect(store.touch(1_000))
      #expect(store.touch(1_000))
      for key in 2_000..<2_020 { store[key] = key }
      #expect(store.contains(1_000))
      #expect(store._policyMismatch() == nil)
    }

    @Test func touchesRacingWritesAndRemovalsKeepTheStoreConsistent() throws {
      let clock = ManualScheduler()
      let store = MemoryStore<Int, Int>(scheduler: clock)
      store.countLimit = 48
      store.defaultTimeToLive = .seconds(60)
      let touched = Atomic(0)
      let writersDone = Atomic(0)
      let finished = try #require(
        runOnThreads(8, timeout: 60) { thread in
          var random = SplitMix64(seed: UInt64(thread) + 5)
          if thread % 2 == 0 {
            // Touchers go on until the writers are done and some touch found its key, however
            // the threads are scheduled (the writers leave entries behind); the cap only keeps
            // a broken touch from hanging the test.
            var step = 0
            while step < 3_000
              || (writersDone.load(ordering: .acquiring) < 4
                || touched.load(ordering: .relaxed) == 0)
                && step < 10_000_000
            {
              step += 1
              if store.touch(random.below(64), timeToLive: .seconds(30 + random.below(60))) {
                touched.wrappingAdd(1, ordering: .relaxed)
              }
            }
            return true
          }
          for step in 0..<3_000 {
            let key = random.below(64)
            if step % 3 == 0 {
              store[key] = nil
            } else {
              store[key] = step
            }
          }
          writersDone.wrappingAdd(1, ordering: .releasing)
          return true
        })
      #expect(finished.count == 8)
      #expect(touched.load(ordering: .relaxed) > 0)
      #expect(store.count <= 48)
      #expect(store.count == store.keys.count)
      #expect(store._policyMismatch() == nil)
      store._checkInvariants()
      // Every entry left expires within its longest time to live.
      clock.advance(by: .seconds(90))
      #expect(store.count == 0)
    }
  }
}
