import Foundation
import MemoryStoreKit

/// One value of the writer's store.
///
/// Item `k<i>` holds `index == i`, the writer round (save number) that last wrote it, and a
/// ~200-byte text derived from both, so that a value cut short or mixed with another is seen.
/// The counter entry (``counterKey``) holds the number of items in `index` and the round of the
/// save that wrote the snapshot in `round`.
struct Entry: Codable, Sendable, Equatable {
  var index: Int
  var round: Int
  var text: String

  static func item(_ index: Int, round: Int) -> Entry {
    Entry(index: index, round: round, text: itemText(index, round: round))
  }

  static func counter(items: Int, round: Int) -> Entry {
    Entry(index: items, round: round, text: counterText)
  }

  /// About 200 bytes that depend on the item and the round.
  static func itemText(_ index: Int, round: Int) -> String {
    let unit = "k\(index)@r\(round);"
    var text = ""
    text.reserveCapacity(textLength + unit.utf8.count)
    while text.utf8.count < textLength { text += unit }
    return text
  }

  static let textLength = 200
  static let counterText = "item count"
}

/// The store's key for the counter entry.
let counterKey = "seq"

/// The key of item `index`.
func itemKey(_ index: Int) -> String { "k\(index)" }

/// The snapshot format under test. JSON so that the naive writer's file is the same bytes
/// without the header.
let snapshotCoder = JSONSnapshotCoder()

/// What a snapshot holds, once found complete.
struct SnapshotSummary: Equatable {
  /// The number of items `k0..k(items-1)`.
  var items: Int
  /// The writer round that saved it.
  var round: Int
}

/// Verifies that `entries` is one complete snapshot of the writer: the counter entry equals
/// the number of items, the items are exactly `k0..k(n-1)`, each value matches its key, and
/// the newest item was written by the same round as the counter.
///
/// - Returns: The snapshot's size and round, or why it is not complete.
func verifySnapshot(_ entries: [String: Entry]) -> Result<SnapshotSummary, CheckFailure> {
  guard let counter = entries[counterKey] else {
    return .failure(CheckFailure("no \"\(counterKey)\" entry among \(entries.count) entries"))
  }
  guard counter.text == Entry.counterText, counter.index >= 0, counter.round >= 0 else {
    return .failure(CheckFailure("the \"\(counterKey)\" entry is malformed: \(counter)"))
  }
  let items = entries.count - 1
  guard counter.index == items else {
    return .failure(
      CheckFailure("\"\(counterKey)\" says \(counter.index) items, the snapshot holds \(items)"))
  }
  var newestRound = -1
  for index in 0..<items {
    let key = itemKey(index)
    guard let entry = entries[key] else {
      return .failure(CheckFailure("item \(key) is missing (\(items) items expected)"))
    }
    guard entry.index == index, entry.round >= 0, entry.round <= counter.round,
      entry.text == Entry.itemText(index, round: entry.round)
    else {
      return .failure(
        CheckFailure(
          "item \(key) does not match its key or the snapshot's round \(counter.round): "
            + "index \(entry.index), round \(entry.round), text of \(entry.text.utf8.count) bytes"))
    }
    newestRound = max(newestRound, entry.round)
  }
  // Every round writes one item and the counter together: the newest item has its round.
  guard newestRound == counter.round else {
    return .failure(
      CheckFailure(
        "the newest item is from round \(newestRound), the counter from round \(counter.round)"))
  }
  return .success(SnapshotSummary(items: items, round: counter.round))
}

/// Why a snapshot is torn, unloadable or inconsistent.
struct CheckFailure: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}

/// The names of the persistence manager's temporary files for `file` in its directory
/// (`.<name>.tmp-*`), whatever the length of their suffix.
func temporaryFiles(of file: URL) -> [String] {
  let directory = file.deletingLastPathComponent().path
  let prefix = "." + file.lastPathComponent + ".tmp-"
  let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
  return names.filter { $0.hasPrefix(prefix) }.sorted()
}
