import Dispatch
import Foundation
import MemoryStoreKit
import Synchronization

/// One kind of operation of the mix: a name for the report, a weight (its share of the
/// operations each thread picks at random), and what it does to the worker's store.
///
/// To add an operation, add one line to ``operations``. Flag it `disturbs` if it may remove or
/// replace keys another thread wrote (the owners' read-your-writes check then accepts a missing
/// or older value of a key if such an operation ran since the write), and `removesPartially` if
/// it may remove some keys of a group written by one `addEntries` and not the others, as an
/// eviction would (groups are then checked for mixed writes only, not for all-or-nothing).
struct Operation: Sendable {
  let name: String
  let weight: Int
  let disturbs: Bool
  let removesPartially: Bool
  let run: @Sendable (inout Worker) -> Void

  init(
    _ name: String, weight: Int, disturbs: Bool = false, removesPartially: Bool = false,
    _ run: @escaping @Sendable (inout Worker) -> Void
  ) {
    self.name = name
    self.weight = weight
    self.disturbs = disturbs
    self.removesPartially = removesPartially
    self.run = run
  }
}

/// The mix. Weights are relative.
let operations: [Operation] = [
  Operation("get", weight: 3_000) { $0.get() },
  Operation("set", weight: 1_500) { $0.set() },
  Operation("remove", weight: 400) { $0.remove() },
  Operation("addEntries", weight: 700) { $0.addGroup() },
  Operation("removeValues", weight: 300) { $0.removeGroup() },
  Operation("removeAll", weight: 1, disturbs: true) { $0.context.store.removeAll() },
  Operation("values(forKeys:)", weight: 800) { $0.readGroup() },
  Operation("allItems", weight: 30) { $0.readAll() },
  Operation("get-or-create", weight: 1_000) { $0.getOrCreate() },
  Operation("observe/cancel", weight: 40) { $0.observeAndCancel() },
  Operation("changes task/cancel", weight: 40) { $0.iterateAndCancel() },
  Operation("flush", weight: 6) { $0.flush() },
  Operation("save", weight: 12) { $0.save() },
  Operation("load (replica)", weight: 12) { $0.loadReplica() },
  Operation("load (merge)", weight: 2, disturbs: true) { $0.loadIntoStore() },
  Operation("purge", weight: 2, disturbs: true) {
    $0.context.store.purgeEvictableItems()
  },
]

/// The cumulative weights of the operations, with the weights in `overrides` in place of the
/// table's (0 leaves an operation out), for picking an operation with one random number.
func cumulativeWeights(overriding overrides: [String: Int]) -> [Int] {
  operations.reduce(into: []) { sums, operation in
    sums.append((sums.last ?? 0) + (overrides[operation.name] ?? operation.weight))
  }
}

/// The index of the operation that `draw` (in `0..<weights.last!`) picks.
func operationIndex(for draw: Int, in weights: [Int]) -> Int {
  var low = 0
  var high = weights.count - 1
  while low < high {
    let middle = (low + high) / 2
    if weights[middle] > draw { high = middle } else { low = middle + 1 }
  }
  return low
}

// MARK: - What each operation does

extension Worker {
  /// Reads one of this thread's keys (checking read-your-writes) or any key (checking the
  /// value's integrity).
  mutating func get() {
    if random.next() & 1 == 0 {
      let key = ownedKey(Int(random.next() % UInt64(KeySpace.ownedPerThread)))
      checkOwned(key, context.store[key])
    } else {
      let key = KeySpace.anyKey(threads: context.threads, &random)
      if let value = context.store[key] { checkIntegrity(key, value) }
    }
  }

  /// Writes one of this thread's keys with its next version.
  mutating func set() {
    let key = ownedKey(Int(random.next() % UInt64(KeySpace.ownedPerThread)))
    version += 1
    let value = Payload(key: key, owner: index, version: version)
    let before = context.disturbancesFinished.load(ordering: .acquiring)
    context.store[key] = value
    written[key] = (value, before)
  }

  /// Removes one of this thread's keys, or a created key.
  mutating func remove() {
    if random.next() & 1 == 0 {
      let key = ownedKey(Int(random.next() % UInt64(KeySpace.ownedPerThread)))
      let before = context.disturbancesFinished.load(ordering: .acquiring)
      if let old = context.store.removeValue(forKey: key) { checkIntegrity(key, old) }
      written[key] = (nil, before)
    } else {
      let key = KeySpace.createdKey(Int(random.next() % UInt64(KeySpace.createdCount)))
      if let old = context.store.removeValue(forKey: key) { checkIntegrity(key, old) }
    }
  }

