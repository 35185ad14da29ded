import Foundation
import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `timeToIdle`: entries live while they are used, renewed by reads without a lock, and
  /// expire at whichever comes first, their idle deadline or their time to live.
  @Suite("Eviction: time to idle") struct IdleExpiry {
    @Test func readsKeepAnEntryAliveAndItExpiresOnceIdleForTheTimeToIdle() {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.timeToIdle = .seconds(10)
      #expect(store.timeToIdle == .seconds(10))
      store["session"] = 1
      store["unread"] = 2
      // Read every 6 s, the session outlives many times its idle time.
      for _ in 0..<5 {
        clock.move(by: .seconds(6))
        #expect(store["session"] == 1)
      }
      #expect(store["unread"] == nil, "idle since it was written 30 s ago")
      clock.move(by: .milliseconds(9_000))
      #expect(store["session"] == 1, "read 9 s ago")
      clock.move(by: .seconds(10))
      #expect(store["session"] == nil, "idle for 10 s")
      #expect(store.isEmpty)
      #expect(store.statistics.evictions[.expired] == 2)
      #expect(store._policyMismatch() == nil)
    }

    @Test func containsAndListingsDoNotRenewAnEntry() {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.timeToIdle = .seconds(10)
      store["a"] = 1
      clock.move(by: .seconds(6))
      #expect(store.contains("a"))
      #expect(store.allItems == ["a": 1])
      #expect(store.count == 1)
      clock.move(by: .seconds(4))
      #expect(!store.contains("a"), "checked, listed and counted, never read")
    }

    @Test func everyKeyedReadAndWriteRenews() async throws {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.timeToIdle = .seconds(10)
      for key in ["subscript", "values", "load", "bulk", "update", "touch"] { store[key] = 0 }
      clock.move(by: .seconds(8))
      _ = store["subscript"]
      _ = store.values(forKeys: ["values"])
      _ = try await store.value(forKey: "load") { -1 }
      _ = try await store.values(forKeys: ["bulk"]) { _ in [:] }
      store.update(forKey: "update") { $0? += 1 }
      store.touch("touch")
      clock.move(by: .seconds(8))
      #expect(
        store.allItems == [
          "subscript": 0, "values": 0, "load": 0, "bulk": 0, "update": 1, "touch": 0,
        ])
      clock.move(by: .seconds(2))
      #expect(store.isEmpty)
    }

    @Test func anEntryExpiresAtItsTimeToLiveOrItsIdleDeadlineWhicheverIsFirst() {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store.timeToIdle = .seconds(10)
      store.defaultTimeToLive = .seconds(25)
      store["read"] = 1
      store.setValue(2, forKey: "short", timeToLive: .seconds(4))
      for _ in 0..<4 {
        clock.move(by: .seconds(6))
        #expect(store["read"] == 1)
        #expect(store["short"] == nil, "its time to live came first")
      }
      clock.move(by: .seconds(1))
      #expect(store["read"] == nil, "its time to live ended at 25 s, though it was read")
    }

    @Test func theTimerRemovesIdleEntriesAndReportsThemAsExpired() async throws {
      let observed = ObservedStore<String, Int>()
      let store = observed.store
      store.timeToIdle = .seconds(10)
      store["kept"] = 1
      store["dropped"] = 2
      await store.flush()
      observed.scheduler.advance(by: .seconds(6))
      #expect(store["kept"] == 1)
      // The timer fires at 10 s: "dropped" goes, "kept" was renewed and its item sinks.
      observed.scheduler.advance(by: .seconds(4))
      #expect(store.statistics.evictions[.expired] == 1)
      observed.scheduler.advance(by: .seconds(6))
      #expect(store.statistics.evictions[.expired] == 2)
      let batches = await observed.flushedBatches()
      let removals = batches.dropFirst().flatMap(\.removed)
      #expect(removals.count == 2 && Set(removals) == ["dropped", "kept"])
      for batch in batches.dropFirst() {
        for key in batch.removed { #expect(batch.reason(forKey: key) == .expired) }
      }
      #expect(store._policyMismatch() == nil)
    }

    @Test func itAppliesToEntriesWrittenAfterItIsSet() {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store["before"] = 1
      store.timeToIdle = .seconds(5)
      store["after"] = 2
      clock.move(by: .seconds(6))
      #expect(store.allItems == ["before": 1])
      store.timeToIdle = nil
      store["later"] = 3
      clock.move(by: .seconds(60))
      #expect(store.allItems == ["before": 1, "later": 3])
    }

    @Test func aHotEntryIsStoredOncePerStepAndNeverExpiresLate() {
      let clock = HeldScheduler()
      let store = MemoryStore<Int, Int>(scheduler: clock)
      store.timeToIdle = .seconds(64)  // a step of 1 s
      store[0] = 0
      // Reads 100 ms apart: most move the deadline by less than a step and store nothing, so
      // the entry may expire up to a step early, never late.
      for _ in 0..<100 {
        clock.move(by: .milliseconds(100))
        #expect(store[0] == 0)
      }
      clock.move(by: .milliseconds(63_000))
      #expect(store.contains(0), "read 63 s ago")
      clock.move(by: .milliseconds(1_001))
      #expect(!store.contains(0), "idle for more than 64 s")
    }

    @Test func readsRenewingRaceRemovalsAndWritesWithoutResurrectingAnEntry() async {
      let clock = HeldScheduler()
      let store = MemoryStore<Int, Int>(scheduler: clock)
      store.timeToIdle = .seconds(1)
      let returned = Atomic<Int>(0)
      let writerDone = Atomic<Bool>(false)
      let done: [Void]? = runOnThreads(4) { thread in
        var random = SplitMix64(seed: UInt64(thread) + 11)
        if thread == 0 {
          // The only writer moves the clock (entries idle past 1 s expire as it goes), writes
          // keys, and writes then removes the first 20 keys, which must stay removed.
          for step in 0..<6_000 {
            if step % 200 == 0 { clock.move(by: .milliseconds(150)) }
            let key = random.below(200)
            store[key] = step
            if key < 20 { store[key] = nil }
          }
          writerDone.store(true, ordering: .releasing)
        } else {
          // Readers renew whatever they find, racing the writes, removals and expiries.
          while !writerDone.load(ordering: .acquiring) {
            if store[random.below(200)] != nil { returned.wrappingAdd(1, ordering: .relaxed) }
          }
        }
      }
      #expect(done != nil)
      #expect(returned.load(ordering: .relaxed) > 0)
      for key in 0..<20 { #expect(!store.contains(key), "key \(key) came back") }
      #expect(store._policyMismatch() == nil)
      // Idle for 2 s: everything expired, whatever the readers renewed.
      clock.move(by: .seconds(2))
      #expect(store.isEmpty)
      await store.flush()
      #expect(store._policyMismatch() == nil)
    }
  }
}
