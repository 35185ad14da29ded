import Foundation
import Testing

@testable import MemoryStoreKit

extension StoreContractTests {
  /// The snapshot file's header, checked through the internal format on purpose: a file from
  /// another format version cannot be made through the public API.
  @Suite("Persistence: file format") struct SnapshotFileFormat {
    static let payload = Array(#"{"a":1}"#.utf8)

    static func file(
      version: UInt32 = 1, entryCount: UInt64 = 1, payload: [UInt8] = payload
    ) -> [UInt8] {
      let header = _SnapshotFile.Header(
        formatName: "json", entryCount: entryCount, payloadLength: UInt64(payload.count),
        payloadChecksum: payload.withUnsafeBytes { _SnapshotFile.checksum($0) })
      var bytes = _SnapshotFile.headerBytes(header)!
      // Rewrite the version and the header checksum that covers it.
      withUnsafeBytes(of: version.littleEndian) { bytes.replaceSubrange(8..<12, with: $0) }
      let sum = bytes.withUnsafeBytes {
        _SnapshotFile.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<44]))
      }
      withUnsafeBytes(of: UInt32(truncatingIfNeeded: sum).littleEndian) {
        bytes.replaceSubrange(44..<48, with: $0)
      }
      return bytes + payload
    }

    @Test func aWellFormedFileLoads() throws {
      let directory = TemporaryDirectory()
      try Data(Self.file()).write(to: directory.file())
      let store = MemoryStore<String, Int>()
      #expect(try manager(store, directory.file()).load() == 1)
      #expect(store.allItems == ["a": 1])
    }

    @Test func aFileFromAnotherFormatVersionIsRejected() throws {
      let directory = TemporaryDirectory()
      let error = try StoreContractTests.PersistenceFaults.loadRejects(
        Self.file(version: 3), in: directory)
      #expect(error.kind == .unsupportedVersion)
      #expect(error.detail.contains("version 3"))
    }

    @Test func anAbsurdEntryCountIsRejectedBeforeDecoding() throws {
      let directory = TemporaryDirectory()
      let error = try StoreContractTests.PersistenceFaults.loadRejects(
        Self.file(entryCount: 1 << 60), in: directory)
      #expect(error.kind == .corrupted)
    }

    @Test func anEntryCountThatDisagreesWithThePayloadIsRejected() throws {
      let directory = TemporaryDirectory()
      let error = try StoreContractTests.PersistenceFaults.loadRejects(
        Self.file(entryCount: 2), in: directory)
      #expect(error.kind == .corrupted)
      #expect(error.detail.contains("declares 2 entries"))
    }

    @Test func theChecksumCatchesEveryChangeOfOneByteAndSwappedWords() {
      var bytes = (0..<203).map { UInt8(truncatingIfNeeded: $0 &* 37) }
      let original = bytes.withUnsafeBytes { _SnapshotFile.checksum($0) }
      var sums: Set<UInt64> = [original]
      for index in bytes.indices {
        for flip: UInt8 in [0x01, 0x80, 0xFF] {
          bytes[index] ^= flip
          sums.insert(bytes.withUnsafeBytes { _SnapshotFile.checksum($0) })
          bytes[index] ^= flip
        }
      }
      #expect(sums.count == 1 + bytes.count * 3)
      // The top bit of two consecutive words: cancels out in a plain multiply-xor scheme.
      bytes[7] ^= 0x80
      bytes[15] ^= 0x80
      #expect(bytes.withUnsafeBytes { _SnapshotFile.checksum($0) } != original)
      // The same bytes, one shorter.
      #expect(bytes.dropLast().withUnsafeBytes { _SnapshotFile.checksum($0) } != original)
    }

    /// A descriptor that is not close-on-exec from the instant it exists leaks into a program
    /// that another thread starts with fork and exec meanwhile: the temporary file's and the
    /// lock file's are checked as their functions return them, before anything else runs.
    /// Close-on-exec "from the start", with no window between the creation of a descriptor
    /// and an `fcntl` that would set the flag, is a matter of the flags passed to `open`:
    /// this checks those flags, then that the descriptors as created are close-on-exec (which
    /// alone would not tell `open` with `O_CLOEXEC` from `mkstemp` followed by `fcntl`).
    @Test func theTemporaryFileAndTheLockAreOpenedWithCloseOnExec() throws {
      #expect(_SnapshotFile.temporaryFileOpenFlags & O_CLOEXEC != 0)
      #expect(_SnapshotFile.temporaryFileOpenFlags & O_EXCL != 0)
      #expect(_SnapshotFile.lockFileOpenFlags & O_CLOEXEC != 0)
      let directory = TemporaryDirectory()
      let (temporary, path) = try _SnapshotFile.createTemporaryFile(
        for: "store.snapshot", in: directory.url.path)
      let temporaryFlags = fcntl(temporary, F_GETFD)
      close(temporary)
      unlink(path)
      #expect(temporaryFlags >= 0)
      #expect(temporaryFlags & FD_CLOEXEC != 0, "the temporary file")
      let lock = try #require(
        try _SnapshotFile.lockSaves(of: "store.snapshot", in: directory.url.path, wait: false))
      let lockFlags = fcntl(lock, F_GETFD)
      close(lock)
      #expect(lockFlags >= 0)
      #expect(lockFlags & FD_CLOEXEC != 0, "the lock file")
    }
  }
}
