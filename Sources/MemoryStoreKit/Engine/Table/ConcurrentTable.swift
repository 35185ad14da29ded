import Synchronization

/// A hash table that any number of threads read without locks while one writer at a time
/// (serialised by a lock the caller holds) changes it; the engine under a store.
///
/// ## Reading
///
/// A reader announces itself in its own stripe of a ``_ReaderIndicator`` (one atomic
/// increment on a cache line no other thread writes, in the common case), loads the published
/// *version*, and reads the table as it was at that version: it walks the key's bucket chain
/// and, from the node it finds, follows `older` links back to the newest node written at or
/// before its version (see ``_Node``). A reader never waits, never retries a lookup and never
/// writes a shared cache line.
///
/// ## Writing
///
/// The writer *stages* changes, each linking a new node (or a tombstone, for a removal) in
/// place of the key's current node, stamped with the next version; readers skip them, since
/// their version is newer than the published one. ``publish(_:)`` then makes every staged change
/// visible at once with one releasing store of the version, so a batch of changes is atomic
/// for readers, and each write costs one hash of its key.
///
/// ## Reclaiming memory
///
/// A node that was replaced, and a table that was replaced, stay readable until no reader can
/// reach them: they are *retired* into the current epoch's list, and freed once every reader
/// that entered during that epoch or before has left (epoch-based reclamation over the reader
/// indicator's two counters per stripe). Freeing runs a key's or a value's `deinit`, so it
/// happens outside the write lock: ``publish(_:)`` returns the garbage, and the caller frees it
/// after unlocking. Tombstones stay linked until no reader can still need what they hide, then
/// the writer unlinks them.
///
/// ## Growing
///
/// Growth never stops the world: when the entries outnumber the buckets, the writer allocates
/// a table twice as large and moves a few buckets per write (copying their nodes, then marking
/// the old bucket forwarded), so no write does work proportional to the table. Readers that
/// meet a forwarded bucket continue in the new table. `removeAll()` starts a new, empty
/// generation; readers at an older version read the previous one until they leave.
///
/// Memory per entry: one node (24 bytes of header, the key, the value; one allocation) and
/// one to two bucket words.
@usableFromInline
final class _ConcurrentTable<Key: Hashable, Value> {
  // The read side: what every reader loads, and the writer rarely changes.

  /// The bits of the current generation's table (during growth, the table being grown from).
  @usableFromInline let _root: Atomic<Int>
  /// The reclamation epoch; its parity picks the reader counter a reader announces itself in.
  @usableFromInline let _epoch: Atomic<Int>
  /// Per-thread counts of the readers of each epoch parity.
  @usableFromInline let _readers: _ReaderIndicator

  /// Keeps what every write stores (below) off the read side's cache line, so that a write
  /// does not take that line from the readers of other cores.
  @usableFromInline let _readSidePadding: _CacheLinePadding = .init()

  // What every write stores: a single-key read loads none of it in the common case (see
  // ``_latestNode(forKey:hash:counters:)``).

  /// The version of the last published write.
  @usableFromInline let _version: Atomic<UInt64>
  /// The number of entries at the even and the odd published versions (see ``count``).
  @usableFromInline let _evenCount: Atomic<Int>
  @usableFromInline let _oddCount: Atomic<Int>

  /// Keeps the spare blocks, which threads freeing garbage push, off the version's line.
  @usableFromInline let _writeSidePadding: _CacheLinePadding = .init()

  // Spare node memory: blocks of freed nodes, chained through their first word, that the
  // threads freeing garbage push (outside the lock) and the writer takes all at once, so that
  // most writes allocate nothing. A push is a compare-and-swap of the head; the writer takes
  // the whole chain with one exchange, which no interleaving can corrupt.

  /// Spare blocks the size of a node with a value.
  @usableFromInline let _spareNodes: Atomic<Int>
  /// Spare blocks the size of a tombstone.
  @usableFromInline let _spareTombstones: Atomic<Int>
  /// About how many spare blocks exist (pushed minus taken), to bound them.
  @usableFromInline let _spareCount: Atomic<Int>
  /// The writer's state: staged changes, counts, retirements and the ring; guarded by the
  /// store's write lock, which every method that reaches it requires.
  @usableFromInline let _writer: _ExternallyLocked<_TableWriter>
  /// Emptied retirement lists, with their capacity, that the threads freeing garbage hand
  /// back, so that the writer's next lists need no allocation under its lock.
  @usableFromInline let _limboBuffers: _Protected<[ContiguousArray<_Retired>]>

  /// The smallest table, in buckets.
  @usableFromInline static var minimumCapacity: Int { 16 }

