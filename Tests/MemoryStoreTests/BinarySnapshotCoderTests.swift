import Foundation
import MemoryStoreKit
import Testing

@Suite("Binary snapshot coder") struct BinarySnapshotCoderTests {
  let coder = BinarySnapshotCoder()

  func roundTrip<Key: Codable & Hashable, Value: Codable>(
    _ entries: [Key: Value]
  ) throws -> [Key: Value] {
    try coder.decode(coder.encode(entries), as: [Key: Value].self)
  }

  /// Decodes `payload` and returns the `DecodingError` it throws, recording an issue when it
  /// decodes or throws something else.
  func decodingError<Value: Decodable>(
    _ payload: [UInt8], as type: Value.Type, sourceLocation: SourceLocation = #_sourceLocation
  ) -> DecodingError? {
    do {
      let entries = try coder.decode(Data(payload), as: [String: Value].self)
      Issue.record("decoded \(entries.count) entries", sourceLocation: sourceLocation)
    } catch let error as DecodingError {
      return error
    } catch {
      Issue.record("threw \(error), not a DecodingError", sourceLocation: sourceLocation)
    }
    return nil
  }

  // MARK: Basics

  @Test func nameAndShorthand() throws {
    #expect(coder.formatName == "binary")
    let shorthand: any SnapshotCoder = .binary
    #expect(shorthand.formatName == "binary")
    let payload = try shorthand.encode(["a": 1])
    #expect(try coder.decode(payload, as: [String: Int].self) == ["a": 1])
  }

  @Test func emptyDictionary() throws {
    let empty: [String: SampleQuote] = [:]
    let payload = try coder.encode(empty)
    #expect(payload.count == 3)  // Version, no strings, no entries.
    #expect(try coder.decode(payload, as: [String: SampleQuote].self).isEmpty)
  }

  @Test func quotes() throws {
    let quotes = SampleQuote.sample(count: 1_000)
    #expect(try roundTrip(quotes) == quotes)
  }

  @Test func payloadIsSmallerThanJSON() throws {
    let quotes = SampleQuote.sample(count: 1_000)
    let binary = try coder.encode(quotes)
    let json = try JSONEncoder().encode(quotes)
    #expect(binary.count < json.count)
    // Field names are written once, in the string table, not once per entry.
    #expect(binary.count < json.count * 3 / 4)
  }

  // MARK: Numbers

  @Test(arguments: Widths.cases) func integersOfEveryWidth(_ widths: Widths) throws {
    #expect(try roundTrip(["w": widths]) == ["w": widths])
    // The same values in unkeyed and single value containers.
    #expect(try roundTrip(["w": [widths.int8]]) == ["w": [widths.int8]])
    #expect(try roundTrip([widths.int16: widths.uint16]) == [widths.int16: widths.uint16])
    let wide = [widths.int128: [widths.uint128]]
    #expect(try roundTrip(wide) == wide)
    let mixed = [widths.uint: [widths.int64, Int64(widths.int), Int64(widths.int32)]]
    #expect(try roundTrip(mixed) == mixed)
    let small = [widths.uint8: [widths.uint32: widths.bool]]
    #expect(try roundTrip(small) == small)
  }

  @Test(arguments: [
    0.0, -0.0, 1.5, -3.25, .pi, .nan, -.nan, Double(nan: 0x1234, signaling: false),
    .signalingNaN, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude,
    -.leastNormalMagnitude,
  ])
  func doublesKeepTheirBits(_ value: Double) throws {
    let decoded = try roundTrip(["d": value, "e": 1])["d"]
    #expect(decoded?.bitPattern == value.bitPattern)
    let list = try roundTrip(["d": [value, value]])["d"] ?? []
    #expect(list.map(\.bitPattern) == [value.bitPattern, value.bitPattern])
    let keyed = try roundTrip(["d": Floats(double: value, float: 0)])["d"]
    #expect(keyed?.double.bitPattern == value.bitPattern)
  }

  @Test(arguments: [
    Float(0), -0.0, 1.5, .nan, Float(nan: 0x55, signaling: false), .infinity, -.infinity,
    .leastNonzeroMagnitude, .greatestFiniteMagnitude,
  ])
  func floatsKeepTheirBits(_ value: Float) throws {
    #expect(try roundTrip(["f": value])["f"]?.bitPattern == value.bitPattern)
    let keyed = try roundTrip(["f": Floats(double: 0, float: value)])["f"]
    #expect(keyed?.float.bitPattern == value.bitPattern)
  }

