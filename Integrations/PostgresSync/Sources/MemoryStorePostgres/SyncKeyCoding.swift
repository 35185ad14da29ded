import Foundation

/// How a key is written as text: in the messages between instances and in the shared table's
/// `key` column. Two instances that share a store must use the same coding.
///
/// ```swift
/// let coding = SyncKeyCoding<UUID>(encode: { $0.uuidString }, decode: UUID.init(uuidString:))
/// ```
public struct SyncKeyCoding<Key>: Sendable {
  /// The text form of a key; a key that cannot be written as text throws.
  public let encode: @Sendable (Key) throws -> String
  /// The key of a text form, or `nil` if the text is no key's.
  public let decode: @Sendable (String) -> Key?

  /// A coding of your own: `decode(encode(key))` must give `key` back.
  public init(
    encode: @escaping @Sendable (Key) throws -> String,
    decode: @escaping @Sendable (String) -> Key?
  ) {
    self.encode = encode
    self.decode = decode
  }
}

extension SyncKeyCoding where Key: Codable & Sendable {
  /// The default: a `String` key is its own text; any other key is its JSON encoding (with
  /// sorted keys, so that equal keys have one text).
  public static var standard: SyncKeyCoding {
    SyncKeyCoding(
      encode: { key in
        if let text = key as? String { return text }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(key), as: UTF8.self)
      },
      decode: { text in
        if Key.self == String.self { return text as? Key }
        return try? JSONDecoder().decode(Key.self, from: Data(text.utf8))
      })
  }
}
