import Foundation

// The decoding half of `BinarySnapshotCoder`; the format is described in BinaryFormat.swift.
//
// Hostile input: every read is checked against the end of the value, container or payload it
// belongs to before it happens, and every declared count or length against the bytes left
// before anything is allocated for it, so no input traps or allocates more than a small
// multiple of its own size. Containers deeper than `_BinaryFormat.maximumDepth` throw before
// they recurse. A container's byte count lets the reader skip any value in O(1), so a keyed
// container is checked once, field by field, when it is opened, and a field is then found by
// trying the field after the last one read (synthesized code reads in the order it wrote)
// before a linear search.
//
// One decoder object serves a whole payload: decoding a nested value saves its frame (the
// value's bytes, depth and coding path), decodes, and restores it, as the call stack nests.

/// Reads a binary payload back into a dictionary.
enum _BinaryDecoding {
  static func decode<Key: Decodable & Hashable, Value: Decodable>(
    _ payload: Data
  ) throws -> [Key: Value] {
    try decode(bytes: [UInt8](payload))
  }

  /// Decodes the payload in `bytes`, which the decoder reads without copying.
  static func decode<Key: Decodable & Hashable, Value: Decodable>(
    bytes: [UInt8]
  ) throws -> [Key: Value] {
    let decoder = try _BinaryDecoder(bytes: bytes)
    if Key.self == String.self {
      let entries: [String: Value] = try decoder.decodeStringKeyedEntries()
      // Key is String, so the bit cast is the identity; `as?` would copy the dictionary.
      return unsafeBitCast(entries, to: [Key: Value].self)
    }
    return try decoder.decodeEntries()
  }
}

/// A decoding failure found by a low-level read, before its coding path is known; the
/// container or decoder that asked turns it into a `DecodingError`.
private struct _BinaryFault: Error {
  enum Kind {
    case corrupted
    case mismatch(any Any.Type)
    case missing(any Any.Type)
  }

  let kind: Kind
  let offset: Int
  let message: String

  static func corrupted(_ offset: Int, _ message: String) -> _BinaryFault {
    _BinaryFault(kind: .corrupted, offset: offset, message: message)
  }

  func error(path: [any CodingKey]) -> DecodingError {
    let context = DecodingError.Context(
      codingPath: path, debugDescription: "\(message), at byte offset \(offset).")
    return switch kind {
    case .corrupted: .dataCorrupted(context)
    case .mismatch(let type): .typeMismatch(type, context)
    case .missing(let type): .valueNotFound(type, context)
    }
  }
}

/// The path from a container's frame to a container nested in it without a frame of its own
/// (`nestedContainer`, `nestedUnkeyedContainer`); rare, so a linked list.
private final class _BinaryPathChain {
  let parent: _BinaryPathChain?
  let component: _BinaryPathComponent

  init(parent: _BinaryPathChain?, component: _BinaryPathComponent) {
    self.parent = parent
    self.component = component
  }

  /// The components from the outermost on.
  var components: [_BinaryPathComponent] {
    var result: [_BinaryPathComponent] = []
    var link: _BinaryPathChain? = self
    while let current = link {
      result.append(current.component)
      link = current.parent
    }
    return result.reversed()
  }
}

/// Where a container sits: its contents, depth and coding path.
private struct _BinaryPlace {
  /// The first byte of the contents (after the tag and byte count).
  let start: Int
  /// The end of the contents.
  let end: Int
  /// The number of containers around the values inside, this one included.
  let depth: Int
  /// The length of the decoder's path when the container's frame was current.
  let pathCount: Int
  /// The steps from that frame to this container, for nested containers.
  let chain: _BinaryPathChain?

  func nestedChain(_ component: _BinaryPathComponent) -> _BinaryPathChain {
    _BinaryPathChain(parent: chain, component: component)
  }
}

/// The string table of a payload: every field name, as a `String`, or, for a table that
/// would take much more memory than the payload, as positions in the payload.
///
/// A `String` takes 16 bytes however short it is, and storage of its own beyond 15 bytes, while
/// a string of the table can take a single byte: a payload made of empty strings would take 16
/// times its size in memory. The table keeps the strings as `String`s while they take at most
/// the payload's size (or 64 KiB). Past that, it keeps the position of every 16th string (at
/// most half the payload's size) and compares a field's name with the payload's bytes, skipping
/// at most 15 strings from the nearest position kept. Payloads the encoder wrote cross that
/// line too, not only crafted ones: a value holding a `[String: X]` with tens of thousands of
/// short distinct keys puts each key in the table in a few bytes, where a `String` takes 16.
///
/// Either way a field's name matches a string of the table as Swift compares `String`s, by
/// canonical equivalence ("é" as one scalar matches "e" followed by a combining accent): the
/// encoder's table holds each name once by that comparison, so a name may be stored in
/// another, equivalent, form than a field that uses it.
private struct _BinaryNames {
  /// Every string, or none when they would take too much memory.
  private let strings: [String]
  /// When `strings` is empty: the offset of the length of every 16th string.
  private let checkpoints: [Int]
  /// The number of strings.
  let count: Int

  private static let checkpointInterval = 16

  /// Reads and checks the table that starts at `position`, and moves `position` past it.
  init(_ bytes: [UInt8], _ position: inout Int) throws {
    let count = try _BinaryDecoder.readVarint(bytes, &position, limit: bytes.count)
    // Each string takes at least its one-byte length.
    guard count <= UInt64(bytes.count - position) else {
      throw _BinaryFault.corrupted(
        position,
        "The string table declares \(count) strings but only \(bytes.count - position) bytes"
          + " follow"
      )
    }
    self.count = Int(count)
    // First the strings' bounds, and the memory they would take as `String`s.
    let start = position
    var cost = 0
    for _ in 0..<self.count {
      let end = try Self.skip(bytes, &position)
      let length = end - position
      cost += MemoryLayout<String>.stride + (length > 15 ? length + 64 : 0)
      position = end
    }
    let tableEnd = position
    position = start
    if cost <= max(bytes.count, 1 << 16) {
      var strings: [String] = []
      strings.reserveCapacity(self.count)
      for _ in 0..<self.count {
        let stringStart = position
        let end = try Self.skip(bytes, &position)
        guard let string = _BinaryDecoder.string(bytes, position, end) else {
          throw Self.invalid(stringStart)
        }
        strings.append(string)
        position = end
      }
      self.strings = strings
      checkpoints = []
    } else {
      var checkpoints: [Int] = []
      checkpoints.reserveCapacity(self.count / Self.checkpointInterval + 1)
      for index in 0..<self.count {
        if index % Self.checkpointInterval == 0 { checkpoints.append(position) }
        let stringStart = position
        let end = try Self.skip(bytes, &position)
        guard Self.isValidUTF8(bytes, position, end) else { throw Self.invalid(stringStart) }
        position = end
      }
      strings = []
      self.checkpoints = checkpoints
    }
    position = tableEnd
  }

