// The eviction section: the hit rate of MemoryStore's count limit (W-TinyLFU order) against a
// strict LRU cache and Belady's MIN on the same traces (see HitRateTraces.swift), and how long a
// purge of 1 000 000 entries, and a memory-pressure trim of as many, make a concurrent writer and
// reader wait.
// The read cost of a limited store is in the throughput section (memorystore-limited).

import Foundation
import MemoryStoreKit
import Synchronization

/// How much the eviction section measures.
struct EvictionPlan {
  var traceLength: Int
  var keySpace: Int
  var blockingEntryCount: Int
  var runs: Int

  init(quick: Bool, runs: Int?) {
    traceLength = quick ? 200_000 : 2_000_000
    keySpace = quick ? 20_000 : 100_000
    blockingEntryCount = quick ? 100_000 : 1_000_000
    self.runs = runs ?? (quick ? 1 : 3)
  }
}

func runEvictionBenchmark(plan: EvictionPlan) {
  print("# Eviction")
  print("")
  printHitRates(plan: plan)
  printSizedHitRates(plan: plan)
  printBlocking(plan: plan)
}

// MARK: - Hit rate

/// A strict LRU cache of keys: a hash map into a doubly linked list kept in arrays.
struct StrictLRU {
  let capacity: Int
  var slots: [Int: Int] = [:]
  var keys: [Int] = []
  var previous: [Int] = []
  var next: [Int] = []
  var head = -1  // most recent
  var tail = -1  // least recent

  init(capacity: Int) {
    self.capacity = capacity
    slots.reserveCapacity(capacity)
  }

  /// Looks `key` up, inserting it on a miss; returns whether it was a hit.
  mutating func access(_ key: Int) -> Bool {
    if read(key) { return true }
    insert(key)
    return false
  }

  /// Looks `key` up: a hit moves it to the front. Returns whether it was a hit.
  mutating func read(_ key: Int) -> Bool {
    guard let slot = slots[key] else { return false }
    moveToFront(slot)
    return true
  }

  /// Puts `key` at the front, evicting the least recent key if the cache is full.
  mutating func insert(_ key: Int) {
    if read(key) { return }
    let slot: Int
    if keys.count < capacity {
      slot = keys.count
      keys.append(key)
      previous.append(-1)
      next.append(-1)
    } else {
      slot = tail
      slots[keys[slot]] = nil
      unlink(slot)
      keys[slot] = key
    }
    slots[key] = slot
    pushFront(slot)
  }

  private mutating func unlink(_ slot: Int) {
    let before = previous[slot]
    let after = next[slot]
    if before >= 0 { next[before] = after } else { head = after }
    if after >= 0 { previous[after] = before } else { tail = before }
  }

  private mutating func pushFront(_ slot: Int) {
    previous[slot] = -1
    next[slot] = head
    if head >= 0 { previous[head] = slot }
    head = slot
    if tail < 0 { tail = slot }
  }

  private mutating func moveToFront(_ slot: Int) {
    guard head != slot else { return }
    unlink(slot)
    pushFront(slot)
  }
}

func lruHitRate(_ trace: [Int], capacity: Int) -> Double {
  var cache = StrictLRU(capacity: capacity)
  var hits = 0
  for key in trace where cache.access(key) { hits += 1 }
  return Double(hits) / Double(trace.count)
}

/// The hit rate of a MemoryStore with `countLimit = capacity` and `policy` used as a cache: a
/// read, and a write on a miss. Also checks the limit held.
func storeHitRate(
  _ trace: [Int], capacity: Int, policy: EvictionPolicy = .adaptive
) -> (rate: Double, withinLimit: Bool) {
  let store = MemoryStore<Int, Int>(name: "hit-rate")
  store.evictionPolicy = policy
  store.countLimit = capacity
  var hits = 0
  for key in trace {
    if store[key] != nil {
      hits += 1
    } else {
      store[key] = key
    }
  }
  return (Double(hits) / Double(trace.count), store.count <= capacity)
}

