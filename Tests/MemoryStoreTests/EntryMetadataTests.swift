import Synchronization
import Testing

@testable import MemoryStoreKit

/// Entries that carry their metadata in their nodes: the table's ring of entries through
/// every kind of write, growth and packing; the policy's expiry heap; and the store turning
/// metadata on while readers read.
@Suite("Entry metadata") struct EntryMetadataTests {
  /// The table tests' writer, which stages and publishes on one thread.
  typealias Writer = ConcurrentTableTests.Writer

  @Test func theRingHoldsEveryEntryOnceThroughRandomWritesGrowthAndClears() {
    let table = _ConcurrentTable<Int, Int>()
    table.startCarryingMetadata()
    let writer = Writer(table: table)
    var model: [Int: (value: Int, cost: Int)] = [:]
    var random = SplitMix64(seed: 11)
    for step in 0..<50_000 {
      let key = random.below(step < 35_000 ? 40_000 : 300)
      switch random.below(100) {
      case 0..<55:
        writer.setNode(key, step, cost: step % 7)
        model[key] = (step, step % 7)
      case 55..<85:
        writer.commit { table.stageRemove(key) }
        model[key] = nil
      case 85..<99:
        // A batch touching some keys twice, one written without metadata of its own.
        let keys = (0..<8).map { _ in random.below(1_000) }
        writer.commit {
          for (offset, key) in keys.enumerated() {
            switch offset % 3 {
            case 0:
              table.stageRemove(key)
              model[key] = nil
            case 1:
              table.stageSet(key, step)
              model[key] = (step, 0)
            default:
              _ = table.stageSet(
                key, step, metadata: _EntryMetadata(writtenAt: 0, expiresAt: .max, cost: 3))
              model[key] = (step, 3)
            }
          }
        }
      default:
        if step % 9 == 0 {
          writer.commit { table.stageRemoveAll() }
          model.removeAll()
        }
      }
      if step % 2_500 == 0 { table._checkInvariants() }  // also in the middle of growth
    }
    table._checkInvariants()
    #expect(table.count == model.count)
    var inRing = 0
    for position in 0..<table.ringCount {
      guard let node = table.ringNode(at: position) else { continue }
      inRing += 1
      let expected = model[node.key.pointee]
      #expect(node.value.pointee == expected?.value)
      #expect(node.cost == expected?.cost)
    }
    #expect(inRing == model.count)
  }

  @Test func aRewriteKeepsTheRingPositionAndCountsAsAUse() {
    let table = _ConcurrentTable<Int, Int>()
    table.startCarryingMetadata()
    let writer = Writer(table: table)
    let first = writer.setNode(1, 10)
    writer.setNode(2, 20)
    #expect(first.recency.pointee.load(ordering: .relaxed) & 3 == 0, "an insertion is no use")
    let position = first.slot
    let second = writer.setNode(1, 11)
    #expect(second.slot == position)
    #expect(table.ringNode(at: position)?.bits == second.bits)
    #expect(second.recency.pointee.load(ordering: .relaxed) & 3 == 1)
    // Reads raise the counter to 3 at most, and record their second.
    var word = second.recency.pointee.load(ordering: .relaxed)
    for _ in 0..<5 { word = _Recency.read(word, tick: 9) }
    #expect(word & 3 == 3)
    #expect(word >> 2 == 9)
    #expect(_Recency.read(word, tick: 0) >> 2 == 9, "no tick keeps the last read time")
    // A removal frees the position; the next new key takes it.
    writer.commit { table.stageRemove(1) }
    #expect(table.ringNode(at: position) == nil)
    #expect(writer.setNode(3, 30).slot == position)
    table._checkInvariants()
  }

