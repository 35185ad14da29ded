// The stores under test: seven baselines defined here, and MemoryStore itself.

import Dispatch
import Foundation
@_spi(Benchmark) import MemoryStoreKit
import Synchronization

/// The value stored under every key.
struct Quote: Sendable, Equatable, Codable {
  var bid: Double
  var ask: Double
  var volume: Int

  /// The value every store holds for key number `index` before a repetition starts. Its
  /// negative volume tells it apart from any written value.
  static func initial(forKeyAt index: Int) -> Quote {
    Quote(bid: 100 + Double(index), ask: 100.05 + Double(index), volume: -1 - index)
  }

  /// The value written by operation number `op` of a lane.
  @inline(__always)
  static func written(byOp op: Int) -> Quote {
    Quote(bid: Double(op), ask: Double(op) + 0.05, volume: op)
  }
}

/// The stores, in report order.
enum StoreKind: String, CaseIterable, Sendable {
  case dictionary
  case ymcacheGCD = "ymcache-gcd"
  case nslock
  case mutex
  case mutexSharded = "mutex-sharded"
  case nslockLRU = "nslock-lru"
  case nslockLRUEvicting = "nslock-lru-evicting"
  case nscache
  case memorystore
  case memorystoreBatches = "memorystore-batches"
  case memorystoreLimited = "memorystore-limited"
  case memorystoreEvicting = "memorystore-evicting"
  case memorystoreTTL = "memorystore-ttl"
  case memorystoreDecider = "memorystore-decider"
  case memorystoreTicker = "memorystore-ticker"
  case memorystoreTracked = "memorystore-tracked"
  case engine

  /// Whether the store may be used from several threads (`dictionary` may not).
  var isThreadSafe: Bool { self != .dictionary }

  /// Whether the store's limit is below the number of keys, so that reads may miss and a key
  /// may be absent at the end.
  var evicts: Bool { self == .memorystoreEvicting || self == .nslockLRUEvicting }

  /// Whether the store is a baseline rather than MemoryStore in one of its configurations.
  var isBaseline: Bool {
    switch self {
    case .memorystore, .memorystoreBatches, .memorystoreLimited, .memorystoreEvicting,
      .memorystoreTTL, .memorystoreDecider,
      .memorystoreTicker, .memorystoreTracked, .engine:
      false
    default: true
    }
  }

  var summary: String {
    switch self {
    case .dictionary: "plain [String: Quote], one thread only (the floor)"
    case .ymcacheGCD:
      "concurrent DispatchQueue: sync reads, async barrier writes (YMCache style)"
    case .nslock: "NSLock around a Dictionary"
    case .mutex: "Synchronization Mutex<[String: Quote]>, every access in withLock"
    case .mutexSharded:
      "16 Mutex<[String: Quote]> shards, the shard chosen by key.hashValue & 15"
    case .nslockLRU:
      "NSLock around a Dictionary of linked-list nodes, countLimit = the key count: "
        + "a hit moves its node to the head, an insert over the limit evicts the tail "
        + "(YYMemoryCache style)"
    case .nslockLRUEvicting:
      "the same with countLimit = half the key count: about half the writes insert a key and "
        + "evict one"
    case .nscache: "Foundation NSCache<KeyBox, ValueBox>, keys boxed once per lane"
    case .memorystore: "MemoryStore<String, Quote>, called as a client module would"
    case .memorystoreBatches:
      "the same with change batches on: 100 ms interval, one observe subscriber"
    case .memorystoreLimited:
      "the same with countLimit = the key count: reads note recency, writes keep the order"
    case .memorystoreEvicting:
      "the same with countLimit = half the key count: about half the writes insert a key and "
        + "evict one"
    case .memorystoreTTL:
      "the same with defaultTimeToLive = 1 hour: every read checks the clock"
    case .memorystoreDecider:
      "the same with an eviction decider that keeps everything ({ _, _, _ in false }), "
        + "never run: entries keep their write time, reads their read second"
    case .memorystoreTicker:
      "configured as Examples/StockTicker: an eviction decider (stale after 1 hour, so "
        + "nothing is evicted) run every second, change batches every 250 ms to one observe "
        + "subscriber, a PersistenceManager (binary, auto-save off)"
    case .memorystoreTracked:
      "the same with tracksReads on (reads register with Observation), read outside any "
        + "tracking scope and with no key observed"
    case .engine:
      "the store's engine alone: its versioned table behind a write lock, no features"
    }
  }
}