  @Test func numbersConvertWhenTheyFit() throws {
    // An integer decodes as another integer type that holds it, a Float as a Double, and a
    // Double as a Float within Float's range.
    let payload = try coder.encode(["a": 200, "b": 7])
    #expect(try coder.decode(payload, as: [String: UInt8].self) == ["a": 200, "b": 7])
    let float = try coder.encode(["f": Float(1.5)])
    #expect(try coder.decode(float, as: [String: Double].self) == ["f": 1.5])
    #expect(try coder.decode(coder.encode(["d": 2.5]), as: [String: Float].self) == ["d": 2.5])
    let big = try coder.encode(["u": UInt128.max])
    #expect(try coder.decode(big, as: [String: UInt128].self) == ["u": .max])
  }

  @Test func integerOutOfRangeThrowsWithThePath() throws {
    let payload = try coder.encode(["k": Widths.cases[1]])
    #expect(throws: DecodingError.self) {
      try coder.decode(payload, as: [String: NarrowWidths].self)
    }
    let error = decodingError([UInt8](try coder.encode(["k": 300])), as: Int8.self)
    guard case .dataCorrupted(let context) = error else {
      Issue.record("expected dataCorrupted, got \(String(describing: error))")
      return
    }
    #expect(context.codingPath.map(\.stringValue) == ["k"])
    #expect(context.debugDescription.contains("300"))
    #expect(context.debugDescription.contains("byte offset"))
    // A negative number does not fit an unsigned type, nor a huge Double a Float.
    #expect(decodingError([UInt8](try coder.encode(["k": -1])), as: UInt.self) != nil)
    #expect(decodingError([UInt8](try coder.encode(["k": 1e300])), as: Float.self) != nil)
  }

  // MARK: Strings and Foundation types

  @Test(arguments: [
    "", "a", "héllo wörld", "日本語のテキスト", "👩‍👩‍👧‍👦 and 🇨🇭",
    "nul\u{0}inside",
    String(repeating: "long ", count: 100),
  ])
  func strings(_ string: String) throws {
    #expect(try roundTrip([string: string]) == [string: string])
    #expect(try roundTrip(["s": [string, string]]) == ["s": [string, string]])
    #expect(try roundTrip(["s": Named(name: string)]) == ["s": Named(name: string)])
    // As a keyed container's field name too.
    #expect(try roundTrip(["s": [string: 1]]) == ["s": [string: 1]])
  }

  @Test func foundationTypes() throws {
    let base = try #require(URL(string: "https://example.com/a/"))
    let values = FoundationValues(
      data: Data([0, 1, 2, 255]), empty: Data(), large: Data((0..<5_000).map { UInt8($0 % 251) }),
      date: Date(timeIntervalSinceReferenceDate: 123_456.789),
      url: try #require(URL(string: "https://example.com/path?query=1#fragment")),
      relative: try #require(URL(string: "b/c", relativeTo: base)),
      uuid: UUID(), decimal: try #require(Decimal(string: "-12345.6789")))
    let decoded = try #require(try roundTrip(["f": values])["f"])
    #expect(decoded == values)
    #expect(decoded.relative.baseURL == base)
    #expect(try roundTrip([values.uuid: values.date]) == [values.uuid: values.date])
  }

  // MARK: Structures

  @Test func nestedStructsEnumsAndCollections() throws {
    let values = Sample.sample
    let decoded = try roundTrip(values)
    #expect(decoded == values)
  }

  @Test(arguments: [
    Shape.circle(radius: 2), .rect(3, 4), .empty,
    .labeled(name: "l", tags: ["x", ""], inner: .circle(radius: -1)),
    .labeled(name: "", tags: [], inner: nil),
  ])
  func enumsWithAssociatedValues(_ shape: Shape) throws {
    #expect(try roundTrip(["s": shape]) == ["s": shape])
    #expect(try roundTrip([shape: 1]) == [shape: 1])
  }

  @Test func optionals() throws {
    let values: [String: Optionals] = [
      "none": Optionals(int: nil, nested: nil, list: nil, inner: nil),
      "some": Optionals(int: 1, nested: .some(.some(2)), list: [nil, 3], inner: Named(name: "n")),
      "someNone": Optionals(int: 0, nested: .some(.none), list: [], inner: nil),
    ]
    let decoded = try roundTrip(values)
    #expect(decoded == values)
    // A present nil inside an optional is kept apart from an absent value.
    #expect(decoded["someNone"]?.nested == .some(.none))
    #expect(decoded["none"]?.nested == .none)
    #expect(try roundTrip(["a": Int?.none, "b": 1]) == ["a": nil, "b": 1])
    #expect(try roundTrip([Int?.none: "nil", 1: "one"]) == [nil: "nil", 1: "one"])
  }

  @Test func dictionariesWithAnyKeys() throws {
    let point = Point(x: 1, y: -2)
    #expect(try roundTrip([1: "a", -5: "b"]) == [1: "a", -5: "b"])
    let points = [point: "p", Point(x: 0, y: 0): "o"]
    #expect(try roundTrip(points) == points)
    #expect(try roundTrip([Color.red: 1, .blue: 2]) == [.red: 1, .blue: 2])
    #expect(try roundTrip([true: 1.5, false: 2]) == [true: 1.5, false: 2])
    #expect(try roundTrip([[1, 2]: "list", []: "empty"]) == [[1, 2]: "list", []: "empty"])
    // Inside values: keyed containers for String, Int and CodingKeyRepresentable keys, unkeyed
    // ones for the others.
    let inner = Keys(
      strings: ["a": 1, "": 2], ints: [3: "c", -4: "d"], points: [point: [point]],
      colors: [.green: 5], uuids: [UUID(): "u"])
    #expect(try roundTrip(["k": inner]) == ["k": inner])
  }

  @Test func classesEncodeTheirSuperclass() throws {
    let dog = Dog(name: "Rex", age: 3, tricks: ["sit", "roll"])
    let decoded = try #require(try roundTrip(["d": dog])["d"])
    #expect(decoded.name == "Rex")
    #expect(decoded.age == 3)
    #expect(decoded.tricks == ["sit", "roll"])
    let puppy = Puppy(name: "Bit", age: 0, tricks: [], toy: "ball")
    let decodedPuppy = try #require(try roundTrip(["p": puppy])["p"])
    #expect(decodedPuppy.name == "Bit")
    #expect(decodedPuppy.toy == "ball")
    #expect(decodedPuppy.tricks.isEmpty)
  }

  @Test func everyKindOfContainer() throws {
    let values = Containers.sample
    #expect(try roundTrip(["c": values]) == ["c": values])
    let wrapped = ["w": Wrapper(quote: SampleQuote(bid: 1, ask: 2, volume: 3))]
    #expect(try roundTrip(wrapped)["w"]?.quote == wrapped["w"]?.quote)
    #expect(try roundTrip(["m": Meters(value: 4.5)]) == ["m": Meters(value: 4.5)])
  }

  @Test func aValueThatEncodesNothingDecodesAsAnEmptyStruct() throws {
    #expect(try roundTrip(["e": Nothing()]).count == 1)
    #expect(try roundTrip(["e": [Nothing(), Nothing()]])["e"]?.count == 2)
  }

  // MARK: Keyed containers

  @Test func keyedFieldsDecodeInAnyOrder() throws {
    let values = ["r": Reversed(a: 1, b: "two", c: [3], d: 4.5)]
    #expect(try roundTrip(values) == values)
    // And a type that writes in one order reads in another.
    let written = try coder.encode(["q": SampleQuote(bid: 1, ask: 2, volume: 3)])
    let read = try coder.decode(written, as: [String: ReversedQuote].self)
    #expect(read["q"] == ReversedQuote(volume: 3, ask: 2, bid: 1))
  }

  @Test func absentKeys() throws {
    let payload = try coder.encode(["a": SampleQuote(bid: 1, ask: 2, volume: 3)])
    let probe = try #require(try coder.decode(payload, as: [String: Probe].self)["a"])
    #expect(probe.containsBid)
    #expect(!probe.containsMissing)
    #expect(probe.missingIfPresent == nil)
    #expect(probe.missingStringIfPresent == nil)
    #expect(probe.keys == ["bid", "ask", "volume"])
  }

  @Test func aMissingKeyThrowsKeyNotFound() throws {
    let payload = [UInt8](try coder.encode(["a": Named(name: "n")]))
    let error = decodingError(payload, as: SampleQuote.self)
    guard case .keyNotFound(let key, let context) = error else {
      Issue.record("expected keyNotFound, got \(String(describing: error))")
      return
    }
    #expect(key.stringValue == "bid")
    #expect(context.codingPath.map(\.stringValue) == ["a"])
  }

  @Test func aWrongTypeThrowsTypeMismatch() throws {
    let payload = [UInt8](try coder.encode(["a": Named(name: "n")]))
    let error = decodingError(payload, as: WrongType.self)
    guard case .typeMismatch(let type, let context) = error else {
      Issue.record("expected typeMismatch, got \(String(describing: error))")
      return
    }
    #expect(ObjectIdentifier(type) == ObjectIdentifier(Int.self))
    #expect(context.codingPath.map(\.stringValue) == ["a", "name"])
    #expect(context.debugDescription.contains("byte offset"))
    // A keyed container where an array is expected, and nil where a value is.
    let list = decodingError(payload, as: [Int].self)
    guard case .typeMismatch = list else {
      Issue.record("expected typeMismatch, got \(String(describing: list))")
      return
    }
    let nilPayload = [UInt8](try coder.encode(["a": Int?.none]))
    guard case .valueNotFound = decodingError(nilPayload, as: Int.self) else {
      Issue.record("expected valueNotFound for nil")
      return
    }
  }

  @Test func errorsNameTheirPathThroughNestedContainers() throws {
    let values = ["top": Outer(items: [Named(name: "a"), Named(name: "b")])]
    let payload = [UInt8](try coder.encode(values))
    let error = decodingError(payload, as: OuterOfInts.self)
    guard case .typeMismatch(_, let context) = error else {
      Issue.record("expected typeMismatch, got \(String(describing: error))")
      return
    }
    #expect(context.codingPath.map(\.stringValue) == ["top", "items", "Index 0", "name"])
  }

  // MARK: Encoding failures

  @Test func aThrowingEncodePropagatesItsError() throws {
    #expect(throws: Failure(id: 1)) {
      try coder.encode(["a": Failing(id: 1)])
    }
    #expect(throws: Failure(id: 2)) {
      try coder.encode(["a": [Failing(id: 2)]])
    }
    #expect(throws: Failure(id: 3)) {
      try coder.encode([Failing(id: 3): 1])
    }
    #expect(throws: Failure(id: 4)) {
      try coder.encode(["a": Holder(value: Failing(id: 4))])
    }
  }

  @Test func aCaughtFailureLeavesNoTrace() throws {
    let decoded = try roundTrip(["a": Recovering(good: 7)])
    #expect(decoded["a"] == Recovering(good: 7))
    let payload = try coder.encode(["a": Recovering(good: 7)])
    let probe = try coder.decode(payload, as: [String: RecoveringProbe].self)
    #expect(probe["a"]?.containsBad == false)
  }

  @Test func nestingIsLimitedOnEncodeToo() throws {
    #expect(try roundTrip(["n": Node.chain(depth: 500)])["n"]?.depth == 500)
    #expect(throws: EncodingError.self) {
      try coder.encode(["n": Node.chain(depth: 600)])
    }
  }

  @Test func containersUsedOutOfOrderThrow() throws {
    #expect(throws: EncodingError.self) {
      try coder.encode(["a": OutOfOrder()])
    }
  }

  // MARK: Hostile input

  @Test func everyTruncationThrows() throws {
    let payload = [UInt8](try coder.encode(Sample.sample))
    for length in 0..<payload.count {
      #expect(throws: DecodingError.self, "prefix of \(length) bytes") {
        try coder.decode(Data(payload[..<length]), as: [String: Sample.Value].self)
      }
    }
  }

  @Test func randomBytesDecodeOrThrow() throws {
    var random = SplitMix64(seed: 0x5EED)
    let valid = [UInt8](try coder.encode(Sample.sample))
    var decoded = 0
    for round in 0..<2_000 {
      var bytes: [UInt8]
      if round.isMultiple(of: 2) {
        // Random bytes after a valid version byte, to get past the first check.
        bytes = [1] + (0..<Int.random(in: 0..<96, using: &random)).map { _ in random.byte() }
      } else {
        // A valid payload with a few bytes changed, to reach the deeper checks.
        bytes = valid
        for _ in 0...Int.random(in: 0..<4, using: &random) {
          bytes[Int.random(in: 0..<bytes.count, using: &random)] = random.byte()
        }
      }
      do {
        _ = try coder.decode(Data(bytes), as: [String: Sample.Value].self)
        decoded += 1
      } catch is DecodingError {
      } catch {
        Issue.record("round \(round) threw \(error), not a DecodingError")
      }
    }
    // Some mutations hit only values, so the payload still decodes.
    #expect(decoded > 0)
    #expect(decoded < 2_000)
  }

  @Test func anAbsurdEntryCountThrowsAtOnce() throws {
    let clock = ContinuousClock()
    let start = clock.now
    // Version 1, no strings, 2^60 entries, then one small entry.
    let payload: [UInt8] = [1, 0] + varint(1 << 60) + [0x09, 1, 0x61, 0x03, 0x02]
    guard case .dataCorrupted(let context) = decodingError(payload, as: Int.self) else {
      Issue.record("expected dataCorrupted")
      return
    }
    #expect(context.debugDescription.contains("entries"))
    #expect(clock.now - start < .seconds(1))
    // The largest varint, and one that is longer than 64 bits.
    #expect(decodingError([1, 0] + varint(.max), as: Int.self) != nil)
    #expect(decodingError([1, 0] + [UInt8](repeating: 0xFF, count: 10) + [1], as: Int.self) != nil)
  }

  @Test func absurdLengthsThrow() throws {
    // A string table of 2^40 strings; a table string of 2^40 bytes; a string value, a Data
    // value, a keyed and an unkeyed container of 2^40 bytes.
    #expect(decodingError([1] + varint(1 << 40), as: Int.self) != nil)
    #expect(decodingError([1, 1] + varint(1 << 40) + [0x61], as: Int.self) != nil)
    let entryStart: [UInt8] = [1, 0, 1, 0x09, 1, 0x61]
    for tag: UInt8 in [0x09, 0x0A, 0x0B, 0x0C] {
      #expect(decodingError(entryStart + [tag] + varint(1 << 40) + [0, 0], as: Named.self) != nil)
    }
    // A field name beyond the string table.
    #expect(decodingError(entryStart + [0x0B, 2, 5, 0x00], as: Named.self) != nil)
    // An unknown tag.
    #expect(decodingError(entryStart + [0x7F], as: Int.self) != nil)
  }

  @Test func deepNestingThrows() throws {
    // 100 000 keyed containers, each the field 0 ("child") of the one around it.
    var reversed: [UInt8] = [0x00]  // The innermost child is nil.
    for _ in 0..<100_000 {
      let length = reversed.count + 1
      reversed.append(0)  // Field name 0.
      reversed += varint(UInt64(length)).reversed()
      reversed.append(0x0B)
    }
    // One string, "child"; one entry, "n".
    let header: [UInt8] = [1, 1, 5] + Array("child".utf8) + [1, 0x09, 1, 0x6E]
    let payload = header + reversed.reversed()
    guard case .dataCorrupted(let context) = decodingError(payload, as: Node.self) else {
      Issue.record("expected dataCorrupted")
      return
    }
    #expect(context.debugDescription.contains("deeper"))
    #expect(context.codingPath.count > 500)
  }

  @Test func invalidUTF8Throws() throws {
    // In a string value, in a top-level key and in the string table.
    let entryStart: [UInt8] = [1, 0, 1, 0x09, 1, 0x61]
    #expect(decodingError(entryStart + [0x09, 2, 0xC3, 0x28], as: String.self) != nil)
    #expect(decodingError([1, 0, 1, 0x09, 1, 0xFF, 0x03, 0x00], as: Int.self) != nil)
    let table: [UInt8] = [1, 1, 2, 0xED, 0xA0, 1, 0x09, 1, 0x61, 0x0B, 0]
    #expect(decodingError(table, as: Nothing.self) != nil)
    // The same bytes with valid UTF-8 decode.
    let valid = try coder.decode(
      Data(entryStart + [0x09, 2, 0xC3, 0xA9]), as: [String: String].self)
    #expect(valid == ["a": "é"])
  }

  @Test func trailingBytesThrow() throws {
    let payload = [UInt8](try coder.encode(["a": 1]))
    #expect(try coder.decode(Data(payload), as: [String: Int].self) == ["a": 1])
    let error = decodingError(payload + [0], as: Int.self)
    guard case .dataCorrupted(let context) = error else {
      Issue.record("expected dataCorrupted, got \(String(describing: error))")
      return
    }
    #expect(context.debugDescription.contains("byte offset \(payload.count)"))
  }

  @Test func duplicateKeysThrow() throws {
    // Two entries with the key "a".
    let payload: [UInt8] = [1, 0, 2, 0x09, 1, 0x61, 0x03, 0x02, 0x09, 1, 0x61, 0x03, 0x04]
    guard case .dataCorrupted(let context) = decodingError(payload, as: Int.self) else {
      Issue.record("expected dataCorrupted")
      return
    }
    #expect(context.debugDescription.contains("\"a\""))
    // The same entries with different keys decode.
    var distinct = payload
    distinct[10] = 0x62
    #expect(try coder.decode(Data(distinct), as: [String: Int].self) == ["a": 1, "b": 2])
  }

  @Test func anUnknownVersionThrows() throws {
    var payload = [UInt8](try coder.encode(["a": 1]))
    payload[0] = 2
    #expect(decodingError(payload, as: Int.self) != nil)
    #expect(decodingError([], as: Int.self) != nil)
  }

  // MARK: Threads

  @Test func concurrentCallsShareOneCoder() async throws {
    let coder = self.coder
    let quotes = SampleQuote.sample(count: 200)
    let expected = try coder.encode(quotes)
    try await withThrowingTaskGroup(of: Bool.self) { group in
      for _ in 0..<8 {
        group.addTask {
          let payload = try coder.encode(quotes)
          return try coder.decode(payload, as: [String: SampleQuote].self) == quotes
            && coder.decode(expected, as: [String: SampleQuote].self) == quotes
        }
      }
      for try await matched in group {
        #expect(matched)
      }
    }
  }
}