  /// Reads the length of the string at `position`, checks that its bytes follow, moves
  /// `position` to them and returns their end.
  private static func skip(_ bytes: [UInt8], _ position: inout Int) throws -> Int {
    let start = position
    let length = try _BinaryDecoder.readVarint(bytes, &position, limit: bytes.count)
    guard length <= UInt64(bytes.count - position) else {
      throw _BinaryFault.corrupted(start, "A string of the string table overruns the payload")
    }
    return position + Int(length)
  }

  private static func invalid(_ offset: Int) -> _BinaryFault {
    .corrupted(offset, "A string of the string table is not valid UTF-8")
  }

  /// Whether `bytes[start..<end]` is valid UTF-8, checked without making a `String`.
  private static func isValidUTF8(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Bool {
    var index = start
    while index < end, bytes[index] < 0x80 { index += 1 }
    if index == end { return true }
    var iterator = bytes[index..<end].makeIterator()
    var decoder = UTF8()
    while true {
      switch decoder.decode(&iterator) {
      case .scalarValue: continue
      case .emptyInput: return true
      case .error: return false
      }
    }
  }

  /// The bytes of string `index`, when the table keeps positions.
  private func range(_ index: Int, in bytes: [UInt8]) -> Range<Int> {
    var position = checkpoints[index / Self.checkpointInterval]
    // The table was checked when it was read, so the reads succeed.
    for _ in 0..<index % Self.checkpointInterval {
      position = (try? Self.skip(bytes, &position)) ?? bytes.count
    }
    let end = (try? Self.skip(bytes, &position)) ?? position
    return position..<end
  }

  /// Whether string `index`, less than ``count``, is `name`: canonically equivalent to it,
  /// as `==` on `String`s tells, whether the table keeps `String`s or positions.
  @inline(__always)
  func matches(_ index: Int, _ name: String, in bytes: [UInt8]) -> Bool {
    if index < strings.count { return strings[index] == name }
    let range = range(index, in: bytes)
    if name.utf8.count == range.count && name.utf8.elementsEqual(bytes[range]) { return true }
    // Other bytes may still be an equivalent form of the name, but not if both are ASCII.
    if name.utf8.allSatisfy({ $0 < 0x80 }) && bytes[range].allSatisfy({ $0 < 0x80 }) {
      return false
    }
    return String(decoding: bytes[range], as: UTF8.self) == name
  }

  /// String `index`, less than ``count``.
  func name(_ index: Int, in bytes: [UInt8]) -> String {
    if index < strings.count { return strings[index] }
    return String(decoding: bytes[range(index, in: bytes)], as: UTF8.self)
  }
}

private final class _BinaryDecoder: Decoder {
  /// The payload. Immutable, so reads need no exclusivity checks.
  let bytes: [UInt8]
  /// The string table.
  let names: _BinaryNames
  /// The offset of the entry count, after the string table.
  private let bodyStart: Int

  // The decoder serves one `decode` call on one thread, and no access to these properties spans
  // a call that could reach another (no user code runs inside one), so the runtime's
  // exclusivity checks would find nothing.

  // The current frame: the value a `T(from: self)` call decodes.
  @exclusivity(unchecked) private var frameStart = 0
  @exclusivity(unchecked) private var frameEnd = 0
  @exclusivity(unchecked) private var frameDepth = 0
  /// The coding path of the current frame, and of the frames that enclose it.
  @exclusivity(unchecked) private var path: [_BinaryPathComponent] = []

  /// Per depth, the keyed container last read there (the start of its contents) and where its
  /// next field starts.
  @exclusivity(unchecked) private var hints: [(start: Int, next: Int)] = []

  var codingPath: [any CodingKey] { path.compactMap(\.key) }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  init(bytes: [UInt8]) throws {
    self.bytes = bytes
    var position = 0
    do {
      guard let version = bytes.first else {
        throw _BinaryFault.corrupted(0, "The payload is empty")
      }
      guard version == _BinaryFormat.version else {
        throw _BinaryFault.corrupted(0, "Unknown format version \(version)")
      }
      position = 1
      names = try _BinaryNames(bytes, &position)
      self.bodyStart = position
    } catch let fault as _BinaryFault {
      throw fault.error(path: [])
    }
  }

  // MARK: Entries

  func decodeStringKeyedEntries<Value: Decodable>() throws -> [String: Value] {
    var position = bodyStart
    let count = try entryCount(&position, entrySize: MemoryLayout<(String, Value)>.stride)
    var result = [String: Value](minimumCapacity: count.reserve)
    for index in 0..<count.declared {
      let keyStart = position
      let (valueStart, valueEnd) = try entryBounds(keyStart, index: index)
      let key: String
      do {
        key = try readString(keyStart, valueStart)
      } catch let fault as _BinaryFault {
        throw fault.error(path: [_BinaryKey(intValue: 2 * index)])
      }
      let value = try decodeValue(
        Value.self, start: valueStart, end: valueEnd, depth: 0, pathCount: 0, chain: nil,
        component: .string(key))
      if result.updateValue(value, forKey: key) != nil {
        throw duplicateKey(key, index: index, offset: keyStart)
      }
      position = valueEnd
    }
    try checkEnd(position)
    return result
  }