/// What the timed loops need from a store. The loops are generic over this protocol and are
/// specialised for every concrete store (each store is a final class, the loops are internal
/// to this module, and the build is whole-module optimised), so no existential or witness
/// table call happens inside a timed loop.
protocol BenchmarkStore: AnyObject, Sendable {
  /// How the store's clients hold a key.
  associatedtype KeyHandle

  static var kind: StoreKind { get }
  static func makeKey(_ string: String) -> KeyHandle

  /// A fresh store holding `entries`, with its writes applied.
  init(prepopulated entries: [String: Quote])

  func fetch(_ key: KeyHandle) -> Quote?
  func put(_ key: KeyHandle, _ value: Quote)
  /// Returns once every earlier write is applied (the store's flush).
  func drain()
}

/// Copies `entries` into a dictionary with storage of its own, so that the first timed write
/// does not pay for a copy-on-write of storage shared with the fixture.
private func uniqueCopy(of entries: [String: Quote]) -> [String: Quote] {
  var copy = [String: Quote](minimumCapacity: entries.count)
  for (key, value) in entries { copy[key] = value }
  return copy
}

// MARK: - (a) dictionary

/// A plain dictionary: the cost of the lookup itself, with no synchronisation at all.
///
/// The dictionary lives behind a pointer rather than in a stored `var`: a class's stored
/// `var` is accessed with a dynamic exclusivity check (`swift_beginAccess`) that a local
/// dictionary does not pay, and the floor should be the dictionary alone.
///
/// `@unchecked Sendable`: the harness only runs single-thread workloads on this store. It is
/// created on the main thread before its one lane thread starts and read again only after
/// that thread has signalled completion; thread start and the semaphore order those accesses,
/// so no two threads ever access the dictionary concurrently.
final class DictionaryStore: BenchmarkStore, @unchecked Sendable {
  private let storage: UnsafeMutablePointer<[String: Quote]>

  static var kind: StoreKind { .dictionary }
  static func makeKey(_ string: String) -> String { string }

  init(prepopulated entries: [String: Quote]) {
    storage = .allocate(capacity: 1)
    storage.initialize(to: uniqueCopy(of: entries))
  }

  deinit {
    storage.deinitialize(count: 1)
    storage.deallocate()
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? { storage.pointee[key] }

  @inline(__always)
  func put(_ key: String, _ value: Quote) { storage.pointee[key] = value }

  func drain() {}
}

// MARK: - (b) ymcache-gcd

/// The YMCache pattern: a concurrent queue, reads with `sync`, writes with asynchronous
/// barrier blocks; its flush is an empty synchronous barrier.
///
/// `@unchecked Sendable`: `storage` is only accessed inside blocks run by `queue`, and the
/// queue never runs a barrier block at the same time as any other block, so reads (plain
/// blocks) only ever overlap other reads and each write runs alone.
final class GCDStore: BenchmarkStore, @unchecked Sendable {
  private let queue = DispatchQueue(label: "benchmark.ymcache-gcd", attributes: .concurrent)
  private var storage: [String: Quote]

  static var kind: StoreKind { .ymcacheGCD }
  static func makeKey(_ string: String) -> String { string }

  init(prepopulated entries: [String: Quote]) {
    storage = uniqueCopy(of: entries)
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? {
    queue.sync { storage[key] }
  }

  @inline(__always)
  func put(_ key: String, _ value: Quote) {
    queue.async(flags: .barrier) { self.storage[key] = value }
  }

  func drain() {
    queue.sync(flags: .barrier) {}
  }
}

// MARK: - (c) nslock

/// A dictionary guarded by an `NSLock`.
///
/// `@unchecked Sendable`: `storage` is only accessed between `lock.lock()` and
/// `lock.unlock()`, so accesses from different threads are mutually exclusive and ordered.
final class NSLockStore: BenchmarkStore, @unchecked Sendable {
  private let lock = NSLock()
  private var storage: [String: Quote]

  static var kind: StoreKind { .nslock }
  static func makeKey(_ string: String) -> String { string }