// MARK: - Helpers

extension SplitMix64 {
  fileprivate mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
}

private func varint(_ value: UInt64) -> [UInt8] {
  var value = value
  var bytes: [UInt8] = []
  while value >= 0x80 {
    bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
    value >>= 7
  }
  bytes.append(UInt8(value))
  return bytes
}

// MARK: - Test types

private struct SampleQuote: Codable, Hashable {
  var bid: Double
  var ask: Double
  var volume: Int

  static func sample(count: Int) -> [String: SampleQuote] {
    var random = SplitMix64(seed: 42)
    var quotes: [String: SampleQuote] = [:]
    for index in 0..<count {
      let bid = Double(Int.random(in: 100...100_000, using: &random)) / 100
      quotes["SYM\(10_000 + index)"] = SampleQuote(
        bid: bid, ask: bid + 0.01, volume: Int.random(in: 0...1_000_000, using: &random))
    }
    return quotes
  }
}

extension BinarySnapshotCoderTests {
  struct Widths: Codable, Equatable, Sendable {
    var int: Int, int8: Int8, int16: Int16, int32: Int32, int64: Int64, int128: Int128
    var uint: UInt, uint8: UInt8, uint16: UInt16, uint32: UInt32, uint64: UInt64, uint128: UInt128
    var bool: Bool

