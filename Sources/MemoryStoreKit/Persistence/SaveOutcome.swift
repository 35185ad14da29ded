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

/// The outcome of one save, as ``PersistenceManager/saveOutcomes`` reports it.
public struct SaveOutcome: Sendable {
  /// What started a save.
  public enum Trigger: Sendable, Equatable {
    /// A call to ``PersistenceManager/save()``.
    case manual
    /// The auto-save timer (``PersistenceManager/saveInterval``).
    case automatic
  }

  /// What started the save.
  public let trigger: Trigger
  /// What it wrote, or why it failed.
  public let result: Result<SaveReport, PersistenceError>
}
