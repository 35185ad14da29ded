// CrashHarness: checks that a PersistenceManager's snapshot survives a SIGKILL at any instant.
//
// A writer process saves a growing snapshot in a loop; once it is killed, the check loads the
// file as a restarted process would and verifies that it is complete and self-consistent, and
// that no temporary file survives the restart. With --naive the writer uses a plain non-atomic
// Data.write(to:) instead, which must leave torn files.
//
//     swift build -c release --product CrashHarness
//     .build/release/CrashHarness writer /tmp/s.snapshot & sleep 1; kill -KILL $!
//     .build/release/CrashHarness check /tmp/s.snapshot

import Foundation

let usage = """
  usage: CrashHarness writer <file> [--naive] [--cap N]
         CrashHarness check <file> [--naive]
    writer     saves a growing snapshot to <file> in a loop, forever (the process to kill);
               starts from the file's snapshot; exits 3 if it cannot be loaded
    check      loads <file> with a fresh persistence manager and verifies it: exits 0 if it is
               complete or absent, 1 if it is torn or unloadable, 2 if a temporary file remains
    --naive    the writer uses a non-atomic Data.write(to:) of the JSON, without a header
    --cap N    the snapshot grows to N items, then items are rewritten (default \(defaultCap))
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

  init(_ arguments: ArraySlice<String>, flags allowedFlags: Set<String>, values allowedValues: Set<String>) {
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
case "-h", "--help", "help":
  print(usage)
  exit(0)
default:
  usageError("unknown sub-command \(commandLine[1])")
}
