import Foundation
import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// `entryTimeToLive`: each entry's time to live from its key and value, run outside every
  /// lock on writes, recomputed by updates, never run on reads.
  @Suite("Eviction: a time to live per entry") struct EntryTimeToLive {
    /// A token that says, in seconds from its write, how long it is valid; 0: no expiry of its
    /// own.
    struct Token: Codable, Sendable, Equatable {
      var validFor: Int
    }

    /// A store whose rule reads each token's own validity, and counts its calls.
    static func tokens(_ clock: HeldScheduler) -> (MemoryStore<String, Token>, Locked<Int>) {
      let store = MemoryStore<String, Token>(scheduler: clock)
      let calls = Locked(0)
      store.entryTimeToLive = { _, token in
        calls.withLock { $0 += 1 }
        return token.validFor > 0 ? .seconds(token.validFor) : nil
      }
      return (store, calls)
    }

    @Test func eachEntryLivesAsLongAsItsRuleSaysAndNilMeansTheDefault() {
      let clock = HeldScheduler()
      let (store, calls) = Self.tokens(clock)
      store.defaultTimeToLive = .seconds(100)
      store["short"] = Token(validFor: 5)
      store.updateValue(Token(validFor: 20), forKey: "long")
      store["default"] = Token(validFor: 0)
      store.addEntries(["added": Token(validFor: 10), "added default": Token(validFor: 0)])
      #expect(calls.value == 5)
      clock.move(by: .seconds(5))
      #expect(store.keys.sorted() == ["added", "added default", "default", "long"])
      clock.move(by: .seconds(5))
      #expect(store.keys.sorted() == ["added default", "default", "long"])
      clock.move(by: .seconds(10))
      #expect(store.keys.sorted() == ["added default", "default"])
      clock.move(by: .seconds(80))
      #expect(store.isEmpty)
    }

    @Test func aWriteWithItsOwnTimeToLiveDoesNotRunTheRule() {
      let clock = HeldScheduler()
      let (store, calls) = Self.tokens(clock)
      store.setValue(Token(validFor: 5), forKey: "a", timeToLive: .seconds(50))
      #expect(calls.value == 0)
      clock.move(by: .seconds(10))
      #expect(store["a"] == Token(validFor: 5))
    }

    @Test func readsNeverRunTheRule() {
      let clock = HeldScheduler()
      let (store, calls) = Self.tokens(clock)
      store["a"] = Token(validFor: 5)
      for _ in 0..<10 {
        _ = store["a"]
        _ = store.values(forKeys: ["a", "b"])
        _ = store.contains("a")
      }
      #expect(calls.value == 1)
    }

    @Test func updatesAndMergesRecomputeTheDeadlineOrKeepItWhenTheRuleHasNone() {
      let clock = HeldScheduler()
      let (store, _) = Self.tokens(clock)
      store["extended"] = Token(validFor: 5)
      store["shortened"] = Token(validFor: 50)
      store.setValue(Token(validFor: 0), forKey: "kept", timeToLive: .seconds(8))
      clock.move(by: .seconds(4))
      store.update(forKey: "extended") { $0?.validFor = 30 }  // until 34 s
      store.merge(["shortened": Token(validFor: 2)]) { _, new in new }  // until 6 s
      store.update(forKey: "kept") { $0?.validFor = 0 }  // the rule has none: still 8 s
      clock.move(by: .seconds(2))
      #expect(store.keys.sorted() == ["extended", "kept"])
      clock.move(by: .seconds(2))
      #expect(store.keys.sorted() == ["extended"])
      clock.move(by: .seconds(25))
      #expect(store["extended"] == Token(validFor: 30))
      clock.move(by: .seconds(1))
      #expect(store.isEmpty)
    }

    @Test func getOrCreateAndGetOrLoadStoreWhatTheRuleSays() async throws {
      let clock = HeldScheduler()
      let (store, _) = Self.tokens(clock)
      _ = store.valueOrInsert(forKey: "created") { Token(validFor: 3) }
      _ = try await store.value(forKey: "loaded") { Token(validFor: 6) }
      _ = try await store.values(forKeys: ["bulk"]) { _ in ["bulk": Token(validFor: 9)] }
      clock.move(by: .seconds(3))
      #expect(store.keys.sorted() == ["bulk", "loaded"])
      clock.move(by: .seconds(3))
      #expect(store.keys.sorted() == ["bulk"])
      clock.move(by: .seconds(3))
      #expect(store.isEmpty)
    }

    @Test func theRuleRunsOutsideEveryLockAndMayUseTheStore() {
      let clock = HeldScheduler()
      let store = MemoryStore<String, Int>(scheduler: clock)
      store["base"] = 7
      store.entryTimeToLive = { key, value in
        // Reads and writes of the store from the rule: a rule called under a lock would
        // deadlock here.
        let base = store["base"] ?? 0
        if key != "log" { store["log"] = value }
        return .seconds(base + value)
      }
      store["a"] = 1  // 8 s
      #expect(store["log"] == 1)
      clock.move(by: .seconds(8))
      #expect(store["a"] == nil)
      store.entryTimeToLive = nil
      store["b"] = 1
      clock.move(by: .seconds(1_000))
      #expect(store["b"] == 1, "no rule, no default: it never expires")
      #expect(store._policyMismatch() == nil)
    }

    @Test func aLoadGivesEachEntryWhatTheRuleSaysAndItsIdleTimeStartsThere() throws {
      let directory = TemporaryDirectory()
      let saved = MemoryStore<String, Token>()
      saved.addEntries(["short": Token(validFor: 5), "long": Token(validFor: 50)])
      try PersistenceManager(store: saved, fileURL: directory.file()).save()
      let clock = HeldScheduler()
      let (store, calls) = Self.tokens(clock)
      store.timeToIdle = .seconds(20)
      try PersistenceManager(store: store, fileURL: directory.file()).load()
      #expect(calls.value == 2)
      clock.move(by: .seconds(5))
      #expect(store.keys == ["long"], "its own 5 s")
      clock.move(by: .seconds(15))
      #expect(store.isEmpty, "idle since the load for 20 s")
    }

    @Test func combinedWithATimeToIdleTheFirstDeadlineWins() {
      let clock = HeldScheduler()
      let (store, _) = Self.tokens(clock)
      store.timeToIdle = .seconds(10)
      store["token"] = Token(validFor: 25)
      for _ in 0..<4 {
        clock.move(by: .seconds(6))
        #expect(store["token"] != nil)
      }
      clock.move(by: .seconds(1))
      #expect(store["token"] == nil, "its own 25 s came before its idle deadline")
    }
  }
}
