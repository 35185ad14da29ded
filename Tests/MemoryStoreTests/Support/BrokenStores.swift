import Foundation
import MemoryStoreKit
import Synchronization

// Deliberately broken stores. Each is free of data races (every access to shared state holds
// a lock or is atomic, so ThreadSanitizer stays quiet) but breaks one guarantee MemoryStore
// makes. The concurrent workloads must catch every one of them: that is the evidence that the
// same workloads passing on MemoryStore means something.

/// Writes go to a queue and reach the map that readers see only in groups of `groupSize`
/// writes, so a read that starts after a write returned usually misses it: stale reads, not
/// linearizable.
final class DeferredWriteStore: StoreUnderTest {
  private struct State {
    var visible: [Int: Int] = [:]
    var queued: [[Int: Int?]] = []
  }

  private let state = Locked(State())
  private let groupSize: Int

  init(groupSize: Int = 8) { self.groupSize = groupSize }

  func read(_ key: Int) -> Int? { state.withLock { $0.visible[key] } }

  func write(_ key: Int, _ value: Int?) { enqueue([key: value]) }

  func exchange(_ key: Int, _ value: Int?) -> Int? {
    state.withLock { state in
      let previous = state.visible[key]
      Self.enqueue([key: value], in: &state, groupSize: groupSize)
      return previous
    }
  }

  func addEntries(_ entries: [Int: Int]) { enqueue(entries.mapValues { $0 }) }

  func readMany(_ keys: [Int]) -> [Int: Int] {
    state.withLock { state in
      var result: [Int: Int] = [:]
      for key in keys { result[key] = state.visible[key] }
      return result
    }
  }

  private func enqueue(_ write: [Int: Int?]) {
    state.withLock { Self.enqueue(write, in: &$0, groupSize: groupSize) }
  }

  private static func enqueue(_ write: [Int: Int?], in state: inout State, groupSize: Int) {
    state.queued.append(write)
    guard state.queued.count >= groupSize else { return }
    for queuedWrite in state.queued {
      for (key, value) in queuedWrite { state.visible[key] = value }
    }
    state.queued.removeAll()
  }
}

/// Writes apply at once, but reads are served from a snapshot refreshed only every
/// `refreshInterval` writes: stale reads, not linearizable.
final class StaleSnapshotStore: StoreUnderTest {
  private struct State {
    var current: [Int: Int] = [:]
    var snapshot: [Int: Int] = [:]
    var writesSinceRefresh = 0
  }

  private let state = Locked(State())
  private let refreshInterval: Int

  init(refreshInterval: Int = 5) { self.refreshInterval = refreshInterval }

  func read(_ key: Int) -> Int? { state.withLock { $0.snapshot[key] } }

  func write(_ key: Int, _ value: Int?) { _ = write([key: value]) }

  func exchange(_ key: Int, _ value: Int?) -> Int? { write([key: value]) }

  func addEntries(_ entries: [Int: Int]) { _ = write(entries.mapValues { $0 }) }

  func readMany(_ keys: [Int]) -> [Int: Int] {
    state.withLock { state in
      var result: [Int: Int] = [:]
      for key in keys { result[key] = state.snapshot[key] }
      return result
    }
  }

  /// Applies `entries` to the current contents; returns the previous value of the last key.
  private func write(_ entries: [Int: Int?]) -> Int? {
    state.withLock { state in
      var previous: Int?
      for (key, value) in entries {
        previous = state.current[key]
        state.current[key] = value
      }
      state.writesSinceRefresh += 1
      if state.writesSinceRefresh >= refreshInterval {
        state.snapshot = state.current
        state.writesSinceRefresh = 0
      }
      return previous
    }
  }
}

/// Applies one kind of batch write in two halves, and between them waits until some read has
/// completed: that read saw half of the batch. Reads themselves are atomic.
final class TornBatchStore: BatchStoreUnderTest {
  enum TornOperation: String, Sendable, CaseIterable, CustomStringConvertible {
    case addEntries, removeValues, removeAll
    var description: String { rawValue }
  }

  private let torn: TornOperation
  private let contents = Locked([Int: Int]())
  /// Reads completed; incremented inside the lock, after the read.
  private let completedReads = Atomic<Int>(0)

  init(tearing torn: TornOperation) { self.torn = torn }

