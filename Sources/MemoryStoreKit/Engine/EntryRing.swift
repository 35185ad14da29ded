/// The current node of every entry with metadata, by position (the node's `slot`): how the
/// policy's components (the eviction order, the expiry heap, the limits) and a purge reach an
/// entry without hashing its key.
///
/// The table owns it, because the table is what replaces, copies and removes nodes: it places
/// each new node at its entry's position and vacates the position of an entry it removes. The
/// components only read it, by position. Holes are filled a few per write, so that the ring
/// shrinks back after many removals without ever renumbering it all at once. Guarded by the
/// write lock, like the rest of the table's writer state.
@usableFromInline
struct _EntryRing {
  /// The node bits at each position; 0 at a free position. In chunks, so that growing never
  /// copies it all inside one write.
  @usableFromInline var nodes = _ChunkedArray<Int>()
  /// Free positions: every hole once, and maybe positions at or past the end (the ring was
  /// shortened since), which are skipped when taken.
  @usableFromInline var freePositions = _ChunkedArray<Int>()

  @inlinable
  init() {}

  /// The number of positions, free ones included.
  @inlinable
  var count: Int { nodes.count }

  /// Whether no position was ever taken since the ring was last emptied.
  @inlinable
  var isEmpty: Bool { nodes.isEmpty }

  /// The node bits at `position`, 0 if it is free.
  @inlinable @inline(__always)
  subscript(position: Int) -> Int { nodes[position] }

  /// A free position for a new entry: a hole, or a new position at the end.
  ///
  /// - Complexity: O(1) amortised.
  @inlinable @inline(__always)
  mutating func take() -> Int {
    while let free = freePositions.popLast() {
      if free < nodes.count { return free }
    }
    nodes.append(0)
    return nodes.count - 1
  }

  /// Makes `bits` the node at `position`, a position taken by its entry.
  @inlinable @inline(__always)
  mutating func place(_ bits: Int, at position: Int) {
    nodes[position] = bits
  }

  /// Frees `position`, whose entry was removed.
  @inlinable @inline(__always)
  mutating func vacate(_ position: Int) {
    nodes[position] = 0
    freePositions.append(position)
  }

  /// Frees every position.
  @inlinable
  mutating func removeAll() {
    nodes.removeAll()
    freePositions.removeAll()
  }

  /// Moves the last entry into one hole, after dropping the holes at the end, and returns the
  /// positions it moved from and to, and its node bits (whose `slot` the caller updates);
  /// `nil` when no hole is left.
  ///
  /// - Complexity: O(1) amortised.
  @inlinable @inline(__always)
  mutating func fillHole() -> (from: Int, to: Int, bits: Int)? {
    while true {
      // Trailing holes go first; their entries in the free list become stale.
      while nodes.last == 0 { nodes.removeLast() }
      guard let free = freePositions.popLast() else { return nil }
      let last = nodes.count - 1
      guard free < last else { continue }
      let bits = nodes.removeLast()
      nodes[free] = bits
      return (last, free, bits)
    }
  }

  /// The first of its invariants that does not hold, or `nil`: every free position listed
  /// once is empty, and the positions taken and free add up to the ring.
  ///
  /// - Parameter taken: The number of entries that should hold a position.
  func _checkInvariants(taken: Int) -> String? {
    let holes = Set(freePositions.indices.map { freePositions[$0] }.filter { $0 < nodes.count })
    if !holes.allSatisfy({ nodes[$0] == 0 }) { return "a free ring position holds a node" }
    let occupied = nodes.indices.reduce(0) { $0 + (nodes[$1] != 0 ? 1 : 0) }
    if occupied + holes.count != nodes.count { return "a ring hole is not listed as free" }
    if occupied != taken { return "the ring holds \(occupied) entries, not \(taken)" }
    return nil
  }
}
