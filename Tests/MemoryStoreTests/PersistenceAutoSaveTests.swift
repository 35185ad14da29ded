import Foundation
import MemoryStoreKit
import Synchronization
import Testing

extension StoreContractTests {
  /// Auto-save, driven by a manual scheduler.
  @Suite("Persistence: auto-save") struct AutoSave {
    let directory = TemporaryDirectory()
    let scheduler = ManualScheduler()
    let store: MemoryStore<String, Int>
    let persistence: PersistenceManager<String, Int>

    init() throws {
      store = MemoryStore(scheduler: scheduler)
      persistence = try manager(store, directory.file())
    }

    /// The store's contents as a fresh load of the file reads them; `nil` if there is no file.
    func onDisk() throws -> [String: Int]? {
      guard FileManager.default.fileExists(atPath: directory.file().path) else { return nil }
      let restored = MemoryStore<String, Int>()
      try manager(restored, directory.file()).load()
      return restored.allItems
    }

    @Test func noTimerRunsWhileAutoSaveIsOff() {
      store["a"] = 1
      #expect(persistence.saveInterval == .zero)
      #expect(scheduler.pendingCount == 0)
    }

    @Test func itSavesEveryIntervalWhileTheStoreChanges() throws {
      persistence.saveInterval = .seconds(30)
      store["a"] = 1
      scheduler.advance(by: .seconds(29))
      #expect(try onDisk() == nil)
      scheduler.advance(by: .seconds(1))
      #expect(try onDisk() == ["a": 1])
      store["b"] = 2
      scheduler.advance(by: .seconds(30))
      #expect(try onDisk() == ["a": 1, "b": 2])
      #expect(scheduler.pendingCount == 1, "the next period is scheduled")
    }

    @Test func anUnchangedStoreIsNotSavedAgain() async throws {
      var outcomes = persistence.saveOutcomes.makeAsyncIterator()
      persistence.saveInterval = .seconds(10)
      store["a"] = 1
      scheduler.advance(by: .seconds(10))
      let first = try #require(await outcomes.next())
      #expect(first.trigger == .automatic)
      let savedAt = try #require(persistence.lastSaveDate)
      scheduler.advance(by: .seconds(50))  // five periods, nothing written
      #expect(persistence.lastSaveDate == savedAt)
      store["absent"] = nil  // removes nothing: not a change
      scheduler.advance(by: .seconds(10))
      #expect(persistence.lastSaveDate == savedAt)
      store["a"] = 2
      scheduler.advance(by: .seconds(10))
      let second = try #require(await outcomes.next())
      #expect(try second.result.get().entryCount == 1)
      #expect(try onDisk() == ["a": 2])
    }

    @Test func aFailedAutoSaveIsReportedAndTriedAgain() async throws {
      var outcomes = persistence.saveOutcomes.makeAsyncIterator()
      persistence.saveInterval = .seconds(10)
      store["a"] = 1
      // The path is taken by a directory: the save fails.
      try FileManager.default.createDirectory(
        at: directory.file(), withIntermediateDirectories: false)
      scheduler.advance(by: .seconds(10))
      let failed = try #require(await outcomes.next())
      #expect(failed.trigger == .automatic)
      guard case .failure(let error) = failed.result else {
        Issue.record("expected a failure, got \(failed.result)")
        return
      }
      #expect(error.code == .EISDIR)
      #expect(persistence.lastSaveError?.code == .EISDIR)
      #expect(persistence.lastSaveDate == nil)

      try FileManager.default.removeItem(at: directory.file())
      scheduler.advance(by: .seconds(10))  // nothing changed, but nothing was saved either
      let retried = try #require(await outcomes.next())
      #expect(try retried.result.get().entryCount == 1)
      #expect(persistence.lastSaveError == nil)
      #expect(try onDisk() == ["a": 1])
    }

    @Test func settingTheIntervalRestartsThePeriodAndZeroStopsIt() throws {
      persistence.saveInterval = .seconds(10)
      store["a"] = 1
      scheduler.advance(by: .seconds(8))
      persistence.saveInterval = .seconds(10)  // restarts: the save is now due at 18 s
      scheduler.advance(by: .seconds(9))
      #expect(try onDisk() == nil)
      scheduler.advance(by: .seconds(1))
      #expect(try onDisk() == ["a": 1])
      persistence.saveInterval = .zero
      store["a"] = 2
      scheduler.advance(by: .seconds(100))
      #expect(try onDisk() == ["a": 1])
      #expect(scheduler.pendingCount == 0)
    }

    @Test func autoSaveStopsWhenTheManagerIsReleased() throws {
      weak var released: PersistenceManager<String, Int>?
      do {
        let temporary = try manager(store, directory.file("other.snapshot"))
        temporary.saveInterval = .seconds(1)
        released = temporary
      }
      #expect(released == nil, "the timer does not keep the manager alive")
      store["a"] = 1
      scheduler.advance(by: .seconds(5))
      #expect(!FileManager.default.fileExists(atPath: directory.file("other.snapshot").path))
    }
  }

  /// What a save writes while other threads write.
  @Suite("Persistence: consistent snapshots") struct ConsistentSnapshots {
    @Test func aSaveWhileFourThreadsWriteIsTheStoreAtOneInstant() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      let persistence = try manager(store, directory.file())
      let writers = 4
      let writesPerThread = 20_000
      let done = Atomic(0)
      // Thread t writes "t-i" = i for i = 0, 1, 2, …, then "last-t" = i. At any instant the
      // store therefore holds, for each thread, a prefix "t-0" … "t-(n-1)", and "last-t" is
      // n - 1 or n - 2.
      let saver = startThread {
        var snapshots = 0
        while done.load(ordering: .acquiring) < writers || snapshots < 3 {
          _ = try? persistence.save()
          snapshots += 1
          let restored = MemoryStore<String, Int>()
          _ = try? manager(restored, directory.file()).load()
          Self.checkConsistent(restored.allItems, writers: writers)
        }
      }
      let finished: [Void]? = runOnThreads(writers) { thread in
        for index in 0..<writesPerThread {
          store["\(thread)-\(index)"] = index
          store["last-\(thread)"] = index
        }
        done.add(1, ordering: .releasing)
      }
      try #require(finished != nil)
      #expect(saver.wait(timeout: 120))
      #expect(store.count == writers * (writesPerThread + 1), "no write was lost")
      try persistence.save()
      let restored = MemoryStore<String, Int>()
      #expect(try manager(restored, directory.file()).load() == store.count)
      #expect(restored.allItems == store.allItems)
    }

    static func checkConsistent(_ items: [String: Int], writers: Int) {
      for thread in 0..<writers {
        var count = 0
        while items["\(thread)-\(count)"] != nil { count += 1 }
        let written = items.keys.filter { $0.hasPrefix("\(thread)-") }.count
        #expect(written == count, "thread \(thread)'s writes form a prefix")
        if let last = items["last-\(thread)"] {
          #expect(
            last == count - 1 || last == count - 2,
            "thread \(thread): last \(last), \(count) written")
        } else {
          #expect(count <= 1)
        }
      }
    }
  }
}
