import Foundation

/// The snapshot file format and the system calls that read and replace it.
///
/// A file is a 48-byte header followed by the payload a ``SnapshotCoder`` wrote. All integers
/// are little-endian:
///
/// | Offset | Size | Field |
/// |---|---|---|
/// | 0 | 8 | magic bytes `MEMSTORE` |
/// | 8 | 4 | format version: 1 or 2 (see below) |
/// | 12 | 8 | the coder's `formatName`, ASCII, zero-padded |
/// | 20 | 8 | entry count |
/// | 28 | 8 | payload length in bytes |
/// | 36 | 8 | payload checksum |
/// | 44 | 4 | header checksum: the low 32 bits of the checksum of bytes 0 to 43 |
///
/// The checksum (``checksum(_:)``) detects accidental damage; it is not cryptographic.
///
/// The format version says what the payload holds:
/// - **1**: the entries' values, the coder's encoding of `[Key: Value]`. A save writes it when
///   no entry has a cost or a deadline, so that such a file stays readable by every version.
/// - **2**: each entry's value with its metadata, the coder's encoding of
///   `[Key: _SnapshotEntry<Value>]`: its cost, if not 0, and its deadlines, as wall-clock
///   times (see ``_SnapshotEntry``).
enum _SnapshotFile {
  static let magic: [UInt8] = Array("MEMSTORE".utf8)
  /// The format version of values only.
  static let valuesVersion: UInt32 = 1
  /// The format version of values with their metadata: the newest.
  static let entriesVersion: UInt32 = 2
  static let headerSize = 48

  /// The header's fields.
  struct Header: Equatable {
    /// ``valuesVersion`` or ``entriesVersion``.
    var version: UInt32 = _SnapshotFile.valuesVersion
    var formatName: String
    var entryCount: UInt64
    var payloadLength: UInt64
    var payloadChecksum: UInt64
  }

  /// A file the header rejects, and why.
  enum Rejection: Error {
    case notASnapshot
    case truncated(expected: Int, found: Int)
    case trailingBytes(expected: Int, found: Int)
    case headerChecksum
    case unsupportedVersion(UInt32)
    case formatMismatch(found: String)
    case implausibleCount(UInt64)
    case payloadChecksum
  }

  /// The coder name as stored: 1 to 8 ASCII bytes.
  static func encodedName(_ name: String) -> [UInt8]? {
    let bytes = Array(name.utf8)
    guard (1...8).contains(bytes.count), bytes.allSatisfy({ $0 > 0 && $0 < 0x80 }) else {
      return nil
    }
    return bytes + [UInt8](repeating: 0, count: 8 - bytes.count)
  }

  /// The 48 header bytes for `header`; `nil` if its format name is not 1 to 8 ASCII bytes.
  static func headerBytes(_ header: Header) -> [UInt8]? {
    guard let name = encodedName(header.formatName) else { return nil }
    var bytes = magic
    bytes.reserveCapacity(headerSize)
    append(header.version, to: &bytes)
    bytes += name
    append(header.entryCount, to: &bytes)
    append(header.payloadLength, to: &bytes)
    append(header.payloadChecksum, to: &bytes)
    let headerSum = bytes.withUnsafeBytes { checksum($0) }
    append(UInt32(truncatingIfNeeded: headerSum), to: &bytes)
    return bytes
  }

