import Foundation
import MemoryStoreKit
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// The coders every round trip runs with.
enum CoderChoice: String, CaseIterable, Sendable, CustomTestStringConvertible {
  case json
  case binary

  var coder: any SnapshotCoder {
    switch self {
    case .json: JSONSnapshotCoder()
    case .binary: BinarySnapshotCoder()
    }
  }

  var testDescription: String { rawValue }
}

/// A manager for `store` at `url` with the coder `choice` names.
func manager<Key, Value>(
  _ store: MemoryStore<Key, Value>, _ url: URL, _ choice: CoderChoice = .json
) throws -> PersistenceManager<Key, Value> {
  try PersistenceManager(store: store, fileURL: url, coder: choice.coder)
}

extension StoreContractTests {
  /// Saving and loading: round trips, what `load` merges, what a save writes.
  @Suite("Persistence: save and load") struct SaveAndLoad {
    func roundTrip<Key: Codable & Hashable & Sendable, Value: Codable & Equatable & Sendable>(
      _ entries: [Key: Value], _ choice: CoderChoice
    ) throws -> [Key: Value] {
      let directory = TemporaryDirectory()
      let source = MemoryStore<Key, Value>()
      source.addEntries(entries)
      let report = try manager(source, directory.file(), choice).save()
      #expect(report.entryCount == entries.count)
      #expect(report.skippedKeys.isEmpty)
      let restored = MemoryStore<Key, Value>()
      #expect(try manager(restored, directory.file(), choice).load() == entries.count)
      return restored.allItems
    }

    @Test(arguments: CoderChoice.allCases)
    func entriesOfSeveralTypesComeBackEqual(_ choice: CoderChoice) throws {
      let quotes = Dictionary(
        uniqueKeysWithValues: (0..<500).map {
          ("SYM\($0)", Quote(bid: Double($0) + 0.25, ask: -Double($0) / 3, volume: $0 * 1_000))
        })
      #expect(try roundTrip(quotes, choice) == quotes)
      let names = [1: "one", -2: "minus two", 3: "", 4: "émoji 🚀"]
      #expect(try roundTrip(names, choice) == names)
      let grid = [Coordinate(x: 1, y: 2): [1, 2, 3], Coordinate(x: -5, y: 0): []]
      #expect(try roundTrip(grid, choice) == grid)
      let optional: [String: Int?] = ["some": 1, "none": nil]
      #expect(try roundTrip(optional, choice) == optional)
      let empty: [String: Int] = [:]
      #expect(try roundTrip(empty, choice) == empty)
    }

    @Test func aMissingFileLoadsNothingWithoutError() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      store["kept"] = 1
      #expect(try manager(store, directory.file("absent.snapshot")).load() == 0)
      #expect(store.allItems == ["kept": 1])
    }

    @Test func loadReportsTheEntriesTheStoreKeptAfterItsLimits() throws {
      let directory = TemporaryDirectory()
      let source = MemoryStore<Int, Int>()
      source.addEntries(Dictionary(uniqueKeysWithValues: (0..<50).map { ($0, $0) }))
      try manager(source, directory.file()).save()
      let limited = MemoryStore<Int, Int>()
      limited.countLimit = 10
      limited.addEntries([100: 100, 101: 101])
      #expect(try manager(limited, directory.file()).load() == 10)
      #expect(limited.count == 10)
      #expect(limited.keys.allSatisfy { $0 < 50 })
      // Without limits, every entry is kept.
      let unlimited = MemoryStore<Int, Int>()
      #expect(try manager(unlimited, directory.file()).load() == 50)
    }

    @Test func missingParentDirectoriesAreCreated() throws {
      let directory = TemporaryDirectory()
      let url = directory.url.appendingPathComponent("a/b/c/store.snapshot")
      let store = MemoryStore<String, Int>()
      store["x"] = 1
      try manager(store, url).save()
      #expect(FileManager.default.fileExists(atPath: url.path))
    }

