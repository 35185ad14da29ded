import Foundation
import MemoryStoreKit
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension StoreContractTests {
  /// One snapshot file, one writer: a save that would replace another writer's snapshot fails
  /// with `conflict` and changes nothing, unless the manager's `conflictPolicy` is `overwrite`.
  @Suite("Persistence: conflicting writers") struct ConflictingWriters {
    let directory = TemporaryDirectory()
    var url: URL { directory.file() }

    /// A store holding `entries`.
    static func store(_ entries: [String: Int]) -> MemoryStore<String, Int> {
      let store = MemoryStore<String, Int>()
      store.addEntries(entries)
      return store
    }

    /// The file's bytes; fails the test if there is no file.
    func bytes(sourceLocation: SourceLocation = #_sourceLocation) throws -> [UInt8] {
      try #require(FileManager.default.bytes(at: url), sourceLocation: sourceLocation)
    }

    /// The entries a fresh load of the file reads.
    func onDisk() throws -> [String: Int] {
      let restored = MemoryStore<String, Int>()
      try manager(restored, url).load()
      return restored.allItems
    }

    /// Saves with `persistence` and checks that the save failed with `conflict` and changed
    /// nothing: not the file, byte for byte, not the store, and left no temporary file.
    func expectConflict(
      _ persistence: PersistenceManager<String, Int>,
      sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> PersistenceError {
      let before = try bytes(sourceLocation: sourceLocation)
      let items = persistence.store.allItems
      let error = try #require(throws: PersistenceError.self, sourceLocation: sourceLocation) {
        try persistence.save()
      }
      #expect(error.kind == .conflict, "\(error)", sourceLocation: sourceLocation)
      #expect(error.fileURL == url.standardizedFileURL, sourceLocation: sourceLocation)
      #expect(error.description.contains(url.path), sourceLocation: sourceLocation)
      #expect(
        error.description.contains("call load()"), "\(error)", sourceLocation: sourceLocation)
      #expect(persistence.lastSaveError?.kind == .conflict, sourceLocation: sourceLocation)
      #expect(try bytes(sourceLocation: sourceLocation) == before, sourceLocation: sourceLocation)
      #expect(persistence.store.allItems == items, sourceLocation: sourceLocation)
      #expect(
        directory.contents == [".store.snapshot.lock", "store.snapshot"],
        sourceLocation: sourceLocation)
      return error
    }

    @Test func aSaveAfterAnotherManagersSaveFailsUntilItLoads() throws {
      let first = try manager(Self.store(["first": 1]), url)
      let second = try manager(Self.store(["second": 2]), url)
      // Both start from the same file, each having loaded it.
      try first.save()
      #expect(try second.load() == 1)
      // The first saves again: the second has not seen that snapshot.
      first.store["first"] = 10
      try first.save()
      let firstSnapshot = try bytes()
      second.store["second"] = 20
      let error = try expectConflict(second)
      #expect(
        error.description.contains(
          "another writer replaced the snapshot since this manager last loaded or saved it"),
        "\(error)")
      #expect(try bytes() == firstSnapshot, "the file still holds the first's snapshot")
      #expect(second.store.allItems == ["first": 1, "second": 20])
      #expect(second.lastSaveDate == nil)

      // Once the second has loaded the first's snapshot, its save replaces it.
      #expect(try second.load() == 1)
      try second.save()
      #expect(second.lastSaveError == nil)
      #expect(try onDisk() == ["first": 10, "second": 20])
      // And now the first is the one that has not seen the file.
      _ = try expectConflict(first)
    }

    @Test func aManagerThatNeverLoadedDoesNotReplaceAnExistingFile() throws {
      try manager(Self.store(["earlier": 1]), url).save()
      let earlier = try bytes()
      let persistence = try manager(Self.store(["fresh": 2]), url)
      let error = try expectConflict(persistence)
      #expect(error.description.contains("neither loaded nor written"), "\(error)")
      #expect(try bytes() == earlier)
      // It may save once it has loaded the file.
      try persistence.load()
      try persistence.save()
      #expect(try onDisk() == ["earlier": 1, "fresh": 2])
    }

    @Test func aFileThatAppearedAfterALoadFoundNoneIsAnotherWritersToo() throws {
      let persistence = try manager(Self.store(["mine": 1]), url)
      #expect(try persistence.load() == 0)
      try manager(Self.store(["theirs": 2]), url).save()
      _ = try expectConflict(persistence)
    }

    @Test func theOverwritePolicyReplacesTheFileAsSavesUsedTo() throws {
      let first = try manager(Self.store(["first": 1]), url)
      try first.save()
      let second = try manager(Self.store(["second": 2]), url)
      #expect(second.conflictPolicy == .fail, "the default")
      second.conflictPolicy = .overwrite
      try second.save()
      #expect(try onDisk() == ["second": 2], "the first's entries are gone, by choice")
      // The first, still under the default, no longer replaces the file it has not seen.
      _ = try expectConflict(first)
      first.conflictPolicy = .overwrite
      try first.save()
      #expect(try onDisk() == ["first": 1])
    }

    @Test func managersOfOneStoreAreOneWriter() throws {
      let store = Self.store(["a": 1])
      try manager(store, url).save()
      // A new manager of the same store, as a tool making one per save would: it goes on
      // from the saves of the store's other managers.
      store["a"] = 2
      try manager(store, url, .json).save()
      #expect(try onDisk() == ["a": 2])
      // Another store's manager is another writer.
      _ = try expectConflict(try manager(Self.store(["b": 3]), url))
    }

    @Test func aDeletedFileIsSavedAgain() throws {
      let persistence = try manager(Self.store(["a": 1]), url)
      try persistence.save()
      try FileManager.default.removeItem(at: url)
      persistence.store["a"] = 2
      try persistence.save()
      #expect(try onDisk() == ["a": 2])
    }

    @Test func aFileMovedAsideByLoadIsNotInTheWay() throws {
      try Data("not a snapshot".utf8).write(to: url)
      let persistence = try manager(Self.store(["a": 1]), url)
      let rejected = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(rejected.movedTo != nil)
      try persistence.save()
      #expect(try onDisk() == ["a": 1])
    }

    @Test func aFileRewrittenInPlaceWithItsSizeAndTimesKeptIsAnotherWriters() throws {
      let persistence = try manager(Self.store(["a": 1]), url)
      try persistence.save()
      // Another program rewrites the file in place (same inode), with content of the same
      // size, and puts its modification time back: only the header tells the change.
      var status = stat()
      try #require(stat(url.path, &status) == 0)
      var changed = try bytes()
      changed[36] ^= 0xFF  // the payload's checksum
      let handle = try FileHandle(forWritingTo: url)
      try handle.write(contentsOf: Data(changed))
      try handle.close()
      #if canImport(Darwin)
        var times = [status.st_atimespec, status.st_mtimespec]
      #else
        var times = [status.st_atim, status.st_mtim]
      #endif
      try #require(utimensat(AT_FDCWD, url.path, &times, 0) == 0)
      var after = stat()
      try #require(stat(url.path, &after) == 0)
      try #require(after.st_ino == status.st_ino && after.st_size == status.st_size)
      _ = try expectConflict(persistence)
    }

    @Test func aChangeOfPermissionsAloneIsNoConflict() throws {
      let persistence = try manager(Self.store(["a": 1]), url)
      try persistence.save()
      // Changes the status change time, not a byte of the file.
      try #require(chmod(url.path, 0o644) == 0)
      persistence.store["a"] = 2
      try persistence.save()
      #expect(try onDisk() == ["a": 2])
    }

    /// Three writers save one file in a loop, each loading it after a conflict: the file always
    /// holds every writer's last acknowledged save.
    @Test func concurrentWritersNeverLoseAnAcknowledgedSave() throws {
      let url = self.url
      let rounds = 150
      let problems = Locked<[String]>([])
      // Per writer: the last round whose save succeeded, and the conflicts it met.
      let results: [(acknowledged: Int?, conflicts: Int)]? = runOnThreads(3) { writer in
        let key = "writer-\(writer)"
        var acknowledged: Int?
        var conflicts = 0
        do {
          let persistence = try manager(MemoryStore<String, Int>(), url)
          for round in 0..<rounds {
            persistence.store[key] = round
            let saved = Result { () throws(PersistenceError) in try persistence.save() }
            switch saved {
            case .success:
              acknowledged = round
            case .failure(let error):
              guard error.kind == .conflict else { throw error }
              conflicts += 1
              try persistence.load()
              // Whoever wrote the file last, it holds this writer's last acknowledged save
              // (and nothing of it before the first).
              let file = MemoryStore<String, Int>()
              try manager(file, url).load()
              let loaded = file[key]
              if loaded != acknowledged {
                problems.withLock {
                  $0.append("\(key) round \(round): loaded \(String(describing: loaded))")
                }
              }
            }
          }
        } catch {
          problems.withLock { $0.append("\(key): \(error)") }
        }
        return (acknowledged, conflicts)
      }
      let writers = try #require(results)
      #expect(problems.value == [])
      let final = try onDisk()
      for (writer, result) in writers.enumerated() {
        #expect(final["writer-\(writer)"] == result.acknowledged, "writer \(writer)")
      }
      #expect(writers.contains { $0.acknowledged != nil })
      // In the first round, the first rename leaves a file the other two have not seen.
      #expect(writers.map(\.conflicts).reduce(0, +) >= 2)
      #expect(directory.contents == [".store.snapshot.lock", "store.snapshot"])
    }

    @Test func autoSaveReportsAConflictOncePerPeriod() async throws {
      let scheduler = ManualScheduler()
      let store = MemoryStore<String, Int>(scheduler: scheduler)
      let persistence = try manager(store, url)
      var outcomes = persistence.saveOutcomes.makeAsyncIterator()
      persistence.saveInterval = .seconds(10)
      store["mine"] = 1
      scheduler.advance(by: .seconds(10))
      let saved = try #require(await outcomes.next())
      #expect(try saved.result.get().entryCount == 1)
      let savedAt = try #require(persistence.lastSaveDate)

      // Another writer, having loaded the file, replaces it.
      let other = try manager(Self.store(["theirs": 2]), url)
      try other.load()
      try other.save()
      let theirs = try bytes()

      store["mine"] = 2
      for period in 1...2 {
        scheduler.advance(by: .seconds(10))
        let outcome = try #require(await outcomes.next())
        #expect(outcome.trigger == .automatic)
        guard case .failure(let error) = outcome.result else {
          Issue.record("period \(period): expected a conflict, got \(outcome.result)")
          return
        }
        #expect(error.kind == .conflict)
        #expect(persistence.lastSaveError?.kind == .conflict)
        #expect(persistence.lastSaveDate == savedAt)
        #expect(try bytes() == theirs)
        #expect(scheduler.pendingCount == 1, "the next attempt is one period later")
      }

      // Once the manager has loaded the other's snapshot, auto-save goes on; the next
      // outcome is that save's: no other attempt was made in between.
      try persistence.load()
      scheduler.advance(by: .seconds(10))
      let resumed = try #require(await outcomes.next())
      #expect(try resumed.result.get().entryCount == 2)
      #expect(persistence.lastSaveError == nil)
      #expect(try onDisk() == ["mine": 1, "theirs": 2])
    }
  }
}
