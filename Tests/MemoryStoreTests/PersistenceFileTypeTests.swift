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

/// `load()` of a path that names something else than a regular file: it fails at once with
/// `readFailed`, leaves the thing where it is and the store as it was. Opening a FIFO for
/// reading waits for a writer, so the FIFO's load runs on a thread of its own: if it is still
/// waiting after a generous deadline, the test opens the write end to release it, and fails.
@Suite("Persistence: loading what is not a regular file")
struct PersistenceFileTypeTests {
  enum FileType: String, CaseIterable, Sendable {
    case fifo, directory, socket, device
  }

  /// Makes a `type` at `url`: a device is a symbolic link to `/dev/null`.
  static func make(_ type: FileType, at url: URL) throws {
    switch type {
    case .fifo:
      try #require(mkfifo(url.path, 0o600) == 0, "mkfifo: errno \(errno)")
    case .directory:
      try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    case .socket:
      try bindSocket(at: url.path)
    case .device:
      try FileManager.default.createSymbolicLink(
        atPath: url.path, withDestinationPath: "/dev/null")
    }
  }

  /// Binds a Unix domain socket at `path`; the descriptor is closed, the socket file stays.
  static func bindSocket(at path: String) throws {
    #if canImport(Darwin)
      let descriptor = socket(AF_UNIX, SOCK_STREAM, 0)
    #else
      let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    #endif
    try #require(descriptor >= 0, "socket: errno \(errno)")
    defer { close(descriptor) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path))
    withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
      sunPath.copyBytes(from: bytes)
      sunPath[bytes.count] = 0
    }
    let result = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    try #require(result == 0, "bind: errno \(errno)")
  }

  @Test(arguments: FileType.allCases)
  func loadingWhatIsNotARegularFileFailsAtOnceAndLeavesItAlone(_ type: FileType) throws {
    let directory = TemporaryDirectory()
    let url = directory.file()
    try Self.make(type, at: url)
    let store = MemoryStore<String, Int>()
    store["kept"] = 1
    let persistence = try PersistenceManager(store: store, fileURL: url, coder: .json)
    let outcome = Locked<Result<Int, PersistenceError>?>(nil)
    let finished = startThread {
      let result = Result { () throws(PersistenceError) in try persistence.load() }
      outcome.withLock { $0 = result }
    }
    // Generous: the load does no more than a few system calls.
    if !finished.wait(timeout: 10) {
      Issue.record("load() of a \(type) was still blocked after 10 s")
      if type == .fifo {
        // A writer releases the reader that open(2) holds; the load then ends.
        let writer = open(url.path, O_WRONLY | O_CLOEXEC)
        if writer >= 0 { close(writer) }
      }
      try #require(finished.wait(timeout: 60), "load() never returned")
    }
    let result = try #require(outcome.value)
    let error = try #require(throws: PersistenceError.self) { try result.get() }
    #expect(error.kind == .readFailed)
    #expect(error.movedTo == nil)
    #expect(error.description.contains(url.path))
    #expect(error.description.contains("not a regular file"), "\(error)")
    #expect(store.allItems == ["kept": 1])
    #expect(directory.contents.contains("store.snapshot"))
    if type == .directory { #expect(error.code == .EISDIR) }
  }
}
