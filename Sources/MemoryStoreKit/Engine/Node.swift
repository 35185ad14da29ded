import Synchronization

/// One version of one entry of a ``_ConcurrentTable``: a heap block laid out by hand, so that a
/// node costs one allocation and no object header.
///
/// Layout (byte offsets):
///
/// | offset | field | mutability |
/// |---|---|---|
/// | 0 | `next`: the following node of the bucket's chain (0: the end) | atomic; the writer relinks it |
/// | 8 | `older`: the node this one superseded (0: none) | immutable once linked |
/// | 16 | `stamp`: `version << 8 \| flags` | immutable once linked |
/// | `keyOffset` | the key | immutable once linked |
/// | `valueOffset` | the value; absent in a tombstone | immutable once linked |
/// | `metadataOffset` | the entry's metadata, in stores with a policy (see ``_EntryMetadata``) | see below |
///
/// The writer initialises every field before it links the node with a releasing store, and
/// readers reach a node only through acquiring loads, so the plain fields need no atomics.
///
/// A node is never modified in place: a write links a new node in its place whose `older` is
/// the node it replaces, so a reader that started before the write was published follows
/// `older` back to the version it must see. A removal links a *tombstone* (a node without a
/// value) in the same way.
///
/// In a store with an eviction policy, limits or expiry, a node holding a value carries the
/// entry's metadata after the value (its stamp has ``metadataFlag``), so that the policy finds
/// it with the entry rather than in a table of its own. Only what differs from the default is
/// stored, so a feature costs memory only for the entries that use it:
///
/// | offset from `metadataOffset` | field | present | mutability |
/// |---|---|---|---|
/// | 0 | `recency`: a 2-bit CLOCK counter and, above it, the second of the last read | always | atomic; readers raise it, the writer lowers it |
/// | 4 | `slot`: the entry's position in the table's ring | always | the writer's only; readers never read it |
/// | 8… | `expiresAt` (absent: never) | ``expiryFlag`` | immutable once linked |
/// | then | `cost` (absent: 0) | ``costFlag`` | immutable once linked |
/// | then | `writtenAt`, nanoseconds since the store's origin (absent: 0) | ``writtenAtFlag`` | immutable once linked |
/// | then | `idleExpiresAt`: when the entry expires unless it is read before (absent: never) | ``idleFlag`` | atomic; readers push it back |
/// | then | `hash`: the key's hash, so that evicting the entry or moving it to a larger table does not hash the key again (absent: hashed when needed) | ``hashFlag`` | immutable once linked |
///
/// The hash is kept from the first limit on, when evictions need it on every write; a store
/// with only a time to live or a decider saves the 8 bytes per entry and hashes the key of an
/// entry it expires or purges.
@usableFromInline
struct _Node<Key: Hashable, Value> {
  @usableFromInline let raw: UnsafeMutableRawPointer

  @inlinable @inline(__always)
  init(_ raw: UnsafeMutableRawPointer) {
    self.raw = raw
  }

  /// The node at `bits`, or `nil` for 0. `bits` must not be a bucket's forwarding mark.
  @inlinable @inline(__always)
  init?(bits: Int) {
    guard let raw = UnsafeMutableRawPointer(bitPattern: bits) else { return nil }
    self.raw = raw
  }

  @inlinable @inline(__always)
  var bits: Int { Int(bitPattern: raw) }

  // MARK: Layout

  @inlinable @inline(__always)
  static var keyOffset: Int { _roundUp(24, toMultipleOf: MemoryLayout<Key>.alignment) }

  @inlinable @inline(__always)
  static var valueOffset: Int {
    _roundUp(keyOffset + MemoryLayout<Key>.size, toMultipleOf: MemoryLayout<Value>.alignment)
  }

  @inlinable @inline(__always)
  static var alignment: Int {
    Swift.max(8, MemoryLayout<Key>.alignment, MemoryLayout<Value>.alignment)
  }

  /// The stamp flag of a tombstone.
  @inlinable @inline(__always)
  static var tombstoneFlag: UInt64 { 1 }

  /// The stamp flag of a node that carries metadata.
  @inlinable @inline(__always)
  static var metadataFlag: UInt64 { 2 }