    static let cases = [
      Widths(
        int: 0, int8: 0, int16: 0, int32: 0, int64: 0, int128: 0, uint: 0, uint8: 0, uint16: 0,
        uint32: 0, uint64: 0, uint128: 0, bool: false),
      Widths(
        int: .max, int8: .max, int16: .max, int32: .max, int64: .max, int128: .max, uint: .max,
        uint8: .max, uint16: .max, uint32: .max, uint64: .max, uint128: .max, bool: true),
      Widths(
        int: .min, int8: .min, int16: .min, int32: .min, int64: .min, int128: .min, uint: 1,
        uint8: 1, uint16: 1, uint32: 1, uint64: 1, uint128: 1, bool: false),
      Widths(
        int: -1, int8: -1, int16: 300, int32: -70_000, int64: 1 << 40,
        int128: Int128(Int64.min) - 1, uint: 127, uint8: 128, uint16: 16_384, uint32: 1 << 31,
        uint64: 1 << 63, uint128: UInt128(UInt64.max) + 1, bool: true),
    ]
  }

  indirect enum Shape: Codable, Hashable {
    case circle(radius: Double)
    case rect(Double, Double)
    case empty
    case labeled(name: String, tags: [String], inner: Shape?)
  }
}

private typealias Shape = BinarySnapshotCoderTests.Shape