/// The hit rate of a cache used by `threads` threads at once: each takes the trace's next 64
/// accesses from one shared index and, for each, looks the key up and inserts it on a miss (two
/// calls, as a user of a cache makes them). The accesses keep the trace's order up to the few
/// blocks that run at the same time, and the repeats of a key close together mostly stay on
/// one thread; those that do not can miss twice (two threads missing the same key at once),
/// for any cache alike.
func concurrentHitRate(
  _ trace: [Int], threads: Int, lookup: @Sendable (Int) -> Bool,
  insert: @Sendable (Int) -> Void
) -> Double {
  let next = Atomic<Int>(0)
  let hits = Atomic<Int>(0)
  DispatchQueue.concurrentPerform(iterations: threads) { _ in
    var laneHits = 0
    while case let start = next.wrappingAdd(64, ordering: .relaxed).oldValue, start < trace.count {
      for key in trace[start..<min(start + 64, trace.count)] {
        if lookup(key) {
          laneHits += 1
        } else {
          insert(key)
        }
      }
    }
    hits.wrappingAdd(laneHits, ordering: .relaxed)
  }
  return Double(hits.load(ordering: .relaxed)) / Double(trace.count)
}

/// The hit rates of strict LRU behind a `Mutex` and of a MemoryStore with `countLimit =
/// capacity`, each used as a cache by `threads` threads at once (see
/// ``concurrentHitRate(_:threads:lookup:insert:)``), and whether the store's limit held. Beside
/// the single-thread rates, LRU's change shows what the threads' reordering costs any cache;
/// the store's, beyond it, what its bookkeeping (reads record their use without a lock, the
/// writer folds them in) costs under concurrency.
func concurrentHitRates(
  _ trace: [Int], capacity: Int, threads: Int
) -> (lru: Double, store: Double, withinLimit: Bool) {
  let lru = Mutex(StrictLRU(capacity: capacity))
  let lruRate = concurrentHitRate(
    trace, threads: threads, lookup: { key in lru.withLock { $0.read(key) } },
    insert: { key in lru.withLock { $0.insert(key) } })
  let store = MemoryStore<Int, Int>(name: "hit-rate")
  store.countLimit = capacity
  let storeRate = concurrentHitRate(
    trace, threads: threads, lookup: { key in store[key] != nil },
    insert: { key in store[key] = key })
  return (lruRate, storeRate, store.count <= capacity)
}

/// One row of a hit-rate table: strict LRU, the store (its default policy, then `.lru`) and
/// Belady on `trace` at `capacity`, in percent, and whether the store's count limit held.
func hitRateRow(
  _ trace: [Int], capacity: Int
) -> (lru: Double, store: Double, storeLRU: Double, belady: Double, limitHeld: Bool) {
  let ours = storeHitRate(trace, capacity: capacity)
  let oursLRU = storeHitRate(trace, capacity: capacity, policy: .lru)
  return (
    lruHitRate(trace, capacity: capacity) * 100, ours.rate * 100, oursLRU.rate * 100,
    beladyHitRate(trace, capacity: capacity) * 100, ours.withinLimit && oursLRU.withinLimit
  )
}

func printHitRates(plan: EvictionPlan) {
  let traces = hitRateTraces(length: plan.traceLength, keySpace: plan.keySpace)
  print("## Hit rate: count limit (W-TinyLFU order) against strict LRU and Belady's MIN")
  print("")
  print(
    "Single thread; a miss inserts the key. Capacities are 1 % and 10 % of the \(plan.keySpace) "
      + "keys that can recur. Belady's MIN (evict the key used again farthest in the future) "
      + "is the best any policy could do. Higher is better; differences are in percentage "
      + "points. Traces (`--export-traces DIR` writes them for Scripts/hitrate/reference.py):")
  print("")
  for trace in traces {
    print(
      "- \(trace.name): \(trace.summary); \(trace.keys.count) accesses, "
        + "\(trace.distinctKeys) distinct keys")
  }
  print("")
  print(
    "| trace | capacity | strict LRU | MemoryStore | MemoryStore, .lru | Belady "
      + "| MemoryStore - LRU | gap to Belady |")
  print("|---|---:|---:|---:|---:|---:|---:|---:|")
  var worst = Double.infinity
  var limitHeld = true
  var beladyIsBest = true
  for trace in traces {
    for capacity in trace.capacities {
      let (lru, store, storeLRU, belady, held) = hitRateRow(trace.keys, capacity: capacity)
      limitHeld = limitHeld && held
      beladyIsBest = beladyIsBest && belady >= max(lru, store)
      if trace.name.hasPrefix("zipf-") && !trace.name.hasSuffix("scans") {
        worst = min(worst, store / lru)
      }
      print(
        "| \(trace.name) | \(capacity) | \(fixed(lru, 2)) % | \(fixed(store, 2)) % "
          + "| \(fixed(storeLRU, 2)) % | \(fixed(belady, 2)) % | \(signed(store - lru)) "
          + "| \(fixed(belady - store, 2)) |")
      progress(
        "hit rate \(trace.name) capacity \(capacity): LRU \(fixed(lru, 2)), MemoryStore "
          + "\(fixed(store, 2)), Belady \(fixed(belady, 2))")
    }
  }
  print("")
  let met = worst >= 0.995
  print(
    "- Target: hit rate on the Zipf traces at least strict LRU's (ratio >= 0.995, the noise of "
      + "one trace): **\(met ? "MET" : "NOT MET")** (worst ratio \(fixed(worst, 3)))")
  print(
    "- Target: within 1.5 points of the best of ARC, S3-FIFO, SIEVE, W-TinyLFU and LIRS on "
      + "every trace: Scripts/hitrate/reference.py measures them with libCacheSim and joins "
      + "this table (Scripts/hitrate/reference-results.md)")
  print("- The count limit held after every trace: \(limitHeld ? "yes" : "**NO**")")
  print("- Belady at least LRU and MemoryStore on every row: \(beladyIsBest ? "yes" : "**NO**")")
  print("")
}

