// The stores of the memory and growth sections: `Int` keys, a 24-byte value, filled by single
// writes on one thread, each in a process of its own (see Probe.swift).

import Dispatch
import Foundation
@_spi(Benchmark) import MemoryStoreKit

/// The value of the memory and growth sections: 24 bytes, no references.
struct Payload: Sendable, Equatable {
  var a: Double
  var b: Double
  var c: Int

  /// The value written under `key`.
  @inline(__always)
  init(key: Int) {
    a = Double(key)
    b = Double(key) + 0.5
    c = key
  }
}

/// The stores the memory and growth sections measure, in report order.
enum ProbeStoreKind: String, CaseIterable, Sendable {
  case dictionary
  case nslock
  case memorystore
  case memorystoreBatches = "memorystore-batches"
  case memorystoreLimited = "memorystore-limited"
  case memorystoreEvicting = "memorystore-evicting"
  case memorystoreTTL = "memorystore-ttl"
  case memorystoreDecider = "memorystore-decider"
  case engine

  var summary: String {
    switch self {
    case .dictionary: "plain [Int: Payload], one thread (the floor)"
    case .nslock: "NSLock around a [Int: Payload]"
    case .memorystore: "MemoryStore<Int, Payload>, no options"
    case .memorystoreBatches:
      "change batches on: 100 ms interval, one observe subscriber; its scheduler's time does "
        + "not move, so every change of the fill is still waiting for its batch"
    case .memorystoreLimited: "countLimit = 2 x the entry count (never reached)"
    case .memorystoreEvicting:
      "countLimit = the entry count; after the fill, a quarter more new keys are written, so "
        + "that it holds the entry count having evicted (its frequency sketch made)"
    case .memorystoreTTL: "defaultTimeToLive = 1 hour"
    case .memorystoreDecider: "an eviction decider that keeps everything ({ _, _, _ in false })"
    case .engine: "the store's engine alone, no features (_EngineProbe<Int, Payload>)"
    }
  }
}

/// A store as the probes fill it: single writes from one thread.
protocol ProbeStore: AnyObject {
  func write(_ key: Int, _ value: Payload)
  /// Applies whatever the store deferred (its flush), where it has such a step.
  func settle()
  var count: Int { get }
}

/// Something a probe does with a fresh store of any kind; `make` creates the store.
protocol ProbeRun {
  func run<Store: ProbeStore>(_ make: () -> Store) -> String
}

/// Runs `probe` with the store `kind` names, specialised for its concrete type; `entryCount`
/// is how many entries the probe writes (a count limit is set from it).
func withProbeStore(_ kind: ProbeStoreKind, entryCount: Int, _ probe: some ProbeRun) -> String {
  switch kind {
  case .dictionary: probe.run { DictionaryProbeStore() }
  case .nslock: probe.run { NSLockProbeStore() }
  case .engine: probe.run { EngineProbeStore() }
  case .memorystore, .memorystoreBatches, .memorystoreLimited, .memorystoreEvicting,
    .memorystoreTTL, .memorystoreDecider:
    probe.run { MemoryStoreProbeStore(kind, entryCount: entryCount) }
  }
}

/// A plain dictionary. Used by one thread only, so it needs no synchronisation.
final class DictionaryProbeStore: ProbeStore {
  private var storage: [Int: Payload] = [:]

  @inline(__always)
  func write(_ key: Int, _ value: Payload) { storage[key] = value }

  func settle() {}

  var count: Int { storage.count }
}

/// A dictionary behind an `NSLock`, locked for every write as a shared store would be.
final class NSLockProbeStore: ProbeStore {
  private let lock = NSLock()
  private var storage: [Int: Payload] = [:]

  @inline(__always)
  func write(_ key: Int, _ value: Payload) {
    lock.lock()
    storage[key] = value
    lock.unlock()
  }

  func settle() {}

  var count: Int {
    lock.lock()
    defer { lock.unlock() }
    return storage.count
  }
}

/// The store's engine on its own, without the store's features.
final class EngineProbeStore: ProbeStore {
  private let table = _EngineProbe<Int, Payload>()

  @inline(__always)
  func write(_ key: Int, _ value: Payload) { table[key] = value }

  func settle() {}

  var count: Int { table.count }
}

/// MemoryStore, configured for `kind` before its first write.
final class MemoryStoreProbeStore: ProbeStore {
  private let store: MemoryStore<Int, Payload>
  /// The change-batch subscriber, kept for the store's lifetime.
  private let subscription: Subscription?
  /// The keys ``settle()`` writes past the fill, to make the store evict.
  private var extraKeys = 0..<0

  init(_ kind: ProbeStoreKind, entryCount: Int) {
    var subscription: Subscription?
    switch kind {
    case .memorystoreBatches:
      // A scheduler whose time never moves: the first batch would be published 100 ms after
      // the first change, so the measurement always sees the changes of the whole fill.
      store = MemoryStore(name: "probe", scheduler: ManualScheduler())
      store.notificationInterval = .milliseconds(100)
      subscription = store.observe { batch in withExtendedLifetime(batch) {} }
    case .memorystoreDecider:
      store = MemoryStore(name: "probe", evictionDecider: { _, _, _ in false })
    default:
      store = MemoryStore(name: "probe")
    }
    if kind == .memorystoreLimited { store.countLimit = 2 * entryCount }
    if kind == .memorystoreEvicting {
      store.countLimit = entryCount
      extraKeys = entryCount..<(entryCount + entryCount / 4)
    }
    if kind == .memorystoreTTL { store.defaultTimeToLive = .seconds(3_600) }
    self.subscription = subscription
  }

  @inline(__always)
  func write(_ key: Int, _ value: Payload) { store[key] = value }

  /// Writes ``extraKeys``, then waits for the store's `flush()` on the calling thread.
  func settle() {
    for key in extraKeys { store[key] = Payload(key: key) }
    let store = store
    let flushed = DispatchSemaphore(value: 0)
    Task {
      await store.flush()
      flushed.signal()
    }
    flushed.wait()
  }

  var count: Int { store.count }
}
