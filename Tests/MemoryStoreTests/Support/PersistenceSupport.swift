import Foundation
import MemoryStoreKit

/// A fresh directory under the system's temporary directory, removed when released.
final class TemporaryDirectory: Sendable {
  let url: URL

  init() {
    url = FileManager.default.temporaryDirectory
      .appendingPathComponent("MemoryStoreTests-\(UUID().uuidString)", isDirectory: true)
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  deinit {
    try? FileManager.default.removeItem(at: url)
  }

  /// A file URL inside the directory.
  func file(_ name: String = "store.snapshot") -> URL {
    url.appendingPathComponent(name)
  }

  /// The names of the directory's entries, sorted.
  var contents: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
  }
}

/// A value like a stock quote: two `Double`s and an `Int`.
struct Quote: Codable, Hashable, Sendable {
  var bid: Double
  var ask: Double
  var volume: Int
}

/// A key that is not a string.
struct Coordinate: Codable, Hashable, Sendable {
  var x: Int
  var y: Int
}

/// A value whose encoding fails when it is negative.
struct Fragile: Codable, Hashable, Sendable {
  struct Refused: Error {}
  var number: Int

  init(_ number: Int) { self.number = number }

  func encode(to encoder: any Encoder) throws {
    if number < 0 { throw Refused() }
    var container = encoder.singleValueContainer()
    try container.encode(number)
  }

  init(from decoder: any Decoder) throws {
    number = try decoder.singleValueContainer().decode(Int.self)
  }
}

/// A coder that wraps another and runs `duringEncode` inside `encode`, before encoding.
struct InstrumentedCoder<Base: SnapshotCoder>: SnapshotCoder {
  var base: Base
  var name: String?
  var duringEncode: @Sendable () -> Void = {}

  var formatName: String { name ?? base.formatName }

  func encode<Key: Encodable & Hashable, Value: Encodable>(_ entries: [Key: Value]) throws -> Data {
    duringEncode()
    return try base.encode(entries)
  }

  func decode<Key: Decodable & Hashable, Value: Decodable>(
    _ payload: Data, as type: [Key: Value].Type
  ) throws -> [Key: Value] {
    try base.decode(payload, as: type)
  }
}

extension FileManager {
  /// The file's bytes, or `nil` if it cannot be read.
  ///
  /// Read through a `FileHandle`: on Linux, `Data(contentsOf:)` of an empty file leaks a 4 KiB
  /// buffer, which LeakSanitizer reports (`Scripts/reliability asan`).
  func bytes(at url: URL) -> [UInt8]? {
    guard let handle = try? FileHandle(forReadingFrom: url) else { return nil }
    defer { try? handle.close() }
    do {
      // `readToEnd()` returns nil for an empty file.
      return [UInt8](try handle.readToEnd() ?? Data())
    } catch {
      return nil
    }
  }
}
