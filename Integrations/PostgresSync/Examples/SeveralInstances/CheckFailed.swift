/// Something the example checks did not hold: it exits with a failure.
struct CheckFailed: Error, CustomStringConvertible {
  /// What was expected, and what happened instead.
  let description: String

  init(_ description: String) {
    self.description = description
  }
}

/// Throws ``CheckFailed`` with `message` unless `condition` holds.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(CheckFailed) {
  if !condition { throw CheckFailed(message()) }
}
