import Foundation
import MemoryStoreKit

// The hostile snapshot fixtures of Tests/MemoryStoreTests/Fixtures/Hostile (which also seed
// the fuzz target's `file` mode) and the seeds of its `binary` mode (Scripts/Fuzz/corpus),
// generated from one description of the file format
// written independently of the library's: the "valid" controls must load, which checks this
// writer against the library's reader.
//
//     CrashHarness make-fixtures Tests/MemoryStoreTests/Fixtures/Hostile
//     CrashHarness make-fuzz-corpus Scripts/Fuzz/corpus
//
// Run with SWIFT_DETERMINISTIC_HASHING=1 for the same bytes on every run (dictionary order).

/// The value type of every fixture: a tree, so that nesting can be as deep as the type allows.
/// The tests (HostileFixtureTests.swift) and the fuzz target declare the same shape.
struct Tree: Codable, Sendable, Equatable {
  var label: String
  var children: [Tree]

  static func leaf(_ label: String) -> Tree { Tree(label: label, children: []) }
}

/// An entry of format version 2 as the library documents it (SnapshotEntry.swift): the
/// value, and its cost and deadline (seconds since 1970) where it has them.
struct SavedEntry: Codable {
  var value: Tree
  var cost: Int?
  var expires: Double?
}

/// One fixture: its file name, the coder to load it with, the `PersistenceError.Kind` that
/// loading it must throw (`ok` for the controls, which must load), and what it is.
struct Fixture {
  var name: String
  var coder: String
  var kind: String
  var about: String
  var bytes: [UInt8]
}

/// The snapshot header as the library documents it (SnapshotFile.swift), written here on its
/// own: magic, version, coder name, entry count, payload length, payload checksum, header
/// checksum; 48 bytes, little-endian.
enum FixtureFormat {
  static let magic = Array("MEMSTORE".utf8)

  static func header(
    version: UInt32 = 1, coder: [UInt8], entryCount: UInt64, payloadLength: UInt64,
    payloadChecksum: UInt64
  ) -> [UInt8] {
    var bytes = magic
    append(version, to: &bytes)
    bytes += coder + [UInt8](repeating: 0, count: 8 - coder.count)
    append(entryCount, to: &bytes)
    append(payloadLength, to: &bytes)
    append(payloadChecksum, to: &bytes)
    append(UInt32(truncatingIfNeeded: checksum(bytes)), to: &bytes)
    return bytes
  }

  /// A complete file: a header that matches `payload`, unless told otherwise.
  static func file(
    coder: String, payload: [UInt8], entryCount: UInt64, version: UInt32 = 1,
    payloadLength: UInt64? = nil
  ) -> [UInt8] {
    header(
      version: version, coder: Array(coder.utf8), entryCount: entryCount,
      payloadLength: payloadLength ?? UInt64(payload.count), payloadChecksum: checksum(payload))
      + payload
  }

  /// The format's checksum (SnapshotFile.swift): 8-byte little-endian words, each mixed in by
  /// xor, a multiply by an odd constant and a xor-shift; the length seeds it; fmix64 at the end.
  static func checksum(_ bytes: [UInt8]) -> UInt64 {
    let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(bytes.count)
    var offset = 0
    while offset < bytes.count {
      var word: UInt64 = 0
      for index in offset..<min(offset + 8, bytes.count) {
        word |= UInt64(bytes[index]) << (UInt64(index - offset) * 8)
      }
      hash = (hash ^ word) &* multiplier
      hash ^= hash >> 29
      offset += 8
    }
    hash ^= hash >> 33
    hash &*= 0xFF51_AFD7_ED55_8CCD
    hash ^= hash >> 33
    hash &*= 0xC4CE_B9FE_1A85_EC53
    hash ^= hash >> 33
    return hash
  }

  static func append<I: FixedWidthInteger>(_ value: I, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
  }

  static func varint(_ value: UInt64) -> [UInt8] {
    var value = value
    var bytes: [UInt8] = []
    while value >= 0x80 {
      bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
      value >>= 7
    }
    bytes.append(UInt8(value))
    return bytes
  }
}

/// Binary payloads of `[String: Tree]` built by hand (BinaryFormat.swift), for the shapes the
/// encoder refuses to write. The string table is always ["label", "children"].
enum BinaryPayload {
  static let stringTag: UInt8 = 0x09
  static let keyedTag: UInt8 = 0x0B
  static let unkeyedTag: UInt8 = 0x0C

