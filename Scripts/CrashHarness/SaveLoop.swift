import Foundation
import MemoryStoreKit

// Saves of one snapshot from several processes at once, for Scripts/reliability: each
// process runs `save-loop` on the same file, under a tag of its own. A snapshot file belongs
// to one writer: a save that would replace a snapshot another process wrote since this one
// last loaded or saved it must fail with `conflict` and change nothing, and then a load
// merges the other's snapshot and the next save goes through. So no acknowledged save is ever
// lost: whenever this process reads the file, it holds this process's last acknowledged save.
// With `--overwrite`, the self-test, saves replace the file whoever wrote it, as they used to,
// and the same check must find acknowledged saves lost.
//
// A save must also never break another's (a new manager used to remove the temporary file of
// a save in progress), every load must succeed, and no temporary file may remain once they
// are done.

/// The `save-loop` sub-command: for `seconds`, writes a group of `entries` items under `tag`
/// and saves with a long-lived manager and with a manager created anew each round (whose
/// creation removes stale temporary files), both of the same store; after a conflict, loads
/// the file into the store and writes the round's group again. Each round then reads the file with a separate store and checks
/// that it holds this process's last acknowledged save and that every tag's group in it is
/// whole. Starts without loading the file: a file already there makes the first save fail
/// with `conflict`.
///
/// Prints the counts and every failure, and `last-acknowledged: <tag> <round>` (or `none`);
/// exits 0 if no save or load failed other than with `conflict` and, unless `overwrite`, no
/// acknowledged save was lost; 1 otherwise.
func runSaveLoop(file: URL, seconds: Int, entries: Int, tag: String, overwrite: Bool) -> Never {
  let store = MemoryStore<String, Entry>(name: "save-loop")
  let longLived = makeManager(store: store, file: file, binary: false)
  if overwrite { longLived.conflictPolicy = .overwrite }
  let clock = ContinuousClock()
  let deadline = clock.now + .seconds(seconds)
  var saves = 0
  var acknowledgedSaves = 0
  var conflicts = 0
  var loads = 0
  var failures = 0
  var lost = 0
  var round = 0
  /// The round of the last save that succeeded.
  var acknowledged: Int?
  func fail(_ message: String) {
    failures += 1
    if failures <= 10 { printError(message) }
  }
  /// Saves; after a conflict, merges the file into the store and writes `batch` again over
  /// what the file held of this process's group (older rounds), as an application re-applies
  /// its change after merging the other writer's state.
  func save(
    _ step: String, with manager: PersistenceManager<String, Entry>, batch: [String: Entry]
  ) {
    saves += 1
    do {
      _ = try manager.save()
      acknowledgedSaves += 1
      acknowledged = round
    } catch {
      guard error.kind == .conflict else {
        failures += 1
        if failures <= 10 { printPersistenceError("\(step) (round \(round))", error) }
        return
      }
      conflicts += 1
      if conflicts == 1 { printPersistenceError("first conflict: \(step) (round \(round))", error) }
      do {
        loads += 1
        _ = try longLived.load()
        store.addEntries(batch)
      } catch {
        failures += 1
        if failures <= 10 { printPersistenceError("load after a conflict (round \(round))", error) }
      }
    }
  }
  while clock.now < deadline {
    var batch: [String: Entry] = [tag: .counter(items: entries, round: round)]
    for index in 0..<entries { batch[groupKey(tag, index)] = .item(index, round: round) }
    store.addEntries(batch)
    save("save", with: longLived, batch: batch)
    let fresh = makeManager(store: store, file: file, binary: false)
    if overwrite { fresh.conflictPolicy = .overwrite }
    save("save with a new manager", with: fresh, batch: batch)

    let reader = MemoryStore<String, Entry>(name: "save-loop-reader")
    do {
      loads += 1
      _ = try makeManager(store: reader, file: file, binary: false).load()
      let groups = tagGroups(reader.allItems)
      for problem in groups.problems { fail("read (round \(round)): \(problem)") }
      if groups.rounds[tag] != acknowledged {
        lost += 1
        if !overwrite {
          fail(
            "read (round \(round)): the file holds round \(describe(groups.rounds[tag])) of "
              + "\(tag), whose last acknowledged save is round \(describe(acknowledged))")
        }
      }
    } catch {
      fail("read (round \(round)): \(error)")
    }
    round += 1
  }
  print(
    "save-loop: tag=\(tag) rounds=\(round) saves=\(saves) acknowledged=\(acknowledgedSaves) "
      + "conflicts=\(conflicts) loads=\(loads) lost=\(lost) failures=\(failures)")
  print("last-acknowledged: \(tag) \(describe(acknowledged))")
  exit(failures == 0 && (overwrite || lost == 0) ? 0 : 1)
}

/// The `tags` sub-command: loads `file` and prints, for each tag whose group it holds,
/// `tag: <tag> <round>`; exits 0 if every group is whole, 1 if not or if the load fails.
func runTags(file: URL) -> Never {
  let store = MemoryStore<String, Entry>(name: "tags")
  do {
    _ = try makeManager(store: store, file: file, binary: false).load()
  } catch {
    printPersistenceError("load", error)
    exit(1)
  }
  let groups = tagGroups(store.allItems)
  for (tag, round) in groups.rounds.sorted(by: { $0.key < $1.key }) {
    print("tag: \(tag) \(round)")
  }
  for problem in groups.problems { print("problem: \(problem)") }
  exit(groups.problems.isEmpty ? 0 : 1)
}

/// The key of item `index` of the group of `tag`.
func groupKey(_ tag: String, _ index: Int) -> String { "\(tag)/k\(index)" }

/// The rounds of the tags' groups in `entries`, each group being a counter entry under its tag
/// and the items it counts, all written by that round; and what is wrong with any of them.
func tagGroups(_ entries: [String: Entry]) -> (rounds: [String: Int], problems: [String]) {
  var rounds: [String: Int] = [:]
  var problems: [String] = []
  for (tag, counter) in entries where !tag.contains("/") {
    guard counter.text == Entry.counterText else {
      problems.append("\(tag): not a counter: \(counter)")
      continue
    }
    rounds[tag] = counter.round
    for index in 0..<counter.index {
      guard let item = entries[groupKey(tag, index)] else {
        problems.append("\(tag): item \(index) of \(counter.index) is missing")
        break
      }
      if item != .item(index, round: counter.round) {
        problems.append(
          "\(tag): item \(index) is from round \(item.round), the counter from \(counter.round)")
        break
      }
    }
  }
  let counted = rounds.keys.reduce(0) { $0 + (entries[$1]?.index ?? 0) + 1 }
  if counted != entries.count {
    problems.append("\(entries.count - counted) entries belong to no whole group")
  }
  return (rounds, problems)
}

/// A round, or `none`.
func describe(_ round: Int?) -> String { round.map(String.init) ?? "none" }
