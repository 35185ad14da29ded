import Foundation
import MemoryStoreKit
import Synchronization

/// A stored value. `text` is derived from the other fields, so a torn or mixed-up value shows.
struct Payload: Codable, Sendable, Equatable {
  /// The writing thread for owned keys, ``groupOwner`` or ``createdOwner`` otherwise.
  var owner: Int
  /// The owner's write number, the group's stamp, or the creation number.
  var version: UInt64
  var text: String

  init(key: Int, owner: Int, version: UInt64) {
    self.owner = owner
    self.version = version
    self.text = Self.text(key: key, owner: owner, version: version)
  }

  static func text(key: Int, owner: Int, version: UInt64) -> String {
    "key \(key) owner \(owner) version \(version)"
  }

  static let groupOwner = -1
  static let createdOwner = -2
}

/// The keys: each thread's own keys, written only by their thread (and by operations flagged
/// `disturbs`); groups of keys written and removed together; keys made by get-or-create.
enum KeySpace {
  static let ownedPerThread = 64
  static let groupBase = 1_000_000
  static let groupCount = 64
  static let groupSize = 8
  static let createdBase = 2_000_000
  static let createdCount = 256

  static func groupKeys(_ group: Int) -> [Int] {
    let first = groupBase + group * groupSize
    return Array(first..<(first + groupSize))
  }

  static func group(of key: Int) -> Int? {
    (groupBase..<(groupBase + groupCount * groupSize)).contains(key)
      ? (key - groupBase) / groupSize : nil
  }

  static func createdKey(_ index: Int) -> Int { createdBase + index }

  static func isCreated(_ key: Int) -> Bool {
    (createdBase..<(createdBase + createdCount)).contains(key)
  }

  /// The owner of an owned key.
  static func owner(of key: Int, threads: Int) -> Int? {
    (0..<(threads * ownedPerThread)).contains(key) ? key / ownedPerThread : nil
  }

  static func anyKey(threads: Int, _ random: inout SplitMix64) -> Int {
    switch random.next() % 3 {
    case 0: Int(random.next() % UInt64(threads * ownedPerThread))
    case 1: groupBase + Int(random.next() % UInt64(groupCount * groupSize))
    default: createdKey(Int(random.next() % UInt64(createdCount)))
    }
  }
}

/// State that several threads share, touched only under its lock.
final class Locked<State: Sendable>: @unchecked Sendable {
  // Safety: `state` is private and only accessed inside `withLock`, which holds `lock` (an
  // NSLock) for the whole access: no two threads touch it at once, and each access happens
  // after the previous one (unlock, then lock). `State` is Sendable, so what `body` returns
  // may cross threads.
  private let lock = NSLock()
  private var state: State

  init(_ state: State) { self.state = state }

  func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }
}

/// A store to load snapshots into, with a manager of the snapshot file created before any
/// save (creating a manager removes the temporary files of saves in progress), and a flag that
/// one thread at a time sets to use it.
final class Replica: Sendable {
  let store: MemoryStore<Int, Payload>
  let manager: PersistenceManager<Int, Payload>
  let isInUse = Atomic<Bool>(false)

  init(index: Int, fileURL: URL, coder: some SnapshotCoder) throws {
    store = MemoryStore<Int, Payload>(name: "replica \(index)")
    manager = try PersistenceManager(store: store, fileURL: fileURL, coder: coder)
  }
}

/// What every thread shares.
final class Context: Sendable {
  let threads: Int
  let store: MemoryStore<Int, Payload>
  let manager: PersistenceManager<Int, Payload>
  /// The mix: see ``cumulativeWeights(skipping:)``.
  let weights: [Int]
  /// Whether an operation in the mix may remove part of a group.
  let groupsMayBePartial: Bool
  /// Operations flagged `disturbs` started and finished so far.
  let disturbancesStarted = Atomic<UInt64>(0)
  let disturbancesFinished = Atomic<UInt64>(0)
  /// Group stamps and creation numbers handed out.
  let stamps = Atomic<UInt64>(0)
  let creations = Atomic<UInt64>(0)
  /// A few replicas, whatever the number of threads, so that memory does not grow with it.
  let replicas: [Replica]
  /// The first failures found (all are counted).
  let failures = Locked<(count: Int, first: [String])>((0, []))

  init(
    threads: Int, store: MemoryStore<Int, Payload>, manager: PersistenceManager<Int, Payload>,
    coder: some SnapshotCoder, weights overrides: [String: Int]
  ) throws {
    weights = cumulativeWeights(overriding: overrides)
    groupsMayBePartial = operations.contains {
      $0.removesPartially && (overrides[$0.name] ?? $0.weight) > 0
    }
    self.threads = threads
    self.store = store
    self.manager = manager
    replicas = try (0..<min(threads, 4)).map {
      try Replica(index: $0, fileURL: manager.fileURL, coder: coder)
    }
  }

  func fail(_ message: String) {
    failures.withLock { failures in
      failures.count += 1
      if failures.first.count < 20 { failures.first.append(message) }
    }
  }
}