  /// Version, the string table, the entry count.
  static func prefix(entryCount: UInt64, version: UInt8 = 1) -> [UInt8] {
    var bytes: [UInt8] = [version]
    bytes += FixtureFormat.varint(2)
    bytes += FixtureFormat.varint(5) + Array("label".utf8)
    bytes += FixtureFormat.varint(8) + Array("children".utf8)
    bytes += FixtureFormat.varint(entryCount)
    return bytes
  }

  static func string(_ utf8: [UInt8]) -> [UInt8] {
    [stringTag] + FixtureFormat.varint(UInt64(utf8.count)) + utf8
  }

  static func container(_ tag: UInt8, _ contents: [UInt8]) -> [UInt8] {
    [tag] + FixtureFormat.varint(UInt64(contents.count)) + contents
  }

  /// A Tree value with `label` and the encoded `children`.
  static func tree(label: [UInt8], children: [[UInt8]]) -> [UInt8] {
    container(
      keyedTag,
      [0] + string(label) + [1] + container(unkeyedTag, children.flatMap { $0 }))
  }

  /// `levels` Trees, each the only child of the one before: 2 containers a level. Built from
  /// the innermost level outwards, by sizes first, so that it takes O(levels).
  static func deepTree(levels: Int) -> [UInt8] {
    let leaf = tree(label: Array("x".utf8), children: [])
    // A level is: keyed tag, byte count, [0, "x", 1, unkeyed tag, byte count, child].
    let fieldsBeforeChild = 1 + string(Array("x".utf8)).count + 1
    var sizes = [leaf.count]  // sizes[i]: the size of the tree i levels above the leaf
    for _ in 1..<levels {
      let child = sizes.last!
      let children = 1 + FixtureFormat.varint(UInt64(child)).count + child
      let fields = fieldsBeforeChild + children
      sizes.append(1 + FixtureFormat.varint(UInt64(fields)).count + fields)
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(sizes.last!)
    for level in stride(from: levels - 1, to: 0, by: -1) {
      let child = sizes[level - 1]
      let children = 1 + FixtureFormat.varint(UInt64(child)).count + child
      bytes.append(keyedTag)
      bytes += FixtureFormat.varint(UInt64(fieldsBeforeChild + children))
      bytes += [0] + string(Array("x".utf8)) + [1]
      bytes.append(unkeyedTag)
      bytes += FixtureFormat.varint(UInt64(child))
    }
    return bytes + leaf
  }

  /// `levels` unkeyed containers, each the only element of the one before.
  static func deepArrays(levels: Int) -> [UInt8] {
    var sizes = [2]  // the innermost: an empty unkeyed container
    for _ in 1..<levels {
      let inner = sizes.last!
      sizes.append(1 + FixtureFormat.varint(UInt64(inner)).count + inner)
    }
    var bytes: [UInt8] = []
    bytes.reserveCapacity(sizes.last!)
    for level in stride(from: levels - 1, to: 0, by: -1) {
      bytes.append(unkeyedTag)
      bytes += FixtureFormat.varint(UInt64(sizes[level - 1]))
    }
    return bytes + [unkeyedTag, 0]
  }
}

/// Every fixture, controls first.
func hostileFixtures() throws -> [Fixture] {
  let entries: [String: Tree] = [
    "alpha": Tree(label: "a", children: [.leaf("a1"), .leaf("a2")]),
    "beta": .leaf("b"),
    "gamma": Tree(label: "g", children: [Tree(label: "g1", children: [.leaf("g11")])]),
  ]
  let json = [UInt8](try JSONSnapshotCoder().encode(entries))
  let binary = [UInt8](try BinarySnapshotCoder().encode(entries))
  let count = UInt64(entries.count)
  let goodJSON = FixtureFormat.file(coder: "json", payload: json, entryCount: count)
  let goodBinary = FixtureFormat.file(coder: "binary", payload: binary, entryCount: count)

  var fixtures: [Fixture] = []
  func add(_ name: String, _ coder: String, _ kind: String, _ about: String, _ bytes: [UInt8]) {
    fixtures.append(Fixture(name: name, coder: coder, kind: kind, about: about, bytes: bytes))
  }
  /// A file with a valid header around a hand-made `payload`.
  func framed(_ coder: String, _ payload: [UInt8], count: UInt64 = 1) -> [UInt8] {
    FixtureFormat.file(coder: coder, payload: payload, entryCount: count)
  }

  add("valid-json.snapshot", "json", "ok", "control: 3 entries, JSON coder", goodJSON)
  add("valid-binary.snapshot", "binary", "ok", "control: 3 entries, binary coder", goodBinary)

  // Format version 2: each value with its metadata (a cost, a deadline in 2100).
  let saved = entries.mapValues { SavedEntry(value: $0, cost: 5, expires: 4_102_444_800) }
  let savedJSON = [UInt8](try JSONSnapshotCoder().encode(saved))
  let savedBinary = [UInt8](try BinarySnapshotCoder().encode(saved))
  add(
    "valid-v2-json.snapshot", "json", "ok",
    "control: 3 entries with a cost and a deadline, format version 2, JSON coder",
    FixtureFormat.file(coder: "json", payload: savedJSON, entryCount: count, version: 2))
  add(
    "valid-v2-binary.snapshot", "binary", "ok",
    "control: 3 entries with a cost and a deadline, format version 2, binary coder",
    FixtureFormat.file(coder: "binary", payload: savedBinary, entryCount: count, version: 2))
  add(
    "v2-values-only.snapshot", "json", "decodingFailed",
    "format version 2 around a payload of values without their metadata",
    FixtureFormat.file(coder: "json", payload: json, entryCount: count, version: 2))
  add(
    "v2-deadline-not-a-time.snapshot", "json", "decodingFailed",
    "format version 2, a deadline that is a string",
    FixtureFormat.file(
      coder: "json",
      payload: Array(#"{"beta":{"value":{"label":"b","children":[]},"expires":"soon"}}"#.utf8),
      entryCount: 1, version: 2))

  // Truncated at each boundary of the 48-byte header, and in the payload.
  add("empty.snapshot", "json", "truncated", "0 bytes", [])
  add(
    "truncated-in-magic.snapshot", "json", "truncated", "the first 5 bytes of the magic",
    Array(goodJSON.prefix(5)))
  let boundaries = [
    (8, "the magic only, no version"), (12, "up to the version, no coder name"),
    (20, "up to the coder name, no entry count"), (28, "up to the entry count, no length"),
    (36, "up to the payload length, no payload checksum"),
    (44, "up to the payload checksum, no header checksum"), (48, "the header only, no payload"),
  ]
  for (length, about) in boundaries {
    add(
      "truncated-at-\(length).snapshot", "json", "truncated", "\(length) bytes: \(about)",
      Array(goodJSON.prefix(length)))
  }
  add(
    "truncated-payload.snapshot", "json", "truncated", "the header and half of the payload",
    Array(goodJSON.prefix(48 + json.count / 2)))
  add(
    "truncated-by-one.snapshot", "binary", "truncated", "the last payload byte missing",
    Array(goodBinary.dropLast()))

  // Not a snapshot.
  var random = SplitMix64(seed: 0xF1C7)
  var noise = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &random) }
  noise[0] = 0x00  // never the magic's first byte
  add("random-bytes.snapshot", "json", "notASnapshot", "4 KiB of seeded random bytes", noise)
  var wrongMagic = goodJSON
  wrongMagic[7] = UInt8(ascii: "F")
  add("wrong-magic.snapshot", "json", "notASnapshot", "MEMSTORF instead of MEMSTORE", wrongMagic)
  add("bare-json.snapshot", "json", "notASnapshot", "the JSON payload without a header", json)
  add(
    "text.snapshot", "json", "notASnapshot", "a line of text",
    Array("This is not a snapshot.\n".utf8))

