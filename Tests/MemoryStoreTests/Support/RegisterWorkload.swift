/// A random read/write workload over a few keys, run on real OS threads started together,
/// that records every operation's call and return times for the linearizability checker.
///
/// Every write stores a value no other write uses (`thread * 1_000_000 + sequence`), so a read
/// names the write it saw. A quarter of the operations are a write immediately followed by a
/// read of the same key by the same thread: any store that lets a completed write go unseen
/// fails on those.
struct RegisterWorkload: Sendable {
  var threads = 8
  var operationsPerThread = 2_000
  var keys = 8
  var seed: UInt64 = 1
  var timeout = 120.0
  /// The thread that, now and then, runs a few operations while one of its reads stays parked
  /// in a read section of the store (see `StoreUnderTest.withParkedReader`); `nil` for none.
  var parkingThread: Int? = nil
  /// Whether some exchanges and reads become read-modify-writes (`update(forKey:)`, whose
  /// new value depends on what it read), membership tests and touches (which renew an entry
  /// and report whether it was present), on stores that have them.
  var readModifyWrites = false

  /// Runs the workload on `store` and returns the history, or `nil` if the threads did not
  /// finish within the timeout.
  func record(on store: some StoreUnderTest) -> [KeyedHistoryOperation]? {
    let workload = self
    let logs = runOnThreads(threads, timeout: timeout) { thread in
      workload.run(thread: thread, on: store)
    }
    return logs?.flatMap { $0 }
  }

  /// One thread's part. The log is allocated up front, so recording takes no lock and does
  /// not allocate; each timestamp is taken immediately before the call or after the return.
  private func run(thread: Int, on store: some StoreUnderTest) -> [KeyedHistoryOperation] {
    var random = SplitMix64(seed: seed &* 0x1_0000_0001 &+ UInt64(thread))
    var log: [KeyedHistoryOperation] = []
    // At most three records per counted operation (a three-key batch read).
    log.reserveCapacity(3 * operationsPerThread + 16)
    var sequence = 0

    func freshValue() -> Int {
      sequence += 1
      return thread * 1_000_000 + sequence
    }
    func record(_ key: Int, _ kind: HistoryOperation.Kind, _ call: UInt64, _ ret: UInt64) {
      let operation = HistoryOperation(kind, call: call, ret: ret, thread: thread)
      log.append(KeyedHistoryOperation(key: key, operation: operation))
    }
    func read(_ key: Int) {
      let call = monotonicNanoseconds()
      let observed = store.read(key)
      let ret = monotonicNanoseconds()
      record(key, .read(observed: observed), call, ret)
    }
    func write(_ key: Int, _ value: Int?) {
      let call = monotonicNanoseconds()
      store.write(key, value)
      let ret = monotonicNanoseconds()
      record(key, .write(value), call, ret)
    }
    func exchange(_ key: Int, _ value: Int?) {
      let call = monotonicNanoseconds()
      let observed = store.exchange(key, value)
      let ret = monotonicNanoseconds()
      record(key, .exchange(value, observed: observed), call, ret)
    }
    func addEntries(_ keys: [Int]) {
      var entries: [Int: Int] = [:]
      for key in keys { entries[key] = freshValue() }
      let call = monotonicNanoseconds()
      store.addEntries(entries)
      let ret = monotonicNanoseconds()
      for (key, value) in entries { record(key, .write(value), call, ret) }
    }
    func readMany(_ keys: [Int]) {
      let call = monotonicNanoseconds()
      let observed = store.readMany(keys)
      let ret = monotonicNanoseconds()
      for key in Set(keys) { record(key, .read(observed: observed[key]), call, ret) }
    }

    func update(_ key: Int, on store: some UpdatingStoreUnderTest) {
      let fresh = freshValue()
      let call = monotonicNanoseconds()
      // Depends on what it read: an odd value is removed, anything else replaced.
      let (old, new) = store.update(key) { old in old.map { $0 % 2 == 1 } ?? false ? nil : fresh }
      let ret = monotonicNanoseconds()
      record(key, .exchange(new, observed: old), call, ret)
    }
    func contains(_ key: Int, on store: some UpdatingStoreUnderTest) {
      let call = monotonicNanoseconds()
      let observed = store.contains(key)
      let ret = monotonicNanoseconds()
      record(key, .present(observed), call, ret)
    }
    func touch(_ key: Int, on store: some UpdatingStoreUnderTest) {
      let call = monotonicNanoseconds()
      let observed = store.touch(key)
      let ret = monotonicNanoseconds()
      // A touch changes no value: it is a membership test that writes.
      record(key, .present(observed), call, ret)
    }
    let updating = readModifyWrites ? store as? any UpdatingStoreUnderTest : nil

    func step() -> Int {
      let key = random.below(keys)
      let choice = random.below(100)
      if let updating, random.below(2) == 0 {
        switch choice {
        case 0..<11:
          contains(key, on: updating)
          return 1
        case 11..<22:
          touch(key, on: updating)
          read(key)
          return 2
        case 55..<70:
          update(key, on: updating)
          read(key)
          return 2
        default: break
        }
      }
      switch choice {
      case 0..<22:
        read(key)
        return 1
      case 22..<47:
        write(key, freshValue())
        read(key)
        return 2
      case 47..<55:
        write(key, nil)
        return 1
      case 55..<63:
        exchange(key, freshValue())
        return 1
      case 63..<70:
        exchange(key, nil)
        read(key)
        return 2
      case 70..<84:
        let batch = random.distinct(2 + random.below(2), below: keys)
        addEntries(batch)
        read(batch[random.below(batch.count)])
        return 2
      default:
        // Two or three keys, sometimes with a duplicate.
        var batch = random.distinct(2 + random.below(2), below: keys)
        if random.below(4) == 0 { batch.append(batch[0]) }
        readMany(batch)
        return 1
      }
    }

    var issued = 0
    while issued < operationsPerThread {
      if thread == parkingThread && random.below(16) == 0 {
        store.withParkedReader {
          for _ in 0..<4 { issued += step() }
        }
      } else {
        issued += step()
      }
    }
    return log
  }
}