  func read(_ key: Int) -> Int? { snapshot { $0[key] } }

  func write(_ key: Int, _ value: Int?) { contents.withLock { $0[key] = value } }

  func exchange(_ key: Int, _ value: Int?) -> Int? {
    contents.withLock { contents in
      defer { contents[key] = value }
      return contents[key]
    }
  }

  func addEntries(_ entries: [Int: Int]) {
    let sorted = entries.sorted { $0.key < $1.key }
    let cut = torn == .addEntries ? sorted.count / 2 : sorted.count
    contents.withLock { contents in for (key, value) in sorted[..<cut] { contents[key] = value } }
    guard cut < sorted.count else { return }
    waitForARead()
    contents.withLock { contents in for (key, value) in sorted[cut...] { contents[key] = value } }
  }

  func removeMany(_ keys: [Int]) {
    let sorted = keys.sorted()
    let cut = torn == .removeValues ? sorted.count / 2 : sorted.count
    contents.withLock { contents in for key in sorted[..<cut] { contents[key] = nil } }
    guard cut < sorted.count else { return }
    waitForARead()
    contents.withLock { contents in for key in sorted[cut...] { contents[key] = nil } }
  }

  func removeAll() {
    guard torn == .removeAll else { return contents.withLock { $0.removeAll() } }
    let firstHalf = contents.withLock { contents in
      let keys = contents.keys.sorted()
      let firstHalf = keys.prefix(keys.count / 2)
      for key in firstHalf { contents[key] = nil }
      return firstHalf
    }
    if !firstHalf.isEmpty { waitForARead() }
    contents.withLock { $0.removeAll() }
  }

  func readMany(_ keys: [Int]) -> [Int: Int] {
    snapshot { contents in
      var result: [Int: Int] = [:]
      for key in keys { result[key] = contents[key] }
      return result
    }
  }

  var allItems: [Int: Int] { snapshot { $0 } }

  var count: Int { snapshot { $0.count } }

  private func snapshot<Result>(_ body: ([Int: Int]) -> Result) -> Result {
    contents.withLock { contents in
      defer { completedReads.wrappingAdd(1, ordering: .relaxed) }
      return body(contents)
    }
  }

  /// Waits (bounded) until a read that started after the first half has completed.
  private func waitForARead() {
    let before = completedReads.load(ordering: .relaxed)
    _ = spinWait(timeout: 5) { completedReads.load(ordering: .relaxed) > before }
  }
}

/// Writes and single-key reads are atomic, but `allItems` and `readMany` read the upper half of
/// the keys, wait until `writesBetweenHalves` more writes have completed, then read the lower
/// half: a snapshot that mixes two points in time.
final class TornSnapshotStore: BatchStoreUnderTest {
  private let contents = Locked([Int: Int]())
  /// Writes completed; incremented inside the lock.
  private let completedWrites = Atomic<Int>(0)
  private let writesBetweenHalves: Int

  init(writesBetweenHalves: Int) { self.writesBetweenHalves = writesBetweenHalves }

  func read(_ key: Int) -> Int? { contents.withLock { $0[key] } }

  func write(_ key: Int, _ value: Int?) { _ = exchange(key, value) }

  func exchange(_ key: Int, _ value: Int?) -> Int? {
    write { contents in
      defer { contents[key] = value }
      return contents[key]
    }
  }

  func addEntries(_ entries: [Int: Int]) { write { $0.merge(entries) { _, new in new } } }

  func removeMany(_ keys: [Int]) { write { for key in keys { $0[key] = nil } } }

  func removeAll() { write { $0.removeAll() } }

  func readMany(_ keys: [Int]) -> [Int: Int] { tornRead(keys: Array(Set(keys))) }

  var allItems: [Int: Int] { tornRead(keys: contents.withLock { Array($0.keys) }) }

  var count: Int { contents.withLock { $0.count } }

  private func write<Result>(_ body: (inout [Int: Int]) -> Result) -> Result {
    contents.withLock { contents in
      defer { completedWrites.wrappingAdd(1, ordering: .relaxed) }
      return body(&contents)
    }
  }

