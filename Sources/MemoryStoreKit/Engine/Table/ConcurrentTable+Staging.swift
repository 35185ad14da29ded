import Synchronization

// MARK: - Writing (the caller holds the write lock)

extension _ConcurrentTable {
  /// The version staged changes get.
  @inlinable
  func _stagingVersion(_ held: borrowing _WriteLockHeld) -> UInt64 {
    _writer.pointer(held).pointee.version &+ 1
  }

  /// The number of entries including staged changes. Write lock held.
  @inlinable
  func stagedCount(_ held: borrowing _WriteLockHeld) -> Int { _writer.pointer(held).pointee.count }

  /// The value of `key` including staged changes. Write lock held.
  @inlinable
  func stagedValue(forKey key: Key, _ held: borrowing _WriteLockHeld) -> Value? {
    guard let node = stagedNode(forKey: key, held) else { return nil }
    return node.value.pointee
  }

  /// The current node of `key` including staged changes, unless the key is absent. Write lock
  /// held; the node stays valid until the lock is released.
  @inlinable
  func stagedNode(forKey key: Key, _ held: borrowing _WriteLockHeld) -> _Node<Key, Value>? {
    let hash = key.hashValue
    guard let (_, node) = _find(key, in: _writeSlot(hash: hash, held)), !node.isTombstone
    else { return nil }
    return node
  }

  /// Stages `key` → `value`; returns the value it replaces (staged or published). Write lock
  /// held.
  ///
  /// - Complexity: O(1) on average: one hash of `key`.
  @inlinable @inline(__always)
  @discardableResult
  func stageSet(_ key: Key, _ value: Value, _ held: borrowing _WriteLockHeld) -> Value? {
    stageSet(key, value, hash: key.hashValue, held)
  }

  /// ``stageSet(_:_:_:)`` of a key whose `hashValue` is `hash`.
  @inlinable @inline(__always)
  @discardableResult
  func stageSet(_ key: Key, _ value: Value, hash: Int, _ held: borrowing _WriteLockHeld) -> Value? {
    guard let old = stageSet(key, value, metadata: nil, hash: hash, held).old, !old.isTombstone
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
    _ key: Key, _ value: Value, metadata: _EntryMetadata?,
    _ held: borrowing _WriteLockHeld
  ) -> (old: _Node<Key, Value>?, new: _Node<Key, Value>) {
    stageSet(
      key, value, metadata: metadata, hash: key.hashValue, held)
  }

  /// ``stageSet(_:_:metadata:_:)`` of a key whose `hashValue` is `hash`.
  @inlinable @inline(__always)
  func stageSet(
    _ key: Key, _ value: Value, metadata: _EntryMetadata?,
    hash: Int, _ held: borrowing _WriteLockHeld
  ) -> (old: _Node<Key, Value>?, new: _Node<Key, Value>) {
    let writer = _writer.pointer(held)
    _growStep(held)
    let slot = _writeSlot(hash: hash, held)
    let version = writer.pointee.version &+ 1
    writer.pointee.staged = true
    if let (predecessor, old) = _find(key, in: slot) {
      let node = _makeNode(
        key, value, metadata: metadata, hash: hash, replacing: old,
        version: version, held)
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
      key, value, metadata: metadata, hash: hash, replacing: nil,
      version: version, held)
    node.next.pointee.store(slot.pointee.load(ordering: .relaxed), ordering: .relaxed)
    slot.pointee.store(node.bits, ordering: .releasing)
    writer.pointee.count += 1
    _growIfNeeded(held)
    return (nil, node)
  }

