import Foundation

/// The JSON format: `JSONEncoder` and `JSONDecoder` applied to the entries as a dictionary.
///
/// String and integer keys make a JSON object; other keys make an array alternating keys and
/// values, as `Dictionary`'s own `Codable` conformance does. Thread-safe: each call uses its own
/// encoder or decoder.
public struct JSONSnapshotCoder: SnapshotCoder {
  /// Whether the output is indented and its keys sorted, for reading by people.
  public var prettyPrinted: Bool

  /// Creates a JSON coder; compact output by default.
  public init(prettyPrinted: Bool = false) {
    self.prettyPrinted = prettyPrinted
  }

  public var formatName: String { "json" }

  public func encode<Key: Encodable & Hashable, Value: Encodable>(
    _ entries: [Key: Value]
  ) throws -> Data {
    let encoder = JSONEncoder()
    if prettyPrinted { encoder.outputFormatting = [.prettyPrinted, .sortedKeys] }
    return try encoder.encode(entries)
  }

  public func decode<Key: Decodable & Hashable, Value: Decodable>(
    _ payload: Data, as type: [Key: Value].Type
  ) throws -> [Key: Value] {
    try JSONDecoder().decode(type, from: payload)
  }
}

extension SnapshotCoder where Self == JSONSnapshotCoder {
  /// The JSON format: readable, the default.
  public static var json: JSONSnapshotCoder { JSONSnapshotCoder() }
}
