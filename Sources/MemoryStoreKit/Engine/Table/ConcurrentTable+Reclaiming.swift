import Synchronization

// MARK: - Publishing and reclaiming (the caller holds the write lock)

extension _ConcurrentTable {
  /// Publishes the staged changes, if any, as one atomic step, and returns what no reader can
  /// reach any more, for the caller to ``_free(_:)`` after it releases the write lock.
  ///
  /// - Complexity: O(1) amortised.
  @inlinable
  func publish(_ held: borrowing _WriteLockHeld) -> _TableGarbage? {
    let writer = _writer.pointer(held)
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
    return _reclaim(held)
  }

  /// Advances the epoch if no reader of the previous one is left, and returns what was
  /// retired two epochs ago; first unlinks the tombstones no reader needs any more, a bounded
  /// number per call. Write lock held.
  ///
  /// - Complexity: O(*r*) for the *r* items retired since the last advance, at most
  ///   ``tombstonesPerReclaim`` tombstones, and a scan of the reader stripes.
  @inlinable
  func _reclaim(_ held: borrowing _WriteLockHeld) -> _TableGarbage? {
    let writer = _writer.pointer(held)
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
    guard _unlinkTombstones(linkedBefore: epoch, limit: Self.tombstonesPerReclaim, held) else {
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
  func reclaimStep(_ held: borrowing _WriteLockHeld) -> (garbage: _TableGarbage?, isFinished: Bool)
  {
    if retainedCount(held) == 0 { return (nil, true) }
    let epoch = _writer.pointer(held).pointee.epoch
    let garbage = _reclaim(held)
    if _writer.pointer(held).pointee.epoch == epoch {
      // Not advanced: a reader holds the previous epoch, or tombstones remain to unlink.
      return (nil, _readers.hasReaders(in: (epoch + 1) & 1))
    }
    return (garbage, retainedCount(held) == 0)
  }

  /// The number of things retired and not freed yet (nodes, tables and tombstones). Write
  /// lock held.
  @inlinable
  func retainedCount(_ held: borrowing _WriteLockHeld) -> Int {
    let writer = _writer.pointer(held)
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
  func _unlinkTombstones(linkedBefore epoch: Int, limit: Int, _ held: borrowing _WriteLockHeld)
    -> Bool
  {
    let writer = _writer.pointer(held)
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
        to: tombstone, in: _currentSlot(hash: tombstone.storedHash.unsafelyUnwrapped, held))
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

  /// Frees what ``publish(_:)`` returned. Call without holding the write lock: it runs the
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
  func _spare(tombstone: Bool, size: Int, _ held: borrowing _WriteLockHeld)
    -> UnsafeMutableRawPointer?
  {
    let writer = _writer.pointer(held)
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
  func _spareValueNode(_ held: borrowing _WriteLockHeld) -> UnsafeMutableRawPointer? {
    _spare(tombstone: false, size: _Node<Key, Value>.valueNodeSize, held)
  }

  /// A spare block for a tombstone.
  @inlinable @inline(__always)
  func _spareTombstone(_ held: borrowing _WriteLockHeld) -> UnsafeMutableRawPointer? {
    _spare(tombstone: true, size: _Node<Key, Value>.tombstoneSize, held)
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
