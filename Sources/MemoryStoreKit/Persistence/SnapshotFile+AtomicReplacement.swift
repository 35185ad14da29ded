import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension _SnapshotFile {
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

  // MARK: Helpers

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

}
