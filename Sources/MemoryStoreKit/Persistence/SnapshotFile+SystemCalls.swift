import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension _SnapshotFile {
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

  static func retryingInterrupts(_ call: () -> Int32) -> Int32 {
    while true {
      let result = call()
      if result >= 0 || errno != EINTR { return result }
    }
  }
}
