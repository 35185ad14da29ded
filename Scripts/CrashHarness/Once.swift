import Foundation
import MemoryStoreKit

// One save or one load, for Scripts/reliability: the fault-injection cases run `save-once`
// under a full, read-only or unwritable file system, as another user, or under strace with a
// failing system call; the hostile-input cases run `load-once` on each fixture. Both print
// what happened in lines a script can grep:
//
//     load: ok entries=10
//     save: error kind=writeFailed code=ENOSPC errno=28
//     description: Saving /…/store.snapshot failed: no space left on device (ENOSPC) while …
//
// and exit with one of the statuses below.

/// The exit statuses of `save-once` and `load-once`.
enum OnceStatus {
  /// The save or load succeeded.
  static let succeeded: Int32 = 0
  /// `save()` threw a `PersistenceError`.
  static let saveFailed: Int32 = 20
  /// Creating the `PersistenceManager` threw a `PersistenceError`.
  static let initFailed: Int32 = 21
  /// `load()` threw a `PersistenceError` (`load-once` only; `save-once` goes on and saves).
  static let loadFailed: Int32 = 22
}

/// Prints `error` as `<step>: error kind=… code=… errno=…` and a `description:` line.
/// A manager for `file` with the binary or the JSON coder; exits with
/// `OnceStatus.initFailed` if it cannot be created.
func makeManager<Value: Codable & Sendable>(
  store: MemoryStore<String, Value>, file: URL, binary: Bool
) -> PersistenceManager<String, Value> {
  do {
    return binary
      ? try PersistenceManager(store: store, fileURL: file, coder: .binary)
      : try PersistenceManager(store: store, fileURL: file, coder: .json)
  } catch {
    printPersistenceError("init", error)
    exit(OnceStatus.initFailed)
  }
}

func printPersistenceError(_ step: String, _ error: PersistenceError) {
  var line = "\(step): error kind=\(error.kind)"
  if let code = error.code { line += " code=\(code) errno=\(code.rawValue)" }
  print(line)
  print("description: \(error)")
}

/// The `save-once` sub-command: creates a manager for `file` (JSON or binary coder), loads the
/// file if present, adds `entries` new entries, optionally moves the file's directory away to
/// `moveDirectoryTo` (so that the directory is missing when the save starts), and saves once.
func runSaveOnce(file: URL, entries: Int, binary: Bool, moveDirectoryTo: String?) -> Never {
  let store = MemoryStore<String, Entry>(name: "save-once")
  let manager = makeManager(store: store, file: file, binary: binary)
  do {
    print("load: ok entries=\(try manager.load())")
  } catch {
    printPersistenceError("load", error)
  }
  let start = store.count
  var batch: [String: Entry] = [:]
  for index in start..<(start + entries) {
    batch[itemKey(index)] = .item(index, round: 0)
  }
  store.addEntries(batch)
  if let target = moveDirectoryTo {
    let directory = file.deletingLastPathComponent().path
    guard rename(directory, target) == 0 else {
      printError("save-once: cannot move \(directory) to \(target): errno \(errno)")
      exit(1)
    }
    print("moved \(directory) to \(target)")
  }
  do {
    let report = try manager.save()
    print("save: ok entries=\(report.entryCount) bytes=\(report.byteCount)")
    exit(OnceStatus.succeeded)
  } catch {
    printPersistenceError("save", error)
    exit(OnceStatus.saveFailed)
  }
}

/// The `load-once` sub-command: loads `file` into a `[String: Tree]` store (the fixtures'
/// type) with the JSON or binary coder and prints the outcome and the time `load()` took.
func runLoadOnce(file: URL, binary: Bool, maximumSize: Int?) -> Never {
  let store = MemoryStore<String, Tree>(name: "load-once")
  let manager = makeManager(store: store, file: file, binary: binary)
  if let maximumSize { manager.maximumFileSize = maximumSize }
  let clock = ContinuousClock()
  let start = clock.now
  let result = Result { () throws(PersistenceError) in try manager.load() }
  let elapsed = clock.now - start
  let (whole, fraction) = elapsed.components
  let milliseconds = Double(whole) * 1e3 + Double(fraction) / 1e15
  switch result {
  case .success(let count):
    print("load: ok entries=\(count)")
    print(String(format: "load-ms: %.3f", milliseconds))
    exit(OnceStatus.succeeded)
  case .failure(let error):
    printPersistenceError("load", error)
    print(String(format: "load-ms: %.3f", milliseconds))
    exit(OnceStatus.loadFailed)
  }
}