  // Header fields.
  add(
    "version-3.snapshot", "json", "unsupportedVersion", "format version 3, header checksum valid",
    FixtureFormat.file(coder: "json", payload: json, entryCount: count, version: 3))
  add(
    "version-0.snapshot", "json", "unsupportedVersion", "format version 0, header checksum valid",
    FixtureFormat.file(coder: "json", payload: json, entryCount: count, version: 0))
  var badHeader = goodJSON
  badHeader[20] ^= 0x01  // the entry count, header checksum not updated
  add(
    "bad-header-checksum.snapshot", "json", "corrupted",
    "one bit of the entry count flipped, header checksum not updated", badHeader)
  var badPayload = goodJSON
  badPayload[48 + json.count / 2] ^= 0x20
  add(
    "bad-payload-checksum.snapshot", "json", "corrupted",
    "one bit of the payload flipped", badPayload)
  var badPayloadBinary = goodBinary
  badPayloadBinary[goodBinary.count - 1] ^= 0x01
  add(
    "bad-payload-checksum-binary.snapshot", "binary", "corrupted",
    "the last payload bit flipped", badPayloadBinary)
  add(
    "trailing-bytes.snapshot", "json", "corrupted", "16 bytes after the declared payload",
    goodJSON + [UInt8](repeating: 0x20, count: 16))
  add(
    "absurd-entry-count.snapshot", "json", "corrupted",
    "the header declares 2^62 entries (header checksum valid)",
    FixtureFormat.file(coder: "json", payload: json, entryCount: 1 << 62))
  add(
    "absurd-payload-length.snapshot", "json", "truncated",
    "the header declares a payload of 2^63 bytes (header checksum valid)",
    FixtureFormat.file(coder: "json", payload: json, entryCount: count, payloadLength: 1 << 63))
  add(
    "entry-count-mismatch.snapshot", "json", "corrupted",
    "the header declares 4 entries, the payload holds 3",
    FixtureFormat.file(coder: "json", payload: json, entryCount: 4))
  add(
    "binary-file-json-coder.snapshot", "json", "formatMismatch",
    "a valid binary snapshot loaded with the JSON coder", goodBinary)
  add(
    "json-file-binary-coder.snapshot", "binary", "formatMismatch",
    "a valid JSON snapshot loaded with the binary coder", goodJSON)
  add(
    "unknown-coder.snapshot", "json", "formatMismatch", "the coder name \"xml\"",
    FixtureFormat.file(coder: "xml", payload: json, entryCount: count))
  add(
    "non-ascii-coder.snapshot", "json", "formatMismatch",
    "a coder name of 8 bytes >= 0x80 (not UTF-8)",
    FixtureFormat.header(
      coder: [0xFF, 0xFE, 0xC0, 0x80, 0xE2, 0x82, 0xAC, 0x00], entryCount: count,
      payloadLength: UInt64(json.count), payloadChecksum: FixtureFormat.checksum(json)) + json)