  func decodeEntries<Key: Decodable & Hashable, Value: Decodable>() throws -> [Key: Value] {
    var position = bodyStart
    let count = try entryCount(&position, entrySize: MemoryLayout<(Key, Value)>.stride)
    var result = [Key: Value](minimumCapacity: count.reserve)
    for index in 0..<count.declared {
      let keyStart = position
      let (valueStart, valueEnd) = try entryBounds(keyStart, index: index)
      let key = try decodeValue(
        Key.self, start: keyStart, end: valueStart, depth: 0, pathCount: 0, chain: nil,
        component: .index(2 * index))
      let value = try decodeValue(
        Value.self, start: valueStart, end: valueEnd, depth: 0, pathCount: 0, chain: nil,
        component: .index(2 * index + 1))
      if result.updateValue(value, forKey: key) != nil {
        throw duplicateKey(key, index: index, offset: keyStart)
      }
      position = valueEnd
    }
    try checkEnd(position)
    return result
  }

  /// Reads the entry count: the declared one, and how many entries to reserve room for.
  private func entryCount(
    _ position: inout Int, entrySize: Int
  ) throws -> (declared: Int, reserve: Int) {
    let start = position
    do {
      let count = try Self.readVarint(bytes, &position, limit: bytes.count)
      // An entry takes at least two bytes: a key's tag and a value's tag.
      let remaining = bytes.count - position
      guard count <= UInt64(remaining / 2) else {
        throw _BinaryFault.corrupted(
          start, "The payload declares \(count) entries but only \(remaining) bytes follow")
      }
      // Room for the declared count, but for no more entries than would take the bytes that
      // follow in memory: the dictionary grows beyond that if the entries really are there.
      let reserve = min(Int(count), max(16, remaining / max(1, entrySize)))
      return (Int(count), reserve)
    } catch let fault as _BinaryFault {
      throw fault.error(path: [])
    }
  }

  /// The bounds of an entry's value, and so of its key.
  private func entryBounds(_ keyStart: Int, index: Int) throws -> (Int, Int) {
    do {
      let valueStart = try valueEnd(keyStart, limit: bytes.count)
      return (valueStart, try valueEnd(valueStart, limit: bytes.count))
    } catch let fault as _BinaryFault {
      throw fault.error(path: [_BinaryKey(intValue: 2 * index)])
    }
  }

  private func duplicateKey(_ key: Any, index: Int, offset: Int) -> DecodingError {
    .dataCorrupted(
      DecodingError.Context(
        codingPath: [_BinaryKey(intValue: 2 * index)],
        debugDescription:
          "Entry \(index) repeats the key \(String(reflecting: key)), at byte offset \(offset)."))
  }

  private func checkEnd(_ position: Int) throws {
    guard position == bytes.count else {
      throw DecodingError.dataCorrupted(
        DecodingError.Context(
          codingPath: [],
          debugDescription:
            "\(bytes.count - position) bytes follow the last entry, at byte offset \(position)."))
    }
  }

  // MARK: Reading

  @inline(__always)
  static func readVarint(_ bytes: [UInt8], _ position: inout Int, limit: Int) throws -> UInt64 {
    guard position < limit else {
      throw _BinaryFault.corrupted(position, "The data ends inside a number")
    }
    let first = bytes[position]
    position += 1
    if first < 0x80 { return UInt64(first) }
    return try readLongVarint(bytes, first, &position, limit: limit)
  }

  private static func readLongVarint(
    _ bytes: [UInt8], _ first: UInt8, _ position: inout Int, limit: Int
  ) throws -> UInt64 {
    let start = position - 1
    var result = UInt64(first & 0x7F)
    var shift: UInt64 = 7
    while true {
      guard position < limit else {
        throw _BinaryFault.corrupted(start, "The data ends inside a number")
      }
      let byte = bytes[position]
      position += 1
      // The 10th byte holds bit 63 only.
      guard shift < 63 || byte <= 1 else {
        throw _BinaryFault.corrupted(start, "A number is longer than 64 bits")
      }
      result |= UInt64(byte & 0x7F) << shift
      if byte < 0x80 { return result }
      shift += 7
    }
  }

  @inline(__always)
  func varint(_ position: inout Int, limit: Int) throws -> UInt64 {
    try Self.readVarint(bytes, &position, limit: limit)
  }

  /// Reads a varint byte count and checks that that many bytes follow before `limit`; returns
  /// the end of those bytes.
  @inline(__always)
  private func counted(_ position: inout Int, limit: Int, from start: Int) throws -> Int {
    let count = try varint(&position, limit: limit)
    guard count <= UInt64(limit - position) else {
      throw _BinaryFault.corrupted(
        start, "A value declares \(count) bytes but only \(limit - position) remain")
    }
    return position + Int(count)
  }

  /// The end of the value that starts at `start`, which must end by `limit`: O(1), as every
  /// value of variable size declares its byte count.
  @inline(__always)
  func valueEnd(_ start: Int, limit: Int) throws -> Int {
    guard start < limit else {
      throw _BinaryFault.corrupted(start, "The data ends where a value should start")
    }
    var position = start + 1
    let size: Int
    switch bytes[start] {
    case _BinaryFormat.nilTag, _BinaryFormat.falseTag, _BinaryFormat.trueTag:
      return position
    case _BinaryFormat.intTag, _BinaryFormat.uintTag:
      _ = try varint(&position, limit: limit)
      return position
    case _BinaryFormat.int128Tag, _BinaryFormat.uint128Tag: size = 16
    case _BinaryFormat.float32Tag: size = 4
    case _BinaryFormat.float64Tag: size = 8
    case _BinaryFormat.stringTag, _BinaryFormat.bytesTag, _BinaryFormat.keyedTag,
      _BinaryFormat.unkeyedTag:
      return try counted(&position, limit: limit, from: start)
    case let tag:
      throw _BinaryFault.corrupted(start, "Unknown tag \(tag)")
    }
    guard size <= limit - position else {
      throw _BinaryFault.corrupted(start, "The data ends inside a number")
    }
    return position + size
  }

  /// The tag of the value in `start..<end`; throws when there is no value.
  @inline(__always)
  private func tag(_ start: Int, _ end: Int, for type: Any.Type) throws -> UInt8 {
    guard start < end else {
      throw _BinaryFault(
        kind: .missing(type), offset: start, message: "Expected \(type) but found no value")
    }
    return bytes[start]
  }