  /// A new node for `key`, whose hash is `hash`, with metadata if given, taking `old`'s ring
  /// position if it has one. Write lock held.
  @inlinable @inline(__always)
  func _makeNode(
    _ key: Key, _ value: Value, metadata: _EntryMetadata?, hash: Int,
    replacing old: _Node<Key, Value>?, version: UInt64, _ held: borrowing _WriteLockHeld
  ) -> _Node<Key, Value> {
    let writer = _writer.pointer(held)
    guard let metadata = metadata ?? _defaultMetadata(held) else {
      return _Node.make(
        key: key, value: value, version: version, older: old?.bits ?? 0,
        memory: _spareValueNode(held))
    }
    let keptHash = writer.pointee.keepsHashes ? hash : nil
    let memory = _spare(
      tombstone: false,
      size: _Node<Key, Value>.metadataNodeSize(
        flags: _Node<Key, Value>.flags(
          for: metadata, keepsHash: keptHash != nil)), held)
    if let old, old.hasMetadata {
      let node = _Node.make(
        key: key, value: value, metadata: metadata,
        recency: _Recency.rewritten(old.recency.pointee.load(ordering: .relaxed)),
        slot: old.slot, hash: keptHash, version: version, older: old.bits, memory: memory)
      writer.pointee.ring.place(node.bits, at: node.slot)
      return node
    }
    let position = writer.pointee.ring.take()
    let node = _Node.make(
      key: key, value: value, metadata: metadata, recency: 0,
      slot: position, hash: keptHash, version: version, older: old?.bits ?? 0, memory: memory)
    writer.pointee.ring.place(node.bits, at: position)
    return node
  }

  /// The metadata of a node written without any while nodes carry metadata (so that every
  /// entry has some), or `nil`. Write lock held.
  @inlinable @inline(__always)
  func _defaultMetadata(_ held: borrowing _WriteLockHeld) -> _EntryMetadata? {
    _writer.pointer(held).pointee.carriesMetadata
      ? _EntryMetadata(writtenAt: 0, expiresAt: .max, cost: 0) : nil
  }

  /// Stages the removal of `key`; returns the value removed. Write lock held.
  ///
  /// - Complexity: O(1) on average: one hash of `key`.
  @inlinable @inline(__always)
  @discardableResult
  func stageRemove(_ key: Key, _ held: borrowing _WriteLockHeld) -> Value? {
    stageRemoveNode(key, held)?.value.pointee
  }

  /// Stages the removal of `key`, whose hash is `hash` if the caller knows it (a node with
  /// metadata keeps it); returns the node removed, which stays valid until the write lock is
  /// released. Frees the entry's ring position. Write lock held.
  ///
  /// - Complexity: O(1) on average: at most one hash of `key`.
  @inlinable @inline(__always)
  func stageRemoveNode(_ key: Key, hash knownHash: Int? = nil, _ held: borrowing _WriteLockHeld)
    -> _Node<Key, Value>?
  {
    _growStep(held)
    let hash = knownHash ?? key.hashValue
    let slot = _writeSlot(hash: hash, held)
    guard let (predecessor, old) = _find(key, in: slot), !old.isTombstone else { return nil }
    _stageRemoval(of: old, linkedFrom: predecessor, hash: hash, held)
    return old
  }

  /// Stages the removal of the entry at ring position `position` (nodes carry metadata); returns
  /// its node, which stays valid until the write lock is released. Its key is neither hashed
  /// nor compared: the node keeps its hash, and is found in its chain by identity. Write lock
  /// held.
  ///
  /// - Complexity: O(1) on average.
  @inlinable @inline(__always)
  func stageRemoveEntry(at position: Int, _ held: borrowing _WriteLockHeld) -> _Node<Key, Value> {
    _growStep(held)
    let hash = ringNode(at: position, held).unsafelyUnwrapped.hash
    let slot = _writeSlot(hash: hash, held)
    // Read only now: growth may have just copied the node into the new table.
    let old = ringNode(at: position, held).unsafelyUnwrapped
    guard let link = _link(to: old, in: slot) else {
      preconditionFailure("Internal inconsistency: a ring entry not in its chain")
    }
    _stageRemoval(of: old, linkedFrom: link, hash: hash, held)
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
    hash: Int, _ held: borrowing _WriteLockHeld
  ) {
    let writer = _writer.pointer(held)
    let version = writer.pointee.version &+ 1
    writer.pointee.staged = true
    let tombstone = _Node<Key, Value>.makeTombstone(
      key: old.key.pointee, hash: hash, version: version, older: old.bits,
      memory: _spareTombstone(held))
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
  func stageRemoveAll(_ held: borrowing _WriteLockHeld) -> Bool {
    let writer = _writer.pointer(held)
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
}