/// The object and byte hit rates of a strict LRU cache holding at most `capacity` in total
/// size: a hit moves the key to the front; a miss inserts it, if it fits at all, and evicts
/// from the back until the total fits.
func sizedLRUHitRates(
  _ trace: SizedHitRateTrace, capacity: Int
) -> (objects: Double, bytes: Double) {
  let keySpace = trace.sizes.count
  var previous = [Int](repeating: -1, count: keySpace)
  var next = [Int](repeating: -1, count: keySpace)
  var cached = [Bool](repeating: false, count: keySpace)
  var head = -1
  var tail = -1
  var total = 0
  var hits = 0
  var hitBytes = 0
  var allBytes = 0
  func unlink(_ key: Int) {
    if previous[key] >= 0 { next[previous[key]] = next[key] } else { head = next[key] }
    if next[key] >= 0 { previous[next[key]] = previous[key] } else { tail = previous[key] }
  }
  func pushFront(_ key: Int) {
    previous[key] = -1
    next[key] = head
    if head >= 0 { previous[head] = key }
    head = key
    if tail < 0 { tail = key }
  }
  for key in trace.keys {
    let size = trace.sizes[key]
    allBytes += size
    if cached[key] {
      hits += 1
      hitBytes += size
      unlink(key)
      pushFront(key)
      continue
    }
    guard size <= capacity else { continue }
    cached[key] = true
    total += size
    pushFront(key)
    while total > capacity {
      let victim = tail
      unlink(victim)
      cached[victim] = false
      total -= trace.sizes[victim]
    }
  }
  return (Double(hits) / Double(trace.keys.count), Double(hitBytes) / Double(allBytes))
}

/// The object and byte hit rates of a MemoryStore with `costLimit = capacity` used as a cache,
/// each key written with its size as its cost; also whether the limit held.
func storeSizedHitRates(
  _ trace: SizedHitRateTrace, capacity: Int
) -> (objects: Double, bytes: Double, withinLimit: Bool) {
  let store = MemoryStore<Int, Int>(name: "sized-hit-rate")
  store.costLimit = capacity
  var hits = 0
  var hitBytes = 0
  var allBytes = 0
  for key in trace.keys {
    let size = trace.sizes[key]
    allBytes += size
    if store[key] != nil {
      hits += 1
      hitBytes += size
    } else {
      store.setValue(key, forKey: key, cost: size)
    }
  }
  return (
    Double(hits) / Double(trace.keys.count), Double(hitBytes) / Double(allBytes),
    store.statistics.totalCost <= capacity
  )
}