  /// The error for a value whose tag is not what `type` needs.
  private func mismatch(_ type: Any.Type, tag: UInt8, at offset: Int) -> _BinaryFault {
    let found = _BinaryFormat.describe(tag: tag)
    return _BinaryFault(
      kind: tag == _BinaryFormat.nilTag ? .missing(type) : .mismatch(type), offset: offset,
      message: "Expected \(type) but found \(found)")
  }

  /// 8 little-endian bytes; the caller checked they are within the value.
  @inline(__always)
  private func fixed64(_ position: Int) -> UInt64 {
    var result: UInt64 = 0
    for index in 0..<8 {
      result |= UInt64(bytes[position + index]) << (8 * UInt64(index))
    }
    return result
  }

  /// 16 little-endian bytes; the caller checked they are within the value.
  private func fixed128(_ position: Int) -> UInt128 {
    UInt128(fixed64(position + 8)) << 64 | UInt128(fixed64(position))
  }

  /// Checks that a fixed-size body fits in the value.
  @inline(__always)
  private func checkFixed(_ start: Int, _ end: Int, size: Int) throws {
    guard size < end - start else {
      throw _BinaryFault.corrupted(start, "The data ends inside a number")
    }
  }

  func readNil(_ start: Int, _ end: Int) -> Bool {
    start >= end || bytes[start] == _BinaryFormat.nilTag
  }

  func readBool(_ start: Int, _ end: Int) throws -> Bool {
    switch try tag(start, end, for: Bool.self) {
    case _BinaryFormat.trueTag: return true
    case _BinaryFormat.falseTag: return false
    case let tag: throw mismatch(Bool.self, tag: tag, at: start)
    }
  }

  func readInteger<T: FixedWidthInteger>(_ type: T.Type, _ start: Int, _ end: Int) throws -> T {
    var position = start + 1
    switch try tag(start, end, for: T.self) {
    case _BinaryFormat.intTag:
      let raw = try varint(&position, limit: end)
      let value = Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
      if let result = T(exactly: value) { return result }
      throw outOfRange(value, T.self, at: start)
    case _BinaryFormat.uintTag:
      let value = try varint(&position, limit: end)
      if let result = T(exactly: value) { return result }
      throw outOfRange(value, T.self, at: start)
    case _BinaryFormat.int128Tag:
      try checkFixed(start, end, size: 16)
      let value = Int128(truncatingIfNeeded: fixed128(position))
      if let result = T(exactly: value) { return result }
      throw outOfRange(value, T.self, at: start)
    case _BinaryFormat.uint128Tag:
      try checkFixed(start, end, size: 16)
      let value = fixed128(position)
      if let result = T(exactly: value) { return result }
      throw outOfRange(value, T.self, at: start)
    case let tag:
      throw mismatch(T.self, tag: tag, at: start)
    }
  }

  private func outOfRange(
    _ value: some BinaryInteger, _ type: Any.Type, at offset: Int
  ) -> _BinaryFault {
    _BinaryFault.corrupted(offset, "The number \(value) does not fit in \(type)")
  }

  func readDouble(_ start: Int, _ end: Int) throws -> Double {
    switch try tag(start, end, for: Double.self) {
    case _BinaryFormat.float64Tag:
      try checkFixed(start, end, size: 8)
      return Double(bitPattern: fixed64(start + 1))
    case _BinaryFormat.float32Tag:
      return Double(try readFloat(start, end))
    case let tag:
      throw mismatch(Double.self, tag: tag, at: start)
    }
  }

  func readFloat(_ start: Int, _ end: Int) throws -> Float {
    switch try tag(start, end, for: Float.self) {
    case _BinaryFormat.float32Tag:
      try checkFixed(start, end, size: 4)
      var bits: UInt32 = 0
      for index in 0..<4 {
        bits |= UInt32(bytes[start + 1 + index]) << (8 * UInt32(index))
      }
      return Float(bitPattern: bits)
    case _BinaryFormat.float64Tag:
      let value = try readDouble(start, end)
      // As JSONDecoder: a finite Double beyond Float's range does not fit.
      guard !value.isFinite || abs(value) <= Double(Float.greatestFiniteMagnitude) else {
        throw _BinaryFault.corrupted(start, "The number \(value) does not fit in Float")
      }
      return Float(value)
    case let tag:
      throw mismatch(Float.self, tag: tag, at: start)
    }
  }

  func readString(_ start: Int, _ end: Int) throws -> String {
    let tag = try tag(start, end, for: String.self)
    guard tag == _BinaryFormat.stringTag else { throw mismatch(String.self, tag: tag, at: start) }
    var position = start + 1
    let stringEnd = try counted(&position, limit: end, from: start)
    guard let string = Self.string(bytes, position, stringEnd) else {
      throw _BinaryFault.corrupted(start, "A string is not valid UTF-8")
    }
    return string
  }

  /// The string of valid UTF-8 bytes, or nil.
  static func string(_ bytes: [UInt8], _ start: Int, _ end: Int) -> String? {
    var ascii = true
    for index in start..<end where bytes[index] >= 0x80 {
      ascii = false
      break
    }
    // ASCII needs no validation, and `String(decoding:as:)` is several times faster than
    // `String(validating:as:)`.
    if ascii { return String(decoding: bytes[start..<end], as: UTF8.self) }
    return String(validating: bytes[start..<end], as: UTF8.self)
  }

  func readData(_ start: Int, _ end: Int) throws -> Data {
    let tag = try tag(start, end, for: Data.self)
    guard tag == _BinaryFormat.bytesTag else { throw mismatch(Data.self, tag: tag, at: start) }
    var position = start + 1
    let dataEnd = try counted(&position, limit: end, from: start)
    return Data(bytes[position..<dataEnd])
  }

  /// Whether values of `type` have a binary form of their own, read by `readPrimitive`.
  @inline(__always)
  private static func isPrimitive(_ type: Any.Type) -> Bool {
    type == String.self || type == Double.self || type == Int.self || type == Bool.self
      || type == Data.self || type == Float.self || type == Int64.self || type == UInt64.self
      || type == UInt8.self
  }