  /// The stamp flags of the optional metadata fields, in their order in the node.
  @inlinable @inline(__always)
  static var expiryFlag: UInt64 { 4 }
  @inlinable @inline(__always)
  static var costFlag: UInt64 { 8 }
  @inlinable @inline(__always)
  static var writtenAtFlag: UInt64 { 16 }
  @inlinable @inline(__always)
  static var idleFlag: UInt64 { 32 }
  @inlinable @inline(__always)
  static var hashFlag: UInt64 { 64 }

  /// The stamp bits of the optional metadata fields.
  @inlinable @inline(__always)
  static var optionalFields: UInt64 { 0b111_1100 }

  /// Where the metadata of a node that carries it starts.
  @inlinable @inline(__always)
  static var metadataOffset: Int {
    _roundUp(valueOffset + MemoryLayout<Value>.size, toMultipleOf: 8)
  }

  /// The stamp flags of a node carrying `metadata`: which optional fields it stores.
  @inlinable @inline(__always)
  static func flags(for metadata: _EntryMetadata, keepsHash: Bool = true) -> UInt64 {
    metadataFlag | (metadata.expiresAt != .max ? expiryFlag : 0)
      | (metadata.cost != 0 ? costFlag : 0) | (metadata.writtenAt != 0 ? writtenAtFlag : 0)
      | (metadata.idleExpiresAt != .max ? idleFlag : 0) | (keepsHash ? hashFlag : 0)
  }

  /// The size of a node holding a value and metadata with the stamp flags `flags`.
  @inlinable @inline(__always)
  static func metadataNodeSize(flags: UInt64) -> Int {
    metadataOffset + 8 + 8 * (flags & optionalFields).nonzeroBitCount
  }

  // MARK: Making and destroying

  /// The size of a node holding a value.
  @inlinable @inline(__always)
  static var valueNodeSize: Int { Swift.max(valueOffset + MemoryLayout<Value>.size, 24) }

  /// The size of a tombstone.
  @inlinable @inline(__always)
  static var tombstoneSize: Int { tombstoneRetiredOffset + 16 }

  /// A node holding `value`, not linked yet, in `memory` (a spare block of
  /// ``valueNodeSize`` bytes) or in a new allocation.
  @inlinable
  static func make(
    key: Key, value: Value, version: UInt64, older: Int, memory: UnsafeMutableRawPointer? = nil
  ) -> _Node {
    let node = allocate(
      byteCount: valueNodeSize, version: version, flags: 0, older: older, memory: memory)
    node.key.initialize(to: key)
    node.value.initialize(to: value)
    return node
  }

  /// A node holding `value` and `metadata`, not linked yet, in `memory` (a spare block of at
  /// least ``metadataNodeSize(flags:)`` bytes) or in a new allocation.
  @inlinable
  static func make(
    key: Key, value: Value, metadata: _EntryMetadata, recency: UInt32, slot: Int, hash: Int?,
    version: UInt64, older: Int, memory: UnsafeMutableRawPointer? = nil
  ) -> _Node {
    let flags = self.flags(for: metadata, keepsHash: hash != nil)
    let node = allocate(
      byteCount: metadataNodeSize(flags: flags), version: version, flags: flags, older: older,
      memory: memory)
    node.key.initialize(to: key)
    node.value.initialize(to: value)
    let base = node.raw + metadataOffset
    base.bindMemory(to: Atomic<UInt32>.self, capacity: 1).initialize(to: Atomic(recency))
    node.slot = slot
    var field = base + 8
    if flags & expiryFlag != 0 {
      field.storeBytes(of: metadata.expiresAt, as: Int64.self)
      field += 8
    }
    if flags & costFlag != 0 {
      field.storeBytes(of: metadata.cost, as: Int.self)
      field += 8
    }
    if flags & writtenAtFlag != 0 {
      field.storeBytes(of: metadata.writtenAt, as: Int64.self)
      field += 8
    }
    if flags & idleFlag != 0 {
      field.bindMemory(to: Atomic<Int64>.self, capacity: 1).initialize(
        to: Atomic(metadata.idleExpiresAt))
      field += 8
    }
    if let hash { field.storeBytes(of: hash, as: Int.self) }
    return node
  }

