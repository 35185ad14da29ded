import Foundation
import MemoryStoreKit
import Synchronization
import Testing

/// Reads never wait for a writer and never free a value: an entry whose deadline has passed is
/// absent from every read whether or not it has been removed yet, and removing it is the work
/// of the expiry timer and of writes.
@Suite struct ReadsNeverWaitTests {
  @Test func aReadBesideAStalledWriteWithEntriesExpiringNeitherWaitsNorFreesAValue() {
    let clock = HeldScheduler()
    let store = MemoryStore<GatedKey, FreedOnThread>(scheduler: clock)
    let freedOn = Locked<[String]>([])
    for id in 0..<100 {
      store.setValue(FreedOnThread(freedOn), forKey: GatedKey(id), timeToLive: .seconds(1))
    }
    store[GatedKey(1_000)] = FreedOnThread(freedOn)
    // Every entry but one has expired, and the timer that would remove them never runs.
    clock.move(by: .seconds(2))

    // A write stalls inside the store's critical section, in a key's `==`.
    let gate = WriteGate()
    let writer = startThread { store[GatedKey(2_000, gate: gate)] = FreedOnThread(freedOn) }
    #expect(gate.entered.wait(timeout: 30))

    let seen = Locked<Seen?>(nil)
    let reader = startThread {
      Thread.current.name = "reader"
      let observed = Seen(
        expired: store[GatedKey(5)] == nil, live: store[GatedKey(1_000)] != nil,
        count: store.count, items: store.allItems.count, keys: store.keys.count,
        contains: store.contains(GatedKey(7)),
        batch: store.values(forKeys: [GatedKey(3), GatedKey(1_000)]).count)
      seen.withLock { $0 = observed }
    }
    let readerFinished = reader.wait(timeout: 10)
    gate.open.signal()
    #expect(writer.wait(timeout: 30))
    if !readerFinished { _ = reader.wait(timeout: 30) }

    // The reads ended while the writer held the lock.
    #expect(readerFinished)
    #expect(
      seen.value
        == Seen(
          expired: true, live: true, count: 1, items: 1, keys: 1, contains: false, batch: 1))
    // The reader freed no value: the write that stalled removed the expired entries.
    #expect(!freedOn.value.contains("reader"))
    #expect(store.count == 2)
    #expect(store.statistics.evictions[.expired] == 100)
  }

  @Test func anExpiredEntryIsAbsentFromEveryReadBeforeItIsRemoved() {
    let clock = HeldScheduler()
    let store = MemoryStore<Int, String>(scheduler: clock)
    store.setValue("soon", forKey: 1, timeToLive: .seconds(1))
    store.setValue("later", forKey: 2, timeToLive: .seconds(10))
    store[3] = "always"
    clock.move(by: .seconds(2))

    #expect(store[1] == nil)
    #expect(store.count == 2)
    #expect(store.allItems == [2: "later", 3: "always"])
    #expect(Set(store.keys) == [2, 3])
    #expect(Set(store.values) == ["later", "always"])
    #expect(!store.contains(1))
    #expect(store.values(forKeys: [1, 2]) == [2: "later"])
    // The timer never runs: the next write removes it, with its reason.
    store[4] = "new"
    #expect(store.statistics.evictions[.expired] == 1)
    #expect(store.count == 3)
  }
}

private struct Seen: Equatable, Sendable {
  var expired: Bool
  var live: Bool
  var count: Int
  var items: Int
  var keys: Int
  var contains: Bool
  var batch: Int
}

/// A value that records the name of the thread its `deinit` runs on.
private final class FreedOnThread: Sendable {
  let freedOn: Locked<[String]>
  init(_ freedOn: Locked<[String]>) { self.freedOn = freedOn }
  deinit {
    let name = Thread.current.name ?? ""
    freedOn.withLock { $0.append(name) }
  }
}

/// Where a write of a gated key stops: it signals `entered` from inside the store's critical
/// section and waits for `open`. Once only.
private final class WriteGate: Sendable {
  let entered = TimedSemaphore()
  let open = TimedSemaphore()
  let armed = Atomic<Bool>(true)
}

/// A key whose every instance hashes alike, so that a write compares it with the keys present;
/// a key carrying a gate stops at it in its first comparison.
private struct GatedKey: Hashable, Sendable {
  let id: Int
  let gate: WriteGate?

  init(_ id: Int, gate: WriteGate? = nil) {
    self.id = id
    self.gate = gate
  }

  static func == (lhs: GatedKey, rhs: GatedKey) -> Bool {
    if let gate = lhs.gate ?? rhs.gate, gate.armed.exchange(false, ordering: .acquiringAndReleasing)
    {
      gate.entered.signal()
      _ = gate.open.wait(timeout: 60)
    }
    return lhs.id == rhs.id
  }

  func hash(into hasher: inout Hasher) { hasher.combine(0) }
}
