import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why a ``PersistenceManager`` could not save or load, with the file, the key where there is
/// one, and the underlying error.
///
/// ```swift
/// do {
///   try persistence.save()
/// } catch let error as PersistenceError where error.kind == .writeFailed {
///   print(error)   // Saving /…/quotes.snapshot failed: no space left on device (ENOSPC) …
/// }
/// ```
///
/// Whatever the error, the store in memory is unchanged, the previous snapshot on disk is
/// byte-identical, and a file that ``PersistenceManager/load()`` rejects is kept, moved aside
/// to ``movedTo``. One exception, which the description states: when only the final flush of
/// the directory fails, the new snapshot has already replaced the previous one, complete, but
/// a power loss could still undo the replacement.
public struct PersistenceError: Error, CustomStringConvertible {
  /// The kind of failure.
  public struct Kind: Hashable, Sendable, CustomStringConvertible {
    let name: String

    /// The file is larger than ``PersistenceManager/maximumFileSize``; it was not read.
    public static let fileTooLarge = Kind(name: "fileTooLarge")
    /// The file does not start with the snapshot magic bytes: it is not a snapshot.
    public static let notASnapshot = Kind(name: "notASnapshot")
    /// The file ends before the length its header declares.
    public static let truncated = Kind(name: "truncated")
    /// The header's checksum, the payload's checksum, its length or its entry count does not
    /// match: the file was damaged.
    public static let corrupted = Kind(name: "corrupted")
    /// The file was written by a newer or unknown version of the format.
    public static let unsupportedVersion = Kind(name: "unsupportedVersion")
    /// The file was written by another ``SnapshotCoder`` than the manager's.
    public static let formatMismatch = Kind(name: "formatMismatch")
    /// The payload is intact but does not decode as entries of the store's types.
    public static let decodingFailed = Kind(name: "decodingFailed")
    /// A value (or key) failed to encode; ``key`` names it. Nothing was written.
    public static let encodingFailed = Kind(name: "encodingFailed")
    /// Reading the file failed (see ``code``).
    public static let readFailed = Kind(name: "readFailed")
    /// Writing the snapshot failed (see ``code``: disk full, read-only file system,
    /// permission denied, path is a directory, …).
    public static let writeFailed = Kind(name: "writeFailed")
    /// The snapshot's directory does not exist and could not be created, cannot be reached
    /// (a directory on its path cannot be searched: ``code`` is `EACCES`), or is not a
    /// directory; the description says which.
    public static let directoryUnavailable = Kind(name: "directoryUnavailable")
    /// The save would replace a snapshot that another writer wrote: another manager or
    /// process replaced the file since this manager last loaded or saved it, or a file that
    /// this manager never loaded nor wrote is at the path (another writer's, or one left by an
    /// earlier run). Replacing it would lose that writer's entries, so nothing was written:
    /// the file and the store are unchanged.
    ///
    /// A snapshot file belongs to one writer. Call ``PersistenceManager/load()`` to merge the
    /// file into the store, then save again; or set ``PersistenceManager/conflictPolicy`` to
    /// ``PersistenceManager/ConflictPolicy/overwrite`` where this manager is meant to replace
    /// whatever is there. To share state between processes, use the companion package
    /// `MemoryStorePostgres` instead of one file.
    public static let conflict = Kind(name: "conflict")

    public var description: String { name }
  }

  /// The kind of failure.
  public let kind: Kind
  /// The snapshot file.
  public let fileURL: URL
  /// The key involved, as `String(reflecting:)` prints it, where there is one.
  public let key: String?
  /// The system error, for failures of a system call: `ENOSPC`, `EROFS`, `EACCES`, `EISDIR`,
  /// `ENOENT`, `EIO`, …
  public let code: POSIXErrorCode?
  /// The error that caused this one: a `DecodingError` or `EncodingError` from the coder, a
  /// `POSIXError`, or `nil`.
  public let underlyingError: (any Error)?
  /// Where a file that `load()` rejected was moved; `nil` if it was not moved.
  public let movedTo: URL?
  /// What exactly went wrong, in words.
  public let detail: String

