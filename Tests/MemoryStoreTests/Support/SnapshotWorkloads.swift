import Synchronization

/// What a reader of a concurrent snapshot workload found.
struct SnapshotReport: Sendable {
  /// How many observations broke the workload's invariant.
  var violationCount = 0
  /// The first few of them, described.
  var examples: [String] = []
  /// Observations made, over all readers.
  var reads = 0
  /// Observations of a full key set, and of an empty store.
  var fullReads = 0
  var emptyReads = 0
  /// The store's contents once every thread had finished.
  var finalContents: [Int: Int] = [:]
  /// The last generation written, where the workload's writes go on until the readers have
  /// read enough.
  var lastGeneration = 0

  mutating func recordViolation(_ description: String) {
    violationCount += 1
    if examples.count < 5 { examples.append(description) }
  }

  mutating func merge(_ other: SnapshotReport) {
    violationCount += other.violationCount
    examples += other.examples.prefix(max(0, 5 - examples.count))
    reads += other.reads
    fullReads += other.fullReads
    emptyReads += other.emptyReads
    lastGeneration = max(lastGeneration, other.lastGeneration)
  }
}

/// Writers replace all `keyCount` keys at once, over and over: `addEntries` of every key with
/// one generation's value, alternating with `removeValues` of every key and with `removeAll`
/// followed by a re-add. Readers call `readMany` (shuffled, with duplicates), `allItems` and
/// `count`, and check that each saw either every key, all with one value, or no key at all.
struct BatchAtomicityWorkload: Sendable {
  var keyCount = 64
  var writers = 1
  var readers = 4
  var generations = 300
  var minimumReadsPerReader = 200
  var maximumReadsPerReader = 200_000
  var timeout = 120.0

  /// A description of what is wrong with `observed`, or `nil` if it is all or nothing.
  static func violation(in observed: [Int: Int], keyCount: Int) -> String? {
    if observed.isEmpty { return nil }
    let present = observed.keys.filter { (0..<keyCount).contains($0) }.count
    if present != keyCount || observed.count != keyCount {
      return "saw \(observed.count) entries (\(present) of the \(keyCount) keys)"
    }
    let values = Set(observed.values)
    if values.count != 1 {
      return "saw \(values.count) different values: \(values.sorted().prefix(4))…"
    }
    return nil
  }

  /// Runs the workload; `nil` if the threads did not finish within the timeout.
  func run(on store: some BatchStoreUnderTest) -> SnapshotReport? {
    let workload = self
    let keys = Array(0..<keyCount)
    let writersRunning = Atomic<Int>(writers)
    let reports = runOnThreads(writers + readers, timeout: timeout) { thread in
      var report = SnapshotReport()
      if thread < workload.writers {
        for generation in 1...workload.generations {
          let value = thread * 1_000_000 + generation
          let all = Dictionary(uniqueKeysWithValues: keys.map { ($0, value) })
          store.addEntries(all)
          switch generation % 3 {
          case 0: store.removeMany(keys)
          case 1:
            store.removeAll()
            store.addEntries(all)
          default: break
          }
        }
        writersRunning.wrappingSubtract(1, ordering: .relaxed)
        return report
      }
      var random = SplitMix64(seed: UInt64(thread))
      var lastValue = Int.min
      while report.reads < workload.maximumReadsPerReader
        && (writersRunning.load(ordering: .relaxed) > 0
          || report.reads < workload.minimumReadsPerReader)
      {
        let observed: [Int: Int]
        if report.reads % 2 == 0 {
          var request = keys.shuffled(using: &random)
          request += request.prefix(random.below(8))
          observed = store.readMany(request)
        } else {
          observed = store.allItems
        }
        report.reads += 1
        if observed.isEmpty { report.emptyReads += 1 } else { report.fullReads += 1 }
        if let problem = Self.violation(in: observed, keyCount: workload.keyCount) {
          report.recordViolation(problem)
        } else if workload.writers == 1, let value = observed.values.first {
          // One writer: the generations a reader sees never go back.
          if value < lastValue { report.recordViolation("saw \(value) after \(lastValue)") }
          lastValue = value
        }
        if report.reads % 8 == 0 {
          let count = store.count
          if count != 0 && count != workload.keyCount {
            report.recordViolation("count was \(count)")
          }
        }
      }
      return report
    }
    guard let reports else { return nil }
    var total = SnapshotReport()
    for report in reports { total.merge(report) }
    total.finalContents = store.allItems
    return total
  }
}