  /// A tombstone for `key`, whose hash is `hash`, not linked yet: the record that `key` was
  /// removed at `version`.
  @inlinable
  static func makeTombstone(
    key: Key, hash: Int, version: UInt64, older: Int, memory: UnsafeMutableRawPointer? = nil
  ) -> _Node {
    let node = allocate(
      byteCount: tombstoneSize, version: version, flags: tombstoneFlag, older: older,
      memory: memory)
    node.key.initialize(to: key)
    node.raw.storeBytes(of: 0, toByteOffset: tombstoneRetiredOffset, as: Int.self)
    node.raw.storeBytes(of: hash, toByteOffset: tombstoneRetiredOffset + 8, as: Int.self)
    return node
  }

  /// Where a tombstone keeps its writer-only mark (in place of a value), followed by its
  /// key's hash.
  @inlinable @inline(__always)
  static var tombstoneRetiredOffset: Int {
    _roundUp(keyOffset + MemoryLayout<Key>.size, toMultipleOf: 8)
  }

  /// Whether this tombstone left its chain by being replaced (or moved by growth) and was
  /// retired then, so that the tombstone list must not touch it again. Read and written by
  /// the writer only; readers never read it.
  @inlinable
  var isRetiredTombstone: Bool {
    get { raw.load(fromByteOffset: _Node.tombstoneRetiredOffset, as: Int.self) != 0 }
    nonmutating set {
      raw.storeBytes(of: newValue ? 1 : 0, toByteOffset: _Node.tombstoneRetiredOffset, as: Int.self)
    }
  }

  /// A copy of this node with the same version, value, metadata and history, for another
  /// table.
  @inlinable
  func copy(memory: UnsafeMutableRawPointer?) -> _Node {
    if isTombstone {
      return _Node.makeTombstone(
        key: key.pointee, hash: storedHash.unsafelyUnwrapped, version: version, older: older,
        memory: memory)
    }
    if hasMetadata {
      return _Node.make(
        key: key.pointee, value: value.pointee, metadata: metadata,
        recency: recency.pointee.load(ordering: .relaxed), slot: slot,
        hash: storedHash, version: version, older: older, memory: memory)
    }
    return _Node.make(
      key: key.pointee, value: value.pointee, version: version, older: older, memory: memory)
  }

