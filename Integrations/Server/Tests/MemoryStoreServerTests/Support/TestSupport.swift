import Foundation
import InMemoryLogging
import Logging
import MemoryStoreKit
import MetricsTestKit

@testable import MemoryStoreServer

/// A new empty directory under the system's temporary directory.
func temporaryDirectory() throws -> URL {
  let directory = FileManager.default.temporaryDirectory
    .appending(path: "MemoryStoreServerTests-\(UUID().uuidString)", directoryHint: .isDirectory)
  try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  return directory
}

/// A logger whose entries the test reads back, at `level` and above.
func recordingLogger(level: Logger.Level = .debug) -> (Logger, InMemoryLogHandler) {
  var handler = InMemoryLogHandler()
  handler.logLevel = level
  let logger = Logger(label: "test", factory: { _ in handler })
  return (logger, handler)
}

extension InMemoryLogHandler {
  /// The entries logged at `level` whose message contains `text`.
  func entries(at level: Logger.Level, containing text: String) -> [Entry] {
    entries.filter { $0.level == level && "\($0.message)".contains(text) }
  }
}

extension TestMetrics {
  /// The total of the counter `label` of the store `store`, with the extra dimensions.
  func total(
    _ label: String, store: String, _ dimensions: [(String, String)] = []
  ) -> Int64 {
    counterTotal(label: label, dimensions: [("store", store)] + dimensions)
  }

  /// The last value recorded by the gauge `label` of the store `store`.
  func gauge(_ label: String, store: String) -> Double? {
    (try? expectGauge(label, [("store", store)]))?.lastValue
  }

  /// The durations recorded by the timer `label` of the store `store`.
  func timerValues(_ label: String, store: String) -> [Int64] {
    (try? expectTimer(label, [("store", store)]))?.values ?? []
  }
}

/// Waits until `condition` holds, checking every 5 ms, for at most `limit`: for what happens
/// on another thread with no event to await. Returns whether it held.
func eventually(
  within limit: Duration = .seconds(10), _ condition: () throws -> Bool
) async rethrows -> Bool {
  let deadline = ContinuousClock.now + limit
  while ContinuousClock.now < deadline {
    if try condition() { return true }
    try? await Task.sleep(for: .milliseconds(5))
  }
  return try condition()
}

/// The entries of the snapshot at `url`, loaded into a new store.
func snapshotContents(_ url: URL) throws -> [String: String] {
  let store = MemoryStore<String, String>()
  let manager = try PersistenceManager(store: store, fileURL: url, coder: .binary)
  _ = try manager.load()
  return store.allItems
}

/// A value that concurrent tasks share, behind the package's lock.
typealias Shared = Locked