/// One thread's state: its random numbers, what it last wrote to its own keys, its
/// subscriptions and tasks, and its operation counts.
struct Worker {
  let index: Int
  let context: Context
  var random: SplitMix64
  /// Per owned key: the value last written (nil: removed) and the number of disturbing
  /// operations finished before the write.
  var written: [Int: (value: Payload?, finishedBefore: UInt64)] = [:]
  var version: UInt64 = 0
  var subscriptions: [Subscription] = []
  var tasks: [Task<Void, Never>] = []
  var counts: [Int]
  /// Per operation, the total time spent in it, in nanoseconds.
  var nanoseconds: [Int64]
  /// The last two `allItems` snapshots (see ``keep(_:)``).
  var heldSnapshots: [[Int: Payload]] = []

  init(index: Int, context: Context, seed: UInt64) {
    self.index = index
    self.context = context
    random = SplitMix64(seed: seed &+ UInt64(index) &* 0x9E37_79B9)
    counts = Array(repeating: 0, count: operations.count)
    nanoseconds = Array(repeating: 0, count: operations.count)
  }

  /// Keeps an `allItems` snapshot alive until two more have been taken, and then until the
  /// end of the run (the main thread releases the last ones after every worker finished).
  ///
  /// Why: values live on in snapshots after the store replaced and freed its own references
  /// to them, so the last release of a value often happens here, on a worker thread, while
  /// other threads write the store; ThreadSanitizer checks that path.
  mutating func keep(_ snapshot: [Int: Payload]) {
    heldSnapshots.append(snapshot)
    if heldSnapshots.count > 2 {
      let released = heldSnapshots.removeFirst()
      withExtendedLifetime(released) {}
    }
  }

  func ownedKey(_ slot: Int) -> Int { index * KeySpace.ownedPerThread + slot }

  /// Runs operations until `deadline`.
  mutating func run(until deadline: ContinuousClock.Instant) {
    let weights = context.weights
    let total = UInt64(weights.last!)
    var done = 0
    while done & 31 != 0 || ContinuousClock.now < deadline {
      let chosen = operationIndex(for: Int(random.next() % total), in: weights)
      let operation = operations[chosen]
      let started = ContinuousClock.now
      if operation.disturbs {
        context.disturbancesStarted.add(1, ordering: .sequentiallyConsistent)
        operation.run(&self)
        context.disturbancesFinished.add(1, ordering: .sequentiallyConsistent)
      } else {
        operation.run(&self)
      }
      let (seconds, attoseconds) = (ContinuousClock.now - started).components
      nanoseconds[chosen] += seconds * 1_000_000_000 + attoseconds / 1_000_000_000
      counts[chosen] += 1
      done += 1
    }
    for subscription in subscriptions { subscription.cancel() }
    for task in tasks { task.cancel() }
    subscriptions = []
    tasks = []
  }

  // MARK: Checks

  /// An owned key must hold what this thread last wrote, unless a disturbing operation ran
  /// (started) after a point before the write.
  func checkOwned(_ key: Int, _ value: Payload?) {
    if let value { checkIntegrity(key, value) }
    let last = written[key]
    if value == last?.value ?? nil { return }
    let started = context.disturbancesStarted.load(ordering: .sequentiallyConsistent)
    if started > (last?.finishedBefore ?? 0) { return }
    context.fail(
      "thread \(index) read \(value.map { "version \($0.version)" } ?? "nothing") for its key "
        + "\(key), after writing \(last?.value.map { "version \($0.version)" } ?? "nothing"), "
        + "with no removeAll or load since")
  }

  /// A value must be the one its text describes, for its key.
  func checkIntegrity(_ key: Int, _ value: Payload) {
    var expectedOwner: Int?
    if let owner = KeySpace.owner(of: key, threads: context.threads) {
      expectedOwner = owner
    } else if KeySpace.group(of: key) != nil {
      expectedOwner = Payload.groupOwner
    } else if KeySpace.isCreated(key) {
      expectedOwner = Payload.createdOwner
    }
    guard let expectedOwner, value.owner == expectedOwner,
      value.text == Payload.text(key: key, owner: value.owner, version: value.version)
    else {
      context.fail("key \(key) holds a value that is not its own: \(value)")
      return
    }
  }

  /// In one consistent read, every group is whole with one stamp, or absent; with partial
  /// removers in the mix, the keys present share one stamp.
  func checkGroups(_ items: [Int: Payload], where source: String) {
    var stamps: [Int: (stamp: UInt64, count: Int)] = [:]
    for (key, value) in items {
      guard let group = KeySpace.group(of: key) else { continue }
      if let seen = stamps[group] {
        if seen.stamp != value.version {
          context.fail(
            "\(source): group \(group) mixes stamps \(seen.stamp) and \(value.version): "
              + "parts of two addEntries")
          return
        }
        stamps[group] = (seen.stamp, seen.count + 1)
      } else {
        stamps[group] = (value.version, 1)
      }
    }
    if context.groupsMayBePartial { return }
    for (group, seen) in stamps where seen.count != KeySpace.groupSize {
      // `values(forKeys:)` is asked for whole groups; `allItems` holds whole groups.
      context.fail(
        "\(source): group \(group) has \(seen.count) of its \(KeySpace.groupSize) keys: "
          + "part of an addEntries or removeValues")
      return
    }
  }
}
