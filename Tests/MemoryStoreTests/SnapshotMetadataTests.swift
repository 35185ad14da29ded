import Foundation
import Testing

@testable import MemoryStoreKit

extension StoreContractTests {
  /// Snapshots keep each entry's cost and deadlines (format version 2), files of version 1
  /// still load, and loaded entries follow the store's expiry settings whatever their order
  /// with the load.
  @Suite("Persistence: entry metadata") struct SnapshotMetadata {
    /// The file's format version.
    static func version(of file: URL) throws -> UInt32 {
      let bytes = try [UInt8](Data(contentsOf: file))
      return bytes[8..<12].reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Stops `manager`'s wall clock, that snapshots' deadlines are written in, at `seconds`.
    static func setWallClock<Key, Value>(
      _ manager: PersistenceManager<Key, Value>, _ seconds: Double
    ) {
      manager._state.withLock { $0.wallClock = { seconds } }
    }

    @Test(arguments: CoderChoice.allCases)
    func costsAndDeadlinesSurviveASaveAndALoad(_ choice: CoderChoice) throws {
      let directory = TemporaryDirectory()
      let clock = HeldScheduler()
      let source = MemoryStore<String, Int>(scheduler: clock)
      source.timeToIdle = .seconds(100)
      source.setValue(1, forKey: "token", timeToLive: .seconds(60))
      source.setValue(2, forKey: "image", cost: 500)
      source["session"] = 3
      clock.move(by: .seconds(10))
      #expect(source["session"] == 3, "read: idle until 110 s")
      let saving = try manager(source, directory.file(), choice)
      Self.setWallClock(saving, 1_000)
      #expect(try saving.save().entryCount == 3)
      #expect(try Self.version(of: directory.file()) == 2)

      // Loaded 5 s of wall-clock time later, by a store whose clock starts anew.
      let restartedClock = HeldScheduler()
      let restarted = MemoryStore<String, Int>(scheduler: restartedClock)
      restarted.timeToIdle = .seconds(100)
      let loading = try manager(restarted, directory.file(), choice)
      Self.setWallClock(loading, 1_005)
      #expect(try loading.load() == 3)
      #expect(restarted.statistics.totalCost == 500)
      // Left: the token 60 - 10 - 5 = 45 s; the image, idle since 0 s, 85 s; the session 95 s.
      for (moveTo, present) in [
        (44, ["token", "image", "session"]), (46, ["image", "session"]),
        (84, ["image", "session"]),
        (86, ["session"]), (94, ["session"]), (96, []),
      ] {
        restartedClock.move(by: .seconds(moveTo) - .nanoseconds(restartedClock.nanoseconds))
        #expect(Set(restarted.keys) == Set(present), "at \(moveTo) s")
      }
      #expect(restarted._policyMismatch() == nil)
    }

    @Test func aStoreWithoutCostsOrDeadlinesWritesFormatVersion1() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      store.countLimit = 10  // metadata, but neither a cost nor a deadline
      store.addEntries(["a": 1, "b": 2])
      try manager(store, directory.file()).save()
      #expect(try Self.version(of: directory.file()) == 1)
      // What the JSON coder wrote is the plain dictionary, readable by any version.
      let payload = try Data(contentsOf: directory.file()).dropFirst(48)
      #expect(try JSONDecoder().decode([String: Int].self, from: payload) == ["a": 1, "b": 2])
      store.setValue(3, forKey: "c", cost: 1)
      try manager(store, directory.file()).save()
      #expect(try Self.version(of: directory.file()) == 2)
    }

    @Test(arguments: CoderChoice.allCases)
    func anEntryWhoseDeadlinePassedMeanwhileIsNotLoaded(_ choice: CoderChoice) throws {
      let directory = TemporaryDirectory()
      let source = MemoryStore<String, Int>(scheduler: HeldScheduler())
      source.setValue(1, forKey: "short", timeToLive: .seconds(60))
      source.setValue(2, forKey: "long", timeToLive: .seconds(600))
      source["forever"] = 3
      let saving = try manager(source, directory.file(), choice)
      Self.setWallClock(saving, 1_000)
      try saving.save()

      let clock = HeldScheduler()
      let restarted = MemoryStore<String, Int>(scheduler: clock)
      restarted["kept"] = 0
      let loading = try manager(restarted, directory.file(), choice)
      Self.setWallClock(loading, 1_100)  // down for 100 s
      #expect(try loading.load() == 2)
      #expect(restarted.allItems == ["kept": 0, "long": 2, "forever": 3])
      clock.move(by: .seconds(499))
      #expect(restarted["long"] == 2)
      clock.move(by: .seconds(2))
      #expect(restarted.allItems == ["kept": 0, "forever": 3])
    }