  /// Reads a value of a type for which `isPrimitive` holds.
  private func readPrimitive<T>(_ type: T.Type, _ start: Int, _ end: Int) throws -> T {
    // Each `as? T` follows a check that T is the very type of the value, so it succeeds.
    let value: T? =
      if T.self == String.self { try readString(start, end) as? T } else if T.self == Double.self {
        try readDouble(start, end) as? T
      } else if T.self == Int.self {
        try readInteger(Int.self, start, end) as? T
      } else if T.self == Bool.self { try readBool(start, end) as? T } else if T.self == Data.self {
        try readData(start, end) as? T
      } else if T.self == Float.self {
        try readFloat(start, end) as? T
      } else if T.self == Int64.self {
        try readInteger(Int64.self, start, end) as? T
      } else if T.self == UInt64.self {
        try readInteger(UInt64.self, start, end) as? T
      } else if T.self == UInt8.self { try readInteger(UInt8.self, start, end) as? T } else { nil }
    guard let value else {
      throw _BinaryFault.corrupted(start, "Cannot read \(T.self) as a primitive")
    }
    return value
  }

  // MARK: Keyed lookup

  /// The bounds of the value of the field `name` of the keyed container whose contents are
  /// `start..<end`, `depth` deep, or nil when it is absent. Tries the field after the one last
  /// read there first.
  @inline(__always)
  func field(_ name: String, start: Int, end: Int, depth: Int) -> (start: Int, end: Int)? {
    var hinted = start
    if depth < hints.count, hints[depth].start == start { hinted = hints[depth].next }
    if let found = scan(for: name, from: hinted, to: end, start: start, end: end, depth: depth) {
      return found
    }
    guard hinted > start else { return nil }
    return scan(for: name, from: start, to: hinted, start: start, end: end, depth: depth)
  }

  /// Looks for the field `name` among the fields from `from` up to `to`.
  private func scan(
    for name: String, from: Int, to: Int, start: Int, end: Int, depth: Int
  ) -> (start: Int, end: Int)? {
    var position = from
    // The fields were checked when the container was opened, so the reads succeed.
    while position < to,
      let index = try? varint(&position, limit: end),
      let valueEnd = try? valueEnd(position, limit: end)
    {
      if names.matches(Int(index), name, in: bytes) {
        if depth >= hints.count {
          hints += repeatElement((start: -1, next: 0), count: depth + 1 - hints.count)
        }
        hints[depth] = (start, valueEnd)
        return (position, valueEnd)
      }
      position = valueEnd
    }
    return nil
  }

  /// The names of the fields of the keyed container at `place`, in order.
  func fieldNames(_ place: _BinaryPlace) -> [String] {
    var result: [String] = []
    var position = place.start
    // The fields were checked when the container was opened.
    while position < place.end,
      let index = try? varint(&position, limit: place.end),
      let end = try? valueEnd(position, limit: place.end)
    {
      result.append(names.name(Int(index), in: bytes))
      position = end
    }
    return result
  }

  // MARK: Frames and paths

  /// The coding path of a place, optionally one step further.
  func codingPath(
    _ pathCount: Int, _ chain: _BinaryPathChain?, _ last: _BinaryPathComponent = .none
  ) -> [any CodingKey] {
    var keys = path.prefix(pathCount).compactMap(\.key)
    if let chain { keys += chain.components.compactMap(\.key) }
    if let key = last.key { keys.append(key) }
    return keys
  }

  func codingPath(_ place: _BinaryPlace, _ last: _BinaryPathComponent = .none) -> [any CodingKey] {
    codingPath(place.pathCount, place.chain, last)
  }

  /// Decodes the value in `start..<end`, inside containers `depth` deep, whose path is the
  /// first `pathCount` components of the current path, then `chain`, then `component`.
  func decodeValue<T: Decodable>(
    _ type: T.Type, start: Int, end: Int, depth: Int, pathCount: Int,
    chain: _BinaryPathChain?, component: _BinaryPathComponent
  ) throws -> T {
    if Self.isPrimitive(T.self) {
      do {
        return try readPrimitive(T.self, start, end)
      } catch let fault as _BinaryFault {
        throw fault.error(path: codingPath(pathCount, chain, component))
      }
    }
    let saved = (frameStart, frameEnd, frameDepth)
    while path.count > pathCount { path.removeLast() }
    if let chain { path += chain.components }
    if case .none = component {} else { path.append(component) }
    (frameStart, frameEnd, frameDepth) = (start, end, depth)
    defer {
      (frameStart, frameEnd, frameDepth) = saved
      while path.count > pathCount { path.removeLast() }
    }
    return try T(from: self)
  }

  func decodeValue<T: Decodable>(
    _ type: T.Type, at place: _BinaryPlace, _ bounds: (start: Int, end: Int),
    component: _BinaryPathComponent
  ) throws -> T {
    try decodeValue(
      T.self, start: bounds.start, end: bounds.end, depth: place.depth,
      pathCount: place.pathCount, chain: place.chain, component: component)
  }

  /// A decoder of its own for `super`, starting with the given path.
  func superDecoder(
    _ bounds: (start: Int, end: Int), depth: Int, path: [any CodingKey]
  ) -> _BinaryDecoder {
    _BinaryDecoder(copying: self, bounds: bounds, depth: depth, path: path)
  }

  private init(
    copying other: _BinaryDecoder, bounds: (start: Int, end: Int), depth: Int,
    path: [any CodingKey]
  ) {
    bytes = other.bytes
    names = other.names
    bodyStart = other.bodyStart
    (frameStart, frameEnd, frameDepth) = (bounds.start, bounds.end, depth)
    self.path = path.map { .key($0) }
  }

  // MARK: Containers

  /// Opens the container in `start..<end` of `depth` containers deep.
  private func open(
    _ expected: UInt8, _ type: Any.Type, start: Int, end: Int, depth: Int
  ) throws -> (start: Int, end: Int) {
    let tag = try tag(start, end, for: type)
    guard tag == expected else { throw mismatch(type, tag: tag, at: start) }
    guard depth < _BinaryFormat.maximumDepth else {
      throw _BinaryFault.corrupted(
        start, "Containers nest deeper than \(_BinaryFormat.maximumDepth) levels")
    }
    var position = start + 1
    let contentEnd = try counted(&position, limit: end, from: start)
    return (position, contentEnd)
  }

