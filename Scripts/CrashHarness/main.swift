// CrashHarness: checks that a PersistenceManager's snapshot survives a SIGKILL at any instant.
//
// A writer process saves a growing snapshot in a loop; the kill test starts it, kills it with
// SIGKILL after a random delay, then loads the file as a restarted process would and checks
// that it is complete and self-consistent, and that no temporary file survives the restart.
// With --naive the writer uses a plain non-atomic Data.write(to:) instead: a self-test that
// the harness does detect torn files.
//
//     swift build -c release --product CrashHarness
//     .build/release/CrashHarness kill-test --kills 200
//     .build/release/CrashHarness kill-test --kills 60 --naive    # must find torn files
//
// Scripts/crash-test runs both. Scripts/reliability uses the other sub-commands: save-once and
// load-once (fault injection, hostile files), save-loop and tags (two processes saving one
// file),
// reentrant-create (a precondition's message in a
// release build), make-fixtures and make-fuzz-corpus.

import Foundation

let usage = """
  usage: CrashHarness writer <file> [--naive] [--cap N]
         CrashHarness check <file> [--naive]
         CrashHarness kill-test [--kills N] [--naive] [--directory D] [--seed S] [--cap N]
         CrashHarness save-once <file> [--entries N] [--binary] [--move-directory-to D]
         CrashHarness load-once <file> [--binary] [--maximum-size BYTES]
         CrashHarness save-loop <file> [--seconds S] [--entries N] [--tag T] [--overwrite]
         CrashHarness tags <file>
         CrashHarness reentrant-create
         CrashHarness make-fixtures <directory>
         CrashHarness make-fuzz-corpus <directory>
    writer     saves a growing snapshot to <file> in a loop, forever (the process to kill);
               starts from the file's snapshot; exits 3 if it cannot be loaded
    check      loads <file> with a fresh persistence manager and verifies it: exits 0 if it is
               complete or absent, 1 if it is torn or unloadable, 2 if a temporary file remains
    kill-test  N times (200 by default): starts a writer, kills it with SIGKILL 10-120 ms
               (at random) after it has loaded the snapshot, and checks the file; exits 0 if no
               file was torn and no temporary file survived a restart
    --naive    the writer uses a non-atomic Data.write(to:) of the JSON, without a header;
               kill-test then is a self-test that passes only if it finds torn files
    --cap N    the snapshot grows to N items, then items are rewritten (default \(defaultCap))
    --seed S   the seed of the random delays (default \(KillTestOptions().seed))
    save-once  creates a manager for <file>, loads it if present, adds N entries (default 10),
               optionally moves the file's directory to D, then saves once; prints the
               outcome ("save: ok ..." or "save: error kind=K code=ERRNO ...") and exits
               0 (saved), \(OnceStatus.saveFailed) (save failed) or \(OnceStatus.initFailed) (the manager could not be created)
    load-once  loads <file> into a [String: Tree] store (the fixtures' type), prints the
               outcome and the time load() took; exits 0 or \(OnceStatus.loadFailed) (load failed)
    --binary   the binary coder instead of JSON
    save-loop  for S seconds (default 3), writes a group of N entries (default 100) under
               the tag T (default p<pid>) and saves <file> with a long-lived manager and with
               a new manager of the same store each round, without loading the file first;
               a save that fails with conflict is followed by a load. Each round reads the
               file and checks that it holds this process's last acknowledged save. Run it
               in several processes at once: prints the counts and "last-acknowledged: T R";
               exits 0 if no save or load failed other than with conflict and no acknowledged
               save was lost, 1 otherwise
    --overwrite  save-loop's self-test: saves replace the file whoever wrote it
               (conflictPolicy .overwrite); lost saves are counted, not failures
    tags       loads <file> and prints "tag: T R", the round of each tag's group; exits 0 if
               every group is whole, 1 otherwise
    reentrant-create  calls valueOrInsert(forKey:_:) again for the same key from inside its
               makeValue: the program must stop with a message that names the mistake
    make-fixtures     writes the hostile snapshot fixtures and their manifest.tsv
    make-fuzz-corpus  writes the seeds of the binary fuzz mode (binary/)
  """

func usageError(_ message: String) -> Never {
  printError("CrashHarness: \(message)\n\(usage)")
  exit(64)
}

/// The arguments after the sub-command: positional ones, flags, and options with a value.
struct Arguments {
  var positional: [String] = []
  var flags: Set<String> = []
  var values: [String: String] = [:]

