/// Expiry: the default time to live, and a min-heap of the deadlines of the entries that have
/// one (what is due, and when the timer must next fire). Guarded by the write lock, as part of
/// ``_Policy``; what it knows of each entry's deadline lives in the entry's node.
@usableFromInline
struct _Expiry: Sendable {
  @usableFromInline var defaultTimeToLive: Duration? {
    didSet { defaultLifetime = defaultTimeToLive?.nanoseconds }
  }
  /// ``defaultTimeToLive`` in nanoseconds, converted once: `Duration` arithmetic costs more
  /// than the rest of a write's bookkeeping.
  @usableFromInline var defaultLifetime: Int64?
  /// How long an entry lives after it was last written or read; `nil`: no idle expiry.
  @usableFromInline var timeToIdle: Duration? {
    didSet { idleLifetime = timeToIdle.map { Swift.max($0.nanoseconds, 0) } }
  }
  /// ``timeToIdle`` in nanoseconds.
  @usableFromInline var idleLifetime: Int64?
  /// A min-heap of the deadlines of the entries that have one, with their ring positions:
  /// exactly one item per such entry. An item's deadline is at or before its entry's (a
  /// rewrite that pushes the deadline back leaves the item alone, so that it costs O(1)); an
  /// item that surfaces early takes its entry's deadline and sinks again.
  /// In chunks, so that growing never copies it all inside one write.
  @usableFromInline var expiries = _ChunkedArray<(deadline: Int64, slot: Int)>()
  /// The index in `expiries` of the item of the entry at each ring position (meaningful only
  /// for entries with a deadline).
  @usableFromInline var heapIndex = _ChunkedArray<Int32>()
  /// The deadline the expiry timer is armed for, if any.
  @usableFromInline var sweepArmedFor: Int64?
  /// The versions of the writes of persistence managers' loads since the store was last
  /// emptied (one per load): an entry whose node has one of them was loaded and not written
  /// since, and a default time to live or a time to idle set later applies to it too.
  @usableFromInline var loadVersions: [UInt64] = []

  @usableFromInline init() {}

  /// The metadata of an entry written at `time` with `cost` and `timeToLive` (`nil`: the
  /// default): its deadline, its idle deadline and, if `keepsWriteTime` (for a decider, the one
  /// reader of it), its write time.
  @inlinable @inline(__always)
  func metadata(
    cost: Int, timeToLive: Duration?, at time: _WriteTime, keepsWriteTime: Bool
  ) -> _EntryMetadata {
    Self.metadata(
      cost: cost, lifetime: timeToLive?.nanoseconds ?? defaultLifetime,
      idleLifetime: idleLifetime, at: time, keepsWriteTime: keepsWriteTime)
  }

  /// The metadata of an entry written at `time` with `cost`, living `lifetime` (`nil`: for
  /// ever) and `idleLifetime` after its last use (`nil`: no idle expiry): its deadlines count
  /// from the time's ``_WriteTime/deadlineBase``.
  @inlinable @inline(__always)
  static func metadata(
    cost: Int, lifetime: Int64?, idleLifetime: Int64?, at time: _WriteTime, keepsWriteTime: Bool
  ) -> _EntryMetadata {
    let base = time.deadlineBase
    return _EntryMetadata(
      writtenAt: keepsWriteTime ? time.now : 0,
      expiresAt: lifetime.map { base.addingSaturating($0) } ?? .max,
      cost: cost, idleExpiresAt: idleLifetime.map { base.addingSaturating($0) } ?? .max)
  }

  /// The idle deadline of an entry written or touched at `now` (`Int64.max`: none, without a
  /// time to idle).
  @inlinable @inline(__always)
  func idleDeadline(now: Int64) -> Int64 {
    guard let idleLifetime else { return .max }
    return now.addingSaturating(idleLifetime)
  }

  /// Whether a rewrite that changes an entry's deadline from `old` to `new` leaves the heap
  /// as it is: both `Int64.max` (no deadline), or a deadline pushed back or kept (the item
  /// stays at or before the entry's deadline).
  @inlinable @inline(__always)
  static func keepsHeap(replacing old: Int64, with new: Int64) -> Bool {
    old <= new && (old == .max || new != .max)
  }

  /// Counts the deadline `deadline` of the entry at ring position `slot`, which replaced one
  /// whose deadline was `old` (`nil`: a new entry).
  ///
  /// - Complexity: O(1), unless the deadline is added, removed or brought forward
  ///   (O(log *n*)).
  @inlinable @inline(__always)
  mutating func track(slot: Int, deadline: Int64, replacing old: Int64?) {
    guard let old, old != .max else {
      if deadline != .max { add(slot: slot, at: deadline) }
      return
    }
    // The item's deadline is at or before the old one: a deadline pushed back (the
    // commonest rewrite, under a default time to live) needs no look at the heap at all.
    if deadline == .max {
      remove(at: Int(heapIndex[slot]))
    } else if deadline < old {
      let index = Int(heapIndex[slot])
      if deadline < expiries[index].deadline {
        expiries[index].deadline = deadline
        siftUp(index)
      }
    }
  }

