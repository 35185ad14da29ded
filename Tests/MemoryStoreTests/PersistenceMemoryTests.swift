import Foundation
import Testing

@testable import MemoryStoreKit

#if os(Linux)
  /// Whether this process runs under ThreadSanitizer or AddressSanitizer: their runtimes
  /// define these symbols.
  private let runsUnderASanitizer =
    dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil

  /// The peak memory of `load()` for crafted files, measured in a child process: this test
  /// executable run again with a filter that selects only ``peakMemoryProbe()``, so that no
  /// other test allocates meanwhile.
  ///
  /// The child resets its peak resident set size (`echo 5 > /proc/self/clear_refs`) once
  /// everything but the load is done, loads, and reports `VmHWM` minus the resident set size
  /// before the load: the memory the load itself made resident. Memory reserved but never
  /// touched is not resident, so it is not counted, as it costs nothing.
  ///
  /// Not under a sanitizer: ThreadSanitizer and AddressSanitizer give every byte an
  /// application touches shadow memory of their own, which the resident set counts.
  @Suite(
    "Persistence: peak memory of a load", .serialized,
    .enabled(
      if: !runsUnderASanitizer,
      "a sanitizer's shadow memory would be measured with the load's"))
  struct PersistenceMemoryTests {

    /// In a child process: what to measure, as `<mode>\t<file>`.
    static let probeVariable = "MEMORYSTORE_PEAK_PROBE"
    static let probe = ProcessInfo.processInfo.environment[probeVariable]

    /// What a child reported.
    struct Measurement {
      /// The memory the measured operation made resident, in bytes.
      var peak: Int
      /// `ok <count>`, or the kind of the `PersistenceError`.
      var outcome: String
    }

    // MARK: Crafted files

    /// A valid binary snapshot of no entries whose string table holds `count` empty strings:
    /// one byte each, a `String` of 16 bytes each if the table were decoded eagerly.
    static func emptyStringTable(count: Int) -> [UInt8] {
      var payload: [UInt8] = [_BinaryFormat.version]
      var value = UInt64(count)
      while value >= 0x80 {
        payload.append(UInt8(value & 0x7F) | 0x80)
        value >>= 7
      }
      payload.append(UInt8(value))
      payload += repeatElement(0, count: count)
      payload.append(0)  // no entries
      return snapshot(payload, formatName: "binary", entryCount: 0)
    }

    /// A JSON snapshot of one entry whose value is an array of `count` zeros: it fails to
    /// decode as `[String: Int]`, after JSONDecoder has parsed all of it.
    static func longJSONArray(count: Int) -> [UInt8] {
      var payload = Array(#"{"a":["#.utf8)
      payload.reserveCapacity(count * 2 + 8)
      for index in 0..<count {
        if index > 0 { payload.append(UInt8(ascii: ",")) }
        payload.append(UInt8(ascii: "0"))
      }
      payload += Array("]}".utf8)
      return snapshot(payload, formatName: "json", entryCount: 1)
    }

    static func snapshot(_ payload: [UInt8], formatName: String, entryCount: UInt64) -> [UInt8] {
      let header = _SnapshotFile.Header(
        formatName: formatName, entryCount: entryCount, payloadLength: UInt64(payload.count),
        payloadChecksum: payload.withUnsafeBytes { _SnapshotFile.checksum($0) })
      // The name is valid ASCII of 1 to 8 bytes.
      return _SnapshotFile.headerBytes(header)! + payload
    }

    // MARK: The tests

    @Test func aBinaryStringTableOfEmptyStringsLoadsInAFewTimesItsSize() throws {
      let file = Self.emptyStringTable(count: 4 << 20)
      let measured = try Self.measure("load-binary", file)
      #expect(measured.outcome == "ok 0")
      // The file's buffer, and what the string table costs: at most twice more.
      #expect(
        measured.peak <= 3 * file.count,
        "peak \(measured.peak) bytes for a file of \(file.count) bytes")
    }

    @Test func aJSONLoadAddsOneBufferOfTheFileToWhatJSONDecoderTakes() throws {
      let file = Self.longJSONArray(count: 1 << 20)
      let load = try Self.measure("load-json", file)
      let decoder = try Self.measure("decode-json", file)
      #expect(load.outcome == "decodingFailed")
      #expect(decoder.outcome == "decodingFailed")
      // The load reads the file into one buffer that JSONDecoder decodes from; the half
      // buffer of slack covers the error's description and the resident pages' granularity
      // (a second copy of the file, as loads used to make, exceeds it).
      #expect(
        load.peak <= decoder.peak + file.count + file.count / 2,
        "load() peak \(load.peak) bytes, JSONDecoder alone \(decoder.peak) bytes, file \(file.count) bytes"
      )
    }

    // MARK: The child

    /// Runs ``peakMemoryProbe()`` in a child process for `file` and returns what it reported.
    static func measure(_ mode: String, _ file: [UInt8]) throws -> Measurement {
      let directory = TemporaryDirectory()
      let url = directory.file()
      try Data(file).write(to: url)
      let child = Process()
      child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
      child.arguments = ["--testing-library", "swift-testing", "--filter", "peakMemoryProbe"]
      var environment = ProcessInfo.processInfo.environment
      environment[probeVariable] = mode + "\t" + url.path
      child.environment = environment
      child.standardOutput = FileHandle.nullDevice
      child.standardError = FileHandle.nullDevice
      try child.run()
      child.waitUntilExit()
      let report = try String(contentsOf: url.appendingPathExtension("peak"), encoding: .utf8)
      let fields = report.split(separator: "\t").map(String.init)
      try #require(
        child.terminationStatus == 0 && fields.count == 2, "the child reported \(report)")
      return Measurement(peak: try #require(Int(fields[0])), outcome: fields[1])
    }

    /// Status fields of this process, in bytes.
    static func status(_ field: String) -> Int? {
      // Read through a `FileHandle`: the file's size is 0 to `stat`.
      guard let bytes = FileManager.default.bytes(at: URL(fileURLWithPath: "/proc/self/status"))
      else { return nil }
      for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n")
      where line.hasPrefix(field + ":") {
        let kilobytes = line.dropFirst(field.count + 1).split(whereSeparator: \.isWhitespace).first
        return kilobytes.flatMap { Int($0) }.map { $0 * 1024 }
      }
      return nil
    }

    /// Resets the peak resident set size to the current one.
    static func resetPeak() -> Bool {
      guard let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") else { return false }
      defer { try? handle.close() }
      return (try? handle.write(contentsOf: Data("5".utf8))) != nil
    }

    /// In the child only: performs the operation `MEMORYSTORE_PEAK_PROBE` names and writes
    /// `<peak bytes>\t<outcome>` to `<file>.peak`.
    @Test(.enabled(if: probe != nil, "runs in a child process of the memory tests"))
    func peakMemoryProbe() throws {
      let fields = try #require(Self.probe).split(separator: "\t").map(String.init)
      try #require(fields.count == 2)
      let (mode, url) = (fields[0], URL(fileURLWithPath: fields[1]))
      let reportURL = url.appendingPathExtension("peak")
      let store = MemoryStore<String, Int>()
      let manager =
        mode == "load-binary"
        ? try PersistenceManager(store: store, fileURL: url, coder: .binary)
        : try PersistenceManager(store: store, fileURL: url, coder: .json)
      // For `decode-json`: the payload, read before the measurement.
      let payload = mode == "decode-json" ? try Data(contentsOf: url).dropFirst(48) : Data()
      let before = try #require(Self.status("VmRSS"))
      try #require(Self.resetPeak(), "cannot reset the peak resident set size")
      var outcome: String
      if mode == "decode-json" {
        do {
          _ = try JSONDecoder().decode([String: Int].self, from: payload)
          outcome = "ok"
        } catch {
          outcome = "decodingFailed"
        }
      } else {
        do {
          outcome = "ok \(try manager.load())"
        } catch {
          outcome = "\(error.kind)"
        }
      }
      let peak = try #require(Self.status("VmHWM"))
      try "\(peak - before)\t\(outcome)".write(to: reportURL, atomically: true, encoding: .utf8)
    }
  }
#endif
