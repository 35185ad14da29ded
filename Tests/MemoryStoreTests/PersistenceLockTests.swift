import Foundation
import MemoryStoreKit
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Holds the lock that saves of `directory`'s `store.snapshot` take, as a save in another
/// process would, until `release()`.
final class HeldSaveLock {
  private var descriptor: Int32

  init(_ directory: TemporaryDirectory) throws {
    descriptor = open(directory.file(".store.snapshot.lock").path, O_RDWR | O_CREAT, 0o600)
    try #require(descriptor >= 0)
    try #require(flock(descriptor, LOCK_EX | LOCK_NB) == 0)
  }

  func release() {
    if descriptor >= 0 { close(descriptor) }
    descriptor = -1
  }

  deinit { release() }
}

extension StoreContractTests {
  /// Several managers of one snapshot, as two processes or a process and a tool would have.
  @Suite("Persistence: several managers of one file") struct SeveralManagers {
    @Test func aNewManagerLeavesTheTemporaryFileOfASaveInProgress() throws {
      let directory = TemporaryDirectory()
      let live = directory.file(".store.snapshot.tmp-Ab12Cd")
      let lock = try HeldSaveLock(directory)
      #expect(FileManager.default.createFile(atPath: live.path, contents: Data([1])))
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      let persistence = try manager(store, directory.file())
      #expect(FileManager.default.fileExists(atPath: live.path), "a live save's file was removed")
      // Once the save is over, its file is stale: this manager's first save removes it.
      lock.release()
      try persistence.save()
      #expect(directory.contents == [".store.snapshot.lock", "store.snapshot"])
    }

    @Test func aNewManagerRemovesStaleFilesWhenNoSaveIsInProgress() throws {
      let directory = TemporaryDirectory()
      HeldSaveLock.releasedAfterUse(directory)
      #expect(
        FileManager.default.createFile(
          atPath: directory.file(".store.snapshot.tmp-Ab12Cd").path, contents: Data([1])))
      _ = try manager(MemoryStore<String, Int>(), directory.file())
      #expect(directory.contents == [".store.snapshot.lock"])
    }

    @Test func managersSavingTogetherNeverBreakEachOthersSaves() throws {
      let directory = TemporaryDirectory()
      let url = directory.file()
      let failures = Locked<[String]>([])
      // Two long-lived managers save in a loop while a third thread creates manager after
      // manager (each removing stale temporary files), saving and loading with each. They
      // are three writers of one file: each replaces the others' snapshots on purpose.
      let done: [Void]? = runOnThreads(3) { thread in
        let store = MemoryStore<String, Int>()
        for index in 0..<50 { store["\(thread)-\(index)"] = index }
        do {
          if thread < 2 {
            let persistence = try manager(store, url)
            persistence.conflictPolicy = .overwrite
            for round in 0..<150 {
              store["round"] = round
              try persistence.save()
            }
          } else {
            for _ in 0..<150 {
              let persistence = try manager(store, url)
              persistence.conflictPolicy = .overwrite
              try persistence.save()
              _ = try manager(MemoryStore<String, Int>(), url).load()
            }
          }
        } catch {
          failures.withLock { $0.append("thread \(thread): \(error)") }
        }
      }
      #expect(done != nil)
      #expect(failures.value == [])
      let restored = MemoryStore<String, Int>()
      // The last save was by a long-lived manager (51 entries) or by the third thread (50).
      let loaded = try manager(restored, url).load()
      #expect(loaded == 51 || loaded == 50)
      #expect(directory.contents == [".store.snapshot.lock", "store.snapshot"])
    }
  }
}

extension HeldSaveLock {
  /// Takes and releases the lock once: the lock file exists, and nobody holds it.
  static func releasedAfterUse(_ directory: TemporaryDirectory) {
    (try? HeldSaveLock(directory))?.release()
  }
}