  @inlinable
  static func allocate(
    byteCount: Int, version: UInt64, flags: UInt64, older: Int, memory: UnsafeMutableRawPointer?
  ) -> _Node {
    let raw = memory ?? UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: alignment)
    raw.bindMemory(to: Atomic<Int>.self, capacity: 1).initialize(to: Atomic(0))
    raw.storeBytes(of: older, toByteOffset: 8, as: Int.self)
    raw.storeBytes(of: version << 8 | flags, toByteOffset: 16, as: UInt64.self)
    return _Node(raw)
  }

  /// Deinitialises the key and value and frees the node. Runs user code (their `deinit`s):
  /// never call it with a lock held.
  @inlinable
  func destroy() {
    destroyContents()
    raw.deallocate()
  }

  /// Deinitialises the key and value, leaving the memory for reuse. Runs user code.
  @inlinable
  func destroyContents() {
    if !isTombstone { value.deinitialize(count: 1) }
    if hasMetadata { recency.deinitialize(count: 1) }
    key.deinitialize(count: 1)
  }

  // MARK: Fields

  /// The link to the next node of the chain.
  @inlinable @inline(__always)
  var next: UnsafeMutablePointer<Atomic<Int>> { raw.assumingMemoryBound(to: Atomic<Int>.self) }

  /// The bits of the node this one superseded, or 0.
  @inlinable @inline(__always)
  var older: Int { raw.load(fromByteOffset: 8, as: Int.self) }

  @inlinable @inline(__always)
  var olderNode: _Node? { _Node(bits: older) }

  @inlinable @inline(__always)
  var stamp: UInt64 { raw.load(fromByteOffset: 16, as: UInt64.self) }

  /// The version of the write that linked this node.
  @inlinable @inline(__always)
  var version: UInt64 { stamp >> 8 }

  @inlinable @inline(__always)
  var isTombstone: Bool { stamp & _Node.tombstoneFlag != 0 }

  /// Whether the node carries metadata (a node with a value, in a store with a policy).
  @inlinable @inline(__always)
  var hasMetadata: Bool { stamp & _Node.metadataFlag != 0 }

  /// The size of the node's block.
  @inlinable
  var byteCount: Int {
    isTombstone
      ? _Node.tombstoneSize
      : hasMetadata ? _Node.metadataNodeSize(flags: stamp) : _Node.valueNodeSize
  }

  /// The node's metadata; only on a node that ``hasMetadata``.
  @inlinable @inline(__always)
  var metadata: _EntryMetadata {
    _EntryMetadata(
      writtenAt: writtenAt, expiresAt: expiresAt, cost: cost, idleExpiresAt: idleExpiresAt)
  }

  /// Where the optional metadata field `flag` is, given the stamp.
  @inlinable @inline(__always)
  func _field(_ flag: UInt64, stamp: UInt64) -> UnsafeMutableRawPointer {
    raw + _Node.metadataOffset + 8
      + 8 * (stamp & (flag &- 1) & _Node.optionalFields).nonzeroBitCount
  }

  /// When the entry expires (`Int64.max`: never); only on a node that ``hasMetadata``.
  @inlinable @inline(__always)
  var expiresAt: Int64 {
    let stamp = self.stamp
    guard stamp & _Node.expiryFlag != 0 else { return .max }
    return _field(_Node.expiryFlag, stamp: stamp).load(as: Int64.self)
  }

  /// The entry's cost; only on a node that ``hasMetadata``.
  @inlinable @inline(__always)
  var cost: Int {
    let stamp = self.stamp
    guard stamp & _Node.costFlag != 0 else { return 0 }
    return _field(_Node.costFlag, stamp: stamp).load(as: Int.self)
  }

  /// When the entry was written, in nanoseconds since the store's origin; only on a node that
  /// ``hasMetadata``.
  @inlinable @inline(__always)
  var writtenAt: Int64 {
    let stamp = self.stamp
    guard stamp & _Node.writtenAtFlag != 0 else { return 0 }
    return _field(_Node.writtenAtFlag, stamp: stamp).load(as: Int64.self)
  }

  /// When the entry expires unless it is read before (`Int64.max`: never); only on a node that
  /// ``hasMetadata``. Readers push it back (see ``renewIdle(until:)``).
  @inlinable @inline(__always)
  var idleExpiresAt: Int64 {
    let stamp = self.stamp
    guard stamp & _Node.idleFlag != 0 else { return .max }
    return _field(_Node.idleFlag, stamp: stamp).assumingMemoryBound(to: Atomic<Int64>.self)
      .pointee.load(ordering: .relaxed)
  }

  /// Whether the entry expires unless it is read (it has an ``idleExpiresAt``).
  @inlinable @inline(__always)
  var expiresWhenIdle: Bool { stamp & _Node.idleFlag != 0 }

  /// Pushes ``idleExpiresAt`` back to `deadline` if that is at least `granule` later: a read
  /// of a node that ``expiresWhenIdle``. Hot entries store once per granule, not per read.
  /// Racing readers may store out of order; the deadline kept is one of theirs, never earlier
  /// than the one before (a reader that would move it back does not store).
  @inlinable @inline(__always)
  func renewIdle(until deadline: Int64, granule: Int64) {
    let field = _field(_Node.idleFlag, stamp: stamp).assumingMemoryBound(to: Atomic<Int64>.self)
    var current = field.pointee.load(ordering: .relaxed)
    while deadline &- current >= granule {
      let (exchanged, original) = field.pointee.weakCompareExchange(
        expected: current, desired: deadline, ordering: .relaxed)
      if exchanged { return }
      current = original
    }
  }

  /// When the entry expires: the earlier of its time to live and its idle deadline
  /// (`Int64.max`: never); only on a node that ``hasMetadata``.
  @inlinable @inline(__always)
  var deadline: Int64 {
    let stamp = self.stamp
    var deadline = Int64.max
    if stamp & _Node.expiryFlag != 0 {
      deadline = _field(_Node.expiryFlag, stamp: stamp).load(as: Int64.self)
    }
    if stamp & _Node.idleFlag != 0 {
      deadline = Swift.min(
        deadline,
        _field(_Node.idleFlag, stamp: stamp).assumingMemoryBound(to: Atomic<Int64>.self).pointee
          .load(ordering: .relaxed))
    }
    return deadline
  }

  /// The entry's recency word (see ``_Recency``); only on a node that ``hasMetadata``.
  @inlinable @inline(__always)
  var recency: UnsafeMutablePointer<Atomic<UInt32>> {
    (raw + _Node.metadataOffset).assumingMemoryBound(to: Atomic<UInt32>.self)
  }

  /// The entry's position in the table's ring; only on a node that ``hasMetadata``. The
  /// writer's only.
  @inlinable @inline(__always)
  var slot: Int {
    get { Int(raw.load(fromByteOffset: _Node.metadataOffset + 4, as: UInt32.self)) }
    nonmutating set {
      raw.storeBytes(
        of: UInt32(truncatingIfNeeded: newValue), toByteOffset: _Node.metadataOffset + 4,
        as: UInt32.self)
    }
  }

  /// The key's hash, kept by tombstones and by nodes with metadata written since the first
  /// limit (see ``hashFlag``); `nil` in other nodes.
  @inlinable @inline(__always)
  var storedHash: Int? {
    let stamp = self.stamp
    if stamp & _Node.tombstoneFlag != 0 {
      return raw.load(fromByteOffset: _Node.tombstoneRetiredOffset + 8, as: Int.self)
    }
    if stamp & _Node.hashFlag != 0 {
      return _field(_Node.hashFlag, stamp: stamp).load(as: Int.self)
    }
    return nil
  }

  /// The key's hash: the one kept, or the key hashed now.
  @inlinable @inline(__always)
  var hash: Int { storedHash ?? key.pointee.hashValue }

  @inlinable @inline(__always)
  var key: UnsafeMutablePointer<Key> {
    (raw + _Node.keyOffset).assumingMemoryBound(to: Key.self)
  }

  /// The value; must not be used on a tombstone.
  @inlinable @inline(__always)
  var value: UnsafeMutablePointer<Value> {
    (raw + _Node.valueOffset).assumingMemoryBound(to: Value.self)
  }

  /// The version of this entry a reader at `version` must see: this node or the first older
  /// one written at or before `version`; `nil` if the key did not exist then. A tombstone is
  /// returned as is (the key was absent).
  @inlinable @inline(__always)
  func resolved(at version: UInt64) -> _Node? {
    var node = self
    while node.version > version {
      guard let older = node.olderNode else { return nil }
      node = older
    }
    return node
  }
}

