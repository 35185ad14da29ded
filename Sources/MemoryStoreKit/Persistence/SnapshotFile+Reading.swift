import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension _SnapshotFile {
  // MARK: Reading

  /// A snapshot's payload, in the one buffer the file's payload was read into.
  enum Payload {
    /// For ``BinarySnapshotCoder``, whose decoder reads an array.
    case bytes([UInt8])
    /// For every other coder, which takes `Data`.
    case data(Data)
  }

  /// The device and inode number of a file: what tells the file that was read from another
  /// that has replaced it at the same path since.
  struct FileIdentity: Equatable {
    var device: UInt64
    var inode: UInt64

    init(_ status: stat) {
      device = UInt64(truncatingIfNeeded: status.st_dev)
      inode = UInt64(truncatingIfNeeded: status.st_ino)
    }
  }

  /// What tells one version of the file at a path from every other: its device and inode
  /// number, its size, its modification time to the nanosecond, and its first bytes (the
  /// header of a snapshot, up to 48 bytes).
  ///
  /// A save never writes a snapshot in place: it renames a new file, a new inode, over the
  /// path, so the device and inode alone tell one save's snapshot from another's, but for one
  /// thing: once a snapshot has been replaced and its inode freed, a later file may get the
  /// same inode number, and the size and modification time may match too (timestamps are
  /// often as coarse as a clock tick, a few milliseconds). The header settles that case: it
  /// holds the payload's 64-bit checksum and the entry count, so two versions that agree on
  /// all of it hold the same snapshot, and replacing one taken for the other loses nothing.
  /// The size and modification time catch a file written in place by another program.
  ///
  /// The status change time (`st_ctime`) is left out on purpose: `chmod`, a hard link made by
  /// a backup tool, or an extended attribute changes it without changing a byte of the file,
  /// which would fail saves for nothing. Everything that changes the content changes the
  /// inode, or the size or modification time, or the header.
  struct FileVersion: Equatable {
    var identity: FileIdentity
    var size: Int64
    var modifiedSeconds: Int64
    var modifiedNanoseconds: Int64
    /// The file's first `min(size, 48)` bytes, when it was read.
    var header: [UInt8]

    init(_ status: stat, header: [UInt8]) {
      identity = FileIdentity(status)
      size = Int64(status.st_size)
      #if canImport(Darwin)
        modifiedSeconds = Int64(status.st_mtimespec.tv_sec)
        modifiedNanoseconds = Int64(status.st_mtimespec.tv_nsec)
      #else
        modifiedSeconds = Int64(status.st_mtim.tv_sec)
        modifiedNanoseconds = Int64(status.st_mtim.tv_nsec)
      #endif
      self.header = header
    }
  }

  /// What ``readSnapshot(at:maximumSize:formatName:payloadAsBytes:)`` found; each case but
  /// `missing` carries the identity of the file it opened, and a snapshot the version that
  /// was read.
  enum ReadOutcome {
    case missing
    case tooLarge(size: Int, FileIdentity)
    /// The header or the payload's checksum rejects the file.
    case rejected(Rejection, FileIdentity)
    case snapshot(Header, Payload, FileVersion)
  }

  /// The failure to report for `status`, which describes something else than a regular file:
  /// `EISDIR` for a directory, `EINVAL` for anything else, with a reason naming what the path
  /// is.
  static func notARegularFile(_ status: stat, at path: String) -> SystemCallFailure {
    let type = status.st_mode & S_IFMT
    let what =
      switch type {
      case S_IFDIR: "a directory"
      case S_IFIFO: "a FIFO (named pipe)"
      case S_IFSOCK: "a socket"
      case S_IFCHR: "a character device"
      case S_IFBLK: "a block device"
      default: "a file of an unknown type"
      }
    return SystemCallFailure(
      step: "looking up the file", path: path, code: type == S_IFDIR ? EISDIR : EINVAL,
      reason: "the path names \(what), not a regular file")
  }

  /// Reads the snapshot at `path`, written by the coder named `formatName`: checks its header,
  /// then reads its payload into one buffer, an array if `payloadAsBytes`, else `Data`, and
  /// checks the payload's checksum.
  ///
  /// Nothing is read from a file larger than `maximumSize`, and nothing but the header from a
  /// file whose header is rejected, so the memory a read takes is the payload's size, once:
  /// the payload is read straight into the buffer its decoder reads, with no other copy.
  ///
  /// A FIFO, a socket, a device or a directory is refused without being opened, and the open
  /// never waits (see ``openRegularFile(at:lookingUp:opening:checking:)``).
  static func readSnapshot(
    at path: String, maximumSize: Int, formatName: String, payloadAsBytes: Bool
  ) throws(SystemCallFailure) -> ReadOutcome {
    let descriptor: Int32
    let status: stat
    switch try openRegularFile(
      at: path, lookingUp: "looking up the file", opening: "opening the file",
      checking: "reading the file's size")
    {
    case .nothing: return .missing
    case .notARegularFile(let found): throw notARegularFile(found, at: path)
    case .opened(let opened, let found): (descriptor, status) = (opened, found)
    }
    defer { close(descriptor) }
    let identity = FileIdentity(status)
    // Blocking reads, as for any file. A failure to clear the flag is ignored, harmlessly:
    // the descriptor names a regular file (checked just above), and reads of a regular file
    // neither wait nor fail with EAGAIN whether O_NONBLOCK is set or not (the exception,
    // mandatory locks, is gone from Linux since 5.15 and never existed on Apple platforms).
    // Even there, `readAll` would report EAGAIN as a failed read, a typed error that changes
    // nothing, never as a short file.
    let flags = fcntl(descriptor, F_GETFL)
    if flags >= 0 { _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK) }
    let size = Int(status.st_size)
    if size > maximumSize { return .tooLarge(size: size, identity) }

    var prefix = [UInt8](repeating: 0, count: headerSize)
    let (prefixCount, prefixFailure) = prefix.withUnsafeMutableBytes { readAll(descriptor, $0) }
    if let prefixFailure {
      throw SystemCallFailure(step: "reading the file", path: path, code: prefixFailure)
    }
    prefix.removeLast(headerSize - prefixCount)
    let version = FileVersion(status, header: prefix)
    let header: Header
    do {
      // A file shorter than its header at the time of the read is as short as what was read.
      header = try verifyHeader(
        prefix, fileSize: prefixCount < headerSize ? prefixCount : size, formatName: formatName)
    } catch {
      return .rejected(error, identity)
    }

    // The header checked the length against the file's size, at most `maximumSize`.
    let length = Int(header.payloadLength)
    var payloadCount = 0
    var payloadFailure: Int32?
    let payload: Payload
    let sum: UInt64
    if payloadAsBytes {
      let bytes = [UInt8](unsafeUninitializedCapacity: length) { buffer, initialized in
        (initialized, payloadFailure) = readAll(descriptor, UnsafeMutableRawBufferPointer(buffer))
      }
      payloadCount = bytes.count
      sum = bytes.withUnsafeBytes { checksum($0) }
      payload = .bytes(bytes)
    } else {
      var data = Data(count: length)
      (payloadCount, payloadFailure) = data.withUnsafeMutableBytes { readAll(descriptor, $0) }
      sum = data.withUnsafeBytes { checksum($0) }
      payload = .data(data)
    }
    if let payloadFailure {
      throw SystemCallFailure(step: "reading the file", path: path, code: payloadFailure)
    }
    // The file shrank since `fstat`.
    guard payloadCount == length else {
      return .rejected(
        .truncated(expected: headerSize + length, found: headerSize + payloadCount), identity)
    }
    guard sum == header.payloadChecksum else { return .rejected(.payloadChecksum, identity) }
    return .snapshot(header, payload, version)
  }

  // MARK: What a save would replace

  /// What ``openRegularFile(at:lookingUp:opening:checking:)`` found.
  enum OpenedFile {
    /// Nothing: the path names no file (or no longer does).
    case nothing
    /// Something else than a regular file, described by its status.
    case notARegularFile(stat)
    /// A regular file, opened read-only, and its status; the caller closes the descriptor.
    case opened(Int32, stat)
  }

  /// Opens the regular file at `path` for reading, without ever waiting on something else:
  /// `stat` looks at the path first, so that a FIFO, a socket, a device or a directory is
  /// not opened (opening a FIFO for reading waits for a writer, and opening a device can act
  /// on it); the open does not wait either (`O_NONBLOCK`), should the path have been replaced
  /// by a FIFO meanwhile, and `fstat` checks what it opened. The three steps name themselves
  /// in an error as `lookingUp`, `opening` and `checking`.
  static func openRegularFile(
    at path: String, lookingUp: String, opening: String, checking: String
  ) throws(SystemCallFailure) -> OpenedFile {
    var status = stat()
    guard retryingInterrupts({ stat(path, &status) }) == 0 else {
      if errno == ENOENT { return .nothing }
      throw SystemCallFailure(step: lookingUp, path: path, code: errno)
    }
    guard status.st_mode & S_IFMT == S_IFREG else { return .notARegularFile(status) }
    let descriptor = retryingInterrupts {
      open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    }
    if descriptor < 0 {
      if errno == ENOENT { return .nothing }
      throw SystemCallFailure(step: opening, path: path, code: errno)
    }
    guard fstat(descriptor, &status) == 0 else {
      let code = errno
      close(descriptor)
      throw SystemCallFailure(step: checking, path: path, code: code)
    }
    guard status.st_mode & S_IFMT == S_IFREG else {
      close(descriptor)
      return .notARegularFile(status)
    }
    return .opened(descriptor, status)
  }

  /// What is at a snapshot's path, as a save finds it just before its rename.
  enum Occupant: Equatable {
    /// Nothing: the path names no file.
    case nothing
    /// Something that holds no snapshot: a directory (which the rename refuses with
    /// `EISDIR`), a FIFO, a socket or a device.
    case notARegularFile
    /// A regular file, in this version.
    case file(FileVersion)
  }

  /// Looks up what is at `path` (following a symbolic link, as a load does), and, for a regular
  /// file, reads its first 48 bytes, opened as ``openRegularFile(at:lookingUp:opening:checking:)``
  /// opens it, without ever waiting.
  static func occupant(of path: String) throws(SystemCallFailure) -> Occupant {
    let descriptor: Int32
    let status: stat
    switch try openRegularFile(
      at: path, lookingUp: "looking up the snapshot to replace",
      opening: "opening the snapshot to replace", checking: "looking up the snapshot to replace")
    {
    case .nothing: return .nothing
    case .notARegularFile: return .notARegularFile
    case .opened(let opened, let found): (descriptor, status) = (opened, found)
    }
    defer { close(descriptor) }
    var header = [UInt8](repeating: 0, count: headerSize)
    let (count, failure) = header.withUnsafeMutableBytes { readAll(descriptor, $0) }
    if let failure {
      throw SystemCallFailure(
        step: "reading the header of the snapshot to replace", path: path, code: failure)
    }
    header.removeLast(headerSize - count)
    return .file(FileVersion(status, header: header))
  }

  // MARK: Helpers

  /// Reads into `buffer` until it is full or the file ends; returns how many bytes were read,
  /// and `errno` if a read failed.
  private static func readAll(
    _ descriptor: Int32, _ buffer: UnsafeMutableRawBufferPointer
  ) -> (count: Int, failure: Int32?) {
    var done = 0
    // The buffer is not empty inside the loop, so it has a base address.
    while done < buffer.count {
      let count = read(descriptor, buffer.baseAddress! + done, buffer.count - done)
      if count < 0 {
        if errno == EINTR { continue }
        return (done, errno)
      }
      if count == 0 { break }  // The file shrank meanwhile.
      done += count
    }
    return (done, nil)
  }
}
