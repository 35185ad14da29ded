import Synchronization
import Testing

@testable import MemoryStoreKit

/// The engine's table on its own: its results against a `Dictionary` model, versions and
/// atomic publication, reclamation, growth, and readers racing a writer.
@Suite("Concurrent table") struct ConcurrentTableTests {
  /// One writer's view of a table: stages, publishes and frees the garbage, as the store does
  /// under its write lock (here a single thread writes, so no lock is needed).
  struct Writer {
    let table: _ConcurrentTable<Int, Int>

    func commit(_ body: () -> Void) {
      body()
      if let garbage = table.publish() { table._free(garbage) }
    }

    func set(_ key: Int, _ value: Int) -> Int? {
      var previous: Int?
      commit { previous = table.stageSet(key, value) }
      return previous
    }

    func remove(_ key: Int) -> Int? {
      var previous: Int?
      commit { previous = table.stageRemove(key) }
      return previous
    }
  }

  @Test func matchesADictionaryThroughRandomWritesGrowthAndClears() {
    let table = _ConcurrentTable<Int, Int>()
    let writer = Writer(table: table)
    var model: [Int: Int] = [:]
    var random = SplitMix64(seed: 7)
    for step in 0..<60_000 {
      let key = random.below(step < 40_000 ? 50_000 : 500)
      switch random.below(100) {
      case 0..<55:
        #expect(writer.set(key, step) == model.updateValue(step, forKey: key))
      case 55..<85:
        #expect(writer.remove(key) == model.removeValue(forKey: key))
      case 85..<90:
        var inserted: Int?
        // Insert only if absent: what get-or-create does.
        writer.commit {
          inserted = table.stagedValue(forKey: key)
          if inserted == nil { table.stageSet(key, step) }
        }
        #expect(inserted == model[key])
        if model[key] == nil { model[key] = step }
      case 90..<99:
        // A batch touching some keys twice.
        let keys = (0..<8).map { _ in random.below(1_000) }
        writer.commit {
          for (offset, key) in keys.enumerated() {
            if offset % 3 == 2 {
              table.stageRemove(key)
              model[key] = nil
            } else {
              table.stageSet(key, step + offset)
              model[key] = step + offset
            }
          }
        }
      default:
        if step % 7 == 0 {
          writer.commit { table.stageRemoveAll() }
          model.removeAll()
        }
      }
      #expect(table.value(forKey: key) == model[key])
      if step % 5_000 == 0 {
        table._checkInvariants()
        #expect(table.dictionary == model)
      }
    }
    table._checkInvariants()
    #expect(table.count == model.count)
    #expect(table.dictionary == model)
    for (key, value) in model { #expect(table.value(forKey: key) == value) }
  }

  @Test func stagedChangesAreInvisibleUntilPublished() {
    let table = _ConcurrentTable<Int, Int>()
    let writer = Writer(table: table)
    for key in 0..<100 { _ = writer.set(key, key) }
    table.stageSet(1, -1)
    table.stageRemove(2)
    table.stageSet(1_000, 1_000)
    #expect(table.value(forKey: 1) == 1)
    #expect(table.value(forKey: 2) == 2)
    #expect(table.value(forKey: 1_000) == nil)
    #expect(table.count == 100)
    #expect(table.stagedValue(forKey: 1) == -1)
    #expect(table.stagedCount == 100)
    if let garbage = table.publish() { table._free(garbage) }
    #expect(table.value(forKey: 1) == -1)
    #expect(table.value(forKey: 2) == nil)
    #expect(table.value(forKey: 1_000) == 1_000)
    #expect(table.count == 100)
    table._checkInvariants()
  }

  @Test func aReaderKeepsSeeingItsVersionThroughWritesGrowthAndClears() {
    let table = _ConcurrentTable<Int, Int>()
    let writer = Writer(table: table)
    for key in 0..<1_000 { _ = writer.set(key, key) }
    table.withReadSection { version in
      // While this reader is inside, the table grows several times, every key is rewritten
      // or removed, and then everything is cleared; this reader's version still shows the
      // entries as they were, and nothing it can reach is freed.
      for key in 0..<20_000 { _ = writer.set(key, -key) }
      for key in stride(from: 0, to: 1_000, by: 2) { _ = writer.remove(key) }
      writer.commit { table.stageRemoveAll() }
      for key in 0..<5_000 { _ = writer.set(key, key * 10) }
      for key in 0..<1_000 {
        #expect(table._value(forKey: key, hash: key.hashValue, at: version) == key)
      }
      #expect(table._value(forKey: 1_500, hash: 1_500.hashValue, at: version) == nil)
      var seen: [Int: Int] = [:]
      table._forEach(at: version) { key, value in seen[key] = value }
      #expect(seen == Dictionary(uniqueKeysWithValues: (0..<1_000).map { ($0, $0) }))
    }
    #expect(table.value(forKey: 4) == 40)
    #expect(table.value(forKey: 6_000) == nil)
    #expect(table.count == 5_000)
    table._checkInvariants()
  }

  @Test func retiredNodesAreFreedOnceNoReaderIsLeft() {
    let tracker = LiveCount()
    let table = _ConcurrentTable<Int, Tracked>()
    func commit(_ body: () -> Void) {
      body()
      if let garbage = table.publish() { table._free(garbage) }
    }
    for round in 0..<50 {
      for key in 0..<100 { commit { table.stageSet(key, Tracked(tracker, round)) } }
    }
    // 100 live values, plus at most a few hundred retired ones not yet reclaimed.
    #expect(tracker.value >= 100)
    #expect(tracker.value <= 100 + 4 * 64)
    commit { table.stageRemoveAll() }
    for _ in 0..<3 {
      for key in 0..<70 { commit { table.stageSet(key, Tracked(tracker, key)) } }
    }
    #expect(tracker.value <= 70 + 4 * 64)
    _ = table
  }

  @Test func everyValueIsFreedWithTheTable() {
    let tracker = LiveCount()
    do {
      let table = _ConcurrentTable<Int, Tracked>()
      for key in 0..<5_000 {
        table.stageSet(key % 3_000, Tracked(tracker, key))
        if key % 4 == 0 { table.stageRemove(key / 2) }
        if let garbage = table.publish() { table._free(garbage) }
      }
      table.stageRemoveAll()
      table.stageSet(1, Tracked(tracker, 1))
      _ = table.publish().map(table._free)
      #expect(tracker.value > 0)
    }
    #expect(tracker.value == 0)
  }

  @Test func everyKeyIsFreedThroughRemovalsGrowthAndClears() {
    // Tombstones hold keys: counting keys proves that none is lost while growth moves them.
    let tracker = LiveCount()
    do {
      let table = _ConcurrentTable<TrackedKey, Int>()
      var random = SplitMix64(seed: 3)
      for step in 0..<40_000 {
        let key = random.below(step < 30_000 ? 20_000 : 200)
        if random.below(3) == 0 {
          table.stageRemove(TrackedKey(tracker, key))
        } else {
          table.stageSet(TrackedKey(tracker, key), step)
        }
        if step % 9_000 == 8_999 { table.stageRemoveAll() }
        if let garbage = table.publish() { table._free(garbage) }
      }
      table._checkInvariants()
      #expect(tracker.value > 0)
    }
    #expect(tracker.value == 0)
  }

  @Test func tombstonesOfALargeRemovalAreUnlinkedAFewAtATimeAndFreed() {
    let tracker = LiveCount()
    do {
      let table = _ConcurrentTable<TrackedKey, Int>()
      for key in 0..<20_000 { table.stageSet(TrackedKey(tracker, key), key) }
      if let garbage = table.publish() { table._free(garbage) }
      for key in 0..<20_000 where key % 10 != 0 { table.stageRemove(TrackedKey(tracker, key)) }
      if let garbage = table.publish() { table._free(garbage) }
      #expect(table.tombstoneCount == 18_000)
      // Later writes unlink them a bounded number per reclamation, and free them.
      var steps = 0
      while table.retainedCount > 0 && steps < 1_000 {
        let step = table.reclaimStep()
        if let garbage = step.garbage { table._free(garbage) }
        steps += 1
      }
      #expect(steps >= 18_000 / _ConcurrentTable<TrackedKey, Int>.tombstonesPerReclaim)
      #expect(table.retainedCount == 0)
      #expect(table.tombstoneCount == 0)
      #expect(table.count == 2_000)
      table._checkInvariants()
      // The table's keys plus the spare blocks' (none: spares hold no key).
      #expect(tracker.value == 2_000)
    }
    #expect(tracker.value == 0)
  }

  /// A reader loads the epoch, then announces itself only after a reclamation has checked the
  /// readers of that epoch's parity and before it unlinks a tombstone, so the reader can still
  /// reach it: the tombstone must outlive that reader. The writer cannot tell such a reader
  /// from one that enters right after that reclamation's advance, in the parity of the epoch
  /// it advanced to, which is how this test makes one.
  @Test func aTombstoneUnlinkedAfterTheReaderCheckOutlivesAReaderThatEnteredMeanwhile() {
    let tracker = LiveCount()
    do {
      let others = LiveCount()
      let table = _ConcurrentTable<TrackedKey, Int>()
      func commit(_ body: () -> Void) {
        body()
        if let garbage = table.publish() { table._free(garbage) }
      }
      commit { table.stageSet(TrackedKey(tracker, 1), 1) }
      commit { table.stageRemove(TrackedKey(tracker, 1)) }
      // Reclaim until the tombstone (the only holder of the key once its node is freed) is
      // unlinked.
      var steps = 0
      while table.tombstoneCount > 0 && steps < 10 {
        if let garbage = table.reclaimStep().garbage { table._free(garbage) }
        steps += 1
      }
      #expect(table.tombstoneCount == 0)
      let (_, token) = table.enterReadSection()
      for key in 2..<200 { commit { table.stageSet(TrackedKey(others, key), key) } }
      for _ in 0..<8 {
        if let garbage = table.reclaimStep().garbage { table._free(garbage) }
      }
      // The key of entry 1 is held by the tombstone only.
      #expect(tracker.value == 1)
      table.leaveReadSection(token)
      steps = 0
      while table.retainedCount > 0 && steps < 100 {
        if let garbage = table.reclaimStep().garbage { table._free(garbage) }
        steps += 1
      }
      #expect(tracker.value == 0)
      table._checkInvariants()
    }
    #expect(tracker.value == 0)
  }

  /// A writer applies batches that keep pairs of keys equal (set both, or remove both) while
  /// the table grows and is cleared; readers check at one version that both keys of a pair
  /// agree, and that a key written before they started is never missing.
  @Test func readersNeverSeePartOfABatch() {
    let table = _ConcurrentTable<Int, Int>()
    let pairs = 4_000
    let writes = 60_000
    let done = Atomic<Bool>(false)
    let published = Atomic<Int>(0)
    let results = runOnThreads(3) { thread -> [Int] in
      if thread == 0 {
        var random = SplitMix64(seed: 11)
        for step in 1...writes {
          let pair = random.below(pairs)
          if random.below(10) < 7 {
            table.stageSet(2 * pair, step)
            table.stageSet(2 * pair + 1, step)
          } else {
            table.stageRemove(2 * pair)
            table.stageRemove(2 * pair + 1)
          }
          if step % 20_000 == 0 { table.stageRemoveAll() }
          // Key -1 holds the step: every read sees at least the steps published before it.
          table.stageSet(-1, step)
          if let garbage = table.publish() { table._free(garbage) }
          published.store(step, ordering: .releasing)
        }
        done.store(true, ordering: .releasing)
        return [0, 1]
      }
      var random = SplitMix64(seed: UInt64(thread))
      var violations = 0
      var lastSeen = 0
      var reads = 0
      // Readers run until the writer is done, and read at least a few thousand times.
      while !done.load(ordering: .acquiring) || reads < 5_000 {
        reads += 1
        let pair = random.below(pairs)
        let before = published.load(ordering: .acquiring)
        let (left, right, marker) = table.withReadSection { version in
          (
            table._value(forKey: 2 * pair, hash: (2 * pair).hashValue, at: version),
            table._value(forKey: 2 * pair + 1, hash: (2 * pair + 1).hashValue, at: version),
            table._value(forKey: -1, hash: (-1).hashValue, at: version)
          )
        }
        if left != right { violations += 1 }
        // Every write published before the read started is visible, and a reader never
        // goes back in time.
        if let marker {
          if marker < before || marker < lastSeen { violations += 1 }
          lastSeen = marker
        } else if before != 0 {
          violations += 1
        }
      }
      return [violations, reads > 0 ? 1 : 0]
    }
    #expect(results == [[0, 1], [0, 1], [0, 1]])
    table._checkInvariants()
  }
}

/// Counts live `Tracked` values.
final class LiveCount: Sendable {
  let live = Atomic<Int>(0)
  var value: Int { live.load(ordering: .relaxed) }
}

/// A value whose instances are counted, to prove that the table frees what it retires.
final class Tracked: Sendable {
  let tracker: LiveCount
  let payload: Int

  init(_ tracker: LiveCount, _ payload: Int) {
    self.tracker = tracker
    self.payload = payload
    tracker.live.wrappingAdd(1, ordering: .relaxed)
  }

  deinit { tracker.live.wrappingSubtract(1, ordering: .relaxed) }
}

/// A key whose instances are counted.
struct TrackedKey: Hashable, Sendable {
  let owner: Tracked
  var id: Int { owner.payload }

  init(_ tracker: LiveCount, _ id: Int) { owner = Tracked(tracker, id) }

  static func == (lhs: TrackedKey, rhs: TrackedKey) -> Bool { lhs.id == rhs.id }
  func hash(into hasher: inout Hasher) { hasher.combine(id) }
}