  init(prepopulated entries: [String: Quote]) {
    storage = uniqueCopy(of: entries)
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? {
    lock.lock()
    defer { lock.unlock() }
    return storage[key]
  }

  @inline(__always)
  func put(_ key: String, _ value: Quote) {
    lock.lock()
    storage[key] = value
    lock.unlock()
  }

  func drain() {}
}

// MARK: - (c1a) mutex

/// A dictionary in a `Mutex` from the Synchronization module: what a Swift 6 client would
/// write instead of the store. Sendable without `@unchecked`: its one stored property is a
/// `Mutex` of a `Sendable` value.
final class MutexStore: BenchmarkStore {
  private let storage: Mutex<[String: Quote]>

  static var kind: StoreKind { .mutex }
  static func makeKey(_ string: String) -> String { string }

  init(prepopulated entries: [String: Quote]) {
    storage = Mutex(uniqueCopy(of: entries))
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? {
    storage.withLock { $0[key] }
  }

  @inline(__always)
  func put(_ key: String, _ value: Quote) {
    storage.withLock { $0[key] = value }
  }

  func drain() {}
}

// MARK: - (c1b) mutex-sharded

/// `shardCount` dictionaries, each in a `Mutex`, a key's shard chosen by the low bits of its
/// `hashValue`, computed once per operation (each dictionary then hashes the key with its own
/// per-instance seed, so the keys of a shard do not bunch in its buckets). The mutexes live in
/// one allocation of fixed size rather than an array: a `Mutex` is noncopyable, so it cannot
/// be an `Array` element, and the hot path pays no bounds or uniqueness check.
///
/// `@unchecked Sendable`: `shards` itself is a `let`, written once in the initializer before the
/// store is shared and freed in `deinit` once no reference to the store is left. The memory it
/// points to is only ever accessed through `Mutex.withLock` (every index is masked into
/// `0..<shardCount`, the allocated and initialized range), and `Mutex` is `Sendable` for a
/// `Sendable` value, so accesses to each dictionary from different threads are mutually
/// exclusive and ordered.
final class ShardedMutexStore: BenchmarkStore, @unchecked Sendable {
  /// A power of two, so that a shard is chosen with a mask. (Computed, so that the hot path
  /// reads a constant rather than a lazily initialised global.)
  static var shardCount: Int { 16 }
  private static var shardMask: Int { shardCount - 1 }

  private let shards: UnsafeMutablePointer<Mutex<[String: Quote]>>

  static var kind: StoreKind { .mutexSharded }
  static func makeKey(_ string: String) -> String { string }

  init(prepopulated entries: [String: Quote]) {
    var parts = [[String: Quote]](repeating: [:], count: Self.shardCount)
    for (key, value) in entries {
      parts[key.hashValue & Self.shardMask][key] = value
    }
    shards = .allocate(capacity: Self.shardCount)
    for (index, part) in parts.enumerated() {
      (shards + index).initialize(to: Mutex(uniqueCopy(of: part)))
    }
  }

  deinit {
    shards.deinitialize(count: Self.shardCount)
    shards.deallocate()
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? {
    shards[key.hashValue & Self.shardMask].withLock { $0[key] }
  }

  @inline(__always)
  func put(_ key: String, _ value: Quote) {
    shards[key.hashValue & Self.shardMask].withLock { $0[key] = value }
  }

  func drain() {}
}

// MARK: - (c2) nslock-lru

/// An entry of `LRUStore`, and its place in the recency list.
final class LRUNode {
  let key: String
  var value: Quote
  /// The next more recently used node; `nil` at the head. Not retained: see `LRUStore`.
  unowned(unsafe) var prev: LRUNode?
  /// The next less recently used node; `nil` at the tail. Not retained: see `LRUStore`.
  unowned(unsafe) var next: LRUNode?

