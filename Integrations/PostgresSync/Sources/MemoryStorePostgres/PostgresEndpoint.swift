import Foundation
import NIOSSL
import PostgresNIO

/// Where the database is and how to sign in: what a ``PostgresSync`` opens its connections
/// with (a pool for writes and reads, and one connection that listens to the channel).
///
/// ```swift
/// let endpoint = try PostgresEndpoint(url: "postgres://app:secret@db.internal:5432/app")
/// ```
public struct PostgresEndpoint: Sendable {
  /// Whether connections use TLS.
  public enum TLSMode: String, Sendable {
    /// Never.
    case disable
    /// When the server offers it.
    case prefer
    /// Always: a server without TLS is refused.
    case require
  }

  public var host: String
  public var port: Int
  public var username: String
  public var password: String?
  public var database: String?
  public var tls: TLSMode

  /// An endpoint from its parts.
  public init(
    host: String, port: Int = 5432, username: String, password: String? = nil,
    database: String? = nil, tls: TLSMode = .prefer
  ) {
    self.host = host
    self.port = port
    self.username = username
    self.password = password
    self.database = database
    self.tls = tls
  }

  /// An endpoint from a URL, `postgres://user:password@host:port/database?sslmode=disable`
  /// (`postgresql://` too; `sslmode` is `disable`, `prefer`, the default, or `require`).
  ///
  /// - Throws: ``PostgresSyncError`` with ``PostgresSyncError/Kind/invalidConfiguration`` if
  ///   the URL is not of that form.
  public init(url text: String) throws(PostgresSyncError) {
    guard let components = URLComponents(string: text),
      components.scheme == "postgres" || components.scheme == "postgresql",
      let host = components.host, !host.isEmpty, let username = components.user
    else {
      throw PostgresSyncError(
        .invalidConfiguration,
        "\"\(text)\" is not a postgres://user@host:port/database URL")
    }
    let database = components.path.split(separator: "/").first.map(String.init)
    var tls = TLSMode.prefer
    if let mode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value {
      guard let parsed = TLSMode(rawValue: mode) else {
        throw PostgresSyncError(
          .invalidConfiguration, "sslmode \(mode) is not disable, prefer or require")
      }
      tls = parsed
    }
    self.init(
      host: host, port: components.port ?? 5432, username: username,
      password: components.password, database: database, tls: tls)
  }

  /// The configuration of a pool of connections to this endpoint.
  var clientConfiguration: PostgresClient.Configuration {
    let tls: PostgresClient.Configuration.TLS =
      switch self.tls {
      case .disable: .disable
      case .prefer: .prefer(.makeClientConfiguration())
      case .require: .require(.makeClientConfiguration())
      }
    return PostgresClient.Configuration(
      host: host, port: port, username: username, password: password, database: database,
      tls: tls)
  }

  /// The configuration of one connection to this endpoint.
  func connectionConfiguration() throws(PostgresSyncError) -> PostgresConnection.Configuration {
    let tls: PostgresConnection.Configuration.TLS
    do {
      switch self.tls {
      case .disable: tls = .disable
      case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
      case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
      }
    } catch {
      throw PostgresSyncError(
        .invalidConfiguration, "TLS could not be set up for \(host):\(port)", underlying: error)
    }
    return PostgresConnection.Configuration(
      host: host, port: port, username: username, password: password, database: database,
      tls: tls)
  }
}
