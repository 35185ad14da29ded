import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The snapshot file format and the system calls that read and replace it.
///
/// A file is a 48-byte header followed by the payload a ``SnapshotCoder`` wrote. All integers
/// are little-endian:
///
/// | Offset | Size | Field |
/// |---|---|---|
/// | 0 | 8 | magic bytes `MEMSTORE` |
/// | 8 | 4 | format version: 1 or 2 (see below) |
/// | 12 | 8 | the coder's `formatName`, ASCII, zero-padded |
/// | 20 | 8 | entry count |
/// | 28 | 8 | payload length in bytes |
/// | 36 | 8 | payload checksum |
/// | 44 | 4 | header checksum: the low 32 bits of the checksum of bytes 0 to 43 |
///
/// The checksum (``checksum(_:)``) detects accidental damage; it is not cryptographic.
///
/// The format version says what the payload holds:
/// - **1**: the entries' values, the coder's encoding of `[Key: Value]`. A save writes it when
///   no entry has a cost or a deadline, so that such a file stays readable by every version.
/// - **2**: each entry's value with its metadata, the coder's encoding of
///   `[Key: _SnapshotEntry<Value>]`: its cost, if not 0, and its deadlines, as wall-clock
///   times (see ``_SnapshotEntry``).
enum _SnapshotFile {
  static let magic: [UInt8] = Array("MEMSTORE".utf8)
  /// The format version of values only.
  static let valuesVersion: UInt32 = 1
  /// The format version of values with their metadata: the newest.
  static let entriesVersion: UInt32 = 2
  static let headerSize = 48

  /// The header's fields.
  struct Header: Equatable {
    /// ``valuesVersion`` or ``entriesVersion``.
    var version: UInt32 = _SnapshotFile.valuesVersion
    var formatName: String
    var entryCount: UInt64
    var payloadLength: UInt64
    var payloadChecksum: UInt64
  }

  /// A file the header rejects, and why.
  enum Rejection: Error {
    case notASnapshot
    case truncated(expected: Int, found: Int)
    case trailingBytes(expected: Int, found: Int)
    case headerChecksum
    case unsupportedVersion(UInt32)
    case formatMismatch(found: String)
    case implausibleCount(UInt64)
    case payloadChecksum
  }

  /// The coder name as stored: 1 to 8 ASCII bytes.
  static func encodedName(_ name: String) -> [UInt8]? {
    let bytes = Array(name.utf8)
    guard (1...8).contains(bytes.count), bytes.allSatisfy({ $0 > 0 && $0 < 0x80 }) else {
      return nil
    }
    return bytes + [UInt8](repeating: 0, count: 8 - bytes.count)
  }

  /// The 48 header bytes for `header`; `nil` if its format name is not 1 to 8 ASCII bytes.
  static func headerBytes(_ header: Header) -> [UInt8]? {
    guard let name = encodedName(header.formatName) else { return nil }
    var bytes = magic
    bytes.reserveCapacity(headerSize)
    append(header.version, to: &bytes)
    bytes += name
    append(header.entryCount, to: &bytes)
    append(header.payloadLength, to: &bytes)
    append(header.payloadChecksum, to: &bytes)
    let headerSum = bytes.withUnsafeBytes { checksum($0) }
    append(UInt32(truncatingIfNeeded: headerSum), to: &bytes)
    return bytes
  }