  init(key: String, value: Quote) {
    self.key = key
    self.value = value
  }
}

/// The count limit of an `LRUStore`, and its name in the report.
protocol LRULimit {
  static var kind: StoreKind { get }
  static func countLimit(keyCount: Int) -> Int
}

/// As many entries as keys: nothing is evicted.
enum AllKeys: LRULimit {
  static var kind: StoreKind { .nslockLRU }
  static func countLimit(keyCount: Int) -> Int { keyCount }
}

/// Half as many entries as keys: about half the writes evict.
enum HalfTheKeys: LRULimit {
  static var kind: StoreKind { .nslockLRUEvicting }
  static func countLimit(keyCount: Int) -> Int { keyCount / 2 }
}

/// The YYMemoryCache pattern: an `NSLock` around a dictionary of nodes that also form an
/// intrusive doubly linked list, most recently used at the head. A hit moves its node to the
/// head, so reads take the lock too; an insert goes to the head, and an insert that takes the
/// count over `countLimit` evicts the tail. The limit is the number of keys (as for
/// `memorystore-limited`, so the standard workloads never evict) or half of it (as for
/// `memorystore-evicting`), as `Limit` says.
///
/// The dictionary holds the only strong reference to each node; the list links, `head` and
/// `tail` are `unowned(unsafe)`, as YYMemoryCache's are unretained, so that moving a node
/// costs no reference counting. A node is in the list exactly while it is in the dictionary:
/// it is linked when inserted and unlinked before it is removed, so no link ever points to a
/// freed node.
///
/// `@unchecked Sendable`: `map`, `head`, `tail` and every node's `value`, `prev` and `next`
/// are only accessed between `lock.lock()` and `lock.unlock()` (the initializer runs before
/// the store is shared), so accesses from different threads are mutually exclusive and
/// ordered; nodes never leave the store.
final class LRUStore<Limit: LRULimit>: BenchmarkStore, @unchecked Sendable {
  private let lock = NSLock()
  private var map: [String: LRUNode]
  private unowned(unsafe) var head: LRUNode?
  private unowned(unsafe) var tail: LRUNode?
  private let countLimit: Int

  static var kind: StoreKind { Limit.kind }
  static func makeKey(_ string: String) -> String { string }

  init(prepopulated entries: [String: Quote]) {
    map = [String: LRUNode](minimumCapacity: entries.count)
    countLimit = Limit.countLimit(keyCount: entries.count)
    for (key, value) in entries { insert(key, value) }
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? {
    lock.lock()
    defer { lock.unlock() }
    guard let node = map[key] else { return nil }
    moveToHead(node)
    return node.value
  }

  @inline(__always)
  func put(_ key: String, _ value: Quote) {
    lock.lock()
    if let node = map[key] {
      node.value = value
      moveToHead(node)
    } else {
      insert(key, value)
    }
    lock.unlock()
  }

  func drain() {}

  /// Adds a node for a key not in the store at the head, then evicts the tail while over the
  /// limit. Called with the lock held (or before the store is shared).
  private func insert(_ key: String, _ value: Quote) {
    let node = LRUNode(key: key, value: value)
    map[key] = node
    node.next = head
    head?.prev = node
    head = node
    if tail == nil { tail = node }
    while map.count > countLimit, let last = tail {
      unlink(last)
      map[last.key] = nil  // releases the node, now unreachable from the list
    }
  }

  /// Makes `node`, which is in the list, its head. Called with the lock held.
  @inline(__always)
  private func moveToHead(_ node: LRUNode) {
    guard head !== node else { return }
    unlink(node)
    node.next = head
    head?.prev = node
    head = node
    if tail == nil { tail = node }
  }

  /// Takes `node`, which is in the list, out of it. Called with the lock held.
  @inline(__always)
  private func unlink(_ node: LRUNode) {
    if let prev = node.prev { prev.next = node.next } else { head = node.next }
    if let next = node.next { next.prev = node.prev } else { tail = node.prev }
    node.prev = nil
    node.next = nil
  }
}

// MARK: - (d) nscache

/// A `String` key boxed for `NSCache`, with value equality.
final class KeyBox: NSObject {
  let string: String

  init(_ string: String) {
    self.string = string
  }

  override var hash: Int { string.hashValue }

  override func isEqual(_ object: Any?) -> Bool {
    guard let other = object as? KeyBox else { return false }
    return other.string == string
  }
}

/// A `Quote` boxed for `NSCache`.
final class ValueBox {
  let quote: Quote

  init(_ quote: Quote) {
    self.quote = quote
  }
}

/// Foundation's `NSCache`. Keys are boxed once per lane before timing starts (the cache's
/// best case: a client holding `String` keys would box one per call); each write boxes its
/// value, as it must. No count or cost limit is set, so nothing is evicted.
///
/// `@unchecked Sendable`: the only stored property is the cache, and `NSCache` is documented
/// as safe to use from several threads at once (it locks internally).
final class NSCacheStore: BenchmarkStore, @unchecked Sendable {
  private let cache = NSCache<KeyBox, ValueBox>()

  static var kind: StoreKind { .nscache }
  static func makeKey(_ string: String) -> KeyBox { KeyBox(string) }