  init(
    _ arguments: ArraySlice<String>, flags allowedFlags: Set<String>,
    values allowedValues: Set<String>
  ) {
    var remaining = arguments
    while let argument = remaining.popFirst() {
      if allowedFlags.contains(argument) {
        flags.insert(argument)
      } else if allowedValues.contains(argument) {
        guard let value = remaining.popFirst() else { usageError("\(argument) needs a value") }
        values[argument] = value
      } else if argument.hasPrefix("-") {
        usageError("unknown option \(argument)")
      } else {
        positional.append(argument)
      }
    }
  }

  func integer<I: FixedWidthInteger>(_ name: String, default value: I, minimum: I) -> I {
    guard let text = values[name] else { return value }
    guard let number = I(text), number >= minimum else {
      usageError("\(name) needs an integer of at least \(minimum), not '\(text)'")
    }
    return number
  }

  /// The single positional argument: the snapshot file.
  func file() -> URL {
    guard positional.count == 1 else { usageError("expected one file argument") }
    return URL(fileURLWithPath: positional[0]).standardizedFileURL
  }
}

let commandLine = CommandLine.arguments
guard commandLine.count >= 2 else { usageError("missing sub-command") }
let rest = commandLine.dropFirst(2)
switch commandLine[1] {
case "writer":
  let arguments = Arguments(rest, flags: ["--naive"], values: ["--cap"])
  runWriter(
    file: arguments.file(), naive: arguments.flags.contains("--naive"),
    cap: arguments.integer("--cap", default: defaultCap, minimum: 1))
case "check":
  let arguments = Arguments(rest, flags: ["--naive"], values: [])
  runCheck(file: arguments.file(), naive: arguments.flags.contains("--naive"))
case "kill-test":
  let arguments = Arguments(
    rest, flags: ["--naive"], values: ["--kills", "--directory", "--seed", "--cap"])
  guard arguments.positional.isEmpty else {
    usageError("unexpected argument \(arguments.positional[0])")
  }
  var options = KillTestOptions()
  options.kills = arguments.integer("--kills", default: options.kills, minimum: 1)
  options.naive = arguments.flags.contains("--naive")
  options.directory = arguments.values["--directory"]
  options.seed = arguments.integer("--seed", default: options.seed, minimum: 0)
  options.cap = arguments.integer("--cap", default: options.cap, minimum: 1)
  runKillTest(options)
case "save-once":
  let arguments = Arguments(
    rest, flags: ["--binary"], values: ["--entries", "--move-directory-to"])
  runSaveOnce(
    file: arguments.file(), entries: arguments.integer("--entries", default: 10, minimum: 0),
    binary: arguments.flags.contains("--binary"),
    moveDirectoryTo: arguments.values["--move-directory-to"])
case "load-once":
  let arguments = Arguments(rest, flags: ["--binary"], values: ["--maximum-size"])
  runLoadOnce(
    file: arguments.file(), binary: arguments.flags.contains("--binary"),
    maximumSize: arguments.values["--maximum-size"].map { _ in
      arguments.integer("--maximum-size", default: 0, minimum: 0)
    })
case "save-loop":
  let arguments = Arguments(
    rest, flags: ["--overwrite"], values: ["--seconds", "--entries", "--tag"])
  let tag = arguments.values["--tag"] ?? "p\(getpid())"
  guard !tag.isEmpty, !tag.contains("/") else { usageError("--tag needs a name without '/'") }
  runSaveLoop(
    file: arguments.file(), seconds: arguments.integer("--seconds", default: 3, minimum: 1),
    entries: arguments.integer("--entries", default: 100, minimum: 1), tag: tag,
    overwrite: arguments.flags.contains("--overwrite"))
case "tags":
  runTags(file: Arguments(rest, flags: [], values: []).file())
case "reentrant-create":
  guard Arguments(rest, flags: [], values: []).positional.isEmpty else {
    usageError("reentrant-create takes no argument")
  }
  runReentrantCreate()
case "make-fixtures":
  runMakeFixtures(directory: Arguments(rest, flags: [], values: []).file())
case "make-fuzz-corpus":
  runMakeFuzzCorpus(directory: Arguments(rest, flags: [], values: []).file())
case "-h", "--help", "help":
  print(usage)
  exit(0)
default:
  usageError("unknown sub-command \(commandLine[1])")
}
