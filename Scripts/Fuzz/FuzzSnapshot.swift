// libFuzzer target over snapshot decoding, compiled in one module with the library's sources
// so that it reaches the internal entry points (Scripts/reliability fuzz builds and runs it):
//
//     clang -O2 -c Sources/_MemoryStoreShims/*.c -I Sources/_MemoryStoreShims/include -o shims.o
//     swiftc -sanitize=fuzzer,address -parse-as-library -O -g -module-name MemoryStoreFuzz \
//       -package-name MemoryStore -I Sources/_MemoryStoreShims/include \
//       $(find Sources/MemoryStoreKit -name '*.swift') Scripts/Fuzz/FuzzSnapshot.swift shims.o \
//       -o fuzz
//     MEMORYSTORE_FUZZ=file   ./fuzz corpus-work seeds   # the small fixtures of
//                                                  # Tests/MemoryStoreTests/Fixtures/Hostile
//     MEMORYSTORE_FUZZ=binary ./fuzz corpus-work Scripts/Fuzz/corpus/binary
//
// `file`: a whole snapshot file through the manager's load path after the read (header
// verification, then the JSON or binary coder, as the header names it, then the entry count
// check). `binary`: a bare payload through the binary coder, as five value types. Whatever
// decodes must encode and decode again to an equal value. A trap, an ASan report or a failed
// round trip is a crash.

import Foundation

/// The fixtures' value type (Scripts/CrashHarness/Fixtures.swift).
struct FuzzTree: Codable, Sendable, Equatable {
  var label: String
  var children: [FuzzTree]
}

/// What this run fuzzes, from the environment.
let fuzzMode = ProcessInfo.processInfo.environment["MEMORYSTORE_FUZZ"] ?? "file"

/// Managers whose `_decode` is the load path after the file is read; never saved or loaded.
let fuzzDirectory = FileManager.default.temporaryDirectory.appending(
  path: "memorystore-fuzz-\(getpid())", directoryHint: .isDirectory)
let jsonManager = makeManager(coder: JSONSnapshotCoder())
let binaryManager = makeManager(coder: BinarySnapshotCoder())

func makeManager(coder: some SnapshotCoder) -> PersistenceManager<String, FuzzTree> {
  do {
    return try PersistenceManager(
      store: MemoryStore<String, FuzzTree>(), fileURL: fuzzDirectory.appending(path: "unused"),
      coder: coder)
  } catch {
    fatalError("cannot create a persistence manager: \(error)")
  }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
  let bytes = [UInt8](UnsafeRawBufferPointer(start: start, count: count))
  if fuzzMode == "binary" {
    fuzzBinaryPayload(bytes)
  } else {
    fuzzSnapshotFile(bytes)
  }
  return 0
}

/// The whole file: the header picks the coder, as a real file would pick its manager.
func fuzzSnapshotFile(_ bytes: [UInt8]) {
  let isBinary = bytes.count >= 20 && bytes[12..<20].elementsEqual(Array("binary\0\0".utf8))
  let manager = isBinary ? binaryManager : jsonManager
  guard let decoded = try? manager._decode(bytes) else { return }
  // Round trip: what decoded encodes, and that decodes to the same entries.
  do {
    switch decoded {
    case .values(let entries):
      let again = try manager.coder.decode(
        try manager.coder.encode(entries), as: [String: FuzzTree].self)
      if again != entries { fatalError("round trip changed the entries: \(entries) -> \(again)") }
    case .entries(let entries):
      let again = try manager.coder.decode(
        try manager.coder.encode(entries), as: [String: _SnapshotEntry<FuzzTree>].self)
      func fields(_ entries: [String: _SnapshotEntry<FuzzTree>]) -> [String: String] {
        entries.mapValues { "\($0.value) \($0.cost) \($0.expires as Any) \($0.idleExpires as Any)" }
      }
      if fields(again) != fields(entries) {
        fatalError("round trip changed the entries: \(fields(entries)) -> \(fields(again))")
      }
    }
  } catch {
    fatalError("decoded entries do not round-trip: \(error)")
  }
}

/// A bare binary payload, decoded as several types.
func fuzzBinaryPayload(_ bytes: [UInt8]) {
  let payload = Data(bytes)
  roundTrip(payload, as: String.self, FuzzTree.self)
  roundTrip(payload, as: Int.self, [Int64].self)
  roundTrip(payload, as: String.self, Data.self)
  roundTrip(payload, as: String.self, [String: [Int]].self)
  // Doubles compared by bit pattern, so that NaN equals itself.
  if let doubles = try? _BinaryDecoding.decode(payload) as [String: [Double?]] {
    do {
      let again: [String: [Double?]] = try _BinaryDecoding.decode(_BinaryEncoding.encode(doubles))
      let bits = { (value: [String: [Double?]]) in value.mapValues { $0.map { $0?.bitPattern } } }
      if bits(again) != bits(doubles) { fatalError("round trip changed doubles: \(doubles)") }
    } catch {
      fatalError("decoded doubles do not round-trip: \(error)")
    }
  }
}

func roundTrip<Key: Codable & Hashable, Value: Codable & Equatable>(
  _ payload: Data, as key: Key.Type, _ value: Value.Type
) {
  guard let entries = try? _BinaryDecoding.decode(payload) as [Key: Value] else { return }
  do {
    let again: [Key: Value] = try _BinaryDecoding.decode(_BinaryEncoding.encode(entries))
    if again != entries { fatalError("round trip changed [\(Key.self): \(Value.self)]") }
  } catch {
    fatalError("decoded [\(Key.self): \(Value.self)] does not round-trip: \(error)")
  }
}