  @usableFromInline
  init() {
    let root = _TableHeader.make(
      capacity: Self.minimumCapacity, baseVersion: 0, previousGeneration: nil)
    _root = Atomic(Int(bitPattern: root))
    _epoch = Atomic(0)
    _version = Atomic(0)
    _evenCount = Atomic(0)
    _oddCount = Atomic(0)
    _spareNodes = Atomic(0)
    _spareTombstones = Atomic(0)
    _spareCount = Atomic(0)
    _readers = _ReaderIndicator()
    _writer = _ExternallyLocked(_TableWriter(root: root))
    _limboBuffers = _Protected([])
  }

  deinit {
    let writer = _writer.pointerAtDeinit
    var garbage = _TableGarbage()
    garbage.items.append(.generation(writer.pointee.root))
    garbage.items.append(contentsOf: writer.pointee.limbo.0)
    garbage.items.append(contentsOf: writer.pointee.limbo.1)
    for bits in writer.pointee.unlinked { garbage.items.append(.node(bits)) }
    // The tombstones still on the list are linked in the root (freed with it) or in a retired
    // generation, or were retired: the list owns none of them.
    _free(garbage)
    for chain in [
      _spareNodes.exchange(0, ordering: .acquiring),
      _spareTombstones.exchange(0, ordering: .acquiring),
      writer.pointee.spareNodes, writer.pointee.spareTombstones,
    ] {
      var bits = chain
      while let block = UnsafeMutableRawPointer(bitPattern: bits) {
        bits = block.load(as: Int.self)
        block.deallocate()
      }
    }
    _writer.deallocate()
    _readers.deallocate()
  }
}

// Safe: the read side is only atomics and memory that the reclamation protocol keeps alive
// for every reader that can reach it; the writer's state is accessed only by the caller that
// holds the store's write lock (documented on every writer method); keys and values are
// Sendable wherever a table is shared (it is internal to MemoryStore, whose Key and Value are).
extension _ConcurrentTable: @unchecked Sendable {}

/// Something retired from a table, freed once no reader can reach it.
@usableFromInline
enum _Retired {
  /// One node.
  case node(Int)
  /// A table's bucket array and header, not its nodes (their entries moved on).
  case shell(UnsafeMutablePointer<_TableHeader>)
  /// A whole generation: its table (and the table it was growing into), with every node
  /// linked in them.
  case generation(UnsafeMutablePointer<_TableHeader>)
}

/// What a write retired and no reader can reach any more: freed by
/// ``_ConcurrentTable/_free(_:)`` after the write lock is released.
@usableFromInline
struct _TableGarbage {
  @usableFromInline var items: ContiguousArray<_Retired> = []

  @inlinable init() {}

  /// Whether freeing it is more work than a write should do on its caller's thread: many
  /// items, or a whole generation (O(its size)).
  @inlinable
  var isLarge: Bool {
    if items.count > 512 { return true }
    for item in items { if case .generation = item { return true } }
    return false
  }
}

// Safe: garbage is owned by one thread at a time, handed over whole (from the writer to the
// thread or queue that frees it); nothing in it is reachable by any reader or writer.
extension _TableGarbage: @unchecked Sendable {}

/// The writer's side of a ``_ConcurrentTable``; guarded by the caller's write lock.
@usableFromInline
struct _TableWriter {
  /// The current generation's table (during growth, the one being grown from).
  @usableFromInline var root: UnsafeMutablePointer<_TableHeader>
  /// The last published version.
  @usableFromInline var version: UInt64 = 0
  /// Whether changes were staged since the last publication.
  @usableFromInline var staged = false
  /// Entries in the newest (staged) state.
  @usableFromInline var count = 0
  /// Tombstones linked in the current generation.
  @usableFromInline var tombstoneCount = 0
  /// During growth: the next bucket of `root` to move.
  @usableFromInline var growthCursor = 0
  /// The reclamation epoch (the writer's copy of `_epoch`).
  @usableFromInline var epoch = 0
  /// Retired in even and in odd epochs.
  @usableFromInline var limbo: (ContiguousArray<_Retired>, ContiguousArray<_Retired>) = ([], [])
  /// Tombstones to unlink once no reader needs them, with the epoch they were linked in,
  /// oldest first, from `tombstonesStart`. Entries whose tombstone was retired meanwhile
  /// (replaced or moved) or whose generation was cleared are skipped.
  @usableFromInline var tombstones: ContiguousArray<(node: Int, epoch: Int)> = []
  @usableFromInline var tombstonesStart = 0
  /// Tombstones unlinked since the last advance of the epoch, retired at the next one (see
  /// ``_ConcurrentTable/_reclaim()``).
  @usableFromInline var unlinked: ContiguousArray<Int> = []
  /// The writer's own chains of spare blocks (see `_ConcurrentTable._spareNodes`).
  @usableFromInline var spareNodes = 0
  @usableFromInline var spareTombstones = 0
  /// Spare blocks taken since `_spareCount` was last lowered.
  @usableFromInline var spareTaken = 0
  /// How many retirements make the next publication try to reclaim; doubled while a reader
  /// holds an epoch back, so that a long reader costs writers nothing.
  @usableFromInline var reclaimThreshold = 64