  init(prepopulated entries: [String: Quote]) {
    for (key, value) in entries {
      cache.setObject(ValueBox(value), forKey: KeyBox(key))
    }
  }

  @inline(__always)
  func fetch(_ key: KeyBox) -> Quote? {
    cache.object(forKey: key)?.quote
  }

  @inline(__always)
  func put(_ key: KeyBox, _ value: Quote) {
    cache.setObject(ValueBox(value), forKey: key)
  }

  func drain() {}
}

// MARK: - (e) memorystore

extension MemoryStore: BenchmarkStore where Key == String, Value == Quote {
  static var kind: StoreKind { .memorystore }
  static func makeKey(_ string: String) -> String { string }

  convenience init(prepopulated entries: [String: Quote]) {
    self.init(name: "benchmark")
    addEntries(entries)
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? { self[key] }

  @inline(__always)
  func put(_ key: String, _ value: Quote) { self[key] = value }

  /// Bridges the asynchronous `flush()` to the calling thread. Only used where a workload
  /// includes the flush, or outside timed code.
  func drain() {
    let flushed = DispatchSemaphore(value: 0)
    Task {
      await self.flush()
      flushed.signal()
    }
    flushed.wait()
  }
}

/// The store under test, as the benchmark instantiates it.
typealias MemoryStoreOfQuotes = MemoryStore<String, Quote>

// MARK: - (f) memorystore with change batches on

/// MemoryStore with change batches on: a 100 ms interval and one `observe` subscriber that
/// reads every batch. The entries are added before batches are turned on.
final class ObservedMemoryStore: BenchmarkStore {
  static var kind: StoreKind { .memorystoreBatches }
  static func makeKey(_ string: String) -> String { string }

  let store: MemoryStore<String, Quote>
  let subscription: Subscription
  /// The number of keys the subscriber was told about.
  let reported = ReportedKeys()

  final class ReportedKeys: Sendable {
    let count = Atomic(0)
  }

  init(prepopulated entries: [String: Quote]) {
    store = MemoryStore(name: "benchmark-batches")
    store.addEntries(entries)
    store.notificationInterval = .milliseconds(100)
    subscription = store.observe { [reported] batch in
      reported.count.wrappingAdd(batch.count, ordering: .relaxed)
    }
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? { store[key] }

  @inline(__always)
  func put(_ key: String, _ value: Quote) { store[key] = value }

  func drain() { store.drain() }
}

// MARK: - (g) memorystore with a count limit, (h) with a time to live

/// How a policy variant of the store is configured before it is filled.
protocol StoreVariant {
  /// The empty store, before `configure`.
  static func make(name: String) -> MemoryStore<String, Quote>
  static var kind: StoreKind { get }
  static func configure(_ store: MemoryStore<String, Quote>, entryCount: Int)
}

extension StoreVariant {
  static func make(name: String) -> MemoryStore<String, Quote> { MemoryStore(name: name) }
}

/// `countLimit` equal to the number of keys: nothing is evicted (every key written is one of
/// them), but reads note recency and writes keep eviction records.
enum CountLimited: StoreVariant {
  static var kind: StoreKind { .memorystoreLimited }
  static func configure(_ store: MemoryStore<String, Quote>, entryCount: Int) {
    store.countLimit = entryCount
  }
}

/// `countLimit` equal to half the number of keys: about half the writes insert a key the
/// limit evicted and evict another, and about half the reads miss.
enum CountEvicting: StoreVariant {
  static var kind: StoreKind { .memorystoreEvicting }
  static func configure(_ store: MemoryStore<String, Quote>, entryCount: Int) {
    store.countLimit = entryCount / 2
  }
}

/// Entries live an hour: nothing expires during a run, but every read compares the earliest
/// expiry with the clock.
enum Expiring: StoreVariant {
  static var kind: StoreKind { .memorystoreTTL }
  static func configure(_ store: MemoryStore<String, Quote>, entryCount: Int) {
    store.defaultTimeToLive = .seconds(3_600)
  }
}

/// An eviction decider that keeps everything; the store's periodic purge is off, so it never
/// runs: what a decider costs reads and writes.
enum Decided: StoreVariant {
  static var kind: StoreKind { .memorystoreDecider }
  static func make(name: String) -> MemoryStore<String, Quote> {
    MemoryStore(name: name) { _, _, _ in false }
  }
  static func configure(_ store: MemoryStore<String, Quote>, entryCount: Int) {
    store.evictionInterval = .zero
  }
}

/// Reads tracked for Observation, but read outside any tracking scope and with nobody
/// observing: what turning tracking on costs a store that views read and servers also use.
enum Tracked: StoreVariant {
  static var kind: StoreKind { .memorystoreTracked }
  static func configure(_ store: MemoryStore<String, Quote>, entryCount: Int) {
    store.tracksReads = true
  }
}

/// MemoryStore configured by `Variant` before it is filled.
final class VariantMemoryStore<Variant: StoreVariant>: BenchmarkStore {
  static var kind: StoreKind { Variant.kind }
  static func makeKey(_ string: String) -> String { string }