func printSizedHitRates(plan: EvictionPlan) {
  let trace = sizedHitRateTrace(length: plan.traceLength, keySpace: plan.keySpace)
  print("## Hit rate with sizes: cost limit against size-aware strict LRU")
  print("")
  print(
    "- \(trace.name): \(trace.summary); \(trace.keys.count) accesses. Each key is written with "
      + "its size as its cost; the capacities are 1 % and 10 % of the key space's total size. "
      + "Objects: the share of accesses that hit; bytes: the share of the accessed size that "
      + "hit. libCacheSim's policies with sizes: Scripts/hitrate/reference.py.")
  print("")
  printSizedHitRateTable([trace])
}

/// The table of object and byte hit rates of `traces`, each at its capacities: the cost limit
/// beside size-aware strict LRU. Returns whether the cost limit held after every run.
@discardableResult
func printSizedHitRateTable(_ traces: [SizedHitRateTrace]) -> Bool {
  print(
    "| trace | cost limit | LRU objects | MemoryStore objects | LRU bytes | MemoryStore bytes |")
  print("|---|---:|---:|---:|---:|---:|")
  var limitHeld = true
  for trace in traces {
    for capacity in trace.capacities {
      let lru = sizedLRUHitRates(trace, capacity: capacity)
      let ours = storeSizedHitRates(trace, capacity: capacity)
      limitHeld = limitHeld && ours.withinLimit
      print(
        "| \(trace.name) | \(capacity) | \(fixed(lru.objects * 100, 2)) % "
          + "| \(fixed(ours.objects * 100, 2)) % | \(fixed(lru.bytes * 100, 2)) % "
          + "| \(fixed(ours.bytes * 100, 2)) % |")
      progress(
        "sized hit rate of \(trace.name) at \(capacity): LRU \(fixed(lru.objects * 100, 2)), "
          + "MemoryStore \(fixed(ours.objects * 100, 2))")
    }
  }
  print("")
  print("- The cost limit held after every run: \(limitHeld ? "yes" : "**NO**")")
  print("")
  return limitHeld
}

/// `value` with two decimals and an explicit sign.
func signed(_ value: Double) -> String {
  (value >= 0 ? "+" : "") + fixed(value, 2)
}

// MARK: - Blocking

/// The longest single operation of a probe thread, and how many it made.
struct ProbeResult {
  var maxNanos: UInt64 = 0
  var operations = 0
  var sortedSample: [UInt64] = []

  var p999: UInt64 {
    sortedSample.isEmpty
      ? 0 : sortedSample[min(sortedSample.count - 1, sortedSample.count * 999 / 1000)]
  }
}

/// Runs a writer and a reader probe on `store` while `work` runs on the calling thread;
/// returns the work's duration and each probe's longest operation.
func probeWhile(
  _ store: MemoryStore<Int, Int>, keySpace: Int, _ work: () -> Void
) -> (seconds: Double, writer: ProbeResult, reader: ProbeResult) {
  let stop = Atomic<Bool>(false)
  let results = Mutex<[ProbeResult]>([ProbeResult(), ProbeResult()])
  let started = DispatchSemaphore(value: 0)
  let group = DispatchGroup()
  for lane in 0..<2 {
    group.enter()
    Thread {
      var random = SplitMix64(seed: UInt64(lane) + 99)
      var result = ProbeResult()
      var latencies: [UInt64] = []
      latencies.reserveCapacity(1 << 20)
      started.signal()
      while !stop.load(ordering: .relaxed) {
        // Keys above the store's range: the writer never touches what the work judges.
        let key = keySpace + Int(random.next(below: 10_000))
        let before = monotonicNanos()
        if lane == 0 {
          store[key] = key
        } else {
          _ = store[Int(random.next(below: UInt32(keySpace)))]
        }
        let elapsed = monotonicNanos() - before
        result.maxNanos = max(result.maxNanos, elapsed)
        result.operations += 1
        if latencies.count < 1 << 20 { latencies.append(elapsed) }
      }
      result.sortedSample = latencies.sorted()
      results.withLock { $0[lane] = result }
      group.leave()
    }.start()
  }
  started.wait()
  started.wait()
  let start = monotonicNanos()
  work()
  let seconds = Double(monotonicNanos() - start) / 1e9
  stop.store(true, ordering: .relaxed)
  group.wait()
  let probes = results.withLock { $0 }
  return (seconds, probes[0], probes[1])
}

