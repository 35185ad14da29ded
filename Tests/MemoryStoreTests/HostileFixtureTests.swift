import Foundation
import MemoryStoreKit
import Testing

/// The value type of the hostile fixtures: `{ label, children }`, as
/// Scripts/CrashHarness/Fixtures.swift writes them.
struct FixtureTree: Codable, Hashable, Sendable {
  var label: String
  var children: [FixtureTree]
}

/// Loads every file of `Fixtures/Hostile` (listed in its `manifest.tsv`, made by
/// `CrashHarness make-fixtures`) through a `PersistenceManager` and expects the `PersistenceError.Kind`
/// the manifest names, or a successful load for the controls. A file too large to read is made
/// here, sparse, rather than kept in the repository.
@Suite("Persistence: hostile snapshot files")
struct HostileFixtureTests {
  struct Fixture: Sendable, CustomTestStringConvertible {
    var name: String
    var coder: String
    var kind: String
    var about: String

    var testDescription: String { "\(name) (\(coder)): \(about)" }
  }

  static let directory = Bundle.module.resourceURL!
    .appending(path: "Fixtures/Hostile", directoryHint: .isDirectory)

  /// The manifest's rows; empty if it cannot be read (`theManifestCoversTheDirectory` fails).
  static let fixtures: [Fixture] = {
    guard
      let text = try? String(contentsOf: directory.appending(path: "manifest.tsv"), encoding: .utf8)
    else { return [] }
    return text.split(separator: "\n").compactMap { line in
      if line.hasPrefix("#") { return nil }
      let fields = line.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
      guard fields.count == 4 else { return nil }
      return Fixture(name: fields[0], coder: fields[1], kind: fields[2], about: fields[3])
    }
  }()

  static let kinds: [String: PersistenceError.Kind] = [
    "fileTooLarge": .fileTooLarge, "notASnapshot": .notASnapshot, "truncated": .truncated,
    "corrupted": .corrupted, "unsupportedVersion": .unsupportedVersion,
    "formatMismatch": .formatMismatch, "decodingFailed": .decodingFailed,
  ]

  /// A manager for `file` with the coder the manifest names.
  static func manager(
    _ store: MemoryStore<String, FixtureTree>, _ file: URL, coder: String
  ) throws -> PersistenceManager<String, FixtureTree> {
    coder == "binary"
      ? try PersistenceManager(store: store, fileURL: file, coder: .binary)
      : try PersistenceManager(store: store, fileURL: file, coder: .json)
  }

  static let kept = FixtureTree(label: "kept", children: [])

  @Test func theManifestCoversTheDirectory() throws {
    let files = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path)
      .filter { $0.hasSuffix(".snapshot") }
    #expect(Set(files) == Set(Self.fixtures.map(\.name)))
    #expect(Self.fixtures.count(where: { $0.kind != "ok" }) >= 20)
    #expect(Self.fixtures.contains { $0.kind == "ok" })
    for fixture in Self.fixtures {
      #expect(fixture.coder == "json" || fixture.coder == "binary", "\(fixture.name)")
      #expect(fixture.kind == "ok" || Self.kinds[fixture.kind] != nil, "\(fixture.name)")
    }
  }

  @Test(arguments: fixtures)
  func eachFixtureLoadsOrFailsAsTheManifestSays(_ fixture: Fixture) throws {
    let fixtureURL = Self.directory.appending(path: fixture.name)
    let bytes = try #require(FileManager.default.bytes(at: fixtureURL))
    let temporary = TemporaryDirectory()
    let file = temporary.file()
    try Data(bytes).write(to: file)
    let store = MemoryStore<String, FixtureTree>()
    store["kept"] = Self.kept
    let persistence = try Self.manager(store, file, coder: fixture.coder)

    if fixture.kind == "ok" {
      let loaded = try persistence.load()
      #expect(loaded > 0)
      #expect(store.count == loaded + 1)
      return
    }
    let expected = try #require(Self.kinds[fixture.kind])
    let error = try #require(throws: PersistenceError.self) { try persistence.load() }
    #expect(error.kind == expected, "\(error)")
    #expect(store.allItems == ["kept": Self.kept])
    // The file is kept, moved aside, byte for byte.
    let movedTo = try #require(error.movedTo)
    #expect(FileManager.default.bytes(at: movedTo) == bytes)
    #expect(!FileManager.default.fileExists(atPath: file.path))
  }

  /// A sparse file one byte over the default maximum (256 MiB) is refused before it is read.
  @Test func aFileOverTheDefaultMaximumIsRejectedUnread() throws {
    let temporary = TemporaryDirectory()
    let file = temporary.file()
    #expect(FileManager.default.createFile(atPath: file.path, contents: Data("MEMSTORE".utf8)))
    let handle = try FileHandle(forWritingTo: file)
    try handle.truncate(atOffset: UInt64(256 << 20) + 1)
    try handle.close()
    let store = MemoryStore<String, FixtureTree>()
    let persistence = try Self.manager(store, file, coder: "json")
    #expect(persistence.maximumFileSize == 256 << 20)
    let error = try #require(throws: PersistenceError.self) { try persistence.load() }
    #expect(error.kind == .fileTooLarge)
    #expect(error.detail.contains("\((256 << 20) + 1) bytes"))
    #expect(store.isEmpty)
  }

  /// `maximumFileSize` is checked before the header: a valid file one byte over it is refused,
  /// and at exactly the maximum it loads.
  @Test func maximumFileSizeIsInclusiveAndCheckedFirst() throws {
    let fixture = try #require(Self.fixtures.first { $0.name == "valid-json.snapshot" })
    let fixtureURL = Self.directory.appending(path: fixture.name)
    let bytes = try #require(FileManager.default.bytes(at: fixtureURL))
    let temporary = TemporaryDirectory()
    let file = temporary.file()

    try Data(bytes).write(to: file)
    let refused = MemoryStore<String, FixtureTree>()
    let small = try Self.manager(refused, file, coder: "json")
    small.maximumFileSize = bytes.count - 1
    let error = try #require(throws: PersistenceError.self) { try small.load() }
    #expect(error.kind == .fileTooLarge)
    #expect(refused.isEmpty)

    try Data(bytes).write(to: file)
    let accepted = MemoryStore<String, FixtureTree>()
    let exact = try Self.manager(accepted, file, coder: "json")
    exact.maximumFileSize = bytes.count
    #expect(try exact.load() == 3)
    #expect(accepted.count == 3)
  }
}