  init(
    _ kind: Kind, fileURL: URL, detail: String, key: String? = nil, code: POSIXErrorCode? = nil,
    underlyingError: (any Error)? = nil, movedTo: URL? = nil
  ) {
    self.kind = kind
    self.fileURL = fileURL
    self.detail = detail
    self.key = key
    self.code = code
    self.underlyingError = underlyingError ?? code.map { POSIXError($0) }
    self.movedTo = movedTo
  }

  /// The same error, noting where the rejected file was moved.
  func moved(to url: URL?) -> PersistenceError {
    PersistenceError(
      kind, fileURL: fileURL, detail: detail, key: key, code: code,
      underlyingError: underlyingError, movedTo: url)
  }

  /// The same error, with `text` added at the end of its detail.
  func appendingToDetail(_ text: String) -> PersistenceError {
    PersistenceError(
      kind, fileURL: fileURL, detail: detail + text, key: key, code: code,
      underlyingError: underlyingError, movedTo: movedTo)
  }

  public var description: String {
    var text = "\(detail) [\(kind)] (file: \(fileURL.path)"
    if let key { text += ", key: \(key)" }
    text += ")"
    if let movedTo { text += "; the file was kept, moved aside to \(movedTo.path)" }
    if let underlyingError, code == nil { text += "; underlying error: \(underlyingError)" }
    return text
  }

  /// The error for a snapshot directory that `FileManager` failed to create with `error`:
  /// what is true of the directory, found by looking it up again.
  static func directoryUnavailable(
    _ directory: String, fileURL: URL, underlyingError error: any Error
  ) -> PersistenceError {
    let prefix = "The snapshot directory \(directory)"
    var status = stat()
    let detail: String
    let code: Int32?
    if stat(directory, &status) == 0 {
      if (status.st_mode & S_IFMT) == S_IFDIR {
        (detail, code) = (prefix + " exists but cannot be used", nil)
      } else {
        (detail, code) = (prefix + " exists but is not a directory", ENOTDIR)
      }
    } else {
      let failure = errno
      switch failure {
      case ENOENT:
        let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
        let reason = underlying.flatMap { $0.domain == NSPOSIXErrorDomain ? Int32($0.code) : nil }
        (detail, code) = (
          prefix + " does not exist and cannot be created"
            + (reason.map { ": " + describe($0) } ?? ""),
          reason
        )
      case EACCES:
        (detail, code) = (
          prefix + " cannot be reached because a directory on its path cannot be searched: "
            + describe(failure) + "; whether it exists is unknown", failure
        )
      case ENOTDIR:
        (detail, code) = (
          prefix + " cannot be created because a component of its path is a file: "
            + describe(failure), failure
        )
      default:
        (detail, code) = (prefix + " cannot be looked up: " + describe(failure), failure)
      }
    }
    return PersistenceError(
      .directoryUnavailable, fileURL: fileURL, detail: detail,
      code: code.flatMap { POSIXErrorCode(rawValue: $0) }, underlyingError: error)
  }

  /// `code` as its symbolic name and its message: "no space left on device (ENOSPC)".
  static func describe(_ code: Int32) -> String {
    let names: [Int32: String] = [
      ENOSPC: "ENOSPC", EROFS: "EROFS", EACCES: "EACCES", EPERM: "EPERM", EISDIR: "EISDIR",
      ENOENT: "ENOENT", ENOTDIR: "ENOTDIR", EIO: "EIO", EDQUOT: "EDQUOT", EEXIST: "EEXIST",
      EMFILE: "EMFILE", ENAMETOOLONG: "ENAMETOOLONG", EINVAL: "EINVAL", EFBIG: "EFBIG",
    ]
    let message = strerror(code).map { String(cString: $0) } ?? "unknown error"
    return "\(message.lowercased()) (\(names[code] ?? "errno \(code)"))"
  }
}