  @Test(arguments: [false, true])
  func aNodeStoresOnlyTheMetadataThatDiffersFromTheDefaults(keepingHashes: Bool) {
    let table = _ConcurrentTable<Int, Int>()
    table.startCarryingMetadata()
    let writer = Writer(table: table)
    // The first limit makes nodes keep their key's hash.
    if keepingHashes { writer.commit { table.startKeepingHashes() } }
    var key = 0
    for expiresAt: Int64 in [.max, 5] {
      for cost in [0, -7, 7] {
        for writtenAt: Int64 in [0, 9] {
          key += 1
          var node: _Node<Int, Int>?
          writer.commit {
            node =
              table.stageSet(
                key, key,
                metadata: _EntryMetadata(writtenAt: writtenAt, expiresAt: expiresAt, cost: cost)
              ).new
          }
          let stored = node!
          #expect(stored.value.pointee == key)
          #expect(stored.expiresAt == expiresAt)
          #expect(stored.cost == cost)
          #expect(stored.writtenAt == writtenAt)
          #expect(stored.hash == key.hashValue)
          let fields =
            (expiresAt != .max ? 1 : 0) + (cost != 0 ? 1 : 0) + (writtenAt != 0 ? 1 : 0)
            + (keepingHashes ? 1 : 0)
          // The recency word and ring position, then the fields stored, the key's hash last.
          #expect(stored.byteCount == _Node<Int, Int>.metadataOffset + 8 + 8 * fields)
          #expect(stored.storedHash == (keepingHashes ? key.hashValue : nil))
        }
      }
    }
    table._checkInvariants()
  }

