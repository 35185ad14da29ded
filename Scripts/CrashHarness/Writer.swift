import Foundation
import MemoryStoreKit

/// The process that the kill test kills: saves a growing snapshot in a loop, forever.
///
/// Round `r` adds item `k<n>` (or, once the store holds `cap` items, rewrites item
/// `k<r mod cap>`) together with the counter entry, as one write, then saves the whole store.
/// It starts from the file's snapshot, so the snapshot keeps growing across kills, and prints
/// a line on standard output once it has loaded it, before the first save.
///
/// - Normal mode saves through a ``PersistenceManager`` (atomic replacement).
/// - Naive mode writes the same JSON bytes, without a header, with a plain non-atomic
///   `Data.write(to:)`: the control that must produce torn files.
///
/// Exits with 3 if the existing file cannot be loaded, 4 if a save fails.
func runWriter(file: URL, naive: Bool, cap: Int) -> Never {
  let store = MemoryStore<String, Entry>(name: "crash-harness")
  let manager: PersistenceManager<String, Entry>?
  if naive {
    manager = nil
    if FileManager.default.fileExists(atPath: file.path) {
      do {
        let data = try Data(contentsOf: file)
        store.addEntries(try snapshotCoder.decode(data, as: [String: Entry].self))
      } catch {
        printError("writer: cannot load \(file.path): \(error)")
        exit(3)
      }
    }
  } else {
    do {
      let persistence = try PersistenceManager(store: store, fileURL: file, coder: snapshotCoder)
      try persistence.load()
      manager = persistence
    } catch {
      printError("writer: cannot load \(file.path): \(error)")
      exit(3)
    }
  }

  var items = store[counterKey]?.index ?? 0
  var round = store[counterKey]?.round ?? -1
  // Tells the kill test that the saves start now: its random delay runs from here.
  FileHandle.standardOutput.write(Data("ready: starting from \(items) items\n".utf8))
  while true {
    round += 1
    var write: [String: Entry] = [:]
    if items < cap {
      write[itemKey(items)] = .item(items, round: round)
      items += 1
    } else {
      let index = round % items
      write[itemKey(index)] = .item(index, round: round)
    }
    write[counterKey] = .counter(items: items, round: round)
    store.addEntries(write)
    do {
      if let manager {
        try manager.save()
      } else {
        // Non-atomic on purpose: truncates the file, then writes it.
        try snapshotCoder.encode(store.allItems).write(to: file)
      }
    } catch {
      printError("writer: saving round \(round) to \(file.path) failed: \(error)")
      exit(4)
    }
  }
}

/// The number of items at which the writer stops growing the snapshot and starts rewriting it.
let defaultCap = 3_000

/// Prints `message` on standard error.
func printError(_ message: String) {
  FileHandle.standardError.write(Data((message + "\n").utf8))
}
