import Synchronization
import Testing

@testable import MemoryStoreKit

/// The change log's parts on their own: the segments writers append to, and the map that
/// coalesces them by the hash each change was logged with.
@Suite("Change log") struct ChangeLogTests {
  /// A key whose hash is chosen by the test: keys with the same `bucket` collide.
  struct CollidingKey: Hashable, Sendable {
    var id: Int
    var bucket: Int
    func hash(into hasher: inout Hasher) { hasher.combine(bucket) }
  }

  /// Counts the instances alive, to tell that every value logged is released exactly once.
  final class Tracked: Sendable {
    static let alive = Atomic(0)
    let id: Int
    init(_ id: Int) {
      self.id = id
      Self.alive.add(1, ordering: .relaxed)
    }
    deinit { Self.alive.subtract(1, ordering: .relaxed) }
  }

  @Test func theMapFindsEveryKeyThroughCollisionsAndGrowth() {
    var map = _ChangeMap<CollidingKey, Int>()
    // 3 000 keys in 10 hash classes: long probe runs, and the index grows 9 times.
    let keys = (0..<3_000).map { CollidingKey(id: $0, bucket: $0 % 10) }
    for (index, key) in keys.enumerated() {
      map.withChange(
        for: key, hash: key.hashValue,
        orInsert: { _KeyChange(wasPresent: false, current: nil, reason: .write) },
        { $0.current = index })
    }
    // A second pass updates in place: no entry is added.
    for (index, key) in keys.enumerated() where index.isMultiple(of: 3) {
      map.withChange(
        for: key, hash: key.hashValue,
        orInsert: {
          Issue.record("key \(key.id) inserted twice")
          return _KeyChange(wasPresent: false, current: nil, reason: .write)
        },
        { $0.current = -index })
    }
    #expect(map.count == keys.count)
    #expect(map.entries.map(\.key) == keys)
    for (index, key) in keys.enumerated() {
      #expect(map[key]?.current == (index.isMultiple(of: 3) ? -index : index))
    }
    #expect(map[CollidingKey(id: -1, bucket: 3)] == nil)
    #expect(_ChangeMap<CollidingKey, Int>()[keys[0]] == nil)
  }

  @Test func aSegmentReleasesWhatItHoldsOnceWhetherOrNotItWasCoalesced() {
    #expect(Tracked.alive.load(ordering: .relaxed) == 0)
    do {
      // Filled past its capacity (so grown), never coalesced: released with the segment.
      var segment = _LogSegment<Int, Tracked>(capacity: 4)
      for index in 0..<10 {
        if segment.count == segment.capacity { segment = segment.grown(minimumCapacity: 4) }
        segment.append(
          index,
          _LoggedValue(
            value: Tracked(index), hash: index.hashValue, wasPresent: false, reason: .write))
      }
      #expect(segment.count == 10 && segment.capacity >= 10)
      #expect(Tracked.alive.load(ordering: .relaxed) == 10)
    }
    #expect(Tracked.alive.load(ordering: .relaxed) == 0)
    do {
      // Coalesced: the accumulator holds the latest value per key, and the values it replaced
      // are handed back to be released by the caller.
      let segment = _LogSegment<Int, Tracked>(capacity: 8)
      for index in 0..<8 {
        segment.append(
          index % 3,
          _LoggedValue(
            value: Tracked(index), hash: (index % 3).hashValue, wasPresent: true, reason: .write))
      }
      var accumulator = _ChangeAccumulator<Int, Tracked>()
      var displaced: [Tracked] = []
      accumulator.apply(segment, displaced: &displaced)
      #expect(segment.recordsTaken)
      #expect(displaced.count == 5)
      #expect(accumulator.changes.entries.map { $0.change.current?.id } == [6, 7, 5])
      displaced = []
      #expect(Tracked.alive.load(ordering: .relaxed) == 3)
      withExtendedLifetime(segment) {}
    }
    #expect(Tracked.alive.load(ordering: .relaxed) == 0)
  }

  @Test func batchesOfCollidingKeysReportEachKeyItsOwnChange() async {
    let store = MemoryStore<CollidingKey, Int>()
    let keys = (0..<600).map { CollidingKey(id: $0, bucket: $0 % 4) }
    for key in keys where key.id < 300 { store[key] = -1 }
    store.notificationInterval = .seconds(3_600)
    let batches = Batches()
    let subscription = store.observe { batches.append($0) }
    // Keys 0..<300 were present: even ones are updated, odd ones removed; keys 300..<600 are
    // added, and those divisible by 5 removed again (no change to report).
    for key in keys {
      if key.id < 300 {
        store[key] = key.id.isMultiple(of: 2) ? key.id : nil
      } else {
        store[key] = key.id
        if key.id.isMultiple(of: 5) { store[key] = nil }
      }
    }
    await store.flush()
    let all = batches.all
    #expect(all.count == 1)
    let batch = all.first
    for key in keys {
      if key.id < 300 {
        if key.id.isMultiple(of: 2) {
          #expect(batch?.updated[key] == key.id && batch?.addedKeys.contains(key) == false)
        } else {
          #expect(batch?.removed.contains(key) == true)
        }
      } else if key.id.isMultiple(of: 5) {
        #expect(batch?.updated[key] == nil && batch?.removed.contains(key) == false)
      } else {
        #expect(batch?.updated[key] == key.id && batch?.addedKeys.contains(key) == true)
      }
    }
    withExtendedLifetime(subscription) {}
  }

  final class Batches: Sendable {
    let batches = Mutex<[ChangeBatch<CollidingKey, Int>]>([])
    func append(_ batch: ChangeBatch<CollidingKey, Int>) { batches.withLock { $0.append(batch) } }
    var all: [ChangeBatch<CollidingKey, Int>] { batches.withLock { $0 } }
  }
}
