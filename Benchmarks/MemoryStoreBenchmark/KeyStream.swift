// The keys and the pre-generated access pattern shared by every store.

/// SplitMix64 (Steele, Lea and Flood, 2014): a tiny, fast and well-mixed generator, seeded so
/// that every run and every store sees exactly the same stream.
struct SplitMix64 {
  private var state: UInt64

  init(seed: UInt64) {
    state = seed
  }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A uniform value in `0..<bound` (Lemire's multiply-shift with rejection: no modulo bias).
  mutating func next(below bound: UInt32) -> UInt32 {
    precondition(bound > 0)
    var product = UInt64(UInt32(truncatingIfNeeded: next() >> 32)) &* UInt64(bound)
    if UInt32(truncatingIfNeeded: product) < bound {
      let threshold = (0 &- bound) % bound
      while UInt32(truncatingIfNeeded: product) < threshold {
        product = UInt64(UInt32(truncatingIfNeeded: next() >> 32)) &* UInt64(bound)
      }
    }
    return UInt32(truncatingIfNeeded: product >> 32)
  }
}

/// One pre-generated operation: a key index in the low bits, and a write mark in the top bit.
enum Op {
  static let writeBit: UInt32 = 0x8000_0000
  static let indexMask: UInt32 = 0x7FFF_FFFF
}

/// The keys: `"SYM0000"` … `"SYM9999"`, 7 UTF-8 bytes each, so every key is a small string
/// stored inline (no heap buffer, no reference counting when copied).
enum KeySpace {
  static let count = 10_000

  static func makeKeys() -> [String] {
    (0..<count).map { index in
      let digits = String(index)
      return "SYM" + String(repeating: "0", count: 4 - digits.count) + digits
    }
  }
}

/// Per-lane streams of operations, generated once before any measurement and used, as
/// prefixes of the same streams, by every store. Indices are uniform over the keys; about
/// `writePercent` % of the operations carry a write mark (only `mixed2` looks at it).
struct AccessPattern: Sendable {
  /// Lanes 0 and 1. Single-thread workloads use lane 0; `rw` gives lane 0 to the writer.
  static let laneCount = 2
  /// Operations per lane: a power of two at least the 2 000 000 cap on calibrated op counts,
  /// so the `rw` reader, which runs until the writer is done, can wrap with a mask.
  static let length = 1 << 21
  static let lengthMask = length - 1

  let seed: UInt64
  let writePercent: Int
  let lanes: [[UInt32]]

  init(keyCount: Int, writePercent: Int, seed: UInt64) {
    precondition(keyCount > 0 && UInt32(keyCount) <= Op.indexMask)
    self.seed = seed
    self.writePercent = writePercent
    var seeder = SplitMix64(seed: seed)
    lanes = (0..<Self.laneCount).map { _ in
      var rng = SplitMix64(seed: seeder.next())
      var ops = [UInt32]()
      ops.reserveCapacity(Self.length)
      for _ in 0..<Self.length {
        let index = rng.next(below: UInt32(keyCount))
        let isWrite = rng.next(below: 100) < UInt32(writePercent)
        ops.append(index | (isWrite ? Op.writeBit : 0))
      }
      return ops
    }
  }

  /// The result of checking the generator before anything is measured.
  struct SanityReport {
    var passed: Bool
    var lines: [String]
  }

  /// Checks that every lane covers every key, that key frequencies are plausible for a
  /// uniform draw, that the write share is close to `writePercent` over the whole stream and
  /// over the shortest prefix a measurement may use, and that the lanes differ.
  func sanityCheck(keyCount: Int, shortestPrefix: Int) -> SanityReport {
    var passed = true
    var lines: [String] = []
    let expectedShare = Double(writePercent) / 100
    let expectedHits = Double(Self.length) / Double(keyCount)
    // Binomial standard deviation of one key's hit count; 8 sigma is far beyond chance.
    let hitSigma = (expectedHits * (1 - 1 / Double(keyCount))).squareRoot()
    for (lane, ops) in lanes.enumerated() {
      var hits = [Int](repeating: 0, count: keyCount)
      var writes = 0
      var prefixWrites = 0
      for (position, op) in ops.enumerated() {
        hits[Int(op & Op.indexMask)] += 1
        if op & Op.writeBit != 0 {
          writes += 1
          if position < shortestPrefix { prefixWrites += 1 }
        }
      }
      let minHits = hits.min() ?? 0
      let maxHits = hits.max() ?? 0
      let share = Double(writes) / Double(ops.count)
      let prefixShare = Double(prefixWrites) / Double(shortestPrefix)
      let coverageOK = minHits > 0
      let uniformOK =
        Double(minHits) > expectedHits - 8 * hitSigma
        && Double(maxHits) < expectedHits + 8 * hitSigma
      let shareOK = abs(share - expectedShare) < 0.002
      let prefixOK = abs(prefixShare - expectedShare) < 0.01
      passed = passed && coverageOK && uniformOK && shareOK && prefixOK
      lines.append(
        "lane \(lane): \(coverageOK ? "all" : "NOT all") \(keyCount) keys covered "
          + "(hits per key \(minHits)...\(maxHits), expected \(fixed(expectedHits, 1))); "
          + "write share \(percent(share)) (first \(shortestPrefix) ops: "
          + "\(percent(prefixShare)))"
          + (coverageOK && uniformOK && shareOK && prefixOK ? "" : "  <-- FAILED"))
    }
    if lanes.count > 1 && lanes[0] == lanes[1] {
      passed = false
      lines.append("lanes 0 and 1 are identical  <-- FAILED")
    }
    return SanityReport(passed: passed, lines: lines)
  }
}

/// Everything a repetition needs that does not depend on the store: built once, shared by
/// every store, never mutated.
struct Fixture: Sendable {
  let keys: [String]
  let initialEntries: [String: Quote]
  let pattern: AccessPattern

  init(seed: UInt64) {
    let keys = KeySpace.makeKeys()
    self.keys = keys
    initialEntries = Dictionary(
      uniqueKeysWithValues: keys.indices.map { (keys[$0], Quote.initial(forKeyAt: $0)) })
    pattern = AccessPattern(keyCount: keys.count, writePercent: 10, seed: seed)
  }

  /// Runs `body` with the lane's operation stream and the keys converted to the store's own
  /// key representation. Each lane converts its own copy, so lanes share no key objects.
  func withLane<S: BenchmarkStore, R>(
    _ lane: Int, for _: S.Type,
    _ body: (UnsafeBufferPointer<S.KeyHandle>, UnsafeBufferPointer<UInt32>) -> R
  ) -> R {
    let handles = keys.map { S.makeKey($0) }
    return handles.withUnsafeBufferPointer { handles in
      pattern.lanes[lane].withUnsafeBufferPointer { ops in body(handles, ops) }
    }
  }
}