/// Widths with every field one size smaller, for out-of-range checks.
private struct NarrowWidths: Codable {
  var int: Int32, int8: Int8, int16: Int8, int32: Int16, int64: Int32, int128: Int64
}

private struct Floats: Codable {
  var double: Double
  var float: Float
}

private struct Named: Codable, Hashable {
  var name: String
}

private struct WrongType: Codable {
  var name: Int
}

private struct Point: Codable, Hashable {
  var x: Int
  var y: Int
}

private enum Color: String, Codable, Hashable, CodingKeyRepresentable {
  case red, green, blue
}

private struct Optionals: Codable, Equatable {
  var int: Int?
  var nested: Int??
  var list: [Int?]?
  var inner: Named?
}

private struct Keys: Codable, Equatable {
  var strings: [String: Int]
  var ints: [Int: String]
  var points: [Point: [Point]]
  var colors: [Color: Int]
  var uuids: [UUID: String]
}

private struct FoundationValues: Codable, Equatable {
  var data: Data
  var empty: Data
  var large: Data
  var date: Date
  var url: URL
  var relative: URL
  var uuid: UUID
  var decimal: Decimal
}

/// A value of every shape at once, for the round-trip, truncation and fuzz tests.
private enum Sample {
  struct Value: Codable, Equatable {
    var quote: SampleQuote
    var shapes: [Shape]
    var optionals: Optionals
    var keys: Keys
    var containers: Containers
    var matrix: [[Double]]
    var text: String
  }

