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
/// their version is newer than the published one. ``publish()`` then makes every staged change
/// visible at once with one releasing store of the version, so a batch of changes is atomic
/// for readers, and each write costs one hash of its key.
///
/// ## Reclaiming memory
///
/// A node that was replaced, and a table that was replaced, stay readable until no reader can
/// reach them: they are *retired* into the current epoch's list, and freed once every reader
/// that entered during that epoch or before has left (epoch-based reclamation over the reader
/// indicator's two counters per stripe). Freeing runs a key's or a value's `deinit`, so it
/// happens outside the write lock: ``publish()`` returns the garbage, and the caller frees it
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
  // The read side: what readers load, on one cache line.

  /// The version of the last published write.
  @usableFromInline let _version: Atomic<UInt64>
  /// The bits of the current generation's table (during growth, the table being grown from).
  @usableFromInline let _root: Atomic<Int>
  /// The reclamation epoch; its parity picks the reader counter a reader announces itself in.
  @usableFromInline let _epoch: Atomic<Int>
  /// The number of entries at the even and the odd published versions (see ``count``).
  @usableFromInline let _evenCount: Atomic<Int>
  @usableFromInline let _oddCount: Atomic<Int>

  /// Per-thread counts of the readers of each epoch parity.
  @usableFromInline let _readers: _ReaderIndicator

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
    _version = Atomic(0)
    _root = Atomic(Int(bitPattern: root))
    _epoch = Atomic(0)
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
    let writer = _writer.underWriteLock
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
  @usableFromInline
  func enterReadSection() -> (version: UInt64, token: (UnsafeMutablePointer<Atomic<Int>>, Int)) {
    let counters = _readers.countersForCurrentThread()
    let parity = _epoch.load(ordering: .relaxed) & 1
    counters[parity].wrappingAdd(1, ordering: .sequentiallyConsistent)
    return (_version.load(ordering: .sequentiallyConsistent), (counters, parity))
  }

  @usableFromInline
  func leaveReadSection(_ token: (UnsafeMutablePointer<Atomic<Int>>, Int)) {
    token.0[token.1].wrappingSubtract(1, ordering: .releasing)
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
    let counters = _readers.countersForCurrentThread()
    let parity = _epoch.load(ordering: .relaxed) & 1
    counters[parity].wrappingAdd(1, ordering: .sequentiallyConsistent)
    let version = _version.load(ordering: .sequentiallyConsistent)
    let result = body(version, counters)
    counters[parity].wrappingSubtract(1, ordering: .releasing)
    return result
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
    var table = _table(at: version)
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
        if node.key.pointee == key {
          guard let visible = node.resolved(at: version), !visible.isTombstone else {
            return nil
          }
          return visible
        }
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

// MARK: - Writing (the caller holds the write lock)

extension _ConcurrentTable {
  /// The version staged changes get.
  @inlinable
  var _stagingVersion: UInt64 { _writer.underWriteLock.pointee.version &+ 1 }

  /// The number of entries including staged changes. Write lock held.
  @inlinable
  var stagedCount: Int { _writer.underWriteLock.pointee.count }

  /// The value of `key` including staged changes. Write lock held.
  @inlinable
  func stagedValue(forKey key: Key) -> Value? {
    guard let node = stagedNode(forKey: key) else { return nil }
    return node.value.pointee
  }

  /// The current node of `key` including staged changes, unless the key is absent. Write lock
  /// held; the node stays valid until the lock is released.
  @inlinable
  func stagedNode(forKey key: Key) -> _Node<Key, Value>? {
    let hash = key.hashValue
    guard let (_, node) = _find(key, in: _writeSlot(hash: hash)), !node.isTombstone
    else { return nil }
    return node
  }

  /// Stages `key` → `value`; returns the value it replaces (staged or published). Write lock
  /// held.
  ///
  /// - Complexity: O(1) on average: one hash of `key`.
  @inlinable @inline(__always)
  @discardableResult
  func stageSet(_ key: Key, _ value: Value) -> Value? {
    stageSet(key, value, hash: key.hashValue)
  }

  /// ``stageSet(_:_:)`` of a key whose `hashValue` is `hash`.
  @inlinable @inline(__always)
  @discardableResult
  func stageSet(_ key: Key, _ value: Value, hash: Int) -> Value? {
    guard let old = stageSet(key, value, metadata: nil, hash: hash).old, !old.isTombstone
    else { return nil }
    return old.value.pointee
  }

  /// Stages `key` → `value`, with the entry's metadata in a store with a policy; returns the
  /// node it replaces (a value or a tombstone; it stays valid until the write lock is
  /// released) and the new node. With metadata, the new node takes the old one's ring
  /// position and, raised by one use, its recency, or a free position and no recency. Write
  /// lock held.
  ///
  /// - Complexity: O(1) on average: one hash of `key`.
  @inlinable @inline(__always)
  func stageSet(
    _ key: Key, _ value: Value, metadata: _EntryMetadata?, idleExpiresAt: Int64 = .max
  ) -> (old: _Node<Key, Value>?, new: _Node<Key, Value>) {
    stageSet(key, value, metadata: metadata, idleExpiresAt: idleExpiresAt, hash: key.hashValue)
  }

  /// ``stageSet(_:_:metadata:)`` of a key whose `hashValue` is `hash`.
  @inlinable @inline(__always)
  func stageSet(
    _ key: Key, _ value: Value, metadata: _EntryMetadata?, idleExpiresAt: Int64 = .max,
    hash: Int
  ) -> (old: _Node<Key, Value>?, new: _Node<Key, Value>) {
    let writer = _writer.underWriteLock
    _growStep()
    let slot = _writeSlot(hash: hash)
    let version = writer.pointee.version &+ 1
    writer.pointee.staged = true
    if let (predecessor, old) = _find(key, in: slot) {
      let node = _makeNode(
        key, value, metadata: metadata, idleExpiresAt: idleExpiresAt, hash: hash, replacing: old,
        version: version)
      node.next.pointee.store(old.next.pointee.load(ordering: .relaxed), ordering: .relaxed)
      predecessor.pointee.store(node.bits, ordering: .releasing)
      writer.pointee.retire(.node(old.bits))
      if old.isTombstone {
        // Retired now: the tombstone list skips it from now on.
        old.isRetiredTombstone = true
        writer.pointee.tombstoneCount -= 1
        writer.pointee.count += 1
      }
      return (old, node)
    }
    let node = _makeNode(
      key, value, metadata: metadata, idleExpiresAt: idleExpiresAt, hash: hash, replacing: nil,
      version: version)
    node.next.pointee.store(slot.pointee.load(ordering: .relaxed), ordering: .relaxed)
    slot.pointee.store(node.bits, ordering: .releasing)
    writer.pointee.count += 1
    _growIfNeeded()
    return (nil, node)
  }

  /// A new node for `key`, whose hash is `hash`, with metadata if given, taking `old`'s ring
  /// position if it has one. Write lock held.
  @inlinable @inline(__always)
  func _makeNode(
    _ key: Key, _ value: Value, metadata: _EntryMetadata?, idleExpiresAt: Int64, hash: Int,
    replacing old: _Node<Key, Value>?, version: UInt64
  ) -> _Node<Key, Value> {
    let writer = _writer.underWriteLock
    guard let metadata = metadata ?? _defaultMetadata else {
      return _Node.make(
        key: key, value: value, version: version, older: old?.bits ?? 0,
        memory: _spareValueNode())
    }
    let keptHash = writer.pointee.keepsHashes ? hash : nil
    let memory = _spare(
      tombstone: false,
      size: _Node<Key, Value>.metadataNodeSize(
        flags: _Node<Key, Value>.flags(
          for: metadata, idleExpiresAt: idleExpiresAt, keepsHash: keptHash != nil)))
    if let old, old.hasMetadata {
      let node = _Node.make(
        key: key, value: value, metadata: metadata, idleExpiresAt: idleExpiresAt,
        recency: _Recency.rewritten(old.recency.pointee.load(ordering: .relaxed)),
        slot: old.slot, hash: keptHash, version: version, older: old.bits, memory: memory)
      writer.pointee.ring.place(node.bits, at: node.slot)
      return node
    }
    let position = writer.pointee.ring.take()
    let node = _Node.make(
      key: key, value: value, metadata: metadata, idleExpiresAt: idleExpiresAt, recency: 0,
      slot: position, hash: keptHash, version: version, older: old?.bits ?? 0, memory: memory)
    writer.pointee.ring.place(node.bits, at: position)
    return node
  }

  /// The metadata of a node written without any while nodes carry metadata (so that every
  /// entry has some), or `nil`. Write lock held.
  @inlinable @inline(__always)
  var _defaultMetadata: _EntryMetadata? {
    _writer.underWriteLock.pointee.carriesMetadata
      ? _EntryMetadata(writtenAt: 0, expiresAt: .max, cost: 0) : nil
  }

  /// Stages the removal of `key`; returns the value removed. Write lock held.
  ///
  /// - Complexity: O(1) on average: one hash of `key`.
  @inlinable @inline(__always)
  @discardableResult
  func stageRemove(_ key: Key) -> Value? {
    stageRemoveNode(key)?.value.pointee
  }

  /// Stages the removal of `key`, whose hash is `hash` if the caller knows it (a node with
  /// metadata keeps it); returns the node removed, which stays valid until the write lock is
  /// released. Frees the entry's ring position. Write lock held.
  ///
  /// - Complexity: O(1) on average: at most one hash of `key`.
  @inlinable @inline(__always)
  func stageRemoveNode(_ key: Key, hash knownHash: Int? = nil) -> _Node<Key, Value>? {
    _growStep()
    let hash = knownHash ?? key.hashValue
    let slot = _writeSlot(hash: hash)
    guard let (predecessor, old) = _find(key, in: slot), !old.isTombstone else { return nil }
    _stageRemoval(of: old, linkedFrom: predecessor, hash: hash)
    return old
  }

  /// Stages the removal of the entry at ring position `position` (nodes carry metadata); returns
  /// its node, which stays valid until the write lock is released. Its key is neither hashed
  /// nor compared: the node keeps its hash, and is found in its chain by identity. Write lock
  /// held.
  ///
  /// - Complexity: O(1) on average.
  @inlinable @inline(__always)
  func stageRemoveEntry(at position: Int) -> _Node<Key, Value> {
    _growStep()
    let hash = ringNode(at: position).unsafelyUnwrapped.hash
    let slot = _writeSlot(hash: hash)
    // Read only now: growth may have just copied the node into the new table.
    let old = ringNode(at: position).unsafelyUnwrapped
    guard let link = _link(to: old, in: slot) else {
      preconditionFailure("Internal inconsistency: a ring entry not in its chain")
    }
    _stageRemoval(of: old, linkedFrom: link, hash: hash)
    return old
  }

  /// The link that points to `node` in the chain that starts at `slot`, found by identity (no
  /// key is compared), or `nil` if the node is not in that chain. Write lock held.
  @inlinable @inline(__always)
  func _link(
    to node: _Node<Key, Value>, in slot: UnsafeMutablePointer<Atomic<Int>>
  ) -> UnsafeMutablePointer<Atomic<Int>>? {
    var link = slot
    var bits = link.pointee.load(ordering: .relaxed)
    while bits != node.bits {
      guard let next = _Node<Key, Value>(bits: bits) else { return nil }
      link = next.next
      bits = link.pointee.load(ordering: .relaxed)
    }
    return link
  }

  /// Replaces `old`, a node with a value linked from `predecessor`, with a tombstone. Write
  /// lock held.
  @inlinable @inline(__always)
  func _stageRemoval(
    of old: _Node<Key, Value>, linkedFrom predecessor: UnsafeMutablePointer<Atomic<Int>>,
    hash: Int
  ) {
    let writer = _writer.underWriteLock
    let version = writer.pointee.version &+ 1
    writer.pointee.staged = true
    let tombstone = _Node<Key, Value>.makeTombstone(
      key: old.key.pointee, hash: hash, version: version, older: old.bits,
      memory: _spareTombstone())
    tombstone.next.pointee.store(old.next.pointee.load(ordering: .relaxed), ordering: .relaxed)
    predecessor.pointee.store(tombstone.bits, ordering: .releasing)
    if old.hasMetadata { writer.pointee.ring.vacate(old.slot) }
    writer.pointee.retire(.node(old.bits))
    writer.pointee.tombstones.append((tombstone.bits, writer.pointee.epoch))
    writer.pointee.tombstoneCount += 1
    writer.pointee.count -= 1
  }

  /// Stages the removal of every entry: a new, empty generation. Returns whether there was
  /// any entry. Write lock held.
  ///
  /// - Complexity: O(1); the old generation is freed later, outside the lock.
  @inlinable
  @discardableResult
  func stageRemoveAll() -> Bool {
    let writer = _writer.underWriteLock
    guard writer.pointee.count > 0 else { return false }
    let version = writer.pointee.version &+ 1
    writer.pointee.staged = true
    let old = writer.pointee.root
    let root = _TableHeader.make(
      capacity: Self.minimumCapacity, baseVersion: version, previousGeneration: old)
    writer.pointee.root = root
    writer.pointee.growthCursor = 0
    writer.pointee.count = 0
    writer.pointee.tombstoneCount = 0
    writer.pointee.ring.removeAll()
    _root.store(Int(bitPattern: root), ordering: .releasing)
    writer.pointee.retire(.generation(old))
    return true
  }

  /// Publishes the staged changes, if any, as one atomic step, and returns what no reader can
  /// reach any more, for the caller to ``_free(_:)`` after it releases the write lock.
  ///
  /// - Complexity: O(1) amortised.
  @inlinable
  func publish() -> _TableGarbage? {
    let writer = _writer.underWriteLock
    guard writer.pointee.staged else { return nil }
    writer.pointee.staged = false
    let version = writer.pointee.version &+ 1
    writer.pointee.version = version
    if version & 1 == 0 {
      _evenCount.store(writer.pointee.count, ordering: .releasing)
    } else {
      _oddCount.store(writer.pointee.count, ordering: .releasing)
    }
    _version.store(version, ordering: .releasing)
    guard writer.pointee.currentLimboCount >= writer.pointee.reclaimThreshold else {
      return nil
    }
    return _reclaim()
  }

  /// Advances the epoch if no reader of the previous one is left, and returns what was
  /// retired two epochs ago; first unlinks the tombstones no reader needs any more, a bounded
  /// number per call. Write lock held.
  ///
  /// - Complexity: O(*r*) for the *r* items retired since the last advance, at most
  ///   ``tombstonesPerReclaim`` tombstones, and a scan of the reader stripes.
  @inlinable
  func _reclaim() -> _TableGarbage? {
    let writer = _writer.underWriteLock
    let epoch = writer.pointee.epoch
    // Order the unlinking stores before the counter loads (a store-load pair).
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    // Readers of epoch - 1 (and of any earlier epoch of that parity) have left: nothing
    // retired in epoch - 1 or before is reachable.
    guard !_readers.hasReaders(in: (epoch + 1) & 1) else {
      writer.pointee.reclaimThreshold = Swift.max(64, writer.pointee.currentLimboCount * 2)
      return nil
    }
    writer.pointee.reclaimThreshold = 64
    // Every reader of epoch - 1 or before has left, so no reader needs what a tombstone linked
    // before this epoch hides. They are unlinked a bounded number at a time, and the epoch
    // advances only once none is left: so a listed tombstone is never freed (that takes an
    // advance) before its entry is processed.
    guard _unlinkTombstones(linkedBefore: epoch, limit: Self.tombstonesPerReclaim) else {
      return nil
    }
    var garbage = _TableGarbage()
    if epoch & 1 == 0 {
      swap(&garbage.items, &writer.pointee.limbo.1)
    } else {
      swap(&garbage.items, &writer.pointee.limbo.0)
    }
    // The previous epoch's list becomes the next epoch's: give it a used buffer.
    if garbage.items.count >= 64, let buffer = _limboBuffers.withLock({ $0.popLast() }) {
      if epoch & 1 == 0 { writer.pointee.limbo.1 = buffer } else { writer.pointee.limbo.0 = buffer }
    }
    writer.pointee.epoch = epoch + 1
    _epoch.store(epoch + 1, ordering: .sequentiallyConsistent)
    // The tombstones unlinked by this reclamation (and by the ones since the last advance that
    // stopped at their limit) were unlinked after the check above, so a reader may have
    // reached them that the check could not see: one that loaded the epoch before the last
    // advance and announced itself, in the previous parity, after the check. Retired in the
    // epoch just begun, they are freed only after both parities have been seen empty after
    // their unlinking, as everything retired in an epoch is.
    for bits in writer.pointee.unlinked { writer.pointee.retire(.node(bits)) }
    writer.pointee.unlinked.removeAll(keepingCapacity: true)
    return garbage.items.isEmpty ? nil : garbage
  }

  /// The most tombstones one reclamation unlinks: a bound on the work a write does under the
  /// lock after a removal of many keys.
  @usableFromInline static var tombstonesPerReclaim: Int { 1_024 }

  /// One step of freeing everything retired (what `flush()` does): returns what to free, and
  /// whether it is done (nothing left, or a reader holds the rest). Write lock held; the
  /// caller releases the lock between steps.
  ///
  /// - Complexity: O(*r*) for the *r* items it frees, at most ``tombstonesPerReclaim``
  ///   tombstones.
  @inlinable
  func reclaimStep() -> (garbage: _TableGarbage?, isFinished: Bool) {
    if retainedCount == 0 { return (nil, true) }
    let epoch = _writer.underWriteLock.pointee.epoch
    let garbage = _reclaim()
    if _writer.underWriteLock.pointee.epoch == epoch {
      // Not advanced: a reader holds the previous epoch, or tombstones remain to unlink.
      return (nil, _readers.hasReaders(in: (epoch + 1) & 1))
    }
    return (garbage, retainedCount == 0)
  }

  /// The number of things retired and not freed yet (nodes, tables and tombstones). Write
  /// lock held.
  @inlinable
  var retainedCount: Int {
    let writer = _writer.underWriteLock
    return writer.pointee.limbo.0.count + writer.pointee.limbo.1.count
      + writer.pointee.unlinked.count + writer.pointee.tombstones.count
      - writer.pointee.tombstonesStart
  }

  /// Unlinks up to `limit` of the tombstones linked in an epoch before `epoch`, for the next
  /// advance of the epoch to retire; returns whether none of those is left. Write lock held.
  ///
  /// It retires nothing itself, and moves no bucket (which would retire the nodes it moves):
  /// whatever it makes unreachable must wait for readers of both parities.
  @inlinable
  func _unlinkTombstones(linkedBefore epoch: Int, limit: Int) -> Bool {
    let writer = _writer.underWriteLock
    var index = writer.pointee.tombstonesStart
    let end = index + limit
    while index < writer.pointee.tombstones.count,
      writer.pointee.tombstones[index].epoch < epoch
    {
      guard index < end else {
        writer.pointee.tombstonesStart = index
        return false
      }
      // Safe: a listed tombstone is retired no earlier than the epoch it was linked in, freed
      // only after an advance, and the epoch advances only once every entry linked before it
      // has been processed.
      let tombstone = _Node<Key, Value>(bits: writer.pointee.tombstones[index].node)
        .unsafelyUnwrapped
      index += 1
      // A tombstone replaced by a later write, or moved by growth, was retired then.
      if tombstone.isRetiredTombstone { continue }
      // Unlink it if it is still in its key's chain (found by identity: no key is compared).
      // Otherwise it belongs to a generation that `removeAll()` retired, whose free frees it
      // with the rest of its chain.
      if let link = _link(
        to: tombstone, in: _currentSlot(hash: tombstone.storedHash.unsafelyUnwrapped))
      {
        link.pointee.store(tombstone.next.pointee.load(ordering: .relaxed), ordering: .releasing)
        writer.pointee.tombstoneCount -= 1
        writer.pointee.unlinked.append(tombstone.bits)
      }
    }
    writer.pointee.tombstonesStart = index
    let count = writer.pointee.tombstones.count
    if index == count {
      writer.pointee.tombstones.removeAll(keepingCapacity: true)
      writer.pointee.tombstonesStart = 0
    } else if index > 1_024 && index * 2 > count {
      writer.pointee.tombstones.removeFirst(index)
      writer.pointee.tombstonesStart = 0
    }
    return true
  }

  /// Frees what ``publish()`` returned. Call without holding the write lock: it runs the
  /// `deinit`s of keys and values.
  ///
  /// - Complexity: O(*k*) for the *k* nodes freed; a whole generation retired by
  ///   `removeAll()` is O(its size).
  @inlinable
  func _free(_ garbage: _TableGarbage) {
    // Keep at most about one spare block per 8 entries (and 64 at least, 8 192 at most).
    let limit = Swift.min(8_192, 64 + _writerCountHint / 8)
    var room = limit - _spareCount.load(ordering: .relaxed)
    var nodes = _SpareChain()
    var tombstones = _SpareChain()
    for item in garbage.items {
      switch item {
      case .node(let bits):
        let node = _Node<Key, Value>(bits: bits).unsafelyUnwrapped
        guard room > 0 else {
          node.destroy()
          continue
        }
        room -= 1
        let isTombstone = node.isTombstone
        let size = node.byteCount
        node.destroyContents()
        if isTombstone {
          tombstones.add(node.raw, size: size)
        } else {
          nodes.add(node.raw, size: size)
        }
      case .shell(let table):
        _TableHeader.freeShell(table)
      case .generation(let table):
        _freeGeneration(table)
      }
    }
    nodes.push(onto: _spareNodes, counting: _spareCount)
    tombstones.push(onto: _spareTombstones, counting: _spareCount)
    // Hand the emptied list back for the writer to reuse (a list that outgrew any normal
    // epoch is let go).
    let capacity = garbage.items.capacity
    if capacity >= 64 && capacity <= 65_536 {
      var buffer = garbage.items
      buffer.removeAll(keepingCapacity: true)
      _limboBuffers.withLock { if $0.count < 2 { $0.append(buffer) } }
    }
  }

  /// A spare block of at least `size` bytes for a node (or a tombstone), or `nil` to allocate
  /// one. Write lock held.
  ///
  /// Blocks too small (nodes without metadata, freed after the store started keeping it) are
  /// freed as they are met: each once.
  @inlinable @inline(__always)
  func _spare(tombstone: Bool, size: Int) -> UnsafeMutableRawPointer? {
    let writer = _writer.underWriteLock
    while true {
      var head = tombstone ? writer.pointee.spareTombstones : writer.pointee.spareNodes
      if head == 0 {
        head =
          tombstone
          ? _spareTombstones.exchange(0, ordering: .acquiring)
          : _spareNodes.exchange(0, ordering: .acquiring)
        if head == 0 { return nil }
      }
      // Safe: `head` is the address of a spare block, whose first word links the next one and
      // whose second holds its size.
      let block = UnsafeMutableRawPointer(bitPattern: head).unsafelyUnwrapped
      let next = block.load(as: Int.self)
      if tombstone {
        writer.pointee.spareTombstones = next
      } else {
        writer.pointee.spareNodes = next
      }
      writer.pointee.spareTaken += 1
      if writer.pointee.spareTaken == 32 {
        writer.pointee.spareTaken = 0
        _spareCount.wrappingSubtract(32, ordering: .relaxed)
      }
      if block.load(fromByteOffset: 8, as: Int.self) >= size { return block }
      block.deallocate()
    }
  }

  /// A spare block for a node with a value, sized for metadata if nodes carry it.
  @inlinable @inline(__always)
  func _spareValueNode() -> UnsafeMutableRawPointer? {
    _spare(tombstone: false, size: _Node<Key, Value>.valueNodeSize)
  }

  /// A spare block for a tombstone.
  @inlinable @inline(__always)
  func _spareTombstone() -> UnsafeMutableRawPointer? {
    _spare(tombstone: true, size: _Node<Key, Value>.tombstoneSize)
  }

  @inlinable
  func _freeGeneration(_ table: UnsafeMutablePointer<_TableHeader>) {
    if let next = table.pointee.nextTable { _freeGeneration(next) }
    for index in 0..<table.pointee.capacity {
      var bits = table.pointee.buckets[index].load(ordering: .relaxed)
      if bits == _TableHeader.forwarded { continue }
      while let node = _Node<Key, Value>(bits: bits) {
        bits = node.next.pointee.load(ordering: .relaxed)
        node.destroy()
      }
    }
    _TableHeader.freeShell(table)
  }

  // MARK: Finding and growing

  /// The bucket of the keys whose hash is `hash` in the newest table (during growth, after
  /// moving their old bucket). Write lock held.
  @inlinable @inline(__always)
  func _writeSlot(hash: Int) -> UnsafeMutablePointer<Atomic<Int>> {
    let root = _writer.underWriteLock.pointee.root
    guard let next = root.pointee.nextTable else {
      return root.pointee.buckets + (hash & root.pointee.mask)
    }
    let index = hash & root.pointee.mask
    if root.pointee.buckets[index].load(ordering: .relaxed) != _TableHeader.forwarded {
      _moveBucket(index)
    }
    return next.pointee.buckets + (hash & next.pointee.mask)
  }

  /// The bucket that holds the keys whose hash is `hash` now, without moving any: during
  /// growth, the root's bucket until it is moved, then the new table's. Write lock held.
  @inlinable
  func _currentSlot(hash: Int) -> UnsafeMutablePointer<Atomic<Int>> {
    let root = _writer.underWriteLock.pointee.root
    let slot = root.pointee.buckets + (hash & root.pointee.mask)
    guard let next = root.pointee.nextTable,
      slot.pointee.load(ordering: .relaxed) == _TableHeader.forwarded
    else { return slot }
    return next.pointee.buckets + (hash & next.pointee.mask)
  }

  /// The link that points to `key`'s node, and the node, in the chain that starts at `slot`.
  @inlinable @inline(__always)
  func _find(
    _ key: Key, in slot: UnsafeMutablePointer<Atomic<Int>>
  ) -> (UnsafeMutablePointer<Atomic<Int>>, _Node<Key, Value>)? {
    var link = slot
    var bits = link.pointee.load(ordering: .relaxed)
    while let node = _Node<Key, Value>(bits: bits) {
      if node.key.pointee == key { return (link, node) }
      link = node.next
      bits = link.pointee.load(ordering: .relaxed)
    }
    return nil
  }

  /// Starts growing if the newest table is full. Write lock held.
  @inlinable
  func _growIfNeeded() {
    let writer = _writer.underWriteLock
    let root = writer.pointee.root
    guard root.pointee.nextTable == nil,
      writer.pointee.count + writer.pointee.tombstoneCount > root.pointee.capacity
    else { return }
    _startGrowth()
  }

  @inlinable
  func _startGrowth() {
    let root = _writer.underWriteLock.pointee.root
    root.pointee.nextTable = _TableHeader.make(
      capacity: root.pointee.capacity * 2, baseVersion: root.pointee.baseVersion,
      previousGeneration: root.pointee.previousGeneration)
    _writer.underWriteLock.pointee.growthCursor = 0
  }

  /// During growth, moves the next few buckets; finishes growth after the last. Every write
  /// calls it, so growth ends before the new table fills up. Write lock held.
  @inlinable @inline(__always)
  func _growStep() {
    guard _writer.underWriteLock.pointee.root.pointee.nextTable != nil else { return }
    _moveBuckets(Self.bucketsMovedPerWrite)
  }

  /// Buckets moved by each write during growth: growth from *c* to 2*c* buckets starts at
  /// *c* entries and must end before 2*c*, which leaves at least *c* writes for *c* buckets.
  @usableFromInline static var bucketsMovedPerWrite: Int { 4 }

  @inlinable
  func _moveBuckets(_ limit: Int) {
    let writer = _writer.underWriteLock
    let root = writer.pointee.root
    var moved = 0
    var cursor = writer.pointee.growthCursor
    while moved < limit && cursor < root.pointee.capacity {
      if root.pointee.buckets[cursor].load(ordering: .relaxed) != _TableHeader.forwarded {
        _moveBucket(cursor)
        moved += 1
      }
      cursor += 1
    }
    writer.pointee.growthCursor = cursor
    if cursor == root.pointee.capacity {
      // Every bucket moved: the new table becomes the root. Readers that loaded the old one
      // follow its forwarded buckets until they leave.
      let next = root.pointee.nextTable.unsafelyUnwrapped
      writer.pointee.root = next
      writer.pointee.growthCursor = 0
      _root.store(Int(bitPattern: next), ordering: .releasing)
      writer.pointee.retire(.shell(root))
    }
  }

  /// Copies bucket `index` of the root into the next table and marks it forwarded. Readers in
  /// the old chain keep reading the old nodes, which are retired. Write lock held.
  @inlinable
  func _moveBucket(_ index: Int) {
    let writer = _writer.underWriteLock
    let root = writer.pointee.root
    let next = root.pointee.nextTable.unsafelyUnwrapped
    var bits = root.pointee.buckets[index].load(ordering: .relaxed)
    while let node = _Node<Key, Value>(bits: bits) {
      bits = node.next.pointee.load(ordering: .relaxed)
      let copy = node.copy(memory: _spare(tombstone: node.isTombstone, size: node.byteCount))
      if copy.hasMetadata { writer.pointee.ring.place(copy.bits, at: copy.slot) }
      let hash = copy.storedHash ?? copy.key.pointee.hashValue
      let slot = next.pointee.buckets + (hash & next.pointee.mask)
      copy.next.pointee.store(slot.pointee.load(ordering: .relaxed), ordering: .relaxed)
      slot.pointee.store(copy.bits, ordering: .releasing)
      if node.isTombstone {
        // The copy takes the original's place on the tombstone list, which skips the original.
        node.isRetiredTombstone = true
        writer.pointee.tombstones.append((copy.bits, writer.pointee.epoch))
      }
      writer.pointee.retire(.node(node.bits))
    }
    root.pointee.buckets[index].store(_TableHeader.forwarded, ordering: .releasing)
  }
}

// MARK: - Entry metadata (the caller holds the write lock)

extension _ConcurrentTable {
  /// Whether nodes with a value carry metadata. Write lock held.
  @inlinable
  var carriesMetadata: Bool { _writer.underWriteLock.pointee.carriesMetadata }

  /// Makes new nodes with metadata keep their key's hash from now on (see `_Node.hashFlag`):
  /// evictions then need no hashing. Write lock held.
  @inlinable
  func startKeepingHashes() {
    _writer.underWriteLock.pointee.keepsHashes = true
  }

  /// The version of the write that copied every entry with metadata (0: none). Write lock
  /// held.
  @inlinable
  var metadataCopiesVersion: UInt64 { _writer.underWriteLock.pointee.metadataCopiesVersion }

  /// The version last published: what readers see, and, between writes, the newest state.
  /// Write lock held.
  @inlinable
  var publishedVersion: UInt64 { _writer.underWriteLock.pointee.version }

  /// Makes every node written from now on carry metadata. The entries present keep their
  /// nodes, without any, until they are written again or ``giveMetadataToEveryEntry(_:_:)``
  /// copies them: such an entry has no cost, no deadline and no place in the ring. Write lock
  /// held.
  ///
  /// - Complexity: O(1).
  @inlinable
  func startCarryingMetadata() {
    let writer = _writer.underWriteLock
    guard !writer.pointee.carriesMetadata else { return }
    writer.pointee.carriesMetadata = true
    writer.pointee.everyEntryHasMetadata = writer.pointee.count == 0
  }

  /// Stages a copy with `metadata` of every entry whose node has none (the values unchanged,
  /// so readers see no change once it is published), calling `body` with each copy and the
  /// node it replaces: what an eviction order and a decider, which walk the ring, need first.
  /// Write lock held, nodes carrying metadata; the caller publishes.
  ///
  /// - Complexity: O(*n*), once in the store's life; O(1) after.
  @inlinable
  func giveMetadataToEveryEntry(
    _ metadata: _EntryMetadata,
    _ body: (_ old: _Node<Key, Value>?, _ new: _Node<Key, Value>) -> Void
  ) {
    let writer = _writer.underWriteLock
    guard writer.pointee.carriesMetadata, !writer.pointee.everyEntryHasMetadata else { return }
    writer.pointee.everyEntryHasMetadata = true
    var entries: [(Key, Value)] = []
    // What this write staged so far included: entries it removed stay removed.
    _forEachNode(at: _stagingVersion) { node in
      if !node.hasMetadata { entries.append((node.key.pointee, node.value.pointee)) }
    }
    guard !entries.isEmpty else { return }
    writer.pointee.metadataCopiesVersion = _stagingVersion
    for (key, value) in entries {
      let (old, new) = stageSet(key, value, metadata: metadata)
      body(old, new)
    }
  }

  /// The ring's nodes' bits by position, for a loop that reads many while the ring does not
  /// grow. Write lock held.
  @inlinable @inline(__always)
  var ringNodes: _ChunkedElements<Int> { _writer.underWriteLock.pointee.ring.nodes.fixed }

  /// The number of ring positions, free ones included. Write lock held.
  @inlinable
  var ringCount: Int { _writer.underWriteLock.pointee.ring.count }

  /// The current node at ring position `position`, or `nil` for a free position. Write lock
  /// held; the node stays valid until the lock is released.
  @inlinable @inline(__always)
  func ringNode(at position: Int) -> _Node<Key, Value>? {
    _Node(bits: _writer.underWriteLock.pointee.ring[position])
  }

  /// The number of the ring's free positions (holes, and maybe stale ones past its end).
  /// Write lock held.
  @inlinable @inline(__always)
  var freeRingPositionCount: Int { _writer.underWriteLock.pointee.ring.freePositions.count }

  /// Fills one hole of the ring with its last entry, after dropping the holes at its end, and
  /// returns the positions the entry moved from and to; `nil` when no hole is left. Called a
  /// few times per write, so that the ring shrinks back after many removals without ever
  /// renumbering it all at once. Write lock held.
  ///
  /// - Complexity: O(1) amortised.
  @inlinable @inline(__always)
  func fillRingHole() -> (from: Int, to: Int)? {
    guard let (from, to, bits) = _writer.underWriteLock.pointee.ring.fillHole() else { return nil }
    _Node<Key, Value>(bits: bits).unsafelyUnwrapped.slot = to
    return (from, to)
  }
}

// MARK: - Checking

extension _ConcurrentTable {
  /// Checks the table's invariants (debug builds only): every node sits in the bucket of its
  /// key's hash, each key once, a kept hash its key's, the counts exact, nothing staged.
  /// Write lock held (or no other thread using the table).
  @usableFromInline
  func _checkInvariants() {
    #if DEBUG
      let writer = _writer.underWriteLock
      precondition(!writer.pointee.staged, "Internal inconsistency: changes left staged")
      var keys = Set<Key>()
      var entries = 0
      var tombstones = 0
      var entriesWithoutMetadata = 0
      func visit(_ table: UnsafeMutablePointer<_TableHeader>) {
        for index in 0..<table.pointee.capacity {
          var bits = table.pointee.buckets[index].load(ordering: .relaxed)
          if bits == _TableHeader.forwarded {
            precondition(table.pointee.nextTable != nil, "Internal inconsistency: forwarding")
            continue
          }
          while let node = _Node<Key, Value>(bits: bits) {
            if !node.isTombstone && !node.hasMetadata { entriesWithoutMetadata += 1 }
            let key = node.key.pointee
            precondition(
              key.hashValue & table.pointee.mask == index,
              "Internal inconsistency: a node in the wrong bucket")
            precondition(keys.insert(key).inserted, "Internal inconsistency: a key twice")
            precondition(
              node.storedHash.map { $0 == key.hashValue } ?? true,
              "Internal inconsistency: a node keeps a hash that is not its key's")
            precondition(
              node.version <= writer.pointee.version, "Internal inconsistency: unpublished node")
            if node.isTombstone { tombstones += 1 } else { entries += 1 }
            bits = node.next.pointee.load(ordering: .relaxed)
          }
        }
      }
      visit(writer.pointee.root)
      if let next = writer.pointee.root.pointee.nextTable { visit(next) }
      // The ring: every entry once, at its own position, when nodes carry metadata.
      let ring = writer.pointee.ring.nodes
      for position in ring.indices where ring[position] != 0 {
        let bits = ring[position]
        let node = _Node<Key, Value>(bits: bits).unsafelyUnwrapped
        precondition(
          node.hasMetadata && !node.isTombstone && node.slot == position,
          "Internal inconsistency: a ring position holds a node not at that position")
        precondition(
          _peekNode(node.key.pointee)?.bits == bits,
          "Internal inconsistency: the ring holds a node that is not its key's current one")
      }
      if writer.pointee.carriesMetadata {
        precondition(
          !writer.pointee.everyEntryHasMetadata || entriesWithoutMetadata == 0,
          "Internal inconsistency: an entry without metadata")
        if let broken = writer.pointee.ring._checkInvariants(
          taken: entries - entriesWithoutMetadata)
        {
          preconditionFailure("Internal inconsistency: \(broken)")
        }
      } else {
        precondition(writer.pointee.ring.isEmpty, "Internal inconsistency: a ring without metadata")
      }
      precondition(entries == writer.pointee.count, "Internal inconsistency: count")
      precondition(
        tombstones == writer.pointee.tombstoneCount, "Internal inconsistency: tombstone count")
      precondition(count == entries, "Internal inconsistency: published count")
    #endif
  }
}

extension _ConcurrentTable {
  /// The current node of `key` (a tombstone included), found without moving any bucket, for
  /// checks. Write lock held.
  @usableFromInline
  func _peekNode(_ key: Key) -> _Node<Key, Value>? {
    _find(key, in: _currentSlot(hash: key.hashValue))?.1
  }
}

/// A chain of spare blocks being gathered by a thread that frees garbage.
@usableFromInline
struct _SpareChain {
  @usableFromInline var first: UnsafeMutableRawPointer?
  @usableFromInline var last: UnsafeMutableRawPointer?
  @usableFromInline var count = 0

  @inlinable init() {}

  /// Adds a block of `size` bytes (at least 16), noting its size in its second word.
  @inlinable
  mutating func add(_ block: UnsafeMutableRawPointer, size: Int) {
    block.storeBytes(of: Int(bitPattern: first), as: Int.self)
    block.storeBytes(of: size, toByteOffset: 8, as: Int.self)
    if last == nil { last = block }
    first = block
    count += 1
  }

  /// Pushes the chain onto the shared stack `head`.
  @inlinable
  func push(onto head: borrowing Atomic<Int>, counting spareCount: borrowing Atomic<Int>) {
    guard let first, let last else { return }
    var expected = head.load(ordering: .relaxed)
    while true {
      last.storeBytes(of: expected, as: Int.self)
      let (exchanged, current) = head.compareExchange(
        expected: expected, desired: Int(bitPattern: first), ordering: .releasing)
      if exchanged { break }
      expected = current
    }
    spareCount.wrappingAdd(count, ordering: .relaxed)
  }
}