  /// Checks the header of a file of `fileSize` bytes for a snapshot written by the coder
  /// named `formatName`: `prefix` holds the file's first `min(fileSize, headerSize)` bytes.
  /// The payload's checksum is left to the caller, which reads the payload only if the header
  /// passes.
  static func verifyHeader(
    _ prefix: [UInt8], fileSize: Int, formatName: String
  ) throws(Rejection) -> Header {
    // An empty file is what a torn non-atomic write typically leaves: truncated.
    let count = min(prefix.count, magic.count)
    guard prefix[..<count].elementsEqual(magic[..<count]) else { throw .notASnapshot }
    guard prefix.count >= headerSize, fileSize >= headerSize else {
      throw .truncated(expected: headerSize, found: min(prefix.count, fileSize))
    }
    let (headerSumMatches, version, header) = prefix.withUnsafeBytes { file in
      let headerSum = checksum(UnsafeRawBufferPointer(rebasing: file[0..<44]))
      return (
        load(UInt32.self, file, at: 44) == UInt32(truncatingIfNeeded: headerSum),
        load(UInt32.self, file, at: 8),
        Header(
          version: load(UInt32.self, file, at: 8),
          formatName: String(decoding: file[12..<20].prefix { $0 != 0 }, as: UTF8.self),
          entryCount: load(UInt64.self, file, at: 20),
          payloadLength: load(UInt64.self, file, at: 28),
          payloadChecksum: load(UInt64.self, file, at: 36))
      )
    }
    guard headerSumMatches else { throw .headerChecksum }
    guard version == valuesVersion || version == entriesVersion else {
      throw .unsupportedVersion(version)
    }
    guard header.formatName == formatName else { throw .formatMismatch(found: header.formatName) }
    let available = UInt64(fileSize - headerSize)
    guard header.payloadLength <= available else {
      throw .truncated(
        expected: headerSize
          + Int(clamping: min(header.payloadLength, UInt64(Int.max - headerSize))),
        found: fileSize)
    }
    guard header.payloadLength == available else {
      throw .trailingBytes(expected: headerSize + Int(header.payloadLength), found: fileSize)
    }
    // Every entry takes at least one byte in any format.
    guard header.entryCount <= max(header.payloadLength, 1) else {
      throw .implausibleCount(header.entryCount)
    }
    return header
  }

