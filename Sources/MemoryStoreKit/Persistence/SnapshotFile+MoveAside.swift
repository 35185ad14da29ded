import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension _SnapshotFile {
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
}
