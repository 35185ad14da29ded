/// Why a service of this package refused to run: a value, safe to share between threads.
///
/// ```swift
/// do { try await persistence.run() } catch let error as StoreServiceError { print(error) }
/// ```
public struct StoreServiceError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What went wrong.
  public enum Kind: Hashable, Sendable {
    /// `run()` was called on a service that runs, or ran, already: a service owns its store's
    /// saves for one run.
    case alreadyRun
    /// A snapshot that failed to load lies beside the file, under
    /// ``StorePersistenceService/Configuration/LoadFailure/stop``: the service does not start
    /// with an empty store in its place.
    case rejectedSnapshotAside
  }

  /// What went wrong.
  public let kind: Kind
  /// What went wrong, naming the service and its store.
  public let description: String

  init(_ kind: Kind, _ description: String) {
    self.kind = kind
    self.description = description
  }
}
