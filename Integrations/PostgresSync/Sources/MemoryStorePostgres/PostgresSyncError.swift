/// Why the PostgreSQL sync could not do something, with what it was doing and the error that
/// caused it.
///
/// ```swift
/// do {
///   let quote = try await sync.value(forKey: "AAPL")
/// } catch let error as PostgresSyncError where error.kind == .databaseUnavailable {
///   // the database is down: the store still serves what it holds
/// }
/// ```
public struct PostgresSyncError: Error, CustomStringConvertible, Sendable {
  /// The kind of failure.
  public struct Kind: Hashable, Sendable, CustomStringConvertible {
    let name: String

    /// The database could not be reached, or did not answer in time.
    public static let databaseUnavailable = Kind(name: "databaseUnavailable")
    /// The database refused a statement (see ``PostgresSyncError/underlyingError``).
    public static let statementFailed = Kind(name: "statementFailed")
    /// A value failed to encode with the configured coder; it stays in the store here, and the
    /// other instances drop the key.
    public static let encodingFailed = Kind(name: "encodingFailed")
    /// A value's encoding is larger than ``PostgresSync/Configuration/maximumValueBytes``; it
    /// stays in the store here, and the other instances drop the key.
    public static let valueTooLarge = Kind(name: "valueTooLarge")
    /// A row of the shared table failed to decode; it was treated as absent.
    public static let decodingFailed = Kind(name: "decodingFailed")
    /// The configuration is invalid: a channel or table name that is not a plain identifier.
    public static let invalidConfiguration = Kind(name: "invalidConfiguration")
    /// The sync is not running, or has stopped.
    public static let notRunning = Kind(name: "notRunning")

    public var description: String { name }
  }

  /// The kind of failure.
  public let kind: Kind
  /// What failed, in words: the step, the channel or table, the key where there is one.
  public let detail: String
  /// The key involved, as `String(reflecting:)` prints it, where there is one.
  public let key: String?
  /// The error that caused this one, if any.
  public let underlyingError: (any Error)?

  init(_ kind: Kind, _ detail: String, key: String? = nil, underlying: (any Error)? = nil) {
    self.kind = kind
    self.detail = detail
    self.key = key
    self.underlyingError = underlying
  }

  public var description: String {
    var text = "\(detail) (\(kind))"
    if let underlyingError { text += ": \(String(reflecting: underlyingError))" }
    return text
  }
}
