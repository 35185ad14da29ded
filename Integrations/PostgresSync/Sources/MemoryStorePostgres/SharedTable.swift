import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The shared table's statements. Every statement names the table by its validated
/// identifier; every value is a bound parameter.
///
/// | column | type | holds |
/// |---|---|---|
/// | `key` | `text`, primary key | the key's text form (``SyncKeyCoding``) |
/// | `value` | `bytea` | a one-entry snapshot of the key and its value, by the store's ``SnapshotCoder`` |
/// | `cost` | `bigint` | the entry's cost |
/// | `expires_at` | `timestamptz`, nullable | when its time to live ends |
/// | `version` | `bigint` | 1 when inserted, plus one per update |
/// | `written_at` | `timestamptz` | when it was last written |
/// | `origin` | `uuid` | the instance that wrote it |
struct SharedTable: Sendable {
  let name: String

  /// One row to write: the key's text, the encoded value, its cost and time to live left in
  /// seconds (negative: none).
  struct Row: Sendable {
    var key: String
    var value: ByteBuffer
    var cost: Int64
    var secondsToLive: Double
  }

  /// A row read: the encoded value, its cost and time to live left in seconds (`nil`: none).
  struct StoredRow: Sendable {
    var key: String
    var value: ByteBuffer
    var cost: Int64
    var secondsToLive: Double?
  }

  /// Creates the table and its index, if missing, in one transaction that first takes an
  /// advisory lock named after the table: `IF NOT EXISTS` alone does not cover instances
  /// creating the same table at the same moment (one of them ends in a unique violation on the
  /// catalog), so those wait for each other and the later ones find both in place.
  func create(on connection: PostgresConnection, logger: Logger) async throws {
    _ = try await connection.query("BEGIN", logger: logger).collect()
    do {
      _ = try await connection.query(
        "SELECT pg_advisory_xact_lock(hashtext(\(name)))", logger: logger
      ).collect()
      try await createInTransaction(on: connection, logger: logger)
      _ = try await connection.query("COMMIT", logger: logger).collect()
    } catch {
      // The error that ended the transaction is the one to report; a rollback that fails
      // too leaves a connection the pool closes.
      _ = try? await connection.query("ROLLBACK", logger: logger).collect()
      throw error
    }
  }

  private func createInTransaction(on connection: PostgresConnection, logger: Logger)
    async throws
  {
    _ = try await connection.query(
      """
      CREATE TABLE IF NOT EXISTS \(unescaped: name) (
        key text PRIMARY KEY,
        value bytea NOT NULL,
        cost bigint NOT NULL DEFAULT 0,
        expires_at timestamptz,
        version bigint NOT NULL DEFAULT 1,
        written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        origin uuid NOT NULL
      )
      """, logger: logger
    ).collect()
    _ = try await connection.query(
      """
      CREATE INDEX IF NOT EXISTS \(unescaped: indexName) ON \(unescaped: name) (written_at DESC)
      """, logger: logger
    ).collect()
  }

  /// The index of rows by time written, for a warm start.
  var indexName: String {
    name.replacingOccurrences(of: ".", with: "_") + "_written_at"
  }

  func upsert(_ rows: [Row], origin: UUID, on connection: PostgresConnection, logger: Logger)
    async throws
  {
    guard !rows.isEmpty else { return }
    let keys = rows.map(\.key)
    let values = rows.map(\.value)
    let costs = rows.map(\.cost)
    let lifetimes = rows.map(\.secondsToLive)
    _ = try await connection.query(
      """
      INSERT INTO \(unescaped: name) AS t (key, value, cost, expires_at, origin)
      SELECT k, v, c,
        CASE WHEN e < 0 THEN NULL ELSE clock_timestamp() + e * interval '1 second' END,
        \(origin)
      FROM unnest(\(keys)::text[], \(values)::bytea[], \(costs)::int8[], \(lifetimes)::float8[])
        AS u(k, v, c, e)
      ON CONFLICT (key) DO UPDATE SET
        value = EXCLUDED.value, cost = EXCLUDED.cost, expires_at = EXCLUDED.expires_at,
        version = t.version + 1, written_at = clock_timestamp(), origin = EXCLUDED.origin
      """, logger: logger
    ).collect()
  }

  func delete(_ keys: [String], on connection: PostgresConnection, logger: Logger) async throws {
    guard !keys.isEmpty else { return }
    _ = try await connection.query(
      "DELETE FROM \(unescaped: name) WHERE key = ANY(\(keys)::text[])", logger: logger
    ).collect()
  }

  func deleteAll(on connection: PostgresConnection, logger: Logger) async throws {
    _ = try await connection.query("DELETE FROM \(unescaped: name)", logger: logger).collect()
  }

  /// The live row of `key`, if any.
  func row(_ key: String, on connection: PostgresConnection, logger: Logger) async throws
    -> StoredRow?
  {
    let rows = try await connection.query(
      """
      SELECT key, value, cost, EXTRACT(EPOCH FROM (expires_at - clock_timestamp()))::float8
      FROM \(unescaped: name)
      WHERE key = \(key) AND (expires_at IS NULL OR expires_at > clock_timestamp())
      """, logger: logger)
    // Read to the end: an error the statement raises comes with the rows.
    var found: StoredRow?
    for try await (key, value, cost, seconds) in rows.decode(
      (String, ByteBuffer, Int64, Double?).self)
    {
      found = StoredRow(key: key, value: value, cost: cost, secondsToLive: seconds)
    }
    return found
  }

  /// The `limit` live rows written last, newest first.
  func newestRows(limit: Int, on connection: PostgresConnection, logger: Logger) async throws
    -> [StoredRow]
  {
    let rows = try await connection.query(
      """
      SELECT key, value, cost, EXTRACT(EPOCH FROM (expires_at - clock_timestamp()))::float8
      FROM \(unescaped: name)
      WHERE expires_at IS NULL OR expires_at > clock_timestamp()
      ORDER BY written_at DESC
      LIMIT \(limit)
      """, logger: logger)
    var result: [StoredRow] = []
    for try await (key, value, cost, seconds) in rows.decode(
      (String, ByteBuffer, Int64, Double?).self)
    {
      result.append(StoredRow(key: key, value: value, cost: cost, secondsToLive: seconds))
    }
    return result
  }

  /// Whether `name` is a plain identifier, optionally schema-qualified: lowercase letters,
  /// digits and underscores, not starting with a digit, at most 63 bytes a part.
  static func isValidIdentifier(_ name: String, allowingSchema: Bool) -> Bool {
    let parts = name.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 1 || (allowingSchema && parts.count == 2) else { return false }
    return parts.allSatisfy { part in
      guard let first = part.utf8.first, part.utf8.count <= 63 else { return false }
      let isStart =
        (first >= UInt8(ascii: "a") && first <= UInt8(ascii: "z")) || first == UInt8(ascii: "_")
      return isStart
        && part.utf8.allSatisfy { byte in
          (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
    }
  }
}