  // Payloads with a valid header that must not decode.
  let deepJSON =
    "{\"a\":" + String(repeating: "[", count: 10_000)
    + String(repeating: "]", count: 10_000) + "}"
  add(
    "json-deep-arrays.snapshot", "json", "decodingFailed", "arrays nested 10 000 deep",
    framed("json", Array(deepJSON.utf8)))
  let treeLevels = 1_000
  let deepTreeJSON =
    "{\"a\":"
    + String(repeating: "{\"label\":\"x\",\"children\":[", count: treeLevels)
    + "{\"label\":\"x\",\"children\":[]}" + String(repeating: "]}", count: treeLevels) + "}"
  add(
    "json-deep-tree.snapshot", "json", "decodingFailed",
    "a Tree nested \(treeLevels) deep (\(2 * treeLevels) JSON levels), past the parser's limit",
    framed("json", Array(deepTreeJSON.utf8)))
  add(
    "json-invalid-utf8.snapshot", "json", "decodingFailed", "a label holding the bytes FF FE",
    framed(
      "json",
      Array("{\"a\":{\"label\":\"".utf8) + [0xFF, 0xFE] + Array("\",\"children\":[]}}".utf8)))
  add(
    "json-wrong-shape.snapshot", "json", "decodingFailed", "an array instead of an object",
    framed("json", Array("[1,2,3]".utf8)))
  add(
    "json-huge-number.snapshot", "json", "decodingFailed", "a label that is the number 1e400",
    framed("json", Array("{\"a\":{\"label\":1e400,\"children\":[]}}".utf8)))
  add(
    "json-duplicate-key.snapshot", "json", "corrupted",
    "the key \"a\" twice; JSONDecoder keeps one, so 1 entry against the 2 declared",
    framed(
      "json",
      Array(
        "{\"a\":{\"label\":\"1\",\"children\":[]},\"a\":{\"label\":\"2\",\"children\":[]}}".utf8),
      count: 2))
  add(
    "json-empty-payload.snapshot", "json", "decodingFailed", "a valid header, a 0-byte payload",
    framed("json", [], count: 0))

