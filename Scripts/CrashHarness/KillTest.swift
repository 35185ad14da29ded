import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The kill test's settings.
struct KillTestOptions {
  var kills = 200
  var naive = false
  var directory: String?
  var seed: UInt64 = 0x5EED
  var cap = defaultCap
  /// The range of the random delay between starting a writer and killing it, in milliseconds.
  var delay = 10...120
}

/// What the kill test counted.
struct KillTestTally {
  var kills = 0
  /// Torn, unloadable or inconsistent snapshots found after a kill.
  var torn = 0
  /// Kills after which a temporary file was found (before the restart removed it): kills that
  /// interrupted a save after it created its temporary file and before the rename.
  var killsLeavingTemporaryFiles = 0
  /// Temporary files found after all the kills, before the restarts removed them.
  var temporaryFilesLeft = 0
  /// Temporary files still present after a restarted persistence manager: must be 0.
  var temporaryFilesRemaining = 0
  /// Kills after which the file held an older round than before the writer started, or had
  /// disappeared: a save that went backwards (normal mode only).
  var regressions = 0
  /// Writers that ended on their own before they were killed.
  var writerExits = 0
  /// Kills after which the file was as before the writer started: the writer completed no
  /// save.
  var killsWithoutSave = 0
  /// The snapshot after the last kill, if complete.
  var last: SnapshotSummary?
  /// The largest snapshot seen after any kill.
  var largestItems = 0
  /// The rounds (saves) that landed on disk across all the kills.
  var savesLanded = 0
}

