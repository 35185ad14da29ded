import Synchronization

/// The least-recently-used order (``EvictionPolicy/lru``): one list of the entries, oldest to
/// newest by admission, and a second chance for every entry read or rewritten since the order
/// last looked at it, as CLOCK gives: reads take no lock, so they cannot move their entry, and
/// record the use in the entry's recency word instead.
///
/// A victim is sought from the list's oldest end: an entry used since it was last looked at
/// has its use cleared and goes to the newest end; the first one unused is the victim. After
/// ``maximumSteps`` entries moved, the oldest entry goes whether used or not, so one eviction
/// is O(1). With a cost limit, entries of cost 0 are passed over (they free no cost).
@usableFromInline
struct _LRUOrder: _EvictionOrdering {
  /// The list's links, per ring position (the tag is unused: one list).
  @usableFromInline var links = _OrderLinks()
  @usableFromInline var list = _OrderSegment()
  @usableFromInline var isOrdered = false

  @usableFromInline init() {}

  /// The most entries one search for a victim moves to the newest end.
  @inlinable static var maximumSteps: Int { 256 }

  @usableFromInline
  mutating func orderAllEntries<Key, Value>(
    of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {
    isOrdered = true
    for position in 0..<table.ringCount(held) where table.ringNode(at: position, held) != nil {
      link(position)
    }
  }

  @usableFromInline
  mutating func weighCosts<Key, Value>(
    _ weighs: Bool, of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {}

  @usableFromInline
  mutating func admit<Key, Value>(_ node: _Node<Key, Value>, count: Int, limits: _Limits) {
    guard isOrdered else { return }
    link(node.slot)
  }

  @usableFromInline
  mutating func untrack<Key, Value>(_ node: _Node<Key, Value>) {
    guard isOrdered else { return }
    unlink(node.slot)
  }

  @usableFromInline
  mutating func recost(slot: Int, by change: Int) {}

  @usableFromInline
  mutating func moveEntry(from: Int, to: Int) {
    guard isOrdered else { return }
    if to >= links.capacity { links.grow(toHold: to) }
    let (older, newer) = (Int(links.older(from)), Int(links.newer(from)))
    links.set(to, newer: Int32(newer), older: Int32(older), tag: 1)
    links.connect(older, to, in: &list)
    links.connect(to, newer, in: &list)
  }

  @usableFromInline
  mutating func removeAll() {
    links = _OrderLinks()
    list = _OrderSegment()
  }

  @usableFromInline
  mutating func prepareForEvictions(_ entries: Int) {}

  @usableFromInline
  mutating func nextVictim<Key, Value>(
    in table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld,
    protecting protectedSlot: Int, costLimit: Int
  ) -> _Node<Key, Value>? {
    guard list.count > 0 else { return nil }
    var fallback: _Node<Key, Value>?
    var position = list.oldest
    var moved = 0
    var seen = 0
    while position >= 0 && seen < list.count {
      seen += 1
      let next = Int(links.newer(position))
      // Safe: every position in the order holds an entry.
      let node = table.ringNode(at: position, held).unsafelyUnwrapped
      if position != protectedSlot && (costLimit == 0 || node.cost != 0) {
        let word = node.recency.pointee.load(ordering: .relaxed)
        guard word & 3 != 0 && moved < Self.maximumSteps else { return node }
        // Used since last looked at: a second chance, at the newest end.
        node.recency.pointee.store(word & ~3, ordering: .relaxed)
        if fallback == nil { fallback = node }
        unlink(position)
        link(position)
        moved += 1
      }
      position = next
    }
    // Every entry was used (or passed over): the first one given a second chance goes, or,
    // when only the protected entry is left, it.
    if let fallback { return fallback }
    guard protectedSlot >= 0, let node = table.ringNode(at: protectedSlot, held),
      costLimit == 0 || node.cost != 0
    else { return nil }
    return node
  }

  @usableFromInline
  mutating func endEvictions() {}

  @usableFromInline
  mutating func releaseMemory() -> (any Sendable)? { nil }

  @usableFromInline
  func _checkInvariants<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> String? {
    var entries = 0
    for position in 0..<table.ringCount(held) where table.ringNode(at: position, held) != nil {
      entries += 1
    }
    guard isOrdered else { return list.count == 0 ? nil : "an LRU list kept before a limit" }
    var inList = 0
    var previous = -1
    var position = list.oldest
    while position >= 0 {
      guard table.ringNode(at: position, held) != nil else {
        return "the LRU list holds position \(position), which has no entry"
      }
      guard Int(links.older(position)) == previous else {
        return "the LRU list's links do not match at \(position)"
      }
      inList += 1
      guard inList <= entries else { return "the LRU list loops" }
      previous = position
      position = Int(links.newer(position))
    }
    if previous != list.newest { return "the LRU list's newest end is wrong" }
    if inList != list.count { return "the LRU list counts \(list.count), holds \(inList)" }
    if inList != entries { return "the LRU list holds \(inList) of \(entries) entries" }
    return nil
  }

  /// Links the entry at `position` as the newest.
  @inlinable
  mutating func link(_ position: Int) {
    if position >= links.capacity { links.grow(toHold: position) }
    let previous = list.newest
    links.set(position, newer: -1, older: Int32(truncatingIfNeeded: previous), tag: 1)
    links.connect(previous, position, in: &list)
    list.newest = position
    list.count += 1
  }

  /// Takes the entry at `position` out of the list.
  @inlinable
  mutating func unlink(_ position: Int) {
    links.connect(Int(links.older(position)), Int(links.newer(position)), in: &list)
    list.count -= 1
  }
}