  let deepArrays =
    BinaryPayload.prefix(entryCount: 1) + BinaryPayload.string(Array("a".utf8))
    + BinaryPayload.deepArrays(levels: 10_000)
  add(
    "binary-deep-arrays.snapshot", "binary", "decodingFailed",
    "unkeyed containers nested 10 000 deep", framed("binary", deepArrays))
  let deepTree =
    BinaryPayload.prefix(entryCount: 1) + BinaryPayload.string(Array("a".utf8))
    + BinaryPayload.deepTree(levels: treeLevels)
  add(
    "binary-deep-tree.snapshot", "binary", "decodingFailed",
    "a Tree nested \(treeLevels) deep (\(2 * treeLevels) containers)", framed("binary", deepTree))
  let leafA =
    BinaryPayload.string(Array("a".utf8)) + BinaryPayload.tree(label: Array("x".utf8), children: [])
  add(
    "binary-control-one-entry.snapshot", "binary", "ok",
    "control: the hand-made binary payload the next fixtures alter",
    framed("binary", BinaryPayload.prefix(entryCount: 1) + leafA))
  add(
    "binary-invalid-utf8.snapshot", "binary", "decodingFailed", "a label holding C3 28",
    framed(
      "binary",
      BinaryPayload.prefix(entryCount: 1) + BinaryPayload.string(Array("a".utf8))
        + BinaryPayload.tree(label: [0xC3, 0x28], children: [])))
  add(
    "binary-absurd-string-count.snapshot", "binary", "decodingFailed",
    "a string table declaring 2^60 strings",
    framed("binary", [1] + FixtureFormat.varint(1 << 60) + [0, 0, 0, 0]))
  add(
    "binary-absurd-entry-count.snapshot", "binary", "decodingFailed",
    "the payload declares 2^60 entries",
    framed("binary", BinaryPayload.prefix(entryCount: 1 << 60) + leafA))
  add(
    "binary-absurd-string-length.snapshot", "binary", "decodingFailed",
    "a key declaring 2^40 bytes",
    framed(
      "binary",
      BinaryPayload.prefix(entryCount: 1) + [BinaryPayload.stringTag]
        + FixtureFormat.varint(1 << 40) + Array("a".utf8)))
  add(
    "binary-overlong-varint.snapshot", "binary", "decodingFailed",
    "an entry count of 11 varint bytes",
    framed(
      "binary",
      Array(BinaryPayload.prefix(entryCount: 0).dropLast())
        + [UInt8](repeating: 0xFF, count: 10) + [0x01] + leafA))
  add(
    "binary-unknown-tag.snapshot", "binary", "decodingFailed", "a value tagged 0x7F",
    framed(
      "binary",
      BinaryPayload.prefix(entryCount: 1) + BinaryPayload.string(Array("a".utf8)) + [0x7F, 0]))
  add(
    "binary-payload-version-2.snapshot", "binary", "decodingFailed",
    "the binary payload's own version byte is 2",
    framed("binary", BinaryPayload.prefix(entryCount: 1, version: 2) + leafA))
  add(
    "binary-container-overrun.snapshot", "binary", "decodingFailed",
    "a keyed container declaring 200 bytes with 10 left",
    framed(
      "binary",
      BinaryPayload.prefix(entryCount: 1) + BinaryPayload.string(Array("a".utf8))
        + [BinaryPayload.keyedTag] + FixtureFormat.varint(200) + Array(leafA.suffix(10))))
  add(
    "binary-duplicate-key.snapshot", "binary", "decodingFailed", "the key \"a\" twice",
    framed("binary", BinaryPayload.prefix(entryCount: 2) + leafA + leafA, count: 2))
  add(
    "binary-trailing-bytes.snapshot", "binary", "decodingFailed",
    "3 bytes after the last entry (the header covers them)",
    framed("binary", BinaryPayload.prefix(entryCount: 1) + leafA + [0, 0, 0]))
  add(
    "binary-field-index-out-of-range.snapshot", "binary", "decodingFailed",
    "a field name index of 9 in a table of 2 strings",
    framed(
      "binary",
      BinaryPayload.prefix(entryCount: 1) + BinaryPayload.string(Array("a".utf8))
        + BinaryPayload.container(
          BinaryPayload.keyedTag,
          [9] + BinaryPayload.string(Array("x".utf8)) + [1]
            + BinaryPayload.container(BinaryPayload.unkeyedTag, []))))
  return fixtures
}