  let store: MemoryStore<String, Quote>

  init(prepopulated entries: [String: Quote]) {
    store = Variant.make(name: "benchmark-\(Variant.kind.rawValue)")
    Variant.configure(store, entryCount: entries.count)
    store.addEntries(entries)
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? { store[key] }

  @inline(__always)
  func put(_ key: String, _ value: Quote) { store[key] = value }

  func drain() { store.drain() }
}

// MARK: - (h2) memorystore configured as the StockTicker example

/// MemoryStore set up as `Examples/StockTicker/main.swift` sets up its market: an eviction
/// decider (the example's stale-quote rule, with stale after an hour rather than 5 seconds so
/// that nothing is evicted during a run) run every second, a `PersistenceManager` with the
/// binary coder and auto-save off, and change batches every 250 ms to one `observe`
/// subscriber. The entries are added before batches are turned on, as the example restores its
/// market first.
///
/// Every such store's manager names the same snapshot file, in a temporary directory of this
/// process that `removeSnapshotDirectory()` removes at the end of the throughput section;
/// nothing is saved into it. (A store's deinit cannot remove it: the last store may be
/// released by a lane thread after the process has gone on to exit.) Should the directory not
/// be creatable, the store runs without a manager, which with auto-save off takes no part in
/// reads or writes.
final class TickerMemoryStore: BenchmarkStore {
  static var kind: StoreKind { .memorystoreTicker }
  static func makeKey(_ string: String) -> String { string }

  /// A quote not written for this long is stale (the example uses 5 seconds).
  static let staleAfter = Duration.seconds(3_600)

  let store: MemoryStore<String, Quote>
  let persistence: PersistenceManager<String, Quote>?
  let subscription: Subscription
  /// The number of keys the subscriber was told about.
  let reported = ObservedMemoryStore.ReportedKeys()

  init(prepopulated entries: [String: Quote]) {
    let staleAfter = Self.staleAfter
    store = MemoryStore(name: "benchmark-ticker") { _, _, context in
      context.age > staleAfter
    }
    store.evictionInterval = .seconds(1)
    persistence = try? PersistenceManager(
      store: store, fileURL: Self.snapshotDirectory.appendingPathComponent("quotes.snapshot"),
      coder: .binary)
    store.addEntries(entries)
    store.notificationInterval = .milliseconds(250)
    subscription = store.observe { [reported] batch in
      reported.count.wrappingAdd(batch.count, ordering: .relaxed)
    }
  }

  /// The directory of the managers' snapshot file, created by the first manager.
  private static let snapshotDirectory = FileManager.default.temporaryDirectory
    .appendingPathComponent("MemoryStoreBenchmark-ticker-\(UUID().uuidString)", isDirectory: true)

  /// Removes the managers' directory, if it was created. Call once no store is being created.
  static func removeSnapshotDirectory() {
    try? FileManager.default.removeItem(at: snapshotDirectory)
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? { store[key] }

  @inline(__always)
  func put(_ key: String, _ value: Quote) { store[key] = value }

  func drain() { store.drain() }
}

// MARK: - (i) the engine alone

/// The store's engine without the store's features, through its benchmark interface.
final class EngineStore: BenchmarkStore {
  static var kind: StoreKind { .engine }
  static func makeKey(_ string: String) -> String { string }

  let store = _EngineProbe<String, Quote>()

  init(prepopulated entries: [String: Quote]) {
    store.addEntries(entries)
  }

  @inline(__always)
  func fetch(_ key: String) -> Quote? { store[key] }

  @inline(__always)
  func put(_ key: String, _ value: Quote) { store[key] = value }

  func drain() {}
}