  func keyedPlace(
    _ bounds: (start: Int, end: Int), depth: Int, pathCount: Int, chain: _BinaryPathChain?
  ) throws -> _BinaryPlace {
    let (start, end) = try open(
      _BinaryFormat.keyedTag, [String: Any].self, start: bounds.start, end: bounds.end,
      depth: depth)
    // Check every field once, so that lookups cannot fail on the bytes.
    var position = start
    while position < end {
      let nameStart = position
      let index = try varint(&position, limit: end)
      guard index < UInt64(names.count) else {
        throw _BinaryFault.corrupted(
          nameStart, "A field name refers to string \(index) of a table of \(names.count)")
      }
      position = try valueEnd(position, limit: end)
    }
    return _BinaryPlace(
      start: start, end: end, depth: depth + 1, pathCount: pathCount, chain: chain)
  }

  func unkeyedPlace(
    _ bounds: (start: Int, end: Int), depth: Int, pathCount: Int, chain: _BinaryPathChain?
  ) throws -> (_BinaryPlace, count: Int) {
    let (start, end) = try open(
      _BinaryFormat.unkeyedTag, [Any].self, start: bounds.start, end: bounds.end, depth: depth)
    // Count the elements, checking each one's bounds.
    var position = start
    var count = 0
    while position < end {
      position = try valueEnd(position, limit: end)
      count += 1
    }
    return (
      _BinaryPlace(start: start, end: end, depth: depth + 1, pathCount: pathCount, chain: chain),
      count
    )
  }

  func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
    do {
      let place = try keyedPlace(
        (frameStart, frameEnd), depth: frameDepth, pathCount: path.count, chain: nil)
      return KeyedDecodingContainer(_BinaryKeyedDecoder<Key>(decoder: self, place: place))
    } catch let fault as _BinaryFault {
      throw fault.error(path: codingPath)
    }
  }

  func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
    do {
      let (place, count) = try unkeyedPlace(
        (frameStart, frameEnd), depth: frameDepth, pathCount: path.count, chain: nil)
      return _BinaryUnkeyedDecoder(decoder: self, place: place, count: count)
    } catch let fault as _BinaryFault {
      throw fault.error(path: codingPath)
    }
  }

  func singleValueContainer() throws -> any SingleValueDecodingContainer {
    _BinarySingleValueDecoder(
      decoder: self, start: frameStart, end: frameEnd, depth: frameDepth, pathCount: path.count)
  }
}