/// The `make-fixtures` sub-command: writes every fixture and `manifest.tsv` into `directory`,
/// after checking the header writer against the library's own (a saved file's header).
func runMakeFixtures(directory: URL) -> Never {
  do {
    try checkHeaderWriter()
    let fixtures = try hostileFixtures()
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    for name in try FileManager.default.contentsOfDirectory(atPath: directory.path)
    where name.hasSuffix(".snapshot") {
      try FileManager.default.removeItem(at: directory.appending(path: name))
    }
    var manifest = """
      # Hostile snapshot fixtures: file, coder, the PersistenceError.Kind loading must throw
      # ("ok": a control that must load), what the file is. Value type: [String: Tree], Tree
      # being { label: String, children: [Tree] }. Regenerate with:
      #   SWIFT_DETERMINISTIC_HASHING=1 CrashHarness make-fixtures <this directory>

      """
    for fixture in fixtures {
      try Data(fixture.bytes).write(to: directory.appending(path: fixture.name))
      manifest += "\(fixture.name)\t\(fixture.coder)\t\(fixture.kind)\t\(fixture.about)\n"
    }
    try Data(manifest.utf8).write(to: directory.appending(path: "manifest.tsv"))
    let total = fixtures.reduce(0) { $0 + $1.bytes.count }
    print("wrote \(fixtures.count) fixtures (\(total) bytes) and manifest.tsv to \(directory.path)")
    exit(0)
  } catch {
    printError("make-fixtures: \(error)")
    exit(1)
  }
}

/// The `make-fuzz-corpus` sub-command: the seeds of the `binary` fuzz mode, `binary/` (bare
/// binary payloads), from the fixtures and a few more shapes. The `file` mode is seeded with
/// the fixtures themselves (see Scripts/reliability).
func runMakeFuzzCorpus(directory: URL) -> Never {
  do {
    let binaryDirectory = directory.appending(path: "binary")
    try? FileManager.default.removeItem(at: binaryDirectory)
    try FileManager.default.createDirectory(
      at: binaryDirectory, withIntermediateDirectories: true)
    var payloads = 0
    for fixture in try hostileFixtures()
    where fixture.coder == "binary" && fixture.bytes.count > 48 && fixture.bytes.count <= 2_048 {
      try Data(fixture.bytes.dropFirst(48)).write(
        to: binaryDirectory.appending(
          path: fixture.name.replacingOccurrences(of: ".snapshot", with: ".bin")))
      payloads += 1
    }
    // Other shapes the binary target decodes: numbers, optionals, data, nested dictionaries.
    let shapes: [(String, Data)] = [
      ("ints.bin", try BinarySnapshotCoder().encode([1: [Int64.min, -1, 0, 1, Int64.max]])),
      (
        "doubles.bin",
        try BinarySnapshotCoder().encode(["d": [Double.nan, -0.0, .infinity, 1.5, nil]])
      ),
      ("data.bin", try BinarySnapshotCoder().encode(["blob": Data([0, 1, 2, 0xFF])])),
      (
        "nested.bin",
        try BinarySnapshotCoder().encode(["m": ["x": [1, 2], "y": [3]], "n": [:]])
      ),
      ("empty.bin", try BinarySnapshotCoder().encode([String: Int]())),
    ]
    for (name, data) in shapes {
      try data.write(to: binaryDirectory.appending(path: name))
      payloads += 1
    }
    print("wrote \(payloads) binary payload seeds to \(directory.path)")
    exit(0)
  } catch {
    printError("make-fuzz-corpus: \(error)")
    exit(1)
  }
}

/// Saves through a real PersistenceManager and compares its header with this file's writer.
private func checkHeaderWriter() throws {
  let directory = FileManager.default.temporaryDirectory.appending(
    path: "fixture-check-\(getpid())", directoryHint: .isDirectory)
  defer { try? FileManager.default.removeItem(at: directory) }
  let file = directory.appending(path: "check.snapshot")
  let store = MemoryStore<String, Tree>()
  store["alpha"] = Tree(label: "a", children: [.leaf("a1")])
  for coderName in ["json", "binary"] {
    if coderName == "json" {
      try PersistenceManager(store: store, fileURL: file, coder: .json).save()
    } else {
      try PersistenceManager(store: store, fileURL: file, coder: .binary).save()
    }
    let saved = [UInt8](try Data(contentsOf: file))
    let payload = Array(saved.dropFirst(48))
    let mine = FixtureFormat.file(coder: coderName, payload: payload, entryCount: 1)
    guard mine == saved else {
      throw CheckFailure(
        "the fixture writer's \(coderName) header differs from the library's: "
          + "\(mine.prefix(48)) against \(saved.prefix(48))")
    }
  }
}