  /// Made afresh on each use: LeakSanitizer reports the boxes of `indirect enum` values held
  /// by a global (a `static let`) as leaks on Linux, though the global still refers to them.
  static var sample: [String: Value] {
    [
      "first": Value(
        quote: SampleQuote(bid: 1.25, ask: 1.5, volume: 100),
        shapes: [.circle(radius: 1), .labeled(name: "é", tags: ["t"], inner: .rect(1, 2))],
        optionals: Optionals(int: 5, nested: .some(nil), list: [1, nil], inner: Named(name: "i")),
        keys: Keys(
          strings: ["k": 1], ints: [2: "two"], points: [Point(x: 1, y: 2): []], colors: [.red: 3],
          uuids: [UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16)): "u"]),
        containers: .sample, matrix: [[1, 2], [], [.infinity]], text: "😀 text"),
      "second": Value(
        quote: SampleQuote(bid: -1, ask: 0, volume: -5), shapes: [],
        optionals: Optionals(int: nil, nested: nil, list: nil, inner: nil),
        keys: Keys(strings: [:], ints: [:], points: [:], colors: [:], uuids: [:]),
        containers: .sample, matrix: [], text: ""),
    ]
  }
}

private class Animal: Codable {
  var name: String
  var age: Int

  init(name: String, age: Int) {
    self.name = name
    self.age = age
  }
}

