import Foundation

/// What a successful save wrote.
public struct SaveReport: Sendable, Equatable {
  /// The snapshot file.
  public let fileURL: URL
  /// The number of entries written.
  public let entryCount: Int
  /// The file's size in bytes, header included.
  public let byteCount: Int
  /// The keys (as `String(reflecting:)` prints them) of the entries left out because their
  /// values failed to encode, under ``PersistenceManager/EncodingFailurePolicy/skipEntry``.
  public let skippedKeys: [String]
  /// When the save finished.
  public let date: Date
  /// How long the save took: snapshot, encoding and writing.
  public let duration: Duration
}