  /// Writes a whole group with one new stamp, as one `addEntries`.
  mutating func addGroup() {
    let group = Int(random.next() % UInt64(KeySpace.groupCount))
    let stamp = context.stamps.add(1, ordering: .relaxed).newValue
    var entries: [Int: Payload] = [:]
    for key in KeySpace.groupKeys(group) {
      entries[key] = Payload(key: key, owner: Payload.groupOwner, version: stamp)
    }
    context.store.addEntries(entries)
  }

  /// Removes a whole group, as one `removeValues`.
  mutating func removeGroup() {
    let group = Int(random.next() % UInt64(KeySpace.groupCount))
    context.store.removeValues(forKeys: KeySpace.groupKeys(group))
  }

  /// Reads a group and two of this thread's keys at once: the group must be whole (or absent)
  /// with one stamp, the owned keys as last written.
  mutating func readGroup() {
    let group = Int(random.next() % UInt64(KeySpace.groupCount))
    let owned = [
      ownedKey(Int(random.next() % UInt64(KeySpace.ownedPerThread))),
      ownedKey(Int(random.next() % UInt64(KeySpace.ownedPerThread))),
    ]
    let keys = KeySpace.groupKeys(group) + owned
    let values = context.store.values(forKeys: keys)
    checkGroups(values, where: "values(forKeys:)")
    for key in owned { checkOwned(key, values[key]) }
  }

  /// Checks a consistent snapshot of the whole store.
  mutating func readAll() {
    let items = context.store.allItems
    checkGroups(items, where: "allItems")
    for (key, value) in items { checkIntegrity(key, value) }
    keep(items)
  }

  /// Gets or creates a created key; the value returned must be the key's.
  mutating func getOrCreate() {
    let key = KeySpace.createdKey(Int(random.next() % UInt64(KeySpace.createdCount)))
    let context = self.context
    let value = context.store.valueOrInsert(forKey: key) {
      Payload(
        key: key, owner: Payload.createdOwner,
        version: context.creations.add(1, ordering: .relaxed).newValue)
    }
    checkIntegrity(key, value)
  }

  /// Subscribes a handler; cancels the oldest of this thread's beyond two.
  mutating func observeAndCancel() {
    let subscription = context.store.observe { batch in
      precondition(!batch.isEmpty, "an empty batch was published")
    }
    subscriptions.append(subscription)
    if subscriptions.count > 2 { subscriptions.removeFirst().cancel() }
  }

  /// Iterates `changes` in a task; cancels the oldest of this thread's tasks beyond two.
  mutating func iterateAndCancel() {
    let store = context.store
    let task = Task.detached {
      for await batch in store.changes {
        precondition(!batch.isEmpty, "an empty batch was published")
      }
    }
    tasks.append(task)
    if tasks.count > 2 { tasks.removeFirst().cancel() }
  }

  /// Publishes now, waits for the handlers, hands removals over and frees what writes
  /// retired (this is a plain thread, not a task, so it may block on a semaphore).
  mutating func flush() {
    let store = context.store
    let done = DispatchSemaphore(value: 0)
    Task.detached {
      await store.flush()
      done.signal()
    }
    done.wait()
  }

  /// Saves the store.
  mutating func save() {
    do {
      let report = try context.manager.save()
      if report.entryCount < 0 || !report.skippedKeys.isEmpty {
        context.fail("save reported \(report.entryCount) entries, skipped \(report.skippedKeys)")
      }
    } catch {
      context.fail("save failed: \(error)")
    }
  }

  /// Loads the snapshot into an emptied replica store that no other thread is using (if all
  /// are in use, does nothing) and checks it as a whole.
  mutating func loadReplica() {
    let replicas = context.replicas
    let first = Int(random.next() % UInt64(replicas.count))
    guard
      let replica = (0..<replicas.count).lazy.map({ replicas[(first + $0) % replicas.count] })
        .first(where: {
          $0.isInUse.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged
        })
    else { return }
    defer { replica.isInUse.store(false, ordering: .releasing) }
    replica.store.removeAll()
    do {
      let loaded = try replica.manager.load()
      let items = replica.store.allItems
      if items.count != loaded {
        context.fail("load() reported \(loaded) entries, the replica holds \(items.count)")
      }
      checkGroups(items, where: "a loaded snapshot")
      for (key, value) in items { checkIntegrity(key, value) }
    } catch {
      context.fail("loading the snapshot into a replica failed: \(error)")
    }
  }

  /// Merges the snapshot into the store itself (older values may come back: `disturbs`).
  mutating func loadIntoStore() {
    do {
      try context.manager.load()
    } catch {
      context.fail("loading the snapshot into the store failed: \(error)")
    }
  }
}
