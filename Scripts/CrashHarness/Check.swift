import Foundation
import MemoryStoreKit

/// What one check of the snapshot file found.
struct CheckReport {
  enum Outcome {
    /// No file yet: the writer never finished a save.
    case missing
    /// A complete, self-consistent snapshot.
    case complete(SnapshotSummary)
    /// A torn, unloadable or inconsistent file, and why.
    case torn(CheckFailure)
  }

  var outcome: Outcome
  /// The temporary files found before the check created its persistence manager: left by a
  /// save that the kill interrupted.
  var temporaryFilesBefore: [String]
  /// The temporary files still there after the manager was created and loaded the file: the
  /// manager should have removed them all.
  var temporaryFilesAfter: [String]
}

/// Loads `file` as a restarted process would, into a fresh store, and verifies the snapshot.
///
/// Normal mode loads through a fresh ``PersistenceManager``, whose creation removes stale
/// temporary files (and whose load moves a rejected file aside). Naive mode decodes the raw
/// JSON file, and leaves it in place.
func checkSnapshot(file: URL, naive: Bool) -> CheckReport {
  let before = temporaryFiles(of: file)
  let outcome: CheckReport.Outcome
  if naive {
    outcome = checkRawJSON(file: file)
  } else {
    outcome = checkThroughManager(file: file)
  }
  return CheckReport(
    outcome: outcome, temporaryFilesBefore: before, temporaryFilesAfter: temporaryFiles(of: file))
}

private func checkThroughManager(file: URL) -> CheckReport.Outcome {
  let exists = FileManager.default.fileExists(atPath: file.path)
  let store = MemoryStore<String, Entry>(name: "crash-harness-check")
  let loaded: Int
  do {
    let manager = try PersistenceManager(store: store, fileURL: file, coder: snapshotCoder)
    loaded = try manager.load()
  } catch {
    return .torn(CheckFailure("the persistence manager cannot load it: \(error)"))
  }
  if !exists && loaded == 0 { return .missing }
  let entries = store.allItems
  guard entries.count == loaded else {
    return .torn(
      CheckFailure("load() reported \(loaded) entries, the store holds \(entries.count)"))
  }
  switch verifySnapshot(entries) {
  case .success(let summary): return .complete(summary)
  case .failure(let failure): return .torn(failure)
  }
}

private func checkRawJSON(file: URL) -> CheckReport.Outcome {
  let data: Data
  do {
    data = try Data(contentsOf: file)
  } catch {
    if !FileManager.default.fileExists(atPath: file.path) { return .missing }
    return .torn(CheckFailure("cannot read it: \(error)"))
  }
  let entries: [String: Entry]
  do {
    entries = try snapshotCoder.decode(data, as: [String: Entry].self)
  } catch {
    let what = data.isEmpty ? "it is empty (0 bytes)" : "its \(data.count) bytes do not decode"
    return .torn(CheckFailure("\(what): \(error)"))
  }
  switch verifySnapshot(entries) {
  case .success(let summary): return .complete(summary)
  case .failure(let failure): return .torn(failure)
  }
}

/// The `check` sub-command: exits 0 if the snapshot is complete (or absent), 1 if it is torn
/// or unloadable, 2 if a temporary file remains after the persistence manager started.
func runCheck(file: URL, naive: Bool) -> Never {
  let report = checkSnapshot(file: file, naive: naive)
  var status: Int32 = 0
  switch report.outcome {
  case .missing:
    print("no snapshot at \(file.path) yet")
  case .complete(let summary):
    print("complete: \(summary.items) items, saved by round \(summary.round)")
  case .torn(let failure):
    print("TORN: \(file.path): \(failure)")
    status = 1
  }
  if !report.temporaryFilesBefore.isEmpty {
    let names = report.temporaryFilesBefore.joined(separator: ", ")
    print("temporary files left before the restart: \(names)")
  }
  if !report.temporaryFilesAfter.isEmpty {
    let names = report.temporaryFilesAfter.joined(separator: ", ")
    print("TEMPORARY FILES REMAIN after the restart: \(names)")
    if status == 0 { status = 2 }
  }
  exit(status)
}
