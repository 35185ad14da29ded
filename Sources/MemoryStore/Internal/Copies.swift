/// The two copies of a store's contents for the left-right protocol, each on its own pair of
/// cache lines so that a writer replacing one copy's storage never disturbs readers of the
/// other.
///
/// Copy `i` is read by readers only while the store's published index is `i` (or while their
/// reader count on `i` keeps the writer out), and written only by the writer holding the write
/// lock while no reader is inside it. ``MemoryStore`` owns the protocol; this type only owns
/// the memory.
@usableFromInline
struct _Copies<Key: Hashable, Value> {
  @usableFromInline static var stride: Int { 128 }

  @usableFromInline let _base: UnsafeMutableRawPointer

  @usableFromInline
  init() {
    precondition(MemoryLayout<[Key: Value]>.stride <= Self.stride)
    _base = UnsafeMutableRawPointer.allocate(
      byteCount: 2 * Self.stride, alignment: Self.stride)
    for copy in 0..<2 {
      (_base + copy * Self.stride).bindMemory(to: [Key: Value].self, capacity: 1)
        .initialize(to: [:])
    }
  }

  /// The address of copy `index` (0 or 1).
  @inlinable @inline(__always)
  func pointer(_ index: Int) -> UnsafeMutablePointer<[Key: Value]> {
    (_base + index &* Self.stride).assumingMemoryBound(to: [Key: Value].self)
  }

  @usableFromInline
  func deallocate() {
    pointer(0).deinitialize(count: 1)
    pointer(1).deinitialize(count: 1)
    _base.deallocate()
  }
}

// Safe: concurrent access to the two copies is serialised by MemoryStore's left-right
// protocol (see `MemoryStore._withReadAccess` and `_withWriteAccess`): a copy is mutated
// only by the single writer holding the write lock, after every reader of that copy has left.
extension _Copies: @unchecked Sendable where Key: Sendable, Value: Sendable {}
