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
///
/// The writer initialises every field before it links the node with a releasing store, and
/// readers reach a node only through acquiring loads, so the plain fields need no atomics.
///
/// A node is never modified in place: a write links a new node in its place whose `older` is
/// the node it replaces, so a reader that started before the write was published follows
/// `older` back to the version it must see. A removal links a *tombstone* (a node without a
/// value) in the same way.
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

  // MARK: Making and destroying

  /// The size of a node holding a value.
  @inlinable @inline(__always)
  static var valueNodeSize: Int { Swift.max(valueOffset + MemoryLayout<Value>.size, 24) }

  /// The size of a tombstone.
  @inlinable @inline(__always)
  static var tombstoneSize: Int { tombstoneRetiredOffset + 8 }

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

  /// A tombstone for `key`, not linked yet: the record that `key` was removed at `version`.
  @inlinable
  static func makeTombstone(
    key: Key, version: UInt64, older: Int, memory: UnsafeMutableRawPointer? = nil
  ) -> _Node {
    let node = allocate(
      byteCount: tombstoneSize, version: version, flags: tombstoneFlag, older: older,
      memory: memory)
    node.key.initialize(to: key)
    node.raw.storeBytes(of: 0, toByteOffset: tombstoneRetiredOffset, as: Int.self)
    return node
  }

  /// Where a tombstone keeps its writer-only mark (in place of a value).
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

  /// A copy of this node with the same version, value and history, for another table.
  @inlinable
  func copy(memory: UnsafeMutableRawPointer?) -> _Node {
    if isTombstone {
      return _Node.makeTombstone(
        key: key.pointee, version: version, older: older, memory: memory)
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