  // Entry metadata (stores with a policy; see `_Node`).

  /// Whether new nodes with a value carry metadata. Set once, never cleared.
  @usableFromInline var carriesMetadata = false
  /// The version of the write that copied every entry with metadata when it was set (0: no
  /// entry was copied): entries it copied got new nodes, without any change of value.
  @usableFromInline var metadataCopiesVersion: UInt64 = 0
  /// Whether every entry's node has metadata: true once nodes carry it and the entries
  /// written before were copied (or there were none).
  @usableFromInline var everyEntryHasMetadata = false
  /// The current node of every entry with metadata, by its `slot`.
  @usableFromInline var ring = _EntryRing()
  /// Whether new nodes with metadata keep their key's hash (see `_Node.hashFlag`): from the
  /// first limit on. Set once, never cleared.
  @usableFromInline var keepsHashes = false

  @usableFromInline
  init(root: UnsafeMutablePointer<_TableHeader>) {
    self.root = root
  }

  @inlinable @inline(__always)
  mutating func retire(_ item: _Retired) {
    if epoch & 1 == 0 { limbo.0.append(item) } else { limbo.1.append(item) }
  }

  /// Retired in the current epoch.
  @inlinable
  var currentLimboCount: Int { epoch & 1 == 0 ? limbo.0.count : limbo.1.count }
}

// MARK: - Reading

extension _ConcurrentTable {
  /// Runs `body` as a reader, with the published version: everything `body` reads through
  /// the table at that version stays valid until it returns.
  ///
  /// `body` may run a key's `==` but no other user code: a reader that stays inside delays the
  /// freeing of memory (never a writer).
  @inlinable @inline(__always)
  func withReadSection<R>(_ body: (UInt64) -> R) -> R {
    withCountedReadSection { version, _ in body(version) }
  }

  /// Enters a read section that stays open until ``leaveReadSection(_:)``: for a reader whose
  /// work runs user code (a save's encoder). Returns the version it reads and the token to
  /// leave with.
  ///
  /// Counted in the stripe's shared block: such a section may be left on another thread.
  @usableFromInline
  func enterReadSection() -> (version: UInt64, token: (UnsafeMutablePointer<Atomic<Int>>, Int)) {
    let token = _announceReader(in: _readers.sharedCountersForCurrentThread())
    return (_version.load(ordering: .sequentiallyConsistent), token)
  }

  /// Leaves the read section `token` names: a releasing store in an owner block, which only
  /// its owner writes (the section was entered and is left on the same thread), else a
  /// releasing read-modify-write.
  @inlinable @inline(__always)
  func leaveReadSection(_ token: (UnsafeMutablePointer<Atomic<Int>>, Int)) {
    _ReaderIndicator.add(-1, to: token.1, in: token.0, releasing: true)
  }

  /// Counts the calling thread as a reader of the current epoch, in `counters` (its block of
  /// its stripe); returns them and the parity counted, for ``leaveReadSection(_:)``.
  @inlinable @inline(__always)
  func _announceReader(
    in counters: UnsafeMutablePointer<Atomic<Int>>
  ) -> (UnsafeMutablePointer<Atomic<Int>>, Int) {
    let parity = _epoch.load(ordering: .relaxed) & 1
    counters[parity].wrappingAdd(1, ordering: .sequentiallyConsistent)
    return (counters, parity)
  }

  /// ``withReadSection(_:)``, also giving `body` the calling thread's stripe of counters
  /// (the store counts hits and misses there).
  ///
  /// Every load a reader makes of the version, the root and the links is sequentially
  /// consistent, like its increment: the writer's check of the counters (after a sequentially
  /// consistent fence) and a reader's increment then form a store-buffering pair that the
  /// memory model orders, so a reader the writer did not see counted sees every unlink made
  /// before the check. On x86-64 such a load is a plain load; on arm64 it is `ldar`.
  @inlinable @inline(__always)
  func withCountedReadSection<R>(
    _ body: (UInt64, UnsafeMutablePointer<Atomic<Int>>) -> R
  ) -> R {
    withLatestReadSection { counters in
      body(_version.load(ordering: .sequentiallyConsistent), counters)
    }
  }