/// Encodes its superclass with `superEncoder()`, as hand-written subclasses do.
private class Dog: Animal {
  var tricks: [String]

  init(name: String, age: Int, tricks: [String]) {
    self.tricks = tricks
    super.init(name: name, age: age)
  }

  enum CodingKeys: String, CodingKey { case tricks }

  required init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    tricks = try container.decode([String].self, forKey: .tricks)
    try super.init(from: container.superDecoder())
  }

  override func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(tricks, forKey: .tricks)
    try super.encode(to: container.superEncoder())
  }
}

/// Encodes its superclass into the same encoder, as the other common pattern does.
private final class Puppy: Dog {
  var toy: String

  init(name: String, age: Int, tricks: [String], toy: String) {
    self.toy = toy
    super.init(name: name, age: age, tricks: tricks)
  }

  enum PuppyKeys: String, CodingKey { case toy }

  required init(from decoder: any Decoder) throws {
    toy = try decoder.container(keyedBy: PuppyKeys.self).decode(String.self, forKey: .toy)
    try super.init(from: decoder)
  }

  override func encode(to encoder: any Encoder) throws {
    try super.encode(to: encoder)
    var container = encoder.container(keyedBy: PuppyKeys.self)
    try container.encode(toy, forKey: .toy)
  }
}

/// Uses every container method by hand.
private struct Containers: Codable, Equatable {
  var number: Int
  var point: Point
  var words: [String]
  var extra: String

  static let sample = Containers(
    number: 42, point: Point(x: 3, y: 4), words: ["a", "bc"], extra: "super")

  enum Keys: String, CodingKey { case number, point, words, extra, inner }
  enum PointKeys: String, CodingKey { case x, y }

  init(number: Int, point: Point, words: [String], extra: String) {
    self.number = number
    self.point = point
    self.words = words
    self.extra = extra
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Keys.self)
    try container.encode(number, forKey: .number)
    var point = container.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
    try point.encode(self.point.x, forKey: .x)
    try point.encode(self.point.y, forKey: .y)
    var words = container.nestedUnkeyedContainer(forKey: .words)
    try words.encode(self.words.count)
    for word in self.words { try words.encode(word) }
    try words.encodeNil()
    var pair = words.nestedUnkeyedContainer()
    try pair.encode(true)
    try pair.encode(Int8(-8))
    var keyed = words.nestedContainer(keyedBy: PointKeys.self)
    try keyed.encode(UInt16(16), forKey: .x)
    var single = words.superEncoder().singleValueContainer()
    try single.encode("element")
    #expect(words.count == self.words.count + 5)
    var extra = container.superEncoder(forKey: .extra).singleValueContainer()
    try extra.encode(self.extra)
  }

  /// Checks what the payload should hold; throws rather than records an issue, as the fuzz
  /// test decodes this type from damaged payloads.
  private static func check(_ condition: Bool, _ what: String) throws {
    guard condition else {
      throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: what))
    }
  }

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: Keys.self)
    let keys = Set(container.allKeys.map(\.stringValue))
    try Self.check(keys == ["number", "point", "words", "extra"], "keys \(keys)")
    number = try container.decode(Int.self, forKey: .number)
    let point = try container.nestedContainer(keyedBy: PointKeys.self, forKey: .point)
    self.point = Point(
      x: try point.decode(Int.self, forKey: .x), y: try point.decode(Int.self, forKey: .y))
    var words = try container.nestedUnkeyedContainer(forKey: .words)
    let count = try words.decode(Int.self)
    try Self.check(words.count == count + 5, "count")
    var list: [String] = []
    for _ in 0..<count { list.append(try words.decode(String.self)) }
    self.words = list
    try Self.check(try words.decodeNil(), "nil")
    try Self.check(try !words.decodeNil(), "not nil")
    var pair = try words.nestedUnkeyedContainer()
    try Self.check(try pair.decode(Bool.self), "true")
    try Self.check(try pair.decode(Int8.self) == -8, "-8")
    try Self.check(pair.isAtEnd, "pair at end")
    let keyed = try words.nestedContainer(keyedBy: PointKeys.self)
    try Self.check(try keyed.decode(UInt16.self, forKey: .x) == 16, "16")
    let element = try words.superDecoder().singleValueContainer().decode(String.self)
    try Self.check(element == "element", "element")
    try Self.check(words.isAtEnd, "words at end")
    try Self.check(words.currentIndex == count + 5, "index")
    do {
      _ = try words.decode(Int.self)
      try Self.check(false, "decoded past the end")
    } catch DecodingError.valueNotFound {}
    extra = try container.superDecoder(forKey: .extra).singleValueContainer().decode(String.self)
    try Self.check(!container.contains(.inner), "inner")
    do {
      _ = try container.nestedContainer(keyedBy: PointKeys.self, forKey: .inner)
      try Self.check(false, "found inner")
    } catch DecodingError.keyNotFound {}
  }
}