private struct _BinaryKeyedDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
  let decoder: _BinaryDecoder
  let place: _BinaryPlace

  var codingPath: [any CodingKey] { decoder.codingPath(place) }

  var allKeys: [Key] {
    decoder.fieldNames(place).compactMap { Key(stringValue: $0) }
  }

  @inline(__always)
  private func find(_ name: String) -> (start: Int, end: Int)? {
    decoder.field(name, start: place.start, end: place.end, depth: place.depth)
  }

  private func bounds(_ key: Key) throws -> (start: Int, end: Int) {
    guard let bounds = find(key.stringValue) else {
      throw DecodingError.keyNotFound(
        key,
        DecodingError.Context(
          codingPath: codingPath,
          debugDescription:
            "No value for the key \"\(key.stringValue)\" in the keyed container at byte offset "
            + "\(place.start)."
        ))
    }
    return bounds
  }

  @inline(__always)
  private func read<T>(_ key: Key, _ read: (Int, Int) throws -> T) throws -> T {
    let (start, end) = try bounds(key)
    do {
      return try read(start, end)
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .key(key)))
    }
  }

  @inline(__always)
  private func readIfPresent<T>(_ key: Key, _ read: (Int, Int) throws -> T) throws -> T? {
    guard let (start, end) = find(key.stringValue), !decoder.readNil(start, end) else {
      return nil
    }
    do {
      return try read(start, end)
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .key(key)))
    }
  }

  func contains(_ key: Key) -> Bool {
    find(key.stringValue) != nil
  }

  func decodeNil(forKey key: Key) throws -> Bool {
    let (start, end) = try bounds(key)
    return decoder.readNil(start, end)
  }

  func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool {
    try read(key, decoder.readBool)
  }

  func decode(_ type: String.Type, forKey key: Key) throws -> String {
    try read(key, decoder.readString)
  }

  func decode(_ type: Double.Type, forKey key: Key) throws -> Double {
    try read(key, decoder.readDouble)
  }

  func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
    try read(key, decoder.readFloat)
  }

  func decode(_ type: Int.Type, forKey key: Key) throws -> Int {
    try read(key) { try decoder.readInteger(Int.self, $0, $1) }
  }

  func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 {
    try read(key) { try decoder.readInteger(Int8.self, $0, $1) }
  }

  func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
    try read(key) { try decoder.readInteger(Int16.self, $0, $1) }
  }

  func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
    try read(key) { try decoder.readInteger(Int32.self, $0, $1) }
  }

  func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
    try read(key) { try decoder.readInteger(Int64.self, $0, $1) }
  }

  func decode(_ type: Int128.Type, forKey key: Key) throws -> Int128 {
    try read(key) { try decoder.readInteger(Int128.self, $0, $1) }
  }

  func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt {
    try read(key) { try decoder.readInteger(UInt.self, $0, $1) }
  }

  func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
    try read(key) { try decoder.readInteger(UInt8.self, $0, $1) }
  }

  func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
    try read(key) { try decoder.readInteger(UInt16.self, $0, $1) }
  }

  func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
    try read(key) { try decoder.readInteger(UInt32.self, $0, $1) }
  }

  func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
    try read(key) { try decoder.readInteger(UInt64.self, $0, $1) }
  }

  func decode(_ type: UInt128.Type, forKey key: Key) throws -> UInt128 {
    try read(key) { try decoder.readInteger(UInt128.self, $0, $1) }
  }

  func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
    try decoder.decodeValue(T.self, at: place, try bounds(key), component: .key(key))
  }

  func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? {
    try readIfPresent(key, decoder.readBool)
  }

  func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
    try readIfPresent(key, decoder.readString)
  }

  func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? {
    try readIfPresent(key, decoder.readDouble)
  }

  func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? {
    try readIfPresent(key, decoder.readFloat)
  }

  func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? {
    try readIfPresent(key) { try decoder.readInteger(Int.self, $0, $1) }
  }

  func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? {
    try readIfPresent(key) { try decoder.readInteger(Int8.self, $0, $1) }
  }

  func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? {
    try readIfPresent(key) { try decoder.readInteger(Int16.self, $0, $1) }
  }

  func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? {
    try readIfPresent(key) { try decoder.readInteger(Int32.self, $0, $1) }
  }

  func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? {
    try readIfPresent(key) { try decoder.readInteger(Int64.self, $0, $1) }
  }

  func decodeIfPresent(_ type: Int128.Type, forKey key: Key) throws -> Int128? {
    try readIfPresent(key) { try decoder.readInteger(Int128.self, $0, $1) }
  }

  func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? {
    try readIfPresent(key) { try decoder.readInteger(UInt.self, $0, $1) }
  }

  func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? {
    try readIfPresent(key) { try decoder.readInteger(UInt8.self, $0, $1) }
  }

  func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? {
    try readIfPresent(key) { try decoder.readInteger(UInt16.self, $0, $1) }
  }

  func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? {
    try readIfPresent(key) { try decoder.readInteger(UInt32.self, $0, $1) }
  }

  func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? {
    try readIfPresent(key) { try decoder.readInteger(UInt64.self, $0, $1) }
  }

  func decodeIfPresent(_ type: UInt128.Type, forKey key: Key) throws -> UInt128? {
    try readIfPresent(key) { try decoder.readInteger(UInt128.self, $0, $1) }
  }

  func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
    guard let bounds = find(key.stringValue) else { return nil }
    // A present nil is `.some(nil)` for an optional T (`encodeIfPresent` of a `U??` holding
    // `.some(nil)`), and absent for any other T.
    if decoder.readNil(bounds.start, bounds.end), !(T.self is any _BinaryOptional.Type) {
      return nil
    }
    return try decoder.decodeValue(T.self, at: place, bounds, component: .key(key))
  }

  func nestedContainer<NestedKey: CodingKey>(
    keyedBy type: NestedKey.Type, forKey key: Key
  ) throws -> KeyedDecodingContainer<NestedKey> {
    let bounds = try bounds(key)
    do {
      let nested = try decoder.keyedPlace(
        bounds, depth: place.depth, pathCount: place.pathCount,
        chain: place.nestedChain(.key(key)))
      return KeyedDecodingContainer(_BinaryKeyedDecoder<NestedKey>(decoder: decoder, place: nested))
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .key(key)))
    }
  }

  func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
    let bounds = try bounds(key)
    do {
      let (nested, count) = try decoder.unkeyedPlace(
        bounds, depth: place.depth, pathCount: place.pathCount,
        chain: place.nestedChain(.key(key)))
      return _BinaryUnkeyedDecoder(decoder: decoder, place: nested, count: count)
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .key(key)))
    }
  }

  func superDecoder() throws -> any Decoder {
    superDecoder(named: _BinaryKey.super.stringValue, key: _BinaryKey.super)
  }

  func superDecoder(forKey key: Key) throws -> any Decoder {
    superDecoder(named: key.stringValue, key: key)
  }

  /// As JSONDecoder: an absent `super` decodes as nil.
  private func superDecoder(named name: String, key: any CodingKey) -> any Decoder {
    let bounds = find(name) ?? (place.end, place.end)
    return decoder.superDecoder(
      bounds, depth: place.depth, path: decoder.codingPath(place, .key(key)))
  }
}

private struct _BinaryUnkeyedDecoder: UnkeyedDecodingContainer {
  let decoder: _BinaryDecoder
  let place: _BinaryPlace
  let count: Int?
  private(set) var currentIndex = 0
  /// The start of the next element.
  private var position: Int

  init(decoder: _BinaryDecoder, place: _BinaryPlace, count: Int) {
    self.decoder = decoder
    self.place = place
    self.count = count
    self.position = place.start
  }

  var codingPath: [any CodingKey] { decoder.codingPath(place) }
  var isAtEnd: Bool { position >= place.end }