  private func tornRead(keys: [Int]) -> [Int: Int] {
    let sorted = keys.sorted()
    let middle = sorted.count / 2
    var result: [Int: Int] = [:]
    let before = contents.withLock { contents in
      for key in sorted[middle...] { result[key] = contents[key] }
      return completedWrites.load(ordering: .relaxed)
    }
    // Bounded, so that reads made after the writer has finished do not each wait long.
    _ = spinWait(timeout: 0.02) {
      completedWrites.load(ordering: .relaxed) >= before + writesBetweenHalves
    }
    contents.withLock { contents in
      for key in sorted[..<middle] { result[key] = contents[key] }
    }
    return result
  }
}

/// Each thread sees its own writes at once, but other threads see them only once
/// `groupSize` writes have accumulated. A single thread alone cannot tell that anything is
/// wrong; only concurrent histories show the stale reads.
final class OwnWritesFirstStore: StoreUnderTest {
  private struct State {
    var shared: [Int: Int] = [:]
    var unpublished: [ObjectIdentifier: [Int: Int?]] = [:]
    var unpublishedCount = 0
  }

  private let state = Locked(State())
  private let groupSize: Int

  init(groupSize: Int = 8) { self.groupSize = groupSize }

  private var thread: ObjectIdentifier { ObjectIdentifier(Thread.current) }

  func read(_ key: Int) -> Int? {
    let thread = thread
    return state.withLock { Self.value(for: key, thread: thread, in: $0) }
  }

  func write(_ key: Int, _ value: Int?) { _ = apply([key: value]) }

  func exchange(_ key: Int, _ value: Int?) -> Int? { apply([key: value]) }

  func addEntries(_ entries: [Int: Int]) { _ = apply(entries.mapValues { $0 }) }

  func readMany(_ keys: [Int]) -> [Int: Int] {
    let thread = thread
    return state.withLock { state in
      var result: [Int: Int] = [:]
      for key in keys { result[key] = Self.value(for: key, thread: thread, in: state) }
      return result
    }
  }

  private static func value(for key: Int, thread: ObjectIdentifier, in state: State) -> Int? {
    if let own = state.unpublished[thread], let value = own[key] { return value }
    return state.shared[key]
  }

  /// Records a write for the calling thread; returns the previous value of the last key as
  /// that thread saw it.
  private func apply(_ entries: [Int: Int?]) -> Int? {
    let thread = thread
    return state.withLock { state in
      var previous: Int?
      for (key, value) in entries {
        previous = Self.value(for: key, thread: thread, in: state)
        state.unpublished[thread, default: [:]][key] = value
      }
      state.unpublishedCount += 1
      if state.unpublishedCount >= groupSize {
        for (_, writes) in state.unpublished {
          for (key, value) in writes { state.shared[key] = value }
        }
        state.unpublished.removeAll()
        state.unpublishedCount = 0
      }
      return previous
    }
  }
}

/// A store whose read-modify-write reads, then writes in a separate step: another write can
/// land in between. Its first few updates wait (bounded) until another write of their key has
/// landed in between, so that the gap is used however the threads are scheduled.
final class TornUpdateStore: UpdatingStoreUnderTest {
  private let store = MemoryStore<Int, Int>()
  /// Updates that still wait for another write in their gap.
  private let waitingUpdatesLeft = Atomic<Int>(4)

  func read(_ key: Int) -> Int? { store[key] }
  func write(_ key: Int, _ value: Int?) { store[key] = value }
  func exchange(_ key: Int, _ value: Int?) -> Int? { store.exchange(key, value) }
  func addEntries(_ entries: [Int: Int]) { store.addEntries(entries) }
  func readMany(_ keys: [Int]) -> [Int: Int] { store.values(forKeys: keys) }
  func contains(_ key: Int) -> Bool { store.contains(key) }
  func touch(_ key: Int) -> Bool { store.touch(key, timeToLive: .seconds(3_600)) }

  func update(_ key: Int, _ transform: (Int?) -> Int?) -> (old: Int?, new: Int?) {
    let old = store[key]
    let new = transform(old)
    if waitingUpdatesLeft.wrappingSubtract(1, ordering: .relaxed).oldValue > 0 {
      // Values are never reused: a different value is another write. The bound only matters
      // once the other threads have stopped writing.
      _ = spinWait(timeout: 5) { store[key] != old }
    } else {
      sched_yield()  // Widens the gap a concurrent write can fall into.
    }
    store[key] = new
    return (old, new)
  }
}