  /// Runs `body` as a reader, announced in the calling thread's stripe of counters (which
  /// `body` gets), without loading a version: what every read section is, and by itself the
  /// section of a read of one key, which takes the newest published node of its key
  /// (``_latestNode(forKey:hash:counters:)``).
  @inlinable @inline(__always)
  func withLatestReadSection<R>(_ body: (UnsafeMutablePointer<Atomic<Int>>) -> R) -> R {
    // Entered and left on this thread: counted in the thread's own block if it has one.
    let token = _announceReader(in: _readers.countersForCurrentThread())
    let result = body(token.0)
    leaveReadSection(token)
    return result
  }

  /// The node holding `key`'s value now, or `nil` if the key is absent; call inside
  /// ``withLatestReadSection(_:)``, with its counters.
  ///
  /// A read of one key needs no version to read at, only to tell a published node from a
  /// staged one: the newest node linked for the key is the newest published one if its
  /// version is at or below a version known to be published. The stripe keeps the last
  /// version its threads loaded (``_ReaderIndicator/knownVersion``): versions only grow, so
  /// any version once published stays a lower bound. Only a node written since then (or a
  /// generation that `removeAll()` began since then) makes the read load the version, which
  /// every write stores: so readers on other cores do not pull the version's cache line from
  /// the writer at every read, and a write does not pull it back from them.
  ///
  /// Linearizable as a read at the version published when it loads the key's chain: a write
  /// whose call returned before has published its node, which is then the key's newest.
  @inlinable @inline(__always)
  func _latestNode(
    forKey key: Key, hash: Int, counters: UnsafeMutablePointer<Atomic<Int>>
  ) -> _Node<Key, Value>? {
    let known = UInt64(
      bitPattern: Int64(counters[_ReaderIndicator.knownVersion].load(ordering: .relaxed)))
    // Safe: the root is never 0.
    let table = UnsafeMutablePointer<_TableHeader>(
      bitPattern: _root.load(ordering: .sequentiallyConsistent)
    ).unsafelyUnwrapped
    guard table.pointee.baseVersion <= known else {
      return _lookup(key, hash: hash, at: _loadVersion(counters))
    }
    guard let node = _newestNode(key, hash: hash, in: table) else { return nil }
    if node.version <= known { return node.isTombstone ? nil : node }
    guard let visible = node.resolved(at: _loadVersion(counters)), !visible.isTombstone else {
      return nil
    }
    return visible
  }

  /// Loads the published version for a reader, and keeps it in the reader's stripe as the
  /// version its later reads know to be published.
  @inlinable @inline(never)
  func _loadVersion(_ counters: UnsafeMutablePointer<Atomic<Int>>) -> UInt64 {
    let version = _version.load(ordering: .sequentiallyConsistent)
    counters[_ReaderIndicator.knownVersion].store(
      Int(Int64(bitPattern: version)), ordering: .relaxed)
    return version
  }

  /// The value of `key` at `version`; call inside ``withReadSection(_:)``.
  @inlinable @inline(__always)
  func _value(forKey key: Key, hash: Int, at version: UInt64) -> Value? {
    guard let node = _lookup(key, hash: hash, at: version) else { return nil }
    return node.value.pointee
  }

  /// The node holding `key`'s value at `version`, or `nil` if the key was absent then.
  @inlinable @inline(__always)
  func _lookup(_ key: Key, hash: Int, at version: UInt64) -> _Node<Key, Value>? {
    guard let node = _newestNode(key, hash: hash, in: _table(at: version)),
      let visible = node.resolved(at: version), !visible.isTombstone
    else { return nil }
    return visible
  }

  /// The newest node linked for `key` in `table` (following forwarded buckets), published or
  /// staged, a value or a tombstone; `nil` if none.
  @inlinable @inline(__always)
  func _newestNode(
    _ key: Key, hash: Int, in table: UnsafeMutablePointer<_TableHeader>
  ) -> _Node<Key, Value>? {
    var table = table
    while true {
      let head = table.pointee.buckets[hash & table.pointee.mask].load(
        ordering: .sequentiallyConsistent)
      if head == _TableHeader.forwarded {
        // Safe: a forwarded bucket is marked only after `nextTable` is set.
        table = table.pointee.nextTable.unsafelyUnwrapped
        continue
      }
      var bits = head
      while let node = _Node<Key, Value>(bits: bits) {
        if node.key.pointee == key { return node }
        bits = node.next.pointee.load(ordering: .sequentiallyConsistent)
      }
      return nil
    }
  }