  /// Forgets the deadline of the entry at ring position `slot`, just removed.
  @inlinable @inline(__always)
  mutating func untrack(slot: Int, deadline: Int64) {
    if deadline != .max { remove(at: Int(heapIndex[slot])) }
  }

  /// Forgets every entry (the store was emptied).
  @inlinable
  mutating func removeAll() {
    expiries.removeAll()
    heapIndex.removeAll()
    loadVersions = []
  }

  /// Records that the entry at ring position `from`, which has a deadline, moved to `to`.
  @inlinable
  mutating func moveEntry(from: Int, to: Int) {
    setHeapIndex(heapIndex[from], at: to)
  }

  /// Records that the heap item at `index` belongs to the entry at ring position `slot`.
  @inlinable
  mutating func setHeapIndex(_ index: Int32, at slot: Int) {
    if heapIndex.count <= slot { heapIndex.append(-1, upTo: slot + 1) }
    heapIndex[slot] = index
    expiries[Int(index)].slot = slot
  }

  /// The earliest deadline of an entry or earlier (see `expiries`), or `Int64.max`.
  @inlinable
  var next: Int64 { expiries.first?.deadline ?? .max }

  /// The entry whose deadline is the earliest, if it is at or before `now`; the caller
  /// removes it (which removes its item). Items that surfaced early sink to their entry's
  /// deadline on the way, at most `limit` of them.
  @inlinable
  mutating func takeExpired<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld, now: Int64,
    limit: Int = 512
  ) -> _Node<Key, Value>? {
    var sunk = 0
    while let top = expiries.first, top.deadline <= now {
      // Safe: every item names the ring position of a live entry with a deadline.
      let node = table.ringNode(at: top.slot, held).unsafelyUnwrapped
      let deadline = node.deadline
      if deadline <= now { return node }
      guard sunk < limit else { return nil }
      sunk += 1
      expiries[0].deadline = deadline
      siftDown(0)
    }
    return nil
  }

  @inlinable
  mutating func add(slot: Int, at deadline: Int64) {
    if heapIndex.count <= slot { heapIndex.append(-1, upTo: slot + 1) }
    expiries.append((deadline, slot))
    heapIndex[slot] = Int32(expiries.count - 1)
    siftUp(expiries.count - 1)
  }

  @inlinable
  mutating func remove(at index: Int) {
    let last = expiries.count - 1
    if index != last {
      let removed = expiries[index].deadline
      move(expiries[last], to: index)
      expiries.removeLast()
      if expiries[index].deadline < removed { siftUp(index) } else { siftDown(index) }
    } else {
      expiries.removeLast()
    }
  }

  @inlinable @inline(__always)
  mutating func move(_ item: (deadline: Int64, slot: Int), to index: Int) {
    expiries[index] = item
    heapIndex[item.slot] = Int32(index)
  }

  @inlinable
  mutating func siftDown(_ start: Int) {
    let item = expiries[start]
    var index = start
    while true {
      let left = 2 * index + 1
      guard left < expiries.count else { break }
      let right = left + 1
      let child =
        right < expiries.count && expiries[right].deadline < expiries[left].deadline ? right : left
      guard expiries[child].deadline < item.deadline else { break }
      move(expiries[child], to: index)
      index = child
    }
    if index != start { move(item, to: index) }
  }

  @inlinable
  mutating func siftUp(_ start: Int) {
    let item = expiries[start]
    var index = start
    while index > 0 {
      let parent = (index - 1) / 2
      guard item.deadline < expiries[parent].deadline else { break }
      move(expiries[parent], to: index)
      index = parent
    }
    if index != start { move(item, to: index) }
  }

  /// The first of its invariants that does not hold in `table`, or `nil`: one item per entry
  /// with a deadline, at the index `heapIndex` names, with a deadline at or before the entry's,
  /// and the heap ordered. Write lock held.
  func _checkInvariants<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> String? {
    var expiring = 0
    for position in 0..<table.ringCount(held) {
      guard let node = table.ringNode(at: position, held), node.deadline != .max else { continue }
      expiring += 1
      let index = position < heapIndex.count ? Int(heapIndex[position]) : -1
      if index < 0 || index >= expiries.count || expiries[index].slot != position
        || expiries[index].deadline > node.deadline
      {
        return "the expiry heap has no item for \(node.key.pointee)"
      }
    }
    if expiring != expiries.count {
      return "\(expiring) entries expire, the heap has \(expiries.count) items"
    }
    for index in expiries.indices.dropFirst()
    where expiries[index].deadline < expiries[(index - 1) / 2].deadline {
      return "the expiry heap is out of order at \(index)"
    }
    return nil
  }
}
