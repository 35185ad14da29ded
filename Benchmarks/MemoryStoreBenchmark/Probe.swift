// Measurements made in a process of their own: the benchmark runs itself again with a hidden
// `--memory-probe STORE COUNT` or `--growth-probe STORE COUNT`; the child fills one store,
// prints one line of numbers on standard output and exits. A fresh process per store keeps one
// store's freed memory, and its allocator's state, out of the next store's numbers.

import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a child process is asked to measure.
struct ProbeRequest: Equatable {
  enum Measurement: String {
    case memory = "--memory-probe"
    case growth = "--growth-probe"
  }

  var measurement: Measurement
  var store: ProbeStoreKind
  var count: Int

  var arguments: [String] { [measurement.rawValue, store.rawValue, String(count)] }
}

// MARK: - Child side

/// Runs `request` in this process, prints its line and returns the exit code.
func runProbe(_ request: ProbeRequest) -> Int32 {
  warmUpRuntime()
  let line: String
  switch request.measurement {
  case .memory:
    line = withProbeStore(
      request.store, entryCount: request.count, MemoryProbe(count: request.count))
  case .growth:
    line = withProbeStore(
      request.store, entryCount: request.count, GrowthProbe(count: request.count))
  }
  print(line)
  return 0
}

/// Starts the threads a store may use (a Swift concurrency worker for a flush, a Dispatch
/// worker for its timers), so that their stacks are resident before the first measurement.
private func warmUpRuntime() {
  let done = DispatchSemaphore(value: 0)
  Task { done.signal() }
  done.wait()
  DispatchQueue.global(qos: .utility).async { done.signal() }
  done.wait()
}

/// The resident set size of this process in bytes, or `nil` where it cannot be read.
func residentBytes() -> Int? {
  #if os(Linux)
    // /proc/self/statm: "size resident shared text lib data dt", in pages.
    let descriptor = open("/proc/self/statm", O_RDONLY)
    guard descriptor >= 0 else { return nil }
    defer { close(descriptor) }
    var bytes = [UInt8](repeating: 0, count: 256)
    let length = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
    guard length > 0 else { return nil }
    let fields = String(decoding: bytes[..<length], as: UTF8.self).split(separator: " ")
    guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
    return pages * Int(getpagesize())
  #elseif canImport(Darwin)
    var info = mach_task_basic_info()
    var count = mach_msg_type_number_t(
      MemoryLayout<mach_task_basic_info>.size / MemoryLayout<natural_t>.size)
    // `task_self_trap()` rather than the `mach_task_self_` global, which older SDKs do not
    // mark as safe to read from any concurrency domain.
    let status = withUnsafeMutablePointer(to: &info) { pointer in
      pointer.withMemoryRebound(to: integer_t.self, capacity: Int(count)) {
        task_info(task_self_trap(), task_flavor_t(MACH_TASK_BASIC_INFO), $0, &count)
      }
    }
    guard status == KERN_SUCCESS else { return nil }
    return Int(info.resident_size)
  #else
    return nil
  #endif
}

/// The line a child prints when this platform cannot report its resident size.
let residentSizeUnavailable = "unavailable"

/// Fills a store with `count` single writes and prints the resident size before the store was
/// created and after the fill (and its flush), and the store's count:
/// `BEFORE AFTER COUNT`, in bytes.
struct MemoryProbe: ProbeRun {
  let count: Int

  func run<Store: ProbeStore>(_ make: () -> Store) -> String {
    guard let before = residentBytes() else { return residentSizeUnavailable }
    let store = make()
    for key in 0..<count {
      store.write(key, Payload(key: key))
    }
    store.settle()
    return withExtendedLifetime(store) {
      guard let after = residentBytes() else { return residentSizeUnavailable }
      return "\(before) \(after) \(store.count)"
    }
  }
}

/// Fills a store with `count` single writes, timing each one, and prints
/// `TOTAL MEDIAN P999 WORST WORST_AT OVER_1MS COUNT`: nanoseconds, except `WORST_AT` (the entry
/// count the worst write reached), `OVER_1MS` (how many writes took longer than 1 ms) and
/// `COUNT` (the store's count afterwards).
struct GrowthProbe: ProbeRun {
  let count: Int

  func run<Store: ProbeStore>(_ make: () -> Store) -> String {
    // Allocated and written before the store exists, so that no timed write faults in a page
    // of it.
    var durations = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: count)
    durations.initialize(repeating: 0)
    defer { durations.deallocate() }

    let store = make()
    var worst: UInt64 = 0
    var worstAt = 0
    let start = monotonicNanos()
    var previous = start
    for key in 0..<count {
      store.write(key, Payload(key: key))
      let now = monotonicNanos()
      let elapsed = now &- previous
      durations[key] = UInt32(clamping: elapsed)
      if elapsed > worst {
        worst = elapsed
        worstAt = key + 1
      }
      previous = now
    }
    let total = previous - start
    let storeCount = store.count

    durations.sort()
    let over1ms = durations.reduce(0) { $0 + ($1 > 1_000_000 ? 1 : 0) }
    return
      "\(total) \(percentile(0.5, of: durations)) \(percentile(0.999, of: durations)) "
      + "\(worst) \(worstAt) \(over1ms) \(storeCount)"
  }

  /// The `share` quantile of sorted `values` (nearest rank).
  private func percentile(_ share: Double, of values: UnsafeMutableBufferPointer<UInt32>) -> UInt32
  {
    guard !values.isEmpty else { return 0 }
    let rank = Int((share * Double(values.count)).rounded(.up))
    return values[min(max(rank, 1), values.count) - 1]
  }
}

// MARK: - Parent side

/// How a child process ended.
enum ProbeOutcome {
  /// It printed `numbers` (its last line, split at spaces).
  case measured([Int])
  /// It could not measure on this platform (resident size unavailable).
  case unavailable
  /// It could not be started; nothing was measured.
  case notStarted(String)
  /// It crashed, exited with an error or printed nothing usable.
  case failed(String)
}

/// The executable to run again: `CommandLine.arguments[0]` when it is a path, otherwise the
/// main bundle's executable.
private var benchmarkExecutable: URL {
  let path = CommandLine.arguments[0]
  if path.contains("/") { return URL(fileURLWithPath: path) }
  return Bundle.main.executableURL ?? URL(fileURLWithPath: path)
}

/// Runs `request` in a fresh process of this benchmark and waits for it.
func runProbeProcess(_ request: ProbeRequest) -> ProbeOutcome {
  let process = Process()
  process.executableURL = benchmarkExecutable
  process.arguments = request.arguments
  process.standardInput = FileHandle.nullDevice
  let output = Pipe()
  process.standardOutput = output
  do {
    try process.run()
  } catch {
    return .notStarted("could not start \(benchmarkExecutable.path): \(error)")
  }
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  let command = ([benchmarkExecutable.lastPathComponent] + request.arguments).joined(
    separator: " ")

  switch process.terminationReason {
  case .uncaughtSignal:
    return .failed("`\(command)` crashed (signal \(process.terminationStatus))")
  case .exit where process.terminationStatus != 0:
    return .failed("`\(command)` exited with status \(process.terminationStatus)")
  default:
    break
  }
  let text = String(decoding: data, as: UTF8.self)
  let line = text.split(separator: "\n").last.map(String.init) ?? ""
  if line == residentSizeUnavailable { return .unavailable }
  let numbers = line.split(separator: " ").compactMap { Int($0) }
  guard !numbers.isEmpty, numbers.count == line.split(separator: " ").count else {
    return .failed("`\(command)` printed no result (its output: '\(text)')")
  }
  return .measured(numbers)
}
