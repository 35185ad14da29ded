import Foundation

/// What one instance tells the others on the store's channel: that some keys changed, or
/// that everything may have. One `NOTIFY` payload, JSON, under the server's limit.
///
/// ```json
/// {"ms":1,"o":"6F1C…","e":1,"s":42,"k":["AAPL","MSFT"]}
/// {"ms":1,"o":"6F1C…","e":1,"s":43,"all":true}
/// ```
///
/// `o` is the sending instance's origin, `e` its epoch (which changes whenever it cannot tell
/// whether a message it sent was delivered), `s` the message's sequence number in that epoch,
/// from 1 with no gap. Keys are their text form (see ``SyncKeyCoding``).
struct SyncMessage: Equatable, Sendable {
  /// The version of this format, `ms` in the payload.
  static var formatVersion: Int { 1 }
  /// The largest payload sent: the server refuses 8 000 bytes and more.
  static var maximumPayloadBytes: Int { 7_900 }

  enum Scope: Equatable, Sendable {
    /// These keys changed.
    case keys([String])
    /// Anything may have changed: drop everything.
    case everything
  }

  var origin: UUID
  var epoch: UInt64
  var sequence: UInt64
  var scope: Scope

  /// Why a payload was ignored.
  enum Rejection: Error, Equatable, CustomStringConvertible {
    case notJSON
    case notOurs
    case unsupportedVersion(Int)
    case malformed(String)

    var description: String {
      switch self {
      case .notJSON: "the payload is not a JSON object"
      case .notOurs: "the payload is not a MemoryStore sync message"
      case .unsupportedVersion(let version): "the message's format version \(version) is unknown"
      case .malformed(let detail): "the message is malformed: \(detail)"
      }
    }
  }

  private struct Wire: Codable {
    var ms: Int?
    var o: String?
    var e: UInt64?
    var s: UInt64?
    var k: [String]?
    var all: Bool?
  }

  /// The payload of this message.
  func payload() -> String {
    var wire = Wire(ms: Self.formatVersion, o: origin.uuidString, e: epoch, s: sequence)
    switch scope {
    case .keys(let keys): wire.k = keys
    case .everything: wire.all = true
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    // Encoding strings, integers and a Bool cannot fail.
    let data = (try? encoder.encode(wire)) ?? Data("{}".utf8)
    return String(decoding: data, as: UTF8.self)
  }

  /// Parses a payload; a payload that anyone could have sent is checked field by field.
  static func parse(_ payload: String) throws(Rejection) -> SyncMessage {
    guard payload.utf8.count <= 8_000, payload.utf8.first == UInt8(ascii: "{") else {
      throw .notJSON
    }
    let wire: Wire
    do {
      wire = try JSONDecoder().decode(Wire.self, from: Data(payload.utf8))
    } catch {
      throw .notJSON
    }
    guard let version = wire.ms else { throw .notOurs }
    guard version == formatVersion else { throw .unsupportedVersion(version) }
    guard let originText = wire.o, let origin = UUID(uuidString: originText) else {
      throw .malformed("no origin")
    }
    guard let epoch = wire.e, let sequence = wire.s, sequence > 0 else {
      throw .malformed("no epoch or sequence number")
    }
    switch (wire.k, wire.all) {
    case (let keys?, nil):
      return SyncMessage(origin: origin, epoch: epoch, sequence: sequence, scope: .keys(keys))
    case (nil, true):
      return SyncMessage(origin: origin, epoch: epoch, sequence: sequence, scope: .everything)
    default:
      throw .malformed("neither keys nor everything")
    }
  }

  /// The payloads that announce `keys`, each under ``maximumPayloadBytes``, numbered from
  /// `firstSequence`: one if they fit, several if not; a key too long to fit alone in a
  /// message turns the whole announcement into one message for everything.
  static func messages(
    announcing keys: [String], origin: UUID, epoch: UInt64, firstSequence: UInt64
  ) -> [SyncMessage] {
    var messages: [SyncMessage] = []
    var sequence = firstSequence
    // The fixed part of a payload, and each key's share of it: its escaped JSON form, a comma.
    let overhead =
      SyncMessage(origin: origin, epoch: epoch, sequence: .max, scope: .keys([])).payload()
      .utf8.count
    let budget = maximumPayloadBytes - overhead
    var chunk: [String] = []
    var used = 0
    for key in keys {
      let size = escapedSize(key) + 1
      if size > budget {
        return [
          SyncMessage(origin: origin, epoch: epoch, sequence: firstSequence, scope: .everything)
        ]
      }
      if used + size > budget {
        messages.append(
          SyncMessage(origin: origin, epoch: epoch, sequence: sequence, scope: .keys(chunk)))
        sequence += 1
        chunk = []
        used = 0
      }
      chunk.append(key)
      used += size
    }
    if !chunk.isEmpty {
      messages.append(
        SyncMessage(origin: origin, epoch: epoch, sequence: sequence, scope: .keys(chunk)))
    }
    return messages
  }

  /// The bytes `key` takes in a payload, with its quotes.
  static func escapedSize(_ key: String) -> Int {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.withoutEscapingSlashes]
    return (try? encoder.encode(key).count) ?? key.utf8.count * 6 + 2
  }
}