@inlinable @inline(__always)
func _roundUp(_ value: Int, toMultipleOf alignment: Int) -> Int {
  (value + alignment - 1) & ~(alignment - 1)
}

/// What the policy knows about an entry, kept in its node: times are nanoseconds since the
/// store's origin.
@usableFromInline
struct _EntryMetadata {
  @usableFromInline var writtenAt: Int64
  /// When its time to live ends; `Int64.max`: never.
  @usableFromInline var expiresAt: Int64
  @usableFromInline var cost: Int
  /// When it expires unless it is read before; `Int64.max`: never. A node starts with it,
  /// and reads push it back in the node (see ``_Node/idleExpiresAt``).
  @usableFromInline var idleExpiresAt: Int64

  @inlinable
  init(writtenAt: Int64, expiresAt: Int64, cost: Int, idleExpiresAt: Int64 = .max) {
    self.writtenAt = writtenAt
    self.expiresAt = expiresAt
    self.cost = cost
    self.idleExpiresAt = idleExpiresAt
  }
}

/// The recency word of an entry: a 2-bit CLOCK counter (bits 0–1) and the second of the last
/// read, plus one (bits 2–31; 0: never read while read times were kept).
@usableFromInline
enum _Recency {
  /// The word after a read at `tick` (0 while no read times are kept): the counter raised,
  /// to at most 3.
  @inlinable @inline(__always)
  static func read(_ word: UInt32, tick: UInt32) -> UInt32 {
    let counter = word & 3
    let time = tick == 0 ? word & ~3 : tick << 2
    return time | (counter == 3 ? 3 : counter + 1)
  }

  /// The word a rewrite of the entry starts with: a rewrite is a use, so the counter is
  /// raised, to at most 3; the last read time is kept.
  @inlinable @inline(__always)
  static func rewritten(_ word: UInt32) -> UInt32 {
    word & 3 == 3 ? word : word + 1
  }
}