  /// The bounds of the next element; throws at the end.
  private func next(_ type: Any.Type) throws -> (start: Int, end: Int) {
    guard position < place.end else {
      throw DecodingError.valueNotFound(
        type,
        DecodingError.Context(
          codingPath: decoder.codingPath(place, .index(currentIndex)),
          debugDescription: "The unkeyed container is at its end, at byte offset \(position)."))
    }
    do {
      return (position, try decoder.valueEnd(position, limit: place.end))
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .index(currentIndex)))
    }
  }

  @inline(__always)
  private mutating func read<T>(
    _ read: (_BinaryDecoder, Int, Int) throws -> T
  ) throws -> T {
    let (start, end) = try next(T.self)
    do {
      let value = try read(decoder, start, end)
      position = end
      currentIndex += 1
      return value
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .index(currentIndex)))
    }
  }

  mutating func decodeNil() throws -> Bool {
    let (start, end) = try next(Never?.self)
    guard decoder.readNil(start, end) else { return false }
    position = end
    currentIndex += 1
    return true
  }

  mutating func decode(_ type: Bool.Type) throws -> Bool {
    try read { try $0.readBool($1, $2) }
  }

  mutating func decode(_ type: String.Type) throws -> String {
    try read { try $0.readString($1, $2) }
  }

  mutating func decode(_ type: Double.Type) throws -> Double {
    try read { try $0.readDouble($1, $2) }
  }

  mutating func decode(_ type: Float.Type) throws -> Float {
    try read { try $0.readFloat($1, $2) }
  }

  mutating func decode(_ type: Int.Type) throws -> Int {
    try read { try $0.readInteger(Int.self, $1, $2) }
  }

  mutating func decode(_ type: Int8.Type) throws -> Int8 {
    try read { try $0.readInteger(Int8.self, $1, $2) }
  }

  mutating func decode(_ type: Int16.Type) throws -> Int16 {
    try read { try $0.readInteger(Int16.self, $1, $2) }
  }

  mutating func decode(_ type: Int32.Type) throws -> Int32 {
    try read { try $0.readInteger(Int32.self, $1, $2) }
  }

  mutating func decode(_ type: Int64.Type) throws -> Int64 {
    try read { try $0.readInteger(Int64.self, $1, $2) }
  }

  mutating func decode(_ type: Int128.Type) throws -> Int128 {
    try read { try $0.readInteger(Int128.self, $1, $2) }
  }

  mutating func decode(_ type: UInt.Type) throws -> UInt {
    try read { try $0.readInteger(UInt.self, $1, $2) }
  }

  mutating func decode(_ type: UInt8.Type) throws -> UInt8 {
    try read { try $0.readInteger(UInt8.self, $1, $2) }
  }

  mutating func decode(_ type: UInt16.Type) throws -> UInt16 {
    try read { try $0.readInteger(UInt16.self, $1, $2) }
  }

  mutating func decode(_ type: UInt32.Type) throws -> UInt32 {
    try read { try $0.readInteger(UInt32.self, $1, $2) }
  }

  mutating func decode(_ type: UInt64.Type) throws -> UInt64 {
    try read { try $0.readInteger(UInt64.self, $1, $2) }
  }

  mutating func decode(_ type: UInt128.Type) throws -> UInt128 {
    try read { try $0.readInteger(UInt128.self, $1, $2) }
  }

  mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
    let bounds = try next(T.self)
    let value = try decoder.decodeValue(T.self, at: place, bounds, component: .index(currentIndex))
    position = bounds.end
    currentIndex += 1
    return value
  }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy type: NestedKey.Type
  ) throws -> KeyedDecodingContainer<NestedKey> {
    let bounds = try next(KeyedDecodingContainer<NestedKey>.self)
    do {
      let nested = try decoder.keyedPlace(
        bounds, depth: place.depth, pathCount: place.pathCount,
        chain: place.nestedChain(.index(currentIndex)))
      position = bounds.end
      currentIndex += 1
      return KeyedDecodingContainer(_BinaryKeyedDecoder<NestedKey>(decoder: decoder, place: nested))
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .index(currentIndex)))
    }
  }

  mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
    let bounds = try next((any UnkeyedDecodingContainer).self)
    do {
      let (nested, count) = try decoder.unkeyedPlace(
        bounds, depth: place.depth, pathCount: place.pathCount,
        chain: place.nestedChain(.index(currentIndex)))
      position = bounds.end
      currentIndex += 1
      return _BinaryUnkeyedDecoder(decoder: decoder, place: nested, count: count)
    } catch let fault as _BinaryFault {
      throw fault.error(path: decoder.codingPath(place, .index(currentIndex)))
    }
  }

  mutating func superDecoder() throws -> any Decoder {
    let bounds = try next((any Decoder).self)
    let superDecoder = decoder.superDecoder(
      bounds, depth: place.depth, path: decoder.codingPath(place, .index(currentIndex)))
    position = bounds.end
    currentIndex += 1
    return superDecoder
  }
}

private struct _BinarySingleValueDecoder: SingleValueDecodingContainer {
  let decoder: _BinaryDecoder
  let start: Int
  let end: Int
  let depth: Int
  let pathCount: Int

  var codingPath: [any CodingKey] { decoder.codingPath(pathCount, nil) }

  @inline(__always)
  private func read<T>(_ read: (Int, Int) throws -> T) throws -> T {
    do {
      return try read(start, end)
    } catch let fault as _BinaryFault {
      throw fault.error(path: codingPath)
    }
  }

  func decodeNil() -> Bool { decoder.readNil(start, end) }
  func decode(_ type: Bool.Type) throws -> Bool { try read(decoder.readBool) }
  func decode(_ type: String.Type) throws -> String { try read(decoder.readString) }
  func decode(_ type: Double.Type) throws -> Double { try read(decoder.readDouble) }
  func decode(_ type: Float.Type) throws -> Float { try read(decoder.readFloat) }
  func decode(_ type: Int.Type) throws -> Int {
    try read { try decoder.readInteger(Int.self, $0, $1) }
  }
  func decode(_ type: Int8.Type) throws -> Int8 {
    try read { try decoder.readInteger(Int8.self, $0, $1) }
  }
  func decode(_ type: Int16.Type) throws -> Int16 {
    try read { try decoder.readInteger(Int16.self, $0, $1) }
  }
  func decode(_ type: Int32.Type) throws -> Int32 {
    try read { try decoder.readInteger(Int32.self, $0, $1) }
  }
  func decode(_ type: Int64.Type) throws -> Int64 {
    try read { try decoder.readInteger(Int64.self, $0, $1) }
  }
  func decode(_ type: Int128.Type) throws -> Int128 {
    try read { try decoder.readInteger(Int128.self, $0, $1) }
  }
  func decode(_ type: UInt.Type) throws -> UInt {
    try read { try decoder.readInteger(UInt.self, $0, $1) }
  }
  func decode(_ type: UInt8.Type) throws -> UInt8 {
    try read { try decoder.readInteger(UInt8.self, $0, $1) }
  }
  func decode(_ type: UInt16.Type) throws -> UInt16 {
    try read { try decoder.readInteger(UInt16.self, $0, $1) }
  }
  func decode(_ type: UInt32.Type) throws -> UInt32 {
    try read { try decoder.readInteger(UInt32.self, $0, $1) }
  }
  func decode(_ type: UInt64.Type) throws -> UInt64 {
    try read { try decoder.readInteger(UInt64.self, $0, $1) }
  }
  func decode(_ type: UInt128.Type) throws -> UInt128 {
    try read { try decoder.readInteger(UInt128.self, $0, $1) }
  }

  func decode<T: Decodable>(_ type: T.Type) throws -> T {
    try decoder.decodeValue(
      T.self, start: start, end: end, depth: depth, pathCount: pathCount, chain: nil,
      component: .none)
  }
}