  /// Checks the header and payload of a whole file held in memory, as
  /// ``readSnapshot(at:maximumSize:formatName:payloadAsBytes:)`` checks a file it reads, and
  /// returns the header and the payload's range.
  static func verify(
    _ file: [UInt8], formatName: String
  ) throws(Rejection) -> (Header, Range<Int>) {
    let header = try verifyHeader(
      Array(file.prefix(headerSize)), fileSize: file.count, formatName: formatName)
    let payload = headerSize..<file.count
    let sum = file.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[payload])) }
    guard sum == header.payloadChecksum else { throw .payloadChecksum }
    return (header, payload)
  }

  // MARK: Checksum

  /// A 64-bit checksum of `bytes`, eight bytes at a time: each word is mixed in by an
  /// invertible step (xor, multiply by an odd constant, xor-shift), so changing any one word
  /// always changes the result, and the length is part of the seed.
  static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(bytes.count)
    var offset = 0
    let whole = bytes.count & ~7
    while offset < whole {
      let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
      hash = (hash ^ word) &* multiplier
      hash ^= hash >> 29
      offset &+= 8
    }
    if offset < bytes.count {
      var word: UInt64 = 0
      for index in offset..<bytes.count {
        word |= UInt64(bytes[index]) << (UInt64(index - offset) * 8)
      }
      hash = (hash ^ word) &* multiplier
      hash ^= hash >> 29
    }
    // Final avalanche (MurmurHash3's fmix64).
    hash ^= hash >> 33
    hash &*= 0xFF51_AFD7_ED55_8CCD
    hash ^= hash >> 33
    hash &*= 0xC4CE_B9FE_1A85_EC53
    hash ^= hash >> 33
    return hash
  }

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

  /// A failed system call: which step, and `errno`.
  struct SystemCallFailure: Error {
    var step: String
    var path: String
    var code: Int32
    /// Whether the failure came after the new file had replaced the old one (flushing the
    /// directory): the new snapshot is then in place, but a power loss could undo the rename.
    var isAfterRename = false
    /// What went wrong, in words, when it is not the system call's error: the path names
    /// something else than a regular file.
    var reason: String?
  }

  /// Throws unless `status` describes a regular file: `EISDIR` for a directory, `EINVAL` for
  /// anything else, with a reason naming what the path is.
  static func requireRegularFile(
    _ status: stat, at path: String
  ) throws(SystemCallFailure) {
    let type = status.st_mode & S_IFMT
    if type == S_IFREG { return }
    let what =
      switch type {
      case S_IFDIR: "a directory"
      case S_IFIFO: "a FIFO (named pipe)"
      case S_IFSOCK: "a socket"
      case S_IFCHR: "a character device"
      case S_IFBLK: "a block device"
      default: "a file of an unknown type"
      }
    throw SystemCallFailure(
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
  /// A FIFO, a socket, a device or a directory is refused without being opened (opening a
  /// FIFO for reading waits for a writer, and opening a device can act on it): `stat` looks at
  /// the path first. The open itself does not wait either (`O_NONBLOCK`), should the path have
  /// been replaced by a FIFO meanwhile, and `fstat` checks what it opened.
  static func readSnapshot(
    at path: String, maximumSize: Int, formatName: String, payloadAsBytes: Bool
  ) throws(SystemCallFailure) -> ReadOutcome {
    var status = stat()
    guard retryingInterrupts({ stat(path, &status) }) == 0 else {
      if errno == ENOENT { return .missing }
      throw SystemCallFailure(step: "looking up the file", path: path, code: errno)
    }
    try requireRegularFile(status, at: path)
    let descriptor = retryingInterrupts {
      open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    }
    if descriptor < 0 {
      if errno == ENOENT { return .missing }
      throw SystemCallFailure(step: "opening the file", path: path, code: errno)
    }
    defer { close(descriptor) }
    guard fstat(descriptor, &status) == 0 else {
      throw SystemCallFailure(step: "reading the file's size", path: path, code: errno)
    }
    try requireRegularFile(status, at: path)
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

  /// Looks up what is at `path`: `stat` (following a symbolic link, as a load does), then, for
  /// a regular file, its first 48 bytes, read through a descriptor opened without waiting
  /// (`O_NONBLOCK`), should the path be replaced by a FIFO meanwhile.
  static func occupant(of path: String) throws(SystemCallFailure) -> Occupant {
    var status = stat()
    guard retryingInterrupts({ stat(path, &status) }) == 0 else {
      if errno == ENOENT { return .nothing }
      throw SystemCallFailure(step: "looking up the snapshot to replace", path: path, code: errno)
    }
    guard status.st_mode & S_IFMT == S_IFREG else { return .notARegularFile }
    let descriptor = retryingInterrupts {
      open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
    }
    if descriptor < 0 {
      if errno == ENOENT { return .nothing }
      throw SystemCallFailure(step: "opening the snapshot to replace", path: path, code: errno)
    }
    defer { close(descriptor) }
    guard fstat(descriptor, &status) == 0 else {
      throw SystemCallFailure(step: "looking up the snapshot to replace", path: path, code: errno)
    }
    guard status.st_mode & S_IFMT == S_IFREG else { return .notARegularFile }
    var header = [UInt8](repeating: 0, count: headerSize)
    let (count, failure) = header.withUnsafeMutableBytes { readAll(descriptor, $0) }
    if let failure {
      throw SystemCallFailure(
        step: "reading the header of the snapshot to replace", path: path, code: failure)
    }
    header.removeLast(headerSize - count)
    return .file(FileVersion(status, header: header))
  }

  // MARK: Atomic replacement

  /// The prefix of the temporary files of saves of `fileName`, in the same directory.
  static func temporaryPrefix(for fileName: String) -> String {
    "." + fileName + ".tmp-"
  }

  /// The name of the lock file of saves of `fileName`, in the same directory:
  /// `.<name>.lock`.
  static func lockFileName(for fileName: String) -> String {
    "." + fileName + ".lock"
  }

  /// The directory of `path` ("." for a bare name) and its last component.
  static func split(_ path: String) -> (directory: String, fileName: String) {
    let directory = (path as NSString).deletingLastPathComponent
    return (directory.isEmpty ? "." : directory, (path as NSString).lastPathComponent)
  }

  /// Opens (creating it, empty, mode 0600, if needed) the lock file of saves of `fileName`
  /// in `directory` and takes an exclusive `flock` on it: waiting for the holder if `wait`,
  /// returning `nil` at once if another holder has it and not `wait`.
  ///
  /// Saves hold the lock from the creation of their temporary file until the directory is
  /// flushed after the rename; the clean-up of stale temporary files removes them only while
  /// holding it. A `flock` belongs to an open file description, so two managers of the same
  /// file exclude each other whether they are in one process or in two, and the lock is
  /// released when the descriptor is closed, or by the kernel when the process dies: a crash
  /// never leaves it held. The lock file itself is never removed (removing it would let two
  /// savers lock two different files).
  ///
  /// - Returns: The locked descriptor, which the caller closes to release the lock.
  static func lockSaves(
    of fileName: String, in directory: String, wait: Bool
  ) throws(SystemCallFailure) -> Int32? {
    let path = directory + "/" + lockFileName(for: fileName)
    let descriptor = retryingInterrupts { open(path, lockFileOpenFlags, 0o600) }
    guard descriptor >= 0 else {
      throw SystemCallFailure(step: "opening the lock file", path: path, code: errno)
    }
    let operation = wait ? LOCK_EX : LOCK_EX | LOCK_NB
    if retryingInterrupts({ flock(descriptor, operation) }) == 0 { return descriptor }
    let code = errno
    close(descriptor)
    if !wait && code == EWOULDBLOCK { return nil }
    throw SystemCallFailure(step: "locking the lock file", path: path, code: code)
  }

  /// Replaces the file at `path` with `header` followed by `payload`, atomically: writes a
  /// temporary file (mode 0600) in the same directory, `fsync`s it, renames it over `path`
  /// and `fsync`s the directory. A crash at any instant leaves either the old or the new file.
  ///
  /// `commit` receives the rename, once the temporary file is on disk: it performs it (which
  /// returns the version of the new file at `path`, or `nil` if the rename failed) and returns
  /// `true`, or vetoes it by returning `false` without performing it: the temporary file is
  /// then removed, nothing is replaced, and this returns `false`. It runs under the lock, so
  /// what it finds at `path` stays there until its rename, as far as saves that take the lock
  /// are concerned.
  ///
  /// The whole replacement holds the lock of ``lockSaves(of:in:wait:)``, waiting for it if
  /// another save of the same file (in this process or another) holds it. If
  /// `removingStaleTemporaryFiles` is `true`, the temporary files of earlier saves are removed
  /// once the lock is taken (no live save can own one then), and it is set to `false`.
  ///
  /// On failure the temporary file is removed and the file at `path` is untouched.
  static func replace(
    at path: String, header: [UInt8], payload: Data,
    removingStaleTemporaryFiles: inout Bool, commit: (() -> FileVersion?) -> Bool
  ) throws(SystemCallFailure) -> Bool {
    let (directory, fileName) = split(path)
    // Taken before the temporary file exists and released after everything else: the
    // deferred close runs last.
    guard let lock = try lockSaves(of: fileName, in: directory, wait: true) else { return false }
    defer { close(lock) }
    if removingStaleTemporaryFiles {
      removeTemporaryFilesWhileLocked(of: fileName, in: directory)
      removingStaleTemporaryFiles = false
    }
    let (descriptor, temporary) = try createTemporaryFile(for: fileName, in: directory)
    var isOpen = true
    var isRenamed = false
    defer {
      if isOpen { close(descriptor) }
      if !isRenamed { unlink(temporary) }
    }
    let headerFailure = header.withUnsafeBytes { writeAll(descriptor, $0) }
    if let code = headerFailure {
      throw SystemCallFailure(step: "writing the temporary file", path: temporary, code: code)
    }
    let payloadFailure = payload.withUnsafeBytes { writeAll(descriptor, $0) }
    if let code = payloadFailure {
      throw SystemCallFailure(step: "writing the temporary file", path: temporary, code: code)
    }
    guard synchronize(descriptor) else {
      throw SystemCallFailure(
        step: "flushing the temporary file to disk", path: temporary, code: errno)
    }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else {
      throw SystemCallFailure(
        step: "looking up the temporary file", path: temporary, code: errno)
    }
    isOpen = false
    guard close(descriptor) == 0 else {
      throw SystemCallFailure(step: "closing the temporary file", path: temporary, code: errno)
    }
    var renameFailure: SystemCallFailure?
    let committed = commit {
      guard rename(temporary, path) == 0 else {
        renameFailure = SystemCallFailure(
          step: "renaming the temporary file over the snapshot", path: temporary, code: errno)
        return nil
      }
      isRenamed = true
      // The file as it is now at the path, if it is still this one (a rename changes no
      // byte nor the modification time, but a network file system may refresh them); else as
      // it was written.
      var renamed = stat()
      if stat(path, &renamed) == 0,
        FileIdentity(renamed) == FileIdentity(status)
      {
        status = renamed
      }
      return FileVersion(status, header: Array(header.prefix(headerSize)))
    }
    if let renameFailure { throw renameFailure }
    guard committed else { return false }
    // Make the rename itself durable.
    let directoryDescriptor = retryingInterrupts { open(directory, O_RDONLY | O_CLOEXEC) }
    guard directoryDescriptor >= 0 else {
      throw SystemCallFailure(
        step: "opening the directory", path: directory, code: errno, isAfterRename: true)
    }
    defer { close(directoryDescriptor) }
    guard fsync(directoryDescriptor) == 0 || errno == EINVAL else {
      throw SystemCallFailure(
        step: "flushing the directory to disk", path: directory, code: errno, isAfterRename: true)
    }
    return true
  }

  /// Creates a temporary file for a save of `fileName` in `directory`, under a new name
  /// starting with ``temporaryPrefix(for:)`` and ending with six random letters and digits,
  /// mode 0600, open for reading and writing.
  ///
  /// The descriptor is close-on-exec from the start: a program that another thread starts with
  /// fork and exec never inherits it, not even for the moment between `mkstemp` and an `fcntl`
  /// that would set the flag afterwards. This is `mkostemp(template, O_CLOEXEC)` written out
  /// (`open` with `O_CREAT | O_EXCL | O_CLOEXEC`, a new name on `EEXIST`), as Glibc's module
  /// does not declare that GNU extension to Swift.
  ///
  /// - Returns: Its descriptor, which the caller closes, and its path.
  static func createTemporaryFile(
    for fileName: String, in directory: String
  ) throws(SystemCallFailure) -> (descriptor: Int32, path: String) {
    let base = directory + "/" + temporaryPrefix(for: fileName)
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
    var generator = SystemRandomNumberGenerator()
    var path = base
    var code: Int32 = 0
    // 62^6 names: a collision is rare, a hundred in a row means something else is wrong.
    for _ in 0..<100 {
      // The alphabet is not empty, so `randomElement` returns an element.
      let suffix = (0..<6).map { _ in alphabet.randomElement(using: &generator)! }
      path = base + String(decoding: suffix, as: UTF8.self)
      let descriptor = retryingInterrupts { open(path, temporaryFileOpenFlags, 0o600) }
      if descriptor >= 0 { return (descriptor, path) }
      // Read at once: what runs next (making the next name allocates) may change `errno`.
      code = errno
      if code != EEXIST { break }
    }
    throw SystemCallFailure(step: "creating the temporary file", path: path, code: code)
  }

  /// The flags ``createTemporaryFile(for:in:)`` opens a temporary file with: a new file, for
  /// reading and writing, close-on-exec.
  static let temporaryFileOpenFlags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC

  /// The flags ``lockSaves(of:in:wait:)`` opens the lock file with: created if needed, for
  /// reading and writing, close-on-exec.
  static let lockFileOpenFlags = O_RDWR | O_CREAT | O_CLOEXEC

  /// Removes the temporary files that saves of `fileName` left in `directory` when their
  /// process died mid-save, if no save of the file is in progress (in any process); returns
  /// how many, or `nil` if it removed nothing because a save holds the lock of
  /// ``lockSaves(of:in:wait:)`` or the lock file cannot be opened (a directory this process
  /// cannot write, where it could remove nothing anyway).
  @discardableResult
  static func removeStaleTemporaryFiles(of fileName: String, in directory: String) -> Int? {
    guard let lock = try? lockSaves(of: fileName, in: directory, wait: false) else { return nil }
    defer { close(lock) }
    return removeTemporaryFilesWhileLocked(of: fileName, in: directory)
  }

  /// Removes every temporary file of saves of `fileName` in `directory`; the caller holds the
  /// lock of ``lockSaves(of:in:wait:)``, so none belongs to a save in progress.
  @discardableResult
  static func removeTemporaryFilesWhileLocked(of fileName: String, in directory: String) -> Int {
    let prefix = temporaryPrefix(for: fileName)
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else {
      return 0
    }
    var removed = 0
    for name in names where name.hasPrefix(prefix) && name.utf8.count == prefix.utf8.count + 6 {
      if unlink(directory + "/" + name) == 0 { removed += 1 }
    }
    return removed
  }

  // MARK: Moving a rejected file aside

  /// What ``moveAside(_:identity:to:)`` did.
  enum MoveAsideOutcome: Equatable {
    /// The file was moved to this path.
    case moved(to: String)
    /// The file that was read is no longer at the path: another file replaced it, or it was
    /// removed. Nothing was moved.
    case replaced
    /// The file could not be moved: the lock of saves or a system call failed.
    case failed
  }

  /// Moves the file at `path` to `base`, or to `base-2`, `base-3`, … if that name is taken,
  /// provided it is still the file of `identity` (which a load read and rejected); never
  /// replaces a file at the new name.
  ///
  /// The move holds the lock of ``lockSaves(of:in:wait:)``, waiting for a save in progress:
  /// no save can rename a new snapshot over `path` between the comparison of identities and
  /// the move, and no other move aside can take the same new name. The file is linked under
  /// the new name, which fails if that name exists, then unlinked from `path`; on a file
  /// system without hard links, it is renamed to a name that did not exist a moment before
  /// (under the lock, only a program that does not take it can create that name meanwhile).
  static func moveAside(
    _ path: String, identity: FileIdentity, to base: String
  ) -> MoveAsideOutcome {
    let (directory, fileName) = split(path)
    // Without the lock file, saves fail as well, so none can overwrite the file left in place.
    guard let lock = try? lockSaves(of: fileName, in: directory, wait: true) else {
      return .failed
    }
    defer { close(lock) }
    var status = stat()
    guard retryingInterrupts({ stat(path, &status) }) == 0 else {
      return errno == ENOENT ? .replaced : .failed
    }
    guard FileIdentity(status) == identity else { return .replaced }
    for attempt in 1...100 {
      let target = attempt == 1 ? base : base + "-\(attempt)"
      switch moveWithoutReplacing(path, to: target) {
      case 0: return .moved(to: target)
      case EEXIST: continue
      default: return .failed
      }
    }
    return .failed
  }

  /// Gives the file at `path` the name `target` instead, unless `target` exists; returns 0, or
  /// `errno` (`EEXIST` if `target` exists).
  private static func moveWithoutReplacing(_ path: String, to target: String) -> Int32 {
    // Flags 0: a symbolic link at `path` is linked itself, as `rename` would move it.
    if linkat(AT_FDCWD, path, AT_FDCWD, target, 0) == 0 {
      if unlink(path) == 0 { return 0 }
      let code = errno
      unlink(target)
      return code
    }
    let code = errno
    if code == EEXIST { return code }
    // No hard links here (or `link` refused for another reason, which `rename` reports).
    var status = stat()
    if lstat(target, &status) == 0 { return EEXIST }
    return rename(path, target) == 0 ? 0 : errno
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

  private static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
    var offset = 0
    while offset < bytes.count {
      let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
      if count < 0 {
        if errno == EINTR { continue }
        return errno
      }
      offset += count
    }
    return nil
  }

  /// Flushes the file's data to the storage device (`F_FULLFSYNC` where it exists).
  private static func synchronize(_ descriptor: Int32) -> Bool {
    #if canImport(Darwin)
      if fcntl(descriptor, F_FULLFSYNC) == 0 { return true }
    #endif
    while true {
      if fsync(descriptor) == 0 { return true }
      if errno != EINTR { return false }
    }
  }

  private static func retryingInterrupts(_ call: () -> Int32) -> Int32 {
    while true {
      let result = call()
      if result >= 0 || errno != EINTR { return result }
    }
  }

  private static func append<I: FixedWidthInteger>(_ value: I, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
  }

  private static func load<I: FixedWidthInteger>(
    _ type: I.Type, _ bytes: UnsafeRawBufferPointer, at offset: Int
  ) -> I {
    I(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: I.self))
  }
}
