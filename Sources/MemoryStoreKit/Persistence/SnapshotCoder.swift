import Foundation

/// Turns a store's entries into a snapshot payload and back: the format of a
/// ``PersistenceManager``'s file.
///
/// The persistence manager frames the payload with its own header (magic bytes, format version,
/// the coder's ``formatName``, the entry count and a checksum), so a coder deals only with the
/// entries. Two coders come with the package:
///
/// - ``JSONSnapshotCoder`` (``SnapshotCoder/json``): readable, the default of
///   ``PersistenceManager/init(store:fileURL:coder:)``.
/// - ``BinarySnapshotCoder`` (``SnapshotCoder/binary``): compact and several times faster.
///
/// Write your own to use another format. Keys may be any `Codable` type, not only strings.
///
/// Thread safety: a coder is called from whichever thread saves or loads, possibly from several
/// at once, and never while the store or the manager holds a lock; implementations must be
/// thread-safe (they are `Sendable`).
public protocol SnapshotCoder: Sendable {
  /// A name of 1 to 8 ASCII bytes written in the file's header. ``PersistenceManager/load()``
  /// refuses a file whose header names another coder.
  var formatName: String { get }

  /// Encodes every entry of `entries` into one payload.
  ///
  /// - Throws: Any error, typically an `EncodingError`; the persistence manager reports it as a
  ///   ``PersistenceError`` that names the key whose value failed to encode.
  func encode<Key: Encodable & Hashable, Value: Encodable>(_ entries: [Key: Value]) throws -> Data

  /// Decodes a payload written by ``encode(_:)``.
  ///
  /// Must not trap on any input: a payload that does not decode throws (typically a
  /// `DecodingError`).
  func decode<Key: Decodable & Hashable, Value: Decodable>(
    _ payload: Data, as type: [Key: Value].Type
  ) throws -> [Key: Value]
}
