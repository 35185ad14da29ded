import Foundation
import MemoryStoreKit

// Saves of one snapshot from several processes at once, for Scripts/reliability: each
// process runs `save-loop` on the same file. A save must never break another's (a new
// manager used to remove the temporary file of a save in progress), every load must succeed,
// and no temporary file may remain once they are done.

/// The `save-loop` sub-command: for `seconds`, saves `file` with a long-lived manager and
/// with a manager created anew each round (whose creation removes stale temporary files),
/// and loads it with a third; prints the counts and every failure, and exits 0 if there was
/// none, 1 otherwise.
func runSaveLoop(file: URL, seconds: Int, entries: Int) -> Never {
  let store = MemoryStore<String, Entry>(name: "save-loop")
  let longLived = makeManager(store: store, file: file, binary: false)
  let clock = ContinuousClock()
  let deadline = clock.now + .seconds(seconds)
  var saves = 0
  var loads = 0
  var failures = 0
  var round = 0
  func attempt(_ step: String, _ body: () throws(PersistenceError) -> Void) {
    do {
      try body()
    } catch {
      failures += 1
      if failures <= 10 { printPersistenceError("\(step) (round \(round))", error) }
    }
  }
  while clock.now < deadline {
    var batch: [String: Entry] = [:]
    for index in 0..<entries { batch[itemKey(index)] = .item(index, round: round) }
    store.addEntries(batch)
    attempt("save") { () throws(PersistenceError) in _ = try longLived.save() }
    saves += 1
    attempt("save with a new manager") { () throws(PersistenceError) in
      _ = try makeManager(store: store, file: file, binary: false).save()
    }
    saves += 1
    attempt("load") { () throws(PersistenceError) in
      let reader = MemoryStore<String, Entry>(name: "save-loop-reader")
      _ = try makeManager(store: reader, file: file, binary: false).load()
      if reader.count != entries {
        printError("load (round \(round)): \(reader.count) entries, \(entries) expected")
        failures += 1
      }
    }
    loads += 1
    round += 1
  }
  print("save-loop: rounds=\(round) saves=\(saves) loads=\(loads) failures=\(failures)")
  exit(failures == 0 ? 0 : 1)
}
