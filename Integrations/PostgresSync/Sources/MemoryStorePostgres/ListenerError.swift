/// An error of ``NotificationListener``: a channel name it refuses, or why its connection was lost.
///
/// Compare ``code`` to tell the kinds apart; ``description`` names the channel, the backend
/// and the underlying error.
///
/// ```swift
/// do {
///   _ = try NotificationListener(channel: "Store-Changes", configuration: configuration)
/// } catch {
///   assert(error.code == .invalidChannelName)
/// }
/// ```
package struct ListenerError: Error, CustomStringConvertible {
  /// The kind of a ``ListenerError``.
  package struct Code: Hashable, Sendable, CustomStringConvertible {
    private enum Base: Hashable, Sendable {
      case invalidChannelName
      case connectionClosed
      case keepAliveFailed
      case keepAliveTimedOut
      case listenTimedOut
    }

    private let base: Base

    private init(_ base: Base) {
      self.base = base
    }

    /// The channel name is not of the form `[a-z_][a-z0-9_]{0,62}`.
    ///
    /// `LISTEN` takes an identifier, not a bind parameter, so the name is spliced into SQL; only
    /// names that need no quoting and keep their case are accepted.
    package static let invalidChannelName = Code(.invalidChannelName)

    /// The connection was closed: the server ended the backend (`pg_terminate_backend`, a
    /// shutdown or a crash) or the network dropped it.
    package static let connectionClosed = Code(.connectionClosed)

    /// The keep-alive query failed; ``ListenerError/underlying`` holds its error.
    package static let keepAliveFailed = Code(.keepAliveFailed)

    /// The keep-alive query had no answer within the configured timeout: the server or the path
    /// to it is stuck, and the listener closed the connection.
    package static let keepAliveTimedOut = Code(.keepAliveTimedOut)
    /// `LISTEN` (or the query that follows it) had no answer within the keep-alive timeout on
    /// a fresh connection, and the listener closed the connection to try again.
    package static let listenTimedOut = Code(.listenTimedOut)

    /// The code's name, as in `"connectionClosed"`.
    package var description: String {
      switch base {
      case .invalidChannelName: "invalidChannelName"
      case .connectionClosed: "connectionClosed"
      case .keepAliveFailed: "keepAliveFailed"
      case .keepAliveTimedOut: "keepAliveTimedOut"
      case .listenTimedOut: "listenTimedOut"
      }
    }
  }

  /// The kind of error.
  package var code: Code

  /// The channel the listener listens on (or, for ``Code/invalidChannelName``, the name refused).
  package var channel: String

  /// The server process of the lost connection, when it had reached `LISTEN`.
  package var backendPID: Int32?

  /// The error that caused this one, if any (for example the keep-alive query's `PSQLError`).
  package var underlying: (any Error)?

  /// Creates an error.
  ///
  /// - Parameters:
  ///   - code: The kind of error.
  ///   - channel: The channel concerned.
  ///   - backendPID: The server process of the connection, when known.
  ///   - underlying: The error that caused this one, if any.
  package init(
    code: Code,
    channel: String,
    backendPID: Int32? = nil,
    underlying: (any Error)? = nil
  ) {
    self.code = code
    self.channel = channel
    self.backendPID = backendPID
    self.underlying = underlying
  }

  /// A sentence naming the channel, the backend and the underlying error.
  package var description: String {
    var text: String
    let backend = backendPID.map { " (backend \($0))" } ?? ""
    switch code {
    case .invalidChannelName:
      text =
        "invalid channel name \"\(channel)\": expected 1 to 63 characters from [a-z0-9_], "
        + "not starting with a digit"
    case .connectionClosed:
      text = "the connection listening on channel \"\(channel)\"\(backend) was closed"
    case .keepAliveFailed:
      text = "the keep-alive query of the connection listening on \"\(channel)\"\(backend) failed"
    case .listenTimedOut:
      text =
        "LISTEN on channel \"\(channel)\" had no answer in time on a new connection; "
        + "the connection was closed"
    default:
      text =
        "the keep-alive query of the connection listening on \"\(channel)\"\(backend) "
        + "had no answer in time; the connection was closed"
    }
    if let underlying {
      // PSQLError's description is a deliberately vague "Database error"; its reflection names
      // the server's message and SQLSTATE.
      text += ": \(String(reflecting: underlying))"
    }
    return text
  }
}
