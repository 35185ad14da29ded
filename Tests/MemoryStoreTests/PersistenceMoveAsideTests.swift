import Foundation
import Testing

@testable import MemoryStoreKit

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension StoreContractTests {
  /// A rejected file is moved aside only if it is still the file that was read, and the move
  /// never replaces another file.
  @Suite("Persistence: moving a rejected file aside") struct MovingAside {
    /// The bytes of a good snapshot of `entries`, saved in a directory of its own.
    static func snapshot(_ entries: [String: Int]) throws -> [UInt8] {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      store.addEntries(entries)
      try manager(store, directory.file()).save()
      return try #require(FileManager.default.bytes(at: directory.file()))
    }

    @Test func aSnapshotSavedAfterTheReadIsLeftInPlace() throws {
      let directory = TemporaryDirectory()
      let url = directory.file()
      let damaged = Array("not a snapshot at all".utf8)
      try Data(damaged).write(to: url)
      let store = MemoryStore<String, Int>()
      let persistence = try manager(store, url)
      // Between the read and the move aside, another manager saves a good snapshot.
      let writer = MemoryStore<String, Int>()
      writer.addEntries(["fresh": 1])
      let other = try manager(writer, url)
      other.conflictPolicy = .overwrite  // it never read the damaged file it replaces
      persistence._state.withLock { state in
        state.beforeMovingAside = { _ = try? other.save() }
      }
      let error = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(error.kind == .notASnapshot)
      #expect(error.movedTo == nil)
      #expect(error.detail.contains("replaced"))
      #expect(directory.contents.allSatisfy { !$0.contains(".corrupt-") }, "\(directory.contents)")
      // The good snapshot is where it was saved.
      persistence._state.withLock { $0.beforeMovingAside = nil }
      #expect(try persistence.load() == 1)
      #expect(store.allItems == ["fresh": 1])
    }

    @Test func aFileRemovedAfterTheReadIsNotRecreated() throws {
      let directory = TemporaryDirectory()
      let url = directory.file()
      try Data(Array("not a snapshot".utf8)).write(to: url)
      let persistence = try manager(MemoryStore<String, Int>(), url)
      persistence._state.withLock { state in
        state.beforeMovingAside = { unlink(url.path) }
      }
      let error = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(error.kind == .notASnapshot)
      #expect(error.movedTo == nil)
      #expect(directory.contents == [".store.snapshot.lock"])
    }

    @Test func theDamagedFileIsStillMovedWhenNothingReplacedIt() throws {
      let directory = TemporaryDirectory()
      let url = directory.file()
      let damaged = Array("not a snapshot".utf8)
      try Data(damaged).write(to: url)
      let persistence = try manager(MemoryStore<String, Int>(), url)
      let calls = Locked(0)
      persistence._state.withLock { state in
        state.beforeMovingAside = { calls.withLock { $0 += 1 } }
      }
      let error = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(calls.withLock { $0 } == 1)
      let movedTo = try #require(error.movedTo)
      #expect(FileManager.default.bytes(at: movedTo) == damaged)
      #expect(!FileManager.default.fileExists(atPath: url.path))
    }

    @Test func aFileAtTheNewNameIsNeverReplaced() throws {
      let directory = TemporaryDirectory()
      let path = directory.file().path
      let base = path + ".corrupt-x"
      let damaged = Array("damaged".utf8)
      try Data(damaged).write(to: directory.file())
      try Data("first".utf8).write(to: URL(fileURLWithPath: base))
      try Data("second".utf8).write(to: URL(fileURLWithPath: base + "-2"))
      var status = stat()
      try #require(stat(path, &status) == 0)
      let outcome = _SnapshotFile.moveAside(
        path, identity: _SnapshotFile.FileIdentity(status), to: base)
      #expect(outcome == .moved(to: base + "-3"))
      #expect(FileManager.default.bytes(at: URL(fileURLWithPath: base)) == Array("first".utf8))
      #expect(
        FileManager.default.bytes(at: URL(fileURLWithPath: base + "-2")) == Array("second".utf8))
      #expect(FileManager.default.bytes(at: URL(fileURLWithPath: base + "-3")) == damaged)
      #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aSnapshotRenamedInWhileASaveHoldsTheLockIsLeftInPlace() throws {
      let directory = TemporaryDirectory()
      let path = directory.file().path
      try Data("damaged".utf8).write(to: directory.file())
      var status = stat()
      try #require(stat(path, &status) == 0)
      let identity = _SnapshotFile.FileIdentity(status)
      // A save holds the lock, and renames a good snapshot into place before releasing it:
      // whenever the move starts, it finds the good snapshot.
      let lock = try HeldSaveLock(directory)
      let good = try Self.snapshot(["fresh": 1])
      let moved = Locked<_SnapshotFile.MoveAsideOutcome?>(nil)
      let done = DispatchSemaphore(value: 0)
      Thread {
        moved.withLock { $0 = _SnapshotFile.moveAside(path, identity: identity, to: path + ".x") }
        done.signal()
      }.start()
      let replacement = directory.file("replacement")
      try Data(good).write(to: replacement)
      try #require(rename(replacement.path, path) == 0)
      lock.release()
      done.wait()
      #expect(moved.value == .replaced)
      #expect(FileManager.default.bytes(at: directory.file()) == good)
    }
  }
}
