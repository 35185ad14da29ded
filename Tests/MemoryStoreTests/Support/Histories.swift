import Dispatch
import Foundation
@_spi(Testing) import MemoryStore
import Synchronization

/// The operations the linearizability tests need, so that broken variants can stand in for
/// the real store.
protocol RegisterStore: Sendable {
  func get(_ key: Int) -> Int?
  func set(_ key: Int, _ value: Int)
  func remove(_ key: Int)
  func setBoth(_ first: Int, _ second: Int, value: Int)
  /// Runs `body` the way the store's readers can be delayed (used to exercise slow paths).
  func whileReaderParked(_ body: () -> Void)
}

extension MemoryStore: RegisterStore where Key == Int, Value == Int {
  func get(_ key: Int) -> Int? { self[key] }
  func set(_ key: Int, _ value: Int) { self[key] = value }
  func remove(_ key: Int) { self[key] = nil }
  func setBoth(_ first: Int, _ second: Int, value: Int) {
    addEntries([first: value, second: value])
  }
  func whileReaderParked(_ body: () -> Void) { _withReaderParked(body) }
}

/// A store whose writes become visible only in groups of eight: data-race free, but a read
/// that starts after a write returned can miss it. The checker must reject its histories.
final class LaggingStore: RegisterStore, @unchecked Sendable {
  // Safe: `visible` and `queued` are only accessed while holding `lock`.
  private let lock = NSLock()
  private var visible: [Int: Int] = [:]
  private var queued: [(Int, Int?)] = []

  func get(_ key: Int) -> Int? { lock.withLock { visible[key] } }
  func set(_ key: Int, _ value: Int) { enqueue([(key, value)]) }
  func remove(_ key: Int) { enqueue([(key, nil)]) }
  func setBoth(_ first: Int, _ second: Int, value: Int) {
    enqueue([(first, value), (second, value)])
  }
  func whileReaderParked(_ body: () -> Void) { body() }

  private func enqueue(_ writes: [(Int, Int?)]) {
    lock.withLock {
      queued += writes
      if queued.count >= 8 {
        for (key, value) in queued { visible[key] = value }
        queued.removeAll()
      }
    }
  }
}

/// One thread's part of a history.
final class HistoryLog: @unchecked Sendable {
  // Safe: each log is written by exactly one thread, and read by the recording thread only
  // after `group.wait()`, which orders those accesses.
  var entries: [(key: Int, op: RegisterOperation)] = []
}

/// Records a concurrent history: `threads` OS threads, started together, each performing
/// `operationsPerThread` random operations over `keys` keys, every write with a unique value.
/// Returns the history split per key.
func recordHistory(
  of store: some RegisterStore, threads: Int = 8, operationsPerThread: Int = 2_000,
  keys: Int = 8, seed: UInt64, parkReaders: Bool = false
) -> [[RegisterOperation]] {
  let logs = (0..<threads).map { _ in HistoryLog() }
  let ready = DispatchSemaphore(value: 0)
  let go = DispatchSemaphore(value: 0)
  let group = DispatchGroup()
  for thread in 0..<threads {
    group.enter()
    let log = logs[thread]
    Thread {
      var random = SeededRandom(seed: seed &* 1_000 &+ UInt64(thread))
      log.entries.reserveCapacity(operationsPerThread * 2)
      ready.signal()
      go.wait()
      var sequence = 0
      func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
      func one() {
        let key = Int(random.next() % UInt64(keys))
        let roll = random.next() % 100
        sequence += 1
        let unique = thread * 1_000_000 + sequence
        if roll < 50 {
          let call = now()
          let value = store.get(key) ?? -1
          log.entries.append((key, RegisterOperation(isWrite: false, value: value, call: call, ret: now())))
        } else if roll < 80 {
          let call = now()
          store.set(key, unique)
          log.entries.append((key, RegisterOperation(isWrite: true, value: unique, call: call, ret: now())))
        } else if roll < 90 {
          let call = now()
          store.remove(key)
          log.entries.append((key, RegisterOperation(isWrite: true, value: -1, call: call, ret: now())))
        } else {
          let other = (key + 1) % keys
          let call = now()
          store.setBoth(key, other, value: unique)
          let ret = now()
          log.entries.append((key, RegisterOperation(isWrite: true, value: unique, call: call, ret: ret)))
          log.entries.append((other, RegisterOperation(isWrite: true, value: unique, call: call, ret: ret)))
        }
      }
      var done = 0
      while done < operationsPerThread {
        if parkReaders && thread == 0 && random.next() % 16 == 0 {
          store.whileReaderParked {
            for _ in 0..<4 { one() }
          }
          done += 4
        } else {
          one()
          done += 1
        }
      }
      group.leave()
    }.start()
  }
  for _ in 0..<threads { ready.wait() }
  for _ in 0..<threads { go.signal() }
  group.wait()
  var perKey = [[RegisterOperation]](repeating: [], count: keys)
  for log in logs {
    for entry in log.entries { perKey[entry.key].append(entry.op) }
  }
  return perKey
}

/// The verdict for a whole history: the worst verdict over its keys.
func verdict(_ perKey: [[RegisterOperation]]) -> LinearizabilityVerdict {
  var result = LinearizabilityVerdict.linearizable
  for history in perKey {
    switch checkRegister(history) {
    case .notLinearizable: return .notLinearizable
    case .inconclusive: result = .inconclusive
    case .linearizable: break
    }
  }
  return result
}
