import Foundation

/// Writes `line` to stdout at once, even when stdout is a pipe (where `print` would buffer it):
/// a person watching, or a test reading the answers of `--instance`, sees it when it happens.
func say(_ line: String = "") {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Writes `line` to stderr.
func complain(_ line: String) {
  FileHandle.standardError.write(Data((line + "\n").utf8))
}

extension Duration {
  /// The duration for a person: `0.8 ms`, `12.3 ms`, `1.52 s`.
  var readable: String {
    let (seconds, attoseconds) = components
    let milliseconds = Double(seconds) * 1e3 + Double(attoseconds) / 1e15
    if milliseconds < 1_000 {
      return String(format: "%.1f ms", milliseconds)
    }
    return String(format: "%.2f s", milliseconds / 1e3)
  }
}