  @Test func holesLeftByRemovalsAreFilledAFewAtATimeAndTheRingShrinks() {
    let table = _ConcurrentTable<Int, Int>()
    table.startCarryingMetadata()
    let writer = Writer(table: table)
    for key in 0..<5_000 { writer.setNode(key, key) }
    writer.commit { for key in 0..<5_000 where key % 5 != 0 { table.stageRemove(key) } }
    #expect(table.ringCount == 5_000)
    var moves: [(Int, Int)] = []
    for _ in 0..<4 { if let move = table.fillRingHole() { moves.append(move) } }
    #expect(moves.count == 4, "one hole per call")
    for (from, to) in moves { #expect(from > to, "entries move toward the start") }
    #expect(table.ringCount < 5_000)
    table._checkInvariants()
    while table.ringCount > 1_000, table.fillRingHole() != nil {}
    table._checkInvariants()
    // A new entry takes a free position at the end, past the stale ones.
    writer.setNode(9_999, 1)
    #expect(table.ringCount == 1_001)
    table._checkInvariants()
    for key in stride(from: 0, to: 5_000, by: 5) { #expect(table.value(forKey: key) == key) }
  }

  @Test func nodeMemoryFreedBeforeMetadataIsNeverReusedForALargerNode() {
    // Freed nodes are recycled as spare blocks; blocks the size of a node without metadata
    // must not receive one with metadata (AddressSanitizer runs of the suite check the
    // bounds; here the values and the count of live values check the contents).
    let tracker = LiveCount()
    do {
      let table = _ConcurrentTable<Int, Tracked>()
      for round in 0..<3 {
        for key in 0..<4_000 {
          table.stageSet(key, Tracked(tracker, key + round))
          if let garbage = table.publish() { table._free(garbage) }
        }
      }
      for key in 0..<4_000 {
        table.stageRemove(key)
        if let garbage = table.publish() { table._free(garbage) }
      }
      table.startCarryingMetadata()
      for key in 0..<4_000 {
        _ = table.stageSet(
          key, Tracked(tracker, key), metadata: _EntryMetadata(writtenAt: 1, expiresAt: 2, cost: 3))
        if let garbage = table.publish() { table._free(garbage) }
      }
      table._checkInvariants()
      for key in 0..<4_000 {
        #expect(table.value(forKey: key)?.payload == key)
      }
      for position in 0..<table.ringCount {
        let node = table.ringNode(at: position)
        #expect(node?.metadata.cost == 3)
        #expect(node?.expiresAt == 2)
      }
    }
    #expect(tracker.value == 0)
  }

  @Test func theExpiryHeapFollowsEveryRewriteAndRemoval() {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.defaultTimeToLive = .seconds(10)
    store["a"] = 1  // expires at 10 s
    store.setValue(2, forKey: "b", timeToLive: .seconds(5))
    store.setValue(3, forKey: "c", timeToLive: .seconds(20))
    store.setValue(4, forKey: "d", timeToLive: .seconds(1))
    #expect(store._policyMismatch() == nil)
    store.setValue(1, forKey: "a", timeToLive: .seconds(30))  // later
    store.setValue(3, forKey: "c", timeToLive: .seconds(2))  // earlier
    store.defaultTimeToLive = nil
    store["b"] = 2  // no deadline any more
    store["d"] = nil
    store["e"] = 5
    #expect(store._policyMismatch() == nil)
    scheduler.advance(by: .milliseconds(1_999))
    #expect(store.count == 4)
    scheduler.advance(by: .milliseconds(1))
    #expect(store["c"] == nil)
    #expect(Set(store.allItems.keys) == ["a", "b", "e"])
    scheduler.advance(by: .seconds(28))
    #expect(Set(store.allItems.keys) == ["b", "e"])
    #expect(store.statistics.evictions[.expired] == 2)
    #expect(store._policyMismatch() == nil)
    store._checkInvariants()
  }

  @Test func theExpiryHeapFollowsEntriesMovedInTheRing() {
    let scheduler = ManualScheduler()
    let store = MemoryStore<Int, Int>(scheduler: scheduler)
    for key in 0..<6_000 {
      store.setValue(key, forKey: key, timeToLive: .seconds(Int64(1 + key % 50)))
    }
    // Removing most entries leaves holes; the writes after it move the last entries into
    // them, which renumbers their positions in the heap.
    store.removeValues(forKeys: (0..<6_000).filter { $0 % 6 != 0 })
    for round in 0..<2_000 { store[-1] = round }
    #expect(store._policyMismatch() == nil)
    store._checkInvariants()
    scheduler.advance(by: .seconds(25))
    let left = Set(store.allItems.keys)
    #expect(left == Set((0..<6_000).filter { $0 % 6 == 0 && 1 + $0 % 50 > 25 }).union([-1]))
    #expect(store._policyMismatch() == nil)
  }

  @Test func settingTheFirstLimitOnALargeStoreChangesNothingReadersSee() async {
    let store = MemoryStore<Int, Int>()
    let count = 60_000
    store.addEntries(Dictionary(uniqueKeysWithValues: (0..<count).map { ($0, $0 * 3) }))
    let done = Atomic(false)
    let wrong = Atomic(0)
    let reads = Atomic(0)
    let readers = (0..<2).map { thread in
      startThread {
        var random = SplitMix64(seed: UInt64(thread) + 5)
        while !done.load(ordering: .acquiring) {
          let key = random.below(count)
          if store[key] != key * 3 { wrong.wrappingAdd(1, ordering: .relaxed) }
          reads.wrappingAdd(1, ordering: .relaxed)
        }
      }
    }
    // The readers' progress, not time, decides when the limit is set and when they stop; the
    // caps only keep readers that never run from hanging the test.
    #expect(spinWait(timeout: 60) { reads.load(ordering: .relaxed) >= 1_000 })
    store.countLimit = count  // every entry gets metadata, in one write
    store.defaultTimeToLive = .seconds(3_600)
    let before = reads.load(ordering: .relaxed)
    #expect(spinWait(timeout: 60) { reads.load(ordering: .relaxed) >= before + 1_000 })
    done.store(true, ordering: .releasing)
    for reader in readers { #expect(reader.wait(timeout: 60)) }
    #expect(wrong.load(ordering: .relaxed) == 0)
    #expect(store.count == count)
    store[count] = 0  // over the limit: one eviction
    #expect(store.count == count)
    #expect(store.statistics.evictions[.countLimit] == 1)
    store._checkInvariants()
  }
}

extension ConcurrentTableTests.Writer {
  /// Stages and publishes `key` → `value` with metadata of cost `cost`; returns the new node.
  @discardableResult
  func setNode(_ key: Int, _ value: Int, cost: Int = 0) -> _Node<Int, Int> {
    var node: _Node<Int, Int>?
    commit {
      node =
        table.stageSet(
          key, value, metadata: _EntryMetadata(writtenAt: 0, expiresAt: .max, cost: cost)
        ).new
    }
    return node!
  }
}
