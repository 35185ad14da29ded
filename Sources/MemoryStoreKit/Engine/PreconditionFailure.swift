/// Stops the program because the caller broke a documented requirement, printing `message`
/// in every build configuration.
///
/// `precondition(_:_:)` prints its message only when the code that contains the check is
/// compiled without optimization: in a release build of the library (or of an application
/// into which the check is inlined), the program stops with a bare "precondition failure".
/// Every check of a caller's mistake is therefore written inline as
/// `if !condition { _preconditionFailure("…") }`, and the failure goes through this function:
/// never inlined, so its message is kept whatever the client's optimization, and returning
/// `Never`, so the optimizer treats its branch as cold. `fatalError` prints the message in
/// debug and release builds alike (not with `-Ounchecked`, which removes every check).
@usableFromInline @inline(never)
func _preconditionFailure(
  _ message: String, file: StaticString = #fileID, line: UInt = #line
) -> Never {
  fatalError(message, file: file, line: line)
}