    @Test func loadMergesIntoTheStoreAsOneBatchWithReasonLoaded() async throws {
      let directory = TemporaryDirectory()
      let source = MemoryStore<String, Int>()
      source.addEntries(["a": 1, "b": 2])
      try manager(source, directory.file()).save()

      let observed = ObservedStore<String, Int>()
      observed.store.addEntries(["b": 20, "c": 30])
      await observed.store.flush()
      #expect(try manager(observed.store, directory.file()).load() == 2)
      // Snapshot entries replace the store's; entries not in the snapshot stay.
      #expect(observed.store.allItems == ["a": 1, "b": 2, "c": 30])
      let batches = await observed.flushedBatches()
      try #require(batches.count == 2)
      #expect(batches[1].updated == ["a": 1, "b": 2])
      #expect(batches[1].reason(forKey: "a") == .loaded)
      #expect(batches[1].reason(forKey: "b") == .loaded)
      #expect(batches[0].reason(forKey: "c") == .write)
    }

    @Test func theFileIsPrivateHasAHeaderAndNoTemporaryFileRemains() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      store["a"] = 1
      let report = try manager(store, directory.file()).save()
      var status = stat()
      #expect(stat(directory.file().path, &status) == 0)
      #expect(status.st_mode & 0o777 == 0o600)
      let bytes = try #require(FileManager.default.bytes(at: directory.file()))
      #expect(bytes.count == report.byteCount)
      #expect(Array(bytes.prefix(8)) == Array("MEMSTORE".utf8))
      #expect(directory.contents == [".store.snapshot.lock", "store.snapshot"])
    }

    @Test func staleTemporaryFilesAreRemovedAtTheNextStart() throws {
      let directory = TemporaryDirectory()
      for name in [
        ".store.snapshot.tmp-Ab12Cd", ".store.snapshot.tmp-zzzzzz", "unrelated",
        ".other.tmp-Ab12Cd",
      ] {
        #expect(
          FileManager.default.createFile(atPath: directory.file(name).path, contents: Data([1])))
      }
      _ = try manager(MemoryStore<String, Int>(), directory.file())
      #expect(directory.contents == [".other.tmp-Ab12Cd", ".store.snapshot.lock", "unrelated"])
    }

    @Test func eachSaveReplacesThePreviousSnapshot() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      let persistence = try manager(store, directory.file())
      store["a"] = 1
      try persistence.save()
      store["a"] = nil
      store["b"] = 2
      try persistence.save()
      let restored = MemoryStore<String, Int>()
      try manager(restored, directory.file()).load()
      #expect(restored.allItems == ["b": 2])
      #expect(persistence.lastSaveError == nil)
      #expect(persistence.lastSaveDate != nil)
    }

    @Test func everySaveIsReportedInSaveOutcomes() async throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      let persistence = try manager(store, directory.file())
      var outcomes = persistence.saveOutcomes.makeAsyncIterator()
      store["a"] = 1
      let report = try persistence.save()
      let outcome = try #require(await outcomes.next())
      #expect(outcome.trigger == .manual)
      #expect(try outcome.result.get() == report)
    }

    @Test func theCoderMayUseTheStoreWhileItEncodes() throws {
      let directory = TemporaryDirectory()
      let store = MemoryStore<String, Int>()
      store.addEntries(["a": 1, "b": 2])
      let coder = InstrumentedCoder(base: JSONSnapshotCoder()) {
        // Runs while the snapshot is held: reads and writes go on, past the snapshot.
        store["c"] = 3
        store["a"] = 10
        store["b"] = nil
        #expect(store["a"] == 10)
        #expect(store.allItems == ["a": 10, "c": 3])
      }
      let report = try PersistenceManager(store: store, fileURL: directory.file(), coder: coder)
        .save()
      #expect(report.entryCount == 2)
      #expect(store.allItems == ["a": 10, "c": 3])
      #expect(
        !store._retainsReplacedValues,
        "what the writes made during the save replaced is freed once it is done")
      let restored = MemoryStore<String, Int>()
      try manager(restored, directory.file()).load()
      #expect(restored.allItems == ["a": 1, "b": 2])
    }
  }
}
