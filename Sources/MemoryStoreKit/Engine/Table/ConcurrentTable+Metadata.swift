import Synchronization

// MARK: - Entry metadata (the caller holds the write lock)

extension _ConcurrentTable {
  /// Whether nodes with a value carry metadata. Write lock held.
  @inlinable
  func carriesMetadata(_ held: borrowing _WriteLockHeld) -> Bool {
    _writer.pointer(held).pointee.carriesMetadata
  }

  /// Makes new nodes with metadata keep their key's hash from now on (see `_Node.hashFlag`):
  /// evictions then need no hashing. Write lock held.
  @inlinable
  func startKeepingHashes(_ held: borrowing _WriteLockHeld) {
    _writer.pointer(held).pointee.keepsHashes = true
  }

  /// The version of the write that copied every entry with metadata (0: none). Write lock
  /// held.
  @inlinable
  func metadataCopiesVersion(_ held: borrowing _WriteLockHeld) -> UInt64 {
    _writer.pointer(held).pointee.metadataCopiesVersion
  }

  /// The version last published: what readers see, and, between writes, the newest state.
  /// Write lock held.
  @inlinable
  func publishedVersion(_ held: borrowing _WriteLockHeld) -> UInt64 {
    _writer.pointer(held).pointee.version
  }

  /// Makes every node written from now on carry metadata. The entries present keep their
  /// nodes, without any, until they are written again or ``giveMetadataToEveryEntry(_:_:_:)``
  /// copies them: such an entry has no cost, no deadline and no place in the ring. Write lock
  /// held.
  ///
  /// - Complexity: O(1).
  @inlinable
  func startCarryingMetadata(_ held: borrowing _WriteLockHeld) {
    let writer = _writer.pointer(held)
    guard !writer.pointee.carriesMetadata else { return }
    writer.pointee.carriesMetadata = true
    writer.pointee.everyEntryHasMetadata = writer.pointee.count == 0
  }

  /// The number of entries whose nodes have no metadata (written before nodes carried it, and
  /// not since). Write lock held; nothing staged.
  ///
  /// - Complexity: O(*n*); for checks.
  func entriesWithoutMetadata(_ held: borrowing _WriteLockHeld) -> Int {
    var count = 0
    _forEachNode(at: publishedVersion(held)) { node in
      if !node.hasMetadata { count += 1 }
    }
    return count
  }

  /// Stages a copy with `metadata` of every entry whose node has none (the values unchanged,
  /// so readers see no change once it is published), calling `body` with each copy and the
  /// node it replaces: what an eviction order and a decider, which walk the ring, need first.
  /// Write lock held, nodes carrying metadata; the caller publishes.
  ///
  /// - Complexity: O(*n*), once in the store's life; O(1) after.
  @inlinable
  func giveMetadataToEveryEntry(
    _ metadata: _EntryMetadata, _ held: borrowing _WriteLockHeld,
    _ body: (_ old: _Node<Key, Value>?, _ new: _Node<Key, Value>) -> Void
  ) {
    let writer = _writer.pointer(held)
    guard writer.pointee.carriesMetadata, !writer.pointee.everyEntryHasMetadata else { return }
    writer.pointee.everyEntryHasMetadata = true
    var entries: [(Key, Value)] = []
    // What this write staged so far included: entries it removed stay removed.
    _forEachNode(at: _stagingVersion(held)) { node in
      if !node.hasMetadata { entries.append((node.key.pointee, node.value.pointee)) }
    }
    guard !entries.isEmpty else { return }
    writer.pointee.metadataCopiesVersion = _stagingVersion(held)
    for (key, value) in entries {
      let (old, new) = stageSet(key, value, metadata: metadata, held)
      body(old, new)
    }
  }

  /// The ring's nodes' bits by position, for a loop that reads many while the ring does not
  /// grow. Write lock held.
  @inlinable @inline(__always)
  func ringNodes(_ held: borrowing _WriteLockHeld) -> _ChunkedElements<Int> {
    _writer.pointer(held).pointee.ring.nodes.fixed
  }

  /// The number of ring positions, free ones included. Write lock held.
  @inlinable
  func ringCount(_ held: borrowing _WriteLockHeld) -> Int {
    _writer.pointer(held).pointee.ring.count
  }

  /// The current node at ring position `position`, or `nil` for a free position. Write lock
  /// held; the node stays valid until the lock is released.
  @inlinable @inline(__always)
  func ringNode(at position: Int, _ held: borrowing _WriteLockHeld) -> _Node<Key, Value>? {
    _Node(bits: _writer.pointer(held).pointee.ring[position])
  }

  /// The number of the ring's free positions (holes, and maybe stale ones past its end).
  /// Write lock held.
  @inlinable @inline(__always)
  func freeRingPositionCount(_ held: borrowing _WriteLockHeld) -> Int {
    _writer.pointer(held).pointee.ring.freePositions.count
  }

  /// Fills one hole of the ring with its last entry, after dropping the holes at its end, and
  /// returns the positions the entry moved from and to; `nil` when no hole is left. Called a
  /// few times per write, so that the ring shrinks back after many removals without ever
  /// renumbering it all at once. Write lock held.
  ///
  /// - Complexity: O(1) amortised.
  @inlinable @inline(__always)
  func fillRingHole(_ held: borrowing _WriteLockHeld) -> (from: Int, to: Int)? {
    guard let (from, to, bits) = _writer.pointer(held).pointee.ring.fillHole() else { return nil }
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
  func _checkInvariants(_ held: borrowing _WriteLockHeld) {
    #if DEBUG
      let writer = _writer.pointer(held)
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
          _peekNode(node.key.pointee, held)?.bits == bits,
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
  func _peekNode(_ key: Key, _ held: borrowing _WriteLockHeld) -> _Node<Key, Value>? {
    _find(key, in: _currentSlot(hash: key.hashValue, held))?.1
  }
}