  /// The generation's table a reader at `version` reads.
  @inlinable @inline(__always)
  func _table(at version: UInt64) -> UnsafeMutablePointer<_TableHeader> {
    // Safe: the root is never 0, and a generation newer than the reader's version always
    // has the previous one (kept alive by this reader) to fall back to.
    var table = UnsafeMutablePointer<_TableHeader>(
      bitPattern: _root.load(ordering: .sequentiallyConsistent)
    ).unsafelyUnwrapped
    while table.pointee.baseVersion > version {
      table = table.pointee.previousGeneration.unsafelyUnwrapped
    }
    return table
  }

  /// The value of `key` now.
  ///
  /// - Complexity: O(1) on average; never waits.
  @inlinable
  func value(forKey key: Key) -> Value? {
    let hash = key.hashValue
    return withReadSection { _value(forKey: key, hash: hash, at: $0) }
  }

  /// The number of entries at one published version.
  ///
  /// - Complexity: O(1); lock-free (it loads again if a write was published meanwhile).
  @inlinable
  var count: Int {
    while true {
      let version = _version.load(ordering: .acquiring)
      // The count of version v is stored (releasing) before v is published, and its slot is
      // reused for v + 2 only after v + 1 is published: an unchanged version proves it.
      let count =
        version & 1 == 0
        ? _evenCount.load(ordering: .acquiring) : _oddCount.load(ordering: .acquiring)
      if _version.load(ordering: .acquiring) == version { return count }
    }
  }

  /// The number of entries at `version` if it is still the published version; `nil`
  /// otherwise.
  @inlinable
  func _count(at version: UInt64) -> Int? {
    let count =
      version & 1 == 0
      ? _evenCount.load(ordering: .acquiring) : _oddCount.load(ordering: .acquiring)
    return _version.load(ordering: .acquiring) == version ? count : nil
  }

  /// Calls `body` with every entry at `version`; call inside ``withReadSection(_:)``.
  ///
  /// - Complexity: O(*n*) for the table's capacity and entries.
  @inlinable
  func _forEach(at version: UInt64, _ body: (Key, Value) -> Void) {
    _forEachNode(at: version) { node in body(node.key.pointee, node.value.pointee) }
  }

  /// Calls `body` with the node of every entry at `version` (valid while the read section
  /// is); call inside ``withReadSection(_:)``.
  ///
  /// - Complexity: O(*n*) for the table's capacity and entries.
  @inlinable
  func _forEachNode(at version: UInt64, _ body: (_Node<Key, Value>) -> Void) {
    let table = _table(at: version)
    for index in 0..<table.pointee.capacity {
      _forEachNode(inBucket: index, of: table, at: version, body)
    }
  }

  @inlinable
  func _forEachNode(
    inBucket index: Int, of table: UnsafeMutablePointer<_TableHeader>, at version: UInt64,
    _ body: (_Node<Key, Value>) -> Void
  ) {
    let head = table.pointee.buckets[index].load(ordering: .sequentiallyConsistent)
    if head == _TableHeader.forwarded {
      // The bucket's entries live in the buckets of the next table that share its low bits.
      let next = table.pointee.nextTable.unsafelyUnwrapped
      var target = index
      while target < next.pointee.capacity {
        _forEachNode(inBucket: target, of: next, at: version, body)
        target += table.pointee.capacity
      }
      return
    }
    var bits = head
    while let node = _Node<Key, Value>(bits: bits) {
      if let visible = node.resolved(at: version), !visible.isTombstone {
        body(visible)
      }
      bits = node.next.pointee.load(ordering: .sequentiallyConsistent)
    }
  }

  /// Every entry at one published version, as a dictionary.
  ///
  /// - Complexity: O(*n*); never waits.
  @inlinable
  var dictionary: [Key: Value] {
    withReadSection { version in
      var result: [Key: Value] = [:]
      result.reserveCapacity(_writerCountHint)
      _forEach(at: version) { key, value in result[key] = value }
      return result
    }
  }

  /// An estimate of the count for sizing results, read without ordering.
  @inlinable
  var _writerCountHint: Int {
    Swift.max(_evenCount.load(ordering: .relaxed), _oddCount.load(ordering: .relaxed))
  }
}

/// A cache line's worth of nothing, between fields that different cores write.
@usableFromInline
struct _CacheLinePadding {
  @usableFromInline let _bytes: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)

  @inlinable init() {}
}
