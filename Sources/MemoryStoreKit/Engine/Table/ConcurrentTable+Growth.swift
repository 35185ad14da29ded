import Synchronization

// MARK: - Finding and growing (the caller holds the write lock)

extension _ConcurrentTable {

  /// The bucket of the keys whose hash is `hash` in the newest table (during growth, after
  /// moving their old bucket). Write lock held.
  @inlinable @inline(__always)
  func _writeSlot(hash: Int, _ held: borrowing _WriteLockHeld) -> UnsafeMutablePointer<Atomic<Int>>
  {
    let root = _writer.pointer(held).pointee.root
    guard let next = root.pointee.nextTable else {
      return root.pointee.buckets + (hash & root.pointee.mask)
    }
    let index = hash & root.pointee.mask
    if root.pointee.buckets[index].load(ordering: .relaxed) != _TableHeader.forwarded {
      _moveBucket(index, held)
    }
    return next.pointee.buckets + (hash & next.pointee.mask)
  }

  /// The bucket that holds the keys whose hash is `hash` now, without moving any: during
  /// growth, the root's bucket until it is moved, then the new table's. Write lock held.
  @inlinable
  func _currentSlot(hash: Int, _ held: borrowing _WriteLockHeld) -> UnsafeMutablePointer<
    Atomic<Int>
  > {
    let root = _writer.pointer(held).pointee.root
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
  func _growIfNeeded(_ held: borrowing _WriteLockHeld) {
    let writer = _writer.pointer(held)
    let root = writer.pointee.root
    guard root.pointee.nextTable == nil,
      writer.pointee.count + writer.pointee.tombstoneCount > root.pointee.capacity
    else { return }
    _startGrowth(held)
  }

  @inlinable
  func _startGrowth(_ held: borrowing _WriteLockHeld) {
    let root = _writer.pointer(held).pointee.root
    root.pointee.nextTable = _TableHeader.make(
      capacity: root.pointee.capacity * 2, baseVersion: root.pointee.baseVersion,
      previousGeneration: root.pointee.previousGeneration)
    _writer.pointer(held).pointee.growthCursor = 0
  }

  /// During growth, moves the next few buckets; finishes growth after the last. Every write
  /// calls it, so growth ends before the new table fills up. Write lock held.
  @inlinable @inline(__always)
  func _growStep(_ held: borrowing _WriteLockHeld) {
    guard _writer.pointer(held).pointee.root.pointee.nextTable != nil else { return }
    _moveBuckets(Self.bucketsMovedPerWrite, held)
  }

  /// Buckets moved by each write during growth: growth from *c* to 2*c* buckets starts at
  /// *c* entries and must end before 2*c*, which leaves at least *c* writes for *c* buckets.
  @usableFromInline static var bucketsMovedPerWrite: Int { 4 }

  @inlinable
  func _moveBuckets(_ limit: Int, _ held: borrowing _WriteLockHeld) {
    let writer = _writer.pointer(held)
    let root = writer.pointee.root
    var moved = 0
    var cursor = writer.pointee.growthCursor
    while moved < limit && cursor < root.pointee.capacity {
      if root.pointee.buckets[cursor].load(ordering: .relaxed) != _TableHeader.forwarded {
        _moveBucket(cursor, held)
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
  func _moveBucket(_ index: Int, _ held: borrowing _WriteLockHeld) {
    let writer = _writer.pointer(held)
    let root = writer.pointee.root
    let next = root.pointee.nextTable.unsafelyUnwrapped
    var bits = root.pointee.buckets[index].load(ordering: .relaxed)
    while let node = _Node<Key, Value>(bits: bits) {
      bits = node.next.pointee.load(ordering: .relaxed)
      let copy = node.copy(memory: _spare(tombstone: node.isTombstone, size: node.byteCount, held))
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
