// The wire format of `BinarySnapshotCoder`, version 1.
//
// All multi-byte numbers are little-endian. A varint is unsigned LEB128: 7 bits a byte, low
// bits first, the high bit set on every byte but the last; at most 10 bytes (64 bits), and the
// 10th byte must be 0 or 1. A signed integer is zigzag-mapped first, (n << 1) ^ (n >> 63), so
// small magnitudes of either sign stay short.
//
//     payload  = version:u8(=1)
//                stringCount:varint  string*      -- the string table
//                entryCount:varint   (key value)* -- the entries, nothing after them
//     string   = byteCount:varint  utf8Bytes      -- valid UTF-8
//     value    = tag:u8  body
//
//     tag   name      body
//     0x00  nil       -
//     0x01  false     -
//     0x02  true      -
//     0x03  int       zigzag varint             (Int, Int8 ... Int64, and Int128 that fit)
//     0x04  uint      varint                    (UInt, UInt8 ... UInt64, and UInt128 that fit)
//     0x05  int128    16 bytes, two's complement
//     0x06  uint128   16 bytes
//     0x07  float32   4 bytes, IEEE 754 bit pattern (NaN payloads, -0.0 and infinities kept)
//     0x08  float64   8 bytes, IEEE 754 bit pattern
//     0x09  string    byteCount:varint  utf8Bytes
//     0x0A  bytes     byteCount:varint  rawBytes   (Foundation's Data)
//     0x0B  keyed     byteCount:varint  (nameIndex:varint value)*
//     0x0C  unkeyed   byteCount:varint  value*
//
// A keyed container's field names are indices into the string table, which holds every name
// once, in order of first use. A container's byteCount covers its fields or elements, so a
// reader skips any value in O(1) and reads a keyed container's fields in any order. The body of
// a top-level String key is a string value; any other key is encoded like a value. The empty
// keyed container (0x0B 0x00) stands for a value whose `encode(to:)` wrote nothing. Containers
// nest at most `_BinaryFormat.maximumDepth` deep; encoding deeper fails, so every payload the
// encoder writes decodes.
//
// Compatibility: a later version must bump `version`; readers reject versions they do not know.

/// Constants of the binary snapshot format; the format itself is described at the top of
/// this file.
enum _BinaryFormat {
  /// The first byte of every payload.
  static let version: UInt8 = 1

  /// The deepest nesting of containers that encodes and decodes; deeper throws.
  static let maximumDepth = 512

  static let nilTag: UInt8 = 0x00
  static let falseTag: UInt8 = 0x01
  static let trueTag: UInt8 = 0x02
  static let intTag: UInt8 = 0x03
  static let uintTag: UInt8 = 0x04
  static let int128Tag: UInt8 = 0x05
  static let uint128Tag: UInt8 = 0x06
  static let float32Tag: UInt8 = 0x07
  static let float64Tag: UInt8 = 0x08
  static let stringTag: UInt8 = 0x09
  static let bytesTag: UInt8 = 0x0A
  static let keyedTag: UInt8 = 0x0B
  static let unkeyedTag: UInt8 = 0x0C

  /// What a tag holds, for error messages.
  static func describe(tag: UInt8) -> String {
    switch tag {
    case nilTag: "nil"
    case falseTag, trueTag: "a Bool"
    case intTag, uintTag, int128Tag, uint128Tag: "an integer"
    case float32Tag: "a Float"
    case float64Tag: "a Double"
    case stringTag: "a string"
    case bytesTag: "Data"
    case keyedTag: "a keyed container"
    case unkeyedTag: "an unkeyed container"
    default: "the unknown tag \(tag)"
    }
  }

  /// The number of bytes of `value` as a varint.
  @inline(__always)
  static func varintSize(_ value: UInt64) -> Int {
    // 1 + floor(log2(value) / 7), with value | 1 so that 0 takes one byte.
    1 + (63 - (value | 1).leadingZeroBitCount) / 7
  }
}

/// A coding key of the binary coder's own: an array index, a top-level String key, or `super`.
struct _BinaryKey: CodingKey {
  var stringValue: String
  var intValue: Int?

  init(stringValue: String) {
    self.stringValue = stringValue
    self.intValue = nil
  }

  init(intValue: Int) {
    self.stringValue = "Index \(intValue)"
    self.intValue = intValue
  }

  static let `super` = _BinaryKey(stringValue: "super")
}

/// One step of a coding path, kept cheap to store until an error or a caller asks for the path.
enum _BinaryPathComponent {
  /// No step: a container made by a value's own encoder or decoder.
  case none
  case key(any CodingKey)
  case index(Int)
  case string(String)

  var key: (any CodingKey)? {
    switch self {
    case .none: nil
    case .key(let key): key
    case .index(let index): _BinaryKey(intValue: index)
    case .string(let string): _BinaryKey(stringValue: string)
    }
  }
}

/// `Optional`, recognised at run time: `decodeIfPresent(T?.self, forKey:)` returns `.some(nil)`
/// for a key that is present with a nil value.
protocol _BinaryOptional {}
extension Optional: _BinaryOptional {}
