import Foundation
import MemoryStoreKit
import Testing

/// A string table that would take many times the payload's size as `String`s is kept as
/// positions in the payload: field names are then compared with the payload's bytes. These
/// payloads, crafted byte by byte, put the names a value uses behind 100 005 empty strings.
@Suite("Binary coder: a string table of many tiny strings")
struct BinarySnapshotCoderStringTableTests {
  static let padding = 100_005

  static func varint(_ value: Int) -> [UInt8] {
    var value = UInt64(value)
    var bytes: [UInt8] = []
    while value >= 0x80 {
      bytes.append(UInt8(value & 0x7F) | 0x80)
      value >>= 7
    }
    return bytes + [UInt8(value)]
  }

  static func string(_ text: String) -> [UInt8] {
    varint(text.utf8.count) + Array(text.utf8)
  }

  static func double(_ value: Double) -> [UInt8] {
    [0x08] + withUnsafeBytes(of: value.bitPattern.littleEndian) { Array($0) }
  }

  /// One entry, key "q", whose value is a keyed container of `bid`, `ask` and `volume`,
  /// named by the strings after the padding.
  static func payload(volume: Bool = true) -> Data {
    var table = varint(padding + 3) + [UInt8](repeating: 0, count: padding)
    table += string("bid") + string("ask") + string("volume")
    var fields = varint(padding) + double(1.5) + varint(padding + 1) + double(2.5)
    if volume { fields += varint(padding + 2) + [0x03, 0x05] }  // zigzag(-3) = 5
    let value = [0x0B] + varint(fields.count) + fields
    return Data([1] + table + varint(1) + [0x09] + string("q") + value)
  }

  @Test func fieldsAreFoundByTheirNamesBytes() throws {
    let decoded = try BinarySnapshotCoder().decode(Self.payload(), as: [String: Quote].self)
    #expect(decoded == ["q": Quote(bid: 1.5, ask: 2.5, volume: -3)])
  }

  @Test func allKeysAreReadFromThePayload() throws {
    let decoded = try BinarySnapshotCoder().decode(
      Self.payload(volume: false), as: [String: [String: Double]].self)
    #expect(decoded == ["q": ["bid": 1.5, "ask": 2.5]])
  }

  @Test func aMissingFieldIsReportedByName() throws {
    let error = try #require(throws: DecodingError.self) {
      try BinarySnapshotCoder().decode(Self.payload(volume: false), as: [String: Quote].self)
    }
    guard case .keyNotFound(let key, _) = error else {
      Issue.record("expected keyNotFound, got \(error)")
      return
    }
    #expect(key.stringValue == "volume")
  }

  @Test func invalidUTF8InTheTableIsRejected() throws {
    var bytes = [UInt8](Self.payload())
    // The first padding string becomes one byte long, holding 0xFF, in place of the next.
    let first = 1 + Self.varint(Self.padding + 3).count
    bytes[first] = 1
    bytes[first + 1] = 0xFF
    let error = try #require(throws: DecodingError.self) {
      try BinarySnapshotCoder().decode(Data(bytes), as: [String: Quote].self)
    }
    #expect("\(error)".contains("not valid UTF-8"))
  }

  /// A field named "café" with its "é" decomposed (NFD).
  struct Accented: Codable, Equatable {
    var value: Int
    enum CodingKeys: String, CodingKey { case value = "cafe\u{301}" }
  }

  /// A dictionary whose keys come first in the string table, then a field of the same name in
  /// another form: the table holds the dictionary's form of the name, once.
  struct Holder: Codable, Equatable {
    var padding: [String: Int]
    var accented: Accented
  }

  static func holder(keys: Int) -> Holder {
    var padding = ["caf\u{E9}": 1]  // precomposed (NFC)
    for index in 0..<keys { padding["k\(index)"] = 0 }
    return Holder(padding: padding, accented: Accented(value: 7))
  }

  /// Whatever the table's size, hence whichever way the decoder keeps it, a name matches a
  /// canonically equivalent field name, as `String`s compare.
  @Test(arguments: [10, 40_000])
  func equivalentFormsOfANameMatchWhateverTheTablesSize(keys: Int) throws {
    let entries = ["h": Self.holder(keys: keys)]
    let payload = try BinarySnapshotCoder().encode(entries)
    #expect(try BinarySnapshotCoder().decode(payload, as: [String: Holder].self) == entries)
  }

  @Test func equivalentFormsOfANameMatchInAPositionsTable() throws {
    // As `payload()`, but the table holds "caf" and a precomposed "é", and the value a field
    // of that name read through the decomposed form.
    var table = Self.varint(Self.padding + 1) + [UInt8](repeating: 0, count: Self.padding)
    table += Self.string("caf\u{E9}")
    let fields = Self.varint(Self.padding) + [0x03, 0x0E]  // zigzag(7) = 14
    let value = [0x0B] + Self.varint(fields.count) + fields
    let payload = Data([1] + table + Self.varint(1) + [0x09] + Self.string("q") + value)
    let decoded = try BinarySnapshotCoder().decode(payload, as: [String: Accented].self)
    #expect(decoded == ["q": Accented(value: 7)])
  }
}
