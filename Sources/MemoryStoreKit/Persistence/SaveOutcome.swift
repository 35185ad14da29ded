import Foundation

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
