import Logging
import MemoryStorePostgres

/// A log handler that keeps every entry, so tests can check what was logged and at what level.
///
/// ```swift
/// let log = RecordingLogHandler.Log()
/// let logger = Logger(label: "test") { _ in RecordingLogHandler(log: log) }
/// #expect(log.entries.contains { $0.level == .warning })
/// ```
struct RecordingLogHandler: LogHandler {
  /// One log entry.
  struct Entry: Sendable {
    /// Its level.
    var level: Logger.Level
    /// Its message.
    var message: String
    /// Its metadata, the logger's merged with the call's.
    var metadata: Logger.Metadata
  }

  /// The entries, shared by every copy of the handler.
  final class Log: Sendable {
    private let storage = Locked<[Entry]>([])

    /// Creates an empty log.
    init() {}

    /// The entries so far, oldest first.
    var entries: [Entry] { storage.withLock { $0 } }

    fileprivate func append(_ entry: Entry) {
      storage.withLock { $0.append(entry) }
    }
  }

  /// Where entries go.
  let log: Log
  var metadata: Logger.Metadata = [:]
  var metadataProvider: Logger.MetadataProvider?
  var logLevel: Logger.Level = .trace

  subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  func log(event: LogEvent) {
    let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
    log.append(Entry(level: event.level, message: "\(event.message)", metadata: merged))
  }
}