  /// Checks the header of a file of `fileSize` bytes for a snapshot written by the coder
  /// named `formatName`: `prefix` holds the file's first `min(fileSize, headerSize)` bytes.
  /// The payload's checksum is left to the caller, which reads the payload only if the header
  /// passes.
  static func verifyHeader(
    _ prefix: [UInt8], fileSize: Int, formatName: String
  ) throws(Rejection) -> Header {
    // An empty file is what a torn non-atomic write typically leaves: truncated.
    let count = min(prefix.count, magic.count)
    guard prefix[..<count].elementsEqual(magic[..<count]) else { throw .notASnapshot }
    guard prefix.count >= headerSize, fileSize >= headerSize else {
      throw .truncated(expected: headerSize, found: min(prefix.count, fileSize))
    }
    let (headerSumMatches, version, header) = prefix.withUnsafeBytes { file in
      let headerSum = checksum(UnsafeRawBufferPointer(rebasing: file[0..<44]))
      return (
        load(UInt32.self, file, at: 44) == UInt32(truncatingIfNeeded: headerSum),
        load(UInt32.self, file, at: 8),
        Header(
          version: load(UInt32.self, file, at: 8),
          formatName: String(decoding: file[12..<20].prefix { $0 != 0 }, as: UTF8.self),
          entryCount: load(UInt64.self, file, at: 20),
          payloadLength: load(UInt64.self, file, at: 28),
          payloadChecksum: load(UInt64.self, file, at: 36))
      )
    }
    guard headerSumMatches else { throw .headerChecksum }
    guard version == valuesVersion || version == entriesVersion else {
      throw .unsupportedVersion(version)
    }
    guard header.formatName == formatName else { throw .formatMismatch(found: header.formatName) }
    let available = UInt64(fileSize - headerSize)
    guard header.payloadLength <= available else {
      throw .truncated(
        expected: headerSize
          + Int(clamping: min(header.payloadLength, UInt64(Int.max - headerSize))),
        found: fileSize)
    }
    guard header.payloadLength == available else {
      throw .trailingBytes(expected: headerSize + Int(header.payloadLength), found: fileSize)
    }
    // Every entry takes at least one byte in any format.
    guard header.entryCount <= max(header.payloadLength, 1) else {
      throw .implausibleCount(header.entryCount)
    }
    return header
  }

  /// Checks the header and payload of a whole file held in memory, as
  /// ``readSnapshot(at:maximumSize:formatName:payloadAsBytes:)`` checks a file it reads, and
  /// returns the header and the payload's range.
  static func verify(
    _ file: [UInt8], formatName: String
  ) throws(Rejection) -> (Header, Range<Int>) {
    let header = try verifyHeader(
      Array(file.prefix(headerSize)), fileSize: file.count, formatName: formatName)
    let payload = headerSize..<file.count
    let sum = file.withUnsafeBytes { checksum(UnsafeRawBufferPointer(rebasing: $0[payload])) }
    guard sum == header.payloadChecksum else { throw .payloadChecksum }
    return (header, payload)
  }

  // MARK: Checksum

  /// A 64-bit checksum of `bytes`, eight bytes at a time: each word is mixed in by an
  /// invertible step (xor, multiply by an odd constant, xor-shift), so changing any one word
  /// always changes the result, and the length is part of the seed.
  static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ UInt64(bytes.count)
    var offset = 0
    let whole = bytes.count & ~7
    while offset < whole {
      let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
      hash = (hash ^ word) &* multiplier
      hash ^= hash >> 29
      offset &+= 8
    }
    if offset < bytes.count {
      var word: UInt64 = 0
      for index in offset..<bytes.count {
        word |= UInt64(bytes[index]) << (UInt64(index - offset) * 8)
      }
      hash = (hash ^ word) &* multiplier
      hash ^= hash >> 29
    }
    // Final avalanche (MurmurHash3's fmix64).
    hash ^= hash >> 33
    hash &*= 0xFF51_AFD7_ED55_8CCD
    hash ^= hash >> 33
    hash &*= 0xC4CE_B9FE_1A85_EC53
    hash ^= hash >> 33
    return hash
  }

  // MARK: Helpers

  private static func append<I: FixedWidthInteger>(_ value: I, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
  }

  private static func load<I: FixedWidthInteger>(
    _ type: I.Type, _ bytes: UnsafeRawBufferPointer, at offset: Int
  ) -> I {
    I(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: I.self))
  }
}