/// The `kill-test` sub-command: kills a writer `options.kills` times at random instants and
/// checks the file after each kill. See the usage text.
func runKillTest(_ options: KillTestOptions) -> Never {
  let executable = executablePath()
  let ownsDirectory = options.directory == nil
  let directory: URL
  if let path = options.directory {
    directory = URL(fileURLWithPath: path, isDirectory: true)
  } else {
    directory = FileManager.default.temporaryDirectory.appending(
      path: "crash-harness-\(getpid())-\(UUID().uuidString.prefix(8))", directoryHint: .isDirectory)
  }
  do {
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  } catch {
    printError("kill-test: cannot create \(directory.path): \(error)")
    exit(2)
  }
  let file = directory.appending(path: "store.snapshot")
  let mode = options.naive ? "naive non-atomic Data.write(to:)" : "PersistenceManager, JSON coder"
  print(
    "kill-test: \(options.kills) SIGKILLs of a writer (\(mode)), delay \(options.delay.lowerBound)-"
      + "\(options.delay.upperBound) ms, cap \(options.cap) items, seed \(options.seed)")
  print("file: \(file.path)")

  var random = SplitMix64(seed: options.seed)
  var tally = KillTestTally()
  // The snapshot before the current writer started; a kill may only leave it or a newer one.
  var previous: SnapshotSummary?
  switch checkSnapshot(file: file, naive: options.naive).outcome {
  case .missing:
    break
  case .complete(let summary):
    previous = summary
    print("starting from the existing snapshot: \(summary.items) items, round \(summary.round)")
  case .torn(let failure):
    print("note: the existing file is not a complete snapshot, starting from nothing: \(failure)")
    if options.naive { unlink(file.path) }
  }
  var reportedFailures = 0
  func report(_ message: String) {
    reportedFailures += 1
    if reportedFailures <= 5 {
      print("  kill \(tally.kills): \(message)")
    } else if reportedFailures == 6 {
      print("  (further ones are counted, not printed)")
    }
  }

  let clock = ContinuousClock()
  let start = clock.now
  for _ in 0..<options.kills {
    let delay = Int.random(in: options.delay, using: &random)
    let writer = Process()
    writer.executableURL = URL(fileURLWithPath: executable)
    writer.arguments =
      ["writer", file.path, "--cap", String(options.cap)] + (options.naive ? ["--naive"] : [])
    writer.standardInput = FileHandle.nullDevice
    let output = Pipe()
    writer.standardOutput = output
    do {
      try writer.run()
    } catch {
      printError("kill-test: cannot start \(executable): \(error)")
      exit(2)
    }
    // Wait until the writer has loaded the snapshot (or ended), so that the delay is spent
    // saving, however long the start and the load take.
    _ = output.fileHandleForReading.availableData
    usleep(UInt32(delay * 1_000))
    kill(writer.processIdentifier, SIGKILL)
    writer.waitUntilExit()
    try? output.fileHandleForReading.close()
    tally.kills += 1
    if writer.terminationReason != .uncaughtSignal || writer.terminationStatus != SIGKILL {
      tally.writerExits += 1
      report(
        "the writer ended on its own before the kill (status \(writer.terminationStatus))")
    }

    let check = checkSnapshot(file: file, naive: options.naive)
    if !check.temporaryFilesBefore.isEmpty {
      tally.killsLeavingTemporaryFiles += 1
      tally.temporaryFilesLeft += check.temporaryFilesBefore.count
    }
    if !check.temporaryFilesAfter.isEmpty {
      tally.temporaryFilesRemaining += check.temporaryFilesAfter.count
      report(
        "temporary files remain after the restart: "
          + check.temporaryFilesAfter.joined(separator: ", "))
      for name in check.temporaryFilesAfter {
        unlink(directory.appending(path: name).path)
      }
    }
    switch check.outcome {
    case .missing:
      tally.last = nil
      if let previous, !options.naive {
        tally.regressions += 1
        report("the snapshot of round \(previous.round) disappeared")
      } else {
        tally.killsWithoutSave += 1
      }
      previous = nil
    case .complete(let summary):
      if let previous {
        if summary.round < previous.round {
          tally.regressions += 1
          report("the snapshot went back from round \(previous.round) to \(summary.round)")
        } else {
          tally.savesLanded += summary.round - previous.round
          if summary.round == previous.round { tally.killsWithoutSave += 1 }
        }
      } else {
        tally.savesLanded += summary.round + 1
      }
      tally.last = summary
      tally.largestItems = max(tally.largestItems, summary.items)
      previous = summary
    case .torn(let failure):
      tally.torn += 1
      tally.last = nil
      report((options.naive ? "torn, as expected of the naive writer: " : "TORN: ") + "\(failure)")
      // Start the next writer from nothing. The persistence manager already moved a rejected
      // file aside; the naive file is removed.
      if options.naive {
        unlink(file.path)
      } else if FileManager.default.fileExists(atPath: file.path) {
        rename(file.path, file.path + ".torn-\(tally.kills)")
      }
      previous = nil
    }

    if tally.kills % 50 == 0 || tally.kills == options.kills {
      let snapshot = tally.last.map { "\($0.items) items (round \($0.round))" } ?? "none"
      print(
        "[\(tally.kills)/\(options.kills)] \(seconds(clock.now - start)) s: snapshot \(snapshot), "
          + "torn \(tally.torn), kills leaving a temp file \(tally.killsLeavingTemporaryFiles), "
          + "temps after restart \(tally.temporaryFilesRemaining)")
      fflush(nil)  // Progress shows as it happens when the output is a pipe, too.
    }
    // The self-test needs only evidence that torn files are caught, from a writer that made
    // progress (the check below): on a loaded machine the first kills may all land before any
    // save completes. `kills` is its upper bound, high enough that a run where the naive writer
    // is rarely torn still finds some.
    if options.naive && tally.torn >= 3 && tally.savesLanded >= max(10, tally.kills / 10) {
      break
    }
  }
  let elapsed = clock.now - start

  let columns = [
    ("kills", "\(tally.kills)"),
    ("torn/unloadable", "\(tally.torn)"),
    ("temps left by kills", "\(tally.temporaryFilesLeft)"),
    ("temps remaining after restart", "\(tally.temporaryFilesRemaining)"),
    ("time", "\(seconds(elapsed)) s"),
  ]
  let widths = columns.map { max($0.0.count, $0.1.count) }
  func pad(_ text: String, _ width: Int) -> String {
    String(repeating: " ", count: width - text.count) + text
  }
  print("")
  print("| " + zip(columns, widths).map { pad($0.0, $1) }.joined(separator: " | ") + " |")
  print("|" + widths.map { String(repeating: "-", count: $0 + 2) }.joined(separator: "|") + "|")
  print("| " + zip(columns, widths).map { pad($0.1, $1) }.joined(separator: " | ") + " |")
  print("")
  let final = tally.last.map { "\($0.items) items, round \($0.round)" } ?? "none"
  print(
    "final snapshot: \(final); largest: \(tally.largestItems) items; saves that landed: "
      + "\(tally.savesLanded); kills before the writer's first save: \(tally.killsWithoutSave)")
  print(
    "kills that interrupted a save mid-way (left a temp file): \(tally.killsLeavingTemporaryFiles)"
      + "; writer exits before the kill: \(tally.writerExits)"
      + (options.naive ? "" : "; snapshots that went backwards or vanished: \(tally.regressions)"))

  var failures: [String] = []
  // Without saves that landed, no kill could have torn anything: the test would prove nothing.
  // (About one save lands per kill at the cap, many more below it.)
  // The naive writer starts from nothing after every torn file, so its snapshots stay small.
  let minimumSaves = max(10, tally.kills / 10)
  let minimumItems = options.naive ? 1 : min(options.cap, minimumSaves)
  if tally.savesLanded < minimumSaves || tally.largestItems < minimumItems {
    failures.append(
      "the writer made too little progress for the test to mean anything: \(tally.savesLanded) "
        + "saves landed (at least \(minimumSaves) needed), the largest snapshot had "
        + "\(tally.largestItems) items (at least \(minimumItems) needed)")
  }
  if tally.writerExits > 0 {
    failures.append("\(tally.writerExits) writers ended on their own before the kill")
  }
  if options.naive {
    print("self-test: the harness detects torn files: \(tally.torn) of \(tally.kills)")
    if tally.torn == 0 {
      failures.append("the naive writer produced no torn file: the harness detects nothing")
    }
  } else {
    if tally.torn > 0 { failures.append("\(tally.torn) torn or unloadable snapshots") }
    if tally.temporaryFilesRemaining > 0 {
      failures.append(
        "\(tally.temporaryFilesRemaining) temporary files remained after a restarted manager")
    }
    if tally.regressions > 0 {
      failures.append("\(tally.regressions) snapshots went backwards or vanished")
    }
  }
  if failures.isEmpty {
    print("PASS")
    if ownsDirectory { try? FileManager.default.removeItem(at: directory) }
    exit(0)
  }
  for failure in failures { print("FAIL: \(failure)") }
  print("files kept in \(directory.path)")
  exit(1)
}

/// The path of this executable, to start writers with.
func executablePath() -> String {
  #if os(Linux)
    if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
      return path
    }
  #endif
  if let url = Bundle.main.executableURL { return url.path }
  return URL(
    fileURLWithPath: CommandLine.arguments[0],
    relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)
  ).standardizedFileURL.path
}

/// `duration` in seconds, with one decimal.
func seconds(_ duration: Duration) -> String {
  let (whole, fraction) = duration.components
  let value = Double(whole) + Double(fraction) / 1e18
  return String(format: "%.1f", value)
}