    @Test func aSavedCostIsKeptAndAnEntrySavedWithoutOneIsWeighed() throws {
      let directory = TemporaryDirectory()
      let source = MemoryStore<String, Int>()
      source.setValue(7, forKey: "costed", cost: 7)
      source.setValue(1, forKey: "free", timeToLive: .seconds(600))
      try manager(source, directory.file()).save()

      let restarted = MemoryStore<String, Int>()
      restarted.entryCost = { _, value in value * 100 }
      #expect(try manager(restarted, directory.file()).load() == 2)
      #expect(restarted.statistics.totalCost == 7 + 100)
      // The costs round-trip again: the weighed one is saved as weighed.
      let again = TemporaryDirectory()
      try manager(restarted, again.file()).save()
      let reloaded = MemoryStore<String, Int>()
      #expect(try manager(reloaded, again.file()).load() == 2)
      #expect(reloaded.statistics.totalCost == 107)
    }

    @Test func aVersion1FileLoadsAndFollowsTheSettingsMadeBeforeTheLoad() throws {
      let directory = TemporaryDirectory()
      let source = MemoryStore<String, Int>()
      source.addEntries(["a": 1, "b": 2])
      try manager(source, directory.file()).save()
      #expect(try Self.version(of: directory.file()) == 1)

      let clock = HeldScheduler()
      let restarted = MemoryStore<String, Int>(scheduler: clock)
      restarted.defaultTimeToLive = .seconds(10)
      restarted.timeToIdle = .seconds(5)
      #expect(try manager(restarted, directory.file()).load() == 2)
      clock.move(by: .seconds(4))
      #expect(restarted["a"] == 1, "renews a for 5 s, until 9 s")
      clock.move(by: .seconds(2))
      #expect(restarted.allItems == ["a": 1], "b idle for 6 s")
      clock.move(by: .seconds(4))
      #expect(restarted.isEmpty, "a, read at 8 s, at its time to live")
    }

    @Test(arguments: CoderChoice.allCases)
    func settingsMadeAfterTheLoadApplyToTheLoadedEntriesOnly(_ choice: CoderChoice) throws {
      let directory = TemporaryDirectory()
      let source = MemoryStore<String, Int>()
      source.addEntries(["a": 1, "b": 2, "c": 3])
      try manager(source, directory.file(), choice).save()

      let clock = HeldScheduler()
      let restarted = MemoryStore<String, Int>(scheduler: clock)
      restarted["written"] = 0
      #expect(try manager(restarted, directory.file(), choice).load() == 3)
      restarted["c"] = 30  // written since the load: no longer a loaded entry
      restarted.defaultTimeToLive = .seconds(10)
      restarted.timeToIdle = .seconds(20)
      clock.move(by: .seconds(9))
      #expect(restarted.count == 4)
      clock.move(by: .seconds(2))
      // As without a load, a default applies to later writes, not to the entries written
      // before it was set; the loaded entries follow it.
      #expect(restarted.allItems == ["written": 0, "c": 30])
      #expect(restarted._policyMismatch() == nil)
    }

    @Test func aVersion2FileIsReadableJSON() throws {
      let directory = TemporaryDirectory()
      // A held clock: the deadline is 60 s from the save's instant, whatever time the save takes.
      let store = MemoryStore<String, String>(scheduler: HeldScheduler())
      store.setValue("x", forKey: "k", cost: 3, timeToLive: .seconds(60))
      let saving = try manager(store, directory.file())
      Self.setWallClock(saving, 1_000)
      try saving.save()
      let payload = try Data(contentsOf: directory.file()).dropFirst(48)
      let object = try #require(
        JSONSerialization.jsonObject(with: payload) as? [String: [String: Any]])
      let entry = try #require(object["k"])
      #expect(entry["value"] as? String == "x")
      #expect(entry["cost"] as? Int == 3)
      let expires = try #require(entry["expires"] as? Double)
      #expect(abs(expires - 1_060) < 0.001)
      #expect(entry["idleExpires"] == nil)
    }
  }
}
