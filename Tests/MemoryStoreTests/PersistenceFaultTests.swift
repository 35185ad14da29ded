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
  /// Bad files and failing saves: a typed error, and nothing lost.
  @Suite("Persistence: bad input and faults") struct PersistenceFaults {
    /// A directory holding a good snapshot of `["a": 1, "b": 2]`.
    static func savedSnapshot() throws -> (TemporaryDirectory, [UInt8]) {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      try manager(store, directory.file()).save()
      return (directory, try #require(FileManager.default.bytes(at: directory.file())))
    }

    /// Writes `bytes` as the snapshot, loads it into a store holding `["kept": 0]`, and checks
    /// the failure: the store untouched, the file moved aside intact.
    static func loadRejects(
      _ bytes: [UInt8], in directory: TemporaryDirectory,
      sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> PersistenceError {
      try Data(bytes).write(to: directory.file())
      let store = MemoryStore<String, Int>()
      store["kept"] = 0
      let persistence = try manager(store, directory.file())
      let error = try #require(
        throws: PersistenceError.self, sourceLocation: sourceLocation
      ) { try persistence.load() }
      #expect(store.allItems == ["kept": 0], sourceLocation: sourceLocation)
      #expect(error.fileURL == directory.file().standardizedFileURL, sourceLocation: sourceLocation)
      let movedTo = try #require(error.movedTo, sourceLocation: sourceLocation)
      #expect(
        movedTo.lastPathComponent.hasPrefix("store.snapshot.corrupt-"),
        sourceLocation: sourceLocation)
      #expect(FileManager.default.bytes(at: movedTo) == bytes, sourceLocation: sourceLocation)
      #expect(
        !FileManager.default.fileExists(atPath: directory.file().path),
        sourceLocation: sourceLocation)
      #expect(
        String(describing: error).contains(directory.file().lastPathComponent),
        sourceLocation: sourceLocation)
      return error
    }

    @Test func aTruncatedFileIsRejectedAtEveryLength() throws {
      let (directory, good) = try Self.savedSnapshot()
      for length in [0, 1, 7, 8, 20, 47, 48, good.count - 1] {
        let error = try Self.loadRejects(Array(good.prefix(length)), in: directory)
        #expect(error.kind == .truncated, "length \(length): \(error)")
        for file in directory.contents {
          try FileManager.default.removeItem(at: directory.file(file))
        }
      }
    }

    @Test func aDamagedPayloadFailsItsChecksum() throws {
      let (directory, good) = try Self.savedSnapshot()
      var damaged = good
      damaged[damaged.count - 3] ^= 0x01
      #expect(try Self.loadRejects(damaged, in: directory).kind == .corrupted)
    }

    @Test func aDamagedHeaderFailsItsChecksum() throws {
      let (directory, good) = try Self.savedSnapshot()
      var damaged = good
      damaged[21] ^= 0x40  // the entry count
      #expect(try Self.loadRejects(damaged, in: directory).kind == .corrupted)
    }

    @Test func extraBytesAfterThePayloadAreRejected() throws {
      let (directory, good) = try Self.savedSnapshot()
      #expect(try Self.loadRejects(good + [0], in: directory).kind == .corrupted)
    }

    @Test func aFileThatIsNotASnapshotIsRejected() throws {
      let directory = TemporaryDirectory()
      let json = Array(#"{"a": 1}"#.utf8)
      #expect(try Self.loadRejects(json, in: directory).kind == .notASnapshot)
    }

    @Test func aFileFromAnotherCoderIsRejected() throws {
      let (directory, _) = try Self.savedSnapshot()
      let store = MemoryStore<String, Int>()
      let other = InstrumentedCoder(base: JSONSnapshotCoder(), name: "other")
      let persistence = try PersistenceManager(
        store: store, fileURL: directory.file(), coder: other)
      let error = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(error.kind == .formatMismatch)
      #expect(error.detail.contains("\"json\""))
      #expect(store.isEmpty)
    }

    @Test func aPayloadOfTheWrongShapeFailsToDecode() throws {
      let directory = TemporaryDirectory()
      let strings = MemoryStore<String, String>()
      strings["a"] = "not a number"
      try manager(strings, directory.file()).save()
      let store = MemoryStore<String, Int>()
      let persistence = try manager(store, directory.file())
      let error = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(error.kind == .decodingFailed)
      #expect(error.underlyingError is DecodingError)
      #expect(error.detail.contains("at a"), "names the coding path: \(error)")
      #expect(error.movedTo != nil)
      #expect(store.isEmpty)
    }

    @Test func aFileLargerThanTheLimitIsNotRead() throws {
      let (directory, good) = try Self.savedSnapshot()
      let store = MemoryStore<String, Int>()
      let persistence = try manager(store, directory.file())
      persistence.maximumFileSize = good.count - 1
      let error = try #require(throws: PersistenceError.self) { try persistence.load() }
      #expect(error.kind == .fileTooLarge)
      #expect(store.isEmpty)
      #expect(try FileManager.default.bytes(at: #require(error.movedTo)) == good)
      persistence.maximumFileSize = good.count
      #expect(try manager(store, #require(error.movedTo)).load() == 2, "the file itself is good")
    }

    @Test func aValueThatFailsToEncodeIsNamedAndNothingIsWritten() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Fragile>()
      store.addEntries(["good": Fragile(1), "other": Fragile(2)])
      let persistence = try manager(store, directory.file())
      try persistence.save()
      let previous = FileManager.default.bytes(at: directory.file())
      store["bad"] = Fragile(-1)
      let error = try #require(throws: PersistenceError.self) { try persistence.save() }
      #expect(error.kind == .encodingFailed)
      #expect(error.key == #""bad""#)
      #expect(error.underlyingError is Fragile.Refused)
      #expect(persistence.lastSaveError?.key == #""bad""#)
      #expect(FileManager.default.bytes(at: directory.file()) == previous)
      #expect(directory.contents == [".store.snapshot.lock", "store.snapshot"])
      #expect(store.count == 3, "the store is untouched")
    }

    @Test func theSkipPolicyLeavesOutAndReportsFailingEntries() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Fragile>()
      store.addEntries(["good": Fragile(1), "bad": Fragile(-1), "worse": Fragile(-2)])
      let persistence = try manager(store, directory.file())
      persistence.encodingFailurePolicy = .skipEntry
      let report = try persistence.save()
      #expect(report.entryCount == 1)
      #expect(Set(report.skippedKeys) == [#""bad""#, #""worse""#])
      let restored = MemoryStore<String, Fragile>()
      #expect(try manager(restored, directory.file()).load() == 1)
      #expect(restored.allItems == ["good": Fragile(1)])
    }

    @Test func savingOverADirectoryFailsAndLeavesItAlone() throws {
      let directory = TemporaryDirectory()
      let url = directory.file("taken")
      try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      let error = try #require(throws: PersistenceError.self) { try manager(store, url).save() }
      #expect(error.kind == .writeFailed)
      #expect(error.code == .EISDIR)
      #expect(error.description.contains("EISDIR"))
      #expect(directory.contents == [".taken.lock", "taken"], "no temporary file is left")
      #expect(try FileManager.default.contentsOfDirectory(atPath: url.path).isEmpty)
    }

    @Test func aDirectoryThatCannotBeWrittenFailsTheSaveAndKeepsTheSnapshot() throws {
      // Permission bits do not stop root; a read-only kernel file system does.
      let isRoot = geteuid() == 0
      let directory = TemporaryDirectory()
      let url = isRoot ? URL(fileURLWithPath: "/sys/kernel/memorystore.snapshot") : directory.file()
      if isRoot {
        try #require(FileManager.default.fileExists(atPath: "/sys/kernel"))
      }
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      let persistence = try manager(store, url)
      if !isRoot {
        try persistence.save()
        #expect(chmod(directory.url.path, 0o500) == 0)
      }
      defer { chmod(directory.url.path, 0o700) }
      let previous = FileManager.default.bytes(at: url)
      store["a"] = 2
      let error = try #require(throws: PersistenceError.self) { try persistence.save() }
      #expect(error.kind == .writeFailed)
      #expect(error.code == .EACCES || error.code == .EROFS || error.code == .EPERM, "\(error)")
      #expect(FileManager.default.bytes(at: url) == previous)
      #expect(persistence.lastSaveError?.kind == .writeFailed)
    }

    @Test func aDirectoryThatCannotBeCreatedIsATypedError() throws {
      let directory = TemporaryDirectory()
      let file = directory.file("plain")
      #expect(FileManager.default.createFile(atPath: file.path, contents: Data()))
      let error = try #require(throws: PersistenceError.self) {
        try manager(MemoryStore<String, Int>(), file.appendingPathComponent("sub/store.snapshot"))
      }
      #expect(error.kind == .directoryUnavailable)
      #expect(error.code == .ENOTDIR)
      #expect(error.description.contains("a component of its path is a file"), "\(error)")
      #expect(error.description.contains("(ENOTDIR)"))
      #expect(!error.description.contains("does not exist"), "\(error)")
    }

    @Test func aFileWhereTheDirectoryShouldBeIsNamedAsSuch() throws {
      let directory = TemporaryDirectory()
      let file = directory.file("plain")
      #expect(FileManager.default.createFile(atPath: file.path, contents: Data()))
      let error = try #require(throws: PersistenceError.self) {
        try manager(MemoryStore<String, Int>(), file.appendingPathComponent("store.snapshot"))
      }
      #expect(error.kind == .directoryUnavailable)
      #expect(error.code == .ENOTDIR)
      #expect(error.description.contains("exists but is not a directory"), "\(error)")
    }
  }
}
