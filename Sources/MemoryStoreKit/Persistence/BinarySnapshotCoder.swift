import Foundation

/// A compact binary snapshot format: several times faster than JSON and smaller.
///
/// The coder has its own `Encoder` and `Decoder`, so it takes any `Codable` keys and values:
/// numbers of every width, strings, `Data`, dates, URLs, optionals, arrays, dictionaries,
/// nested and recursive types, enums with associated values and classes that encode their
/// superclass with `superEncoder()`.
///
/// ## Format
///
/// A payload is a format version byte, a string table holding every field name of every keyed
/// container once, the entry count, then each entry's key and value. Each value is a tag byte
/// and a body: integers are varints (zigzag for signed types), `Float` and `Double` their
/// little-endian bit patterns (so NaN, infinities and `-0.0` round-trip exactly), strings and
/// `Data` a length and their bytes, and containers a byte count and their contents, a keyed
/// container's field names being indices into the string table. The wire format is specified
/// in `Persistence/Binary/BinaryFormat.swift`.
///
/// A keyed container may be decoded in any order, and asked for keys it lacks:
/// `decodeIfPresent` returns nil, `contains` false, and `decode` throws
/// `DecodingError.keyNotFound`. Field names match as Swift compares `String`s, by canonical
/// equivalence: "é" as one scalar and as "e" followed by a combining accent are one name, as
/// they are one key of a `Dictionary`.
///
/// ## Limits
///
/// Containers nest at most 512 deep: deeper values fail to encode. An `encode(to:)` must use
/// its containers in stack order — finish a nested container or value before writing to its
/// parent again — as synthesized and nearly all hand-written implementations do; writing to a
/// container after its parent wrote throws an `EncodingError`. `encodeConditional` encodes the
/// object every time.
///
/// ## Hostile input
///
/// ``decode(_:as:)`` never traps on any bytes: truncated, random or malicious payloads throw a
/// `DecodingError` whose coding path locates the value and whose description gives the byte
/// offset. Every declared count and length is checked against the bytes that remain before
/// anything is allocated for it, and a string table of many tiny strings (which an ordinary
/// value makes too: a dictionary with tens of thousands of short keys) is kept as positions in
/// the payload rather than as `String`s, names matching the same way, so that decoding takes
/// at most about twice the payload's size beside the payload and the decoded values
/// (``decode(_:as:)`` copies the payload once; a ``PersistenceManager``'s load decodes the
/// buffer it read without a copy).
/// Nesting is limited to 512 containers; strings must be valid UTF-8; numbers must fit the type
/// asked for; and a payload with trailing bytes or a repeated top-level key is rejected.
///
/// Thread safety: thread-safe and stateless; every call builds its own encoder or decoder, so
/// any number of threads may share a coder.
///
/// Complexity: O(n) in the payload's size, for encoding and decoding.
public struct BinarySnapshotCoder: SnapshotCoder {
  /// Creates a binary coder.
  public init() {}

  /// `"binary"`, the name in a snapshot file's header.
  public var formatName: String { "binary" }

  /// Encodes every entry of `entries` into one payload.
  ///
  /// Complexity: O(n) in the size of the payload.
  ///
  /// - Throws: The error of a key's or value's `encode(to:)`, unchanged; an `EncodingError`
  ///   for containers nested more than 512 deep or used out of order.
  public func encode<Key: Encodable & Hashable, Value: Encodable>(
    _ entries: [Key: Value]
  ) throws -> Data {
    try _BinaryEncoding.encode(entries)
  }

  /// Decodes a payload written by ``encode(_:)``.
  ///
  /// Never traps, whatever the bytes; see the type's discussion for the checks.
  ///
  /// Complexity: O(n) in the size of the payload.
  ///
  /// - Throws: A `DecodingError` for a malformed payload or one that does not hold
  ///   `[Key: Value]`, or the error of a type's `init(from:)`.
  public func decode<Key: Decodable & Hashable, Value: Decodable>(
    _ payload: Data, as type: [Key: Value].Type
  ) throws -> [Key: Value] {
    try _BinaryDecoding.decode(payload)
  }
}

extension SnapshotCoder where Self == BinarySnapshotCoder {
  /// The binary format: compact and several times faster than JSON. Thread-safe and stateless.
  public static var binary: BinarySnapshotCoder { BinarySnapshotCoder() }
}