/// A struct encoded through a single value container.
private struct Wrapper: Codable {
  var quote: SampleQuote

  init(quote: SampleQuote) { self.quote = quote }

  init(from decoder: any Decoder) throws {
    quote = try decoder.singleValueContainer().decode(SampleQuote.self)
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(quote)
  }
}

private struct Meters: Codable, Equatable {
  var value: Double

  init(value: Double) { self.value = value }

  init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    #expect(!container.decodeNil())
    value = try container.decode(Double.self)
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(value)
  }
}

private struct Nothing: Codable {
  init() {}
  init(from decoder: any Decoder) throws {}
  func encode(to encoder: any Encoder) throws {}
}

/// Decodes its fields in the reverse of the order it encodes them.
private struct Reversed: Codable, Equatable {
  var a: Int
  var b: String
  var c: [Int]
  var d: Double

  init(a: Int, b: String, c: [Int], d: Double) {
    (self.a, self.b, self.c, self.d) = (a, b, c, d)
  }

  enum CodingKeys: CodingKey { case a, b, c, d }

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    d = try container.decode(Double.self, forKey: .d)
    c = try container.decode([Int].self, forKey: .c)
    b = try container.decode(String.self, forKey: .b)
    a = try container.decode(Int.self, forKey: .a)
  }
}

/// SampleQuote's fields, declared (and so decoded) in another order.
private struct ReversedQuote: Codable, Equatable {
  var volume: Int
  var ask: Double
  var bid: Double
}

/// Reads a SampleQuote's payload, asking for keys that are and are not there.
private struct Probe: Decodable {
  var containsBid: Bool
  var containsMissing: Bool
  var missingIfPresent: Int?
  var missingStringIfPresent: String?
  var keys: [String]

  enum CodingKeys: String, CodingKey { case bid, ask, volume, missing }

  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    containsBid = container.contains(.bid)
    containsMissing = container.contains(.missing)
    missingIfPresent = try container.decodeIfPresent(Int.self, forKey: .missing)
    missingStringIfPresent = try container.decodeIfPresent(String.self, forKey: .missing)
    keys = container.allKeys.map(\.stringValue)
    #expect(throws: DecodingError.self) { try container.decode(Int.self, forKey: .missing) }
    #expect(throws: DecodingError.self) { try container.decodeNil(forKey: .missing) }
    #expect(try container.decodeIfPresent(Double.self, forKey: .bid) != nil)
  }
}

private struct Outer: Codable {
  var items: [Named]
}

private struct OuterOfInts: Codable {
  var items: [WrongType]
}

private struct Failure: Error, Equatable {
  var id: Int
}

private struct Failing: Codable, Hashable {
  var id: Int

  func encode(to encoder: any Encoder) throws {
    var container = encoder.unkeyedContainer()
    try container.encode(id)
    throw Failure(id: id)
  }
}

private struct Holder<Value: Encodable>: Encodable {
  var value: Value
}

/// Catches the failure of one field and encodes another.
private struct Recovering: Codable, Equatable {
  var good: Int

  enum CodingKeys: CodingKey { case bad, good }

  init(good: Int) { self.good = good }

  init(from decoder: any Decoder) throws {
    good = try decoder.container(keyedBy: CodingKeys.self).decode(Int.self, forKey: .good)
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    #expect(throws: Failure.self) { try container.encode(Failing(id: 9), forKey: .bad) }
    try container.encode(good, forKey: .good)
  }
}

private struct RecoveringProbe: Decodable {
  var containsBad: Bool

  init(from decoder: any Decoder) throws {
    containsBad = try decoder.container(keyedBy: Recovering.CodingKeys.self).contains(.bad)
  }
}

/// A linked list, one keyed container per node.
private final class Node: Codable {
  let child: Node?

  init(child: Node?) { self.child = child }

  static func chain(depth: Int) -> Node {
    var node = Node(child: nil)
    for _ in 1..<depth { node = Node(child: node) }
    return node
  }

  var depth: Int {
    var count = 1
    var node = self
    while let child = node.child {
      count += 1
      node = child
    }
    return count
  }
}

/// Writes to a nested container after its parent has written again.
private struct OutOfOrder: Encodable {
  enum CodingKeys: CodingKey { case a, b }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    var nested = container.nestedUnkeyedContainer(forKey: .a)
    try container.encode(1, forKey: .b)
    try nested.encode(2)
  }
}