func printBlocking(plan: EvictionPlan) {
  let count = plan.blockingEntryCount
  print("## Blocking: a purge and a trim of \(count) entries")
  print("")
  print(
    "A writer (new keys) and a reader run throughout; each reports its longest single "
      + "operation and its 99.9th percentile. The control runs the same probes for the same time "
      + "with no purge: what the machine alone costs; the busy control adds a thread that only "
      + "spins, as busy as the purge's thread, so that it shows what sharing the cores with a "
      + "third thread costs without the store. Medians of \(plan.runs) runs.")
  print("")
  var rows: [(String, [Double], [Double], [Double], [Double], [Double])] = []
  for scenario in [
    "purge (decider evicts 1 in 10)", "memory-pressure trim to 50 %", "control, busy", "control",
  ] {
    var seconds: [Double] = []
    var writerMax: [Double] = []
    var readerMax: [Double] = []
    var writerTail: [Double] = []
    var readerTail: [Double] = []
    for run in 0..<plan.runs {
      let entries = Dictionary(uniqueKeysWithValues: (0..<count).map { ($0, $0) })
      let store: MemoryStore<Int, Int>
      if scenario.hasPrefix("purge") {
        store = MemoryStore(name: "purge") { key, _, _ in key % 10 == 0 }
      } else {
        store = MemoryStore(name: "trim")
        store.countLimit = count + 10_000
      }
      store.addEntries(entries)
      let controlSeconds = seconds.isEmpty ? 1.0 : median(seconds)
      let result = probeWhile(store, keySpace: count) {
        switch scenario {
        case let name where name.hasPrefix("purge"):
          // The writer probe's own keys (from `count` up) written before the purge started are
          // judged too; of the store's entries, exactly one in ten goes.
          let evicted = store.purgeEvictableItems().keys.filter { $0 < count }
          precondition(evicted.count == count / 10, "the purge evicted \(evicted.count)")
        case let name where name.hasPrefix("memory"):
          store.handleMemoryPressure(.warning)
          // The writer probe may add its keys again after the trim.
          let bound = (count + 10_000) / 2 + 10_000
          precondition(store.count <= bound, "the trim left \(store.count)")
        case let name where name.hasSuffix("busy"):
          let start = DispatchTime.now().uptimeNanoseconds
          let nanos = UInt64(controlSeconds * 1e9)
          var spins = 0
          while DispatchTime.now().uptimeNanoseconds - start < nanos { spins &+= 1 }
          precondition(spins > 0)
        default:
          Thread.sleep(forTimeInterval: controlSeconds)
        }
      }
      seconds.append(result.seconds)
      writerMax.append(Double(result.writer.maxNanos) / 1e6)
      readerMax.append(Double(result.reader.maxNanos) / 1e6)
      writerTail.append(Double(result.writer.p999) / 1e6)
      readerTail.append(Double(result.reader.p999) / 1e6)
      progress(
        "blocking \(scenario) run \(run + 1): \(fixed(result.seconds, 2)) s, writer max "
          + "\(fixed(writerMax.last!, 2)) ms, reader max \(fixed(readerMax.last!, 2)) ms")
    }
    rows.append((scenario, seconds, writerMax, writerTail, readerMax, readerTail))
  }
  print("| work | duration | writer max | writer p99.9 | reader max | reader p99.9 |")
  print("|---|---:|---:|---:|---:|---:|")
  for (name, seconds, writerMax, writerTail, readerMax, readerTail) in rows {
    print(
      "| \(name) | \(fixed(median(seconds), 2)) s | \(fixed(median(writerMax), 2)) ms "
        + "| \(fixed(median(writerTail), 3)) ms | \(fixed(median(readerMax), 2)) ms "
        + "| \(fixed(median(readerTail), 3)) ms |")
  }
  print("")
  let worst = rows.prefix(2).map { max(median($0.2), median($0.4)) }.max() ?? 0
  let busy = rows.dropFirst(2).first.map { max(median($0.2), median($0.4)) } ?? 0
  let control = rows.last.map { max(median($0.2), median($0.4)) } ?? 0
  print(
    "- Target: no writer or reader waits more than 10 ms longer at a time during a purge or a "
      + "trim of \(count) entries than in the control: **\(worst <= control + 10 ? "MET" : "NOT MET")** "
      + "(worst median max \(fixed(worst, 2)) ms; control \(fixed(control, 2)) ms; busy control "
      + "\(fixed(busy, 2)) ms)")
  print("")
}