/// One writer rewrites the keys `0..<keyCount` one at a time, in order, generation after
/// generation (`set` and `exchange`, one key per write). After `p` writes, keys below
/// `p % keyCount` hold generation `p / keyCount + 1` and the others `p / keyCount`. Readers
/// check that every `allItems` and `readMany` result is exactly such a state (one point of the
/// write order, never a mix of before and after a write), that the points a reader sees never
/// go back, and that `count` never changes.
///
/// The writer writes at least `generations`, and goes on until every reader has made
/// `minimumReadsPerReader` reads (at most `maximumGenerations`, so that a reader that never
/// runs cannot hang it): however the threads are scheduled, those reads race the writes.
struct SnapshotConsistencyWorkload: Sendable {
  var keyCount = 64
  var readers = 4
  var generations = 150
  var maximumGenerations = 100_000
  var minimumReadsPerReader = 100
  var maximumReadsPerReader = 200_000
  var timeout = 120.0

  /// The number of writes after which the store holds `observed`, or `nil` if no point of the
  /// write order does.
  static func position(of observed: [Int: Int], keyCount: Int) -> Int? {
    guard observed.count == keyCount else { return nil }
    var values: [Int] = []
    for key in 0..<keyCount {
      guard let value = observed[key] else { return nil }
      values.append(value)
    }
    let newest = values[0]
    let written = values.prefix { $0 == newest }.count
    if written == keyCount { return newest * keyCount }
    guard values[written...].allSatisfy({ $0 == newest - 1 }) else { return nil }
    return (newest - 1) * keyCount + written
  }

  /// Runs the workload; `nil` if the threads did not finish within the timeout.
  func run(on store: some BatchStoreUnderTest) -> SnapshotReport? {
    let workload = self
    let keys = Array(0..<keyCount)
    store.addEntries(Dictionary(uniqueKeysWithValues: keys.map { ($0, 0) }))
    let writerRunning = Atomic<Bool>(true)
    let readersSatisfied = Atomic<Int>(0)
    let reports = runOnThreads(1 + readers, timeout: timeout) { thread in
      var report = SnapshotReport()
      if thread == 0 {
        var generation = 0
        while generation < workload.generations
          || (readersSatisfied.load(ordering: .relaxed) < workload.readers
            && generation < workload.maximumGenerations)
        {
          generation += 1
          for key in keys {
            if key % 2 == 0 {
              store.write(key, generation)
              continue
            }
            let previous = store.exchange(key, generation)
            if previous != generation - 1 {
              report.recordViolation("exchange on \(key) returned \(String(describing: previous))")
            }
          }
        }
        report.lastGeneration = generation
        writerRunning.store(false, ordering: .relaxed)
        return report
      }
      var random = SplitMix64(seed: UInt64(thread))
      var lastPosition = 0
      while report.reads < workload.maximumReadsPerReader
        && (writerRunning.load(ordering: .relaxed)
          || report.reads < workload.minimumReadsPerReader)
      {
        let useAllItems = report.reads % 2 == 0
        let observed = useAllItems ? store.allItems : store.readMany(keys.shuffled(using: &random))
        report.reads += 1
        if report.reads == workload.minimumReadsPerReader {
          readersSatisfied.wrappingAdd(1, ordering: .relaxed)
        }
        let source = useAllItems ? "allItems" : "readMany"
        if let position = Self.position(of: observed, keyCount: workload.keyCount) {
          if position < lastPosition {
            report.recordViolation("\(source) went back from \(lastPosition) to \(position)")
          }
          lastPosition = position
        } else {
          let values = keys.map { observed[$0].map(String.init) ?? "-" }
          report.recordViolation("\(source) saw no single point: \(values)")
        }
        if report.reads % 8 == 0 {
          let count = store.count
          if count != workload.keyCount { report.recordViolation("count was \(count)") }
        }
      }
      return report
    }
    guard let reports else { return nil }
    var total = SnapshotReport()
    for report in reports { total.merge(report) }
    total.finalContents = store.allItems
    return total
  }
}
