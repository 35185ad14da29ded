import Synchronization

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Bionic)
  import Bionic
#endif

/// The bookkeeping of a store with an eviction decider, limits or expiry, guarded by the
/// store's write lock. What it knows of each entry lives in the entry's node (see
/// ``_EntryMetadata``); it keeps only totals, the expiry heap and the CLOCK hand, and every
/// write of a store with a policy updates them in the same critical section.
///
/// Eviction order is **CLOCK with a 2-bit reference counter** (generalised CLOCK) over the
/// table's ring of entries: reads raise their entry's counter (to at most 3) without a lock;
/// the hand lowers the counter of each entry it passes and evicts the first whose counter is
/// 0. An entry read often survives up to three sweeps of the hand, so, on skewed workloads,
/// the policy keeps hot keys better than strict LRU, which drops a hot key after a single scan
/// of cold ones. A new key that makes a full store evict starts a twentieth of the ring ahead
/// of the hand, a short trial, unless it was evicted recently (see ``placeOnProbation``).
@usableFromInline
struct _Policy {
  /// The CLOCK hand: the next ring position it looks at.
  @usableFromInline var hand = 0
  @usableFromInline var totalCost = 0
  /// 0: no limit.
  @usableFromInline var countLimit = 0
  @usableFromInline var costLimit = 0
  @usableFromInline var defaultTimeToLive: Duration? {
    didSet { defaultLifetime = defaultTimeToLive?.nanoseconds }
  }
  /// ``defaultTimeToLive`` in nanoseconds, converted once: `Duration` arithmetic costs more
  /// than the rest of a write's bookkeeping.
  @usableFromInline var defaultLifetime: Int64?
  /// A min-heap of the deadlines of the entries that have one, with their ring positions:
  /// exactly one item per such entry. An item's deadline is at or before its entry's (a
  /// rewrite that pushes the deadline back leaves the item alone, so that it costs O(1)); an
  /// item that surfaces early takes its entry's deadline and sinks again.
  @usableFromInline var expiries: [(deadline: Int64, slot: Int)] = []
  /// The index in `expiries` of the item of the entry at each ring position (meaningful only
  /// for entries with a deadline).
  @usableFromInline var heapIndex: [Int32] = []
  /// Purges in progress: the ring is not packed while one walks it.
  @usableFromInline var purgesRunning = 0
  /// The keys the limits evicted most recently (see ``_GhostKeys``).
  @usableFromInline var ghosts = _GhostKeys()
  @usableFromInline var evictions = StoreStatistics.Evictions()
  /// The deadline the expiry timer is armed for, if any.
  @usableFromInline var sweepArmedFor: Int64?
  @usableFromInline var memoryPressure = MemoryPressurePolicy()
  @usableFromInline var evictionInterval: Duration = .zero
  /// When entries started keeping their write time (the first decider was set), in policy
  /// nanoseconds: the write time a decider is given for an entry written before.
  @usableFromInline var writeTimesSince: Int64 = 0
  /// Bumped when the interval changes, so a superseded timer does nothing.
  @usableFromInline var intervalGeneration: UInt64 = 0

  @usableFromInline init() {}

  // MARK: Accounting

  /// The entries with a deadline.
  @inlinable var expiringCount: Int { expiries.count }

  /// Counts `new`, which the write lock holder just staged in place of `old` (`nil`, a
  /// tombstone, or the entry's previous node, at the same ring position).
  ///
  /// - Complexity: O(1), unless the deadline is removed or brought forward (O(log *n*)).
  @inlinable @inline(__always)
  mutating func track<Key, Value>(_ new: _Node<Key, Value>, replacing old: _Node<Key, Value>?) {
    let deadline = new.expiresAt
    if let old, !old.isTombstone, old.hasMetadata {
      totalCost += new.cost - old.cost
      let oldDeadline = old.expiresAt
      if oldDeadline != .max {
        // The item's deadline is at or before the old one: a deadline pushed back (the
        // commonest rewrite, under a default time to live) needs no look at the heap at all.
        if deadline == .max {
          removeExpiry(at: Int(heapIndex[new.slot]))
        } else if deadline < oldDeadline {
          let index = Int(heapIndex[new.slot])
          if deadline < expiries[index].deadline {
            expiries[index].deadline = deadline
            siftUp(index)
          }
        }
        return
      }
    } else {
      totalCost += new.cost
    }
    if deadline != .max { addExpiry(slot: new.slot, at: deadline) }
  }

  /// Uncounts an entry the write lock holder just removed.
  @inlinable @inline(__always)
  mutating func untrack<Key, Value>(_ node: _Node<Key, Value>) {
    totalCost -= node.cost
    if node.expiresAt != .max { removeExpiry(at: Int(heapIndex[node.slot])) }
  }

  /// Forgets every entry (the store was emptied).
  @inlinable
  mutating func removeAll() {
    hand = 0
    totalCost = 0
    expiries = []
    heapIndex = []
  }

  // MARK: Probation

  /// How far ahead of the hand, as a fraction of the ring, a new key is placed when the store
  /// is full: about the share of the cache in which it must be read to survive (S3-FIFO's
  /// small queue). 1/20 measured best on the benchmark's traces.
  @inlinable static var probationDivisor: Int { 20 }

  /// Notes that the limits evicted the key whose hash is `hash`. O(1).
  @inlinable
  mutating func noteEvicted(hash: Int, count: Int) {
    // Two and a half cache-fuls measured best on the benchmark's traces.
    ghosts.ensureCapacity(5 * Swift.max(countLimit, count) / 2)
    ghosts.insert(_GhostKeys.fingerprint(hash))
  }

  /// Places the entry at ring position `from`, just inserted into a full store, where it gets
  /// a short trial: ``probationDivisor``'s share of the
  /// ring ahead of the hand, swapping places with the entry there. Unless its key was evicted
  /// recently: it came back, and keeps its place behind the hand, a whole turn away. O(1).
  ///
  /// Most keys seen once are never seen again; this way they leave after a twentieth of a turn
  /// instead of a whole one, while the keys that return within 2.5 cache-fuls of evictions
  /// are kept as long as any. With the ring's order, this makes the CLOCK as good as S3-FIFO
  /// and W-TinyLFU on skewed traces while keeping its resistance to loops. Not while a purge
  /// walks the ring (positions must stay put).
  @inlinable
  mutating func placeOnProbation<Key, Value>(
    at from: Int, in table: _ConcurrentTable<Key, Value>
  ) {
    let count = table.ringCount
    guard purgesRunning == 0, count > Self.probationDivisor,
      let node = table.ringNode(at: from),
      !ghosts.contains(_GhostKeys.fingerprint(node.storedHash.unsafelyUnwrapped))
    else { return }
    var target = hand + count / Self.probationDivisor
    if target >= count { target -= count }
    guard target != from, let other = table.ringNode(at: target) else { return }
    table.swapRingPositions(from, target)
    // The expiry heap names entries by ring position: it follows them.
    let movedIndex = node.expiresAt != .max ? heapIndex[from] : -1
    let otherIndex = other.expiresAt != .max ? heapIndex[target] : -1
    if movedIndex >= 0 { setHeapIndex(movedIndex, at: target) }
    if otherIndex >= 0 { setHeapIndex(otherIndex, at: from) }
  }

  /// Records that the heap item at `index` belongs to the entry at ring position `slot`.
  @inlinable
  mutating func setHeapIndex(_ index: Int32, at slot: Int) {
    if heapIndex.count <= slot {
      heapIndex.append(contentsOf: repeatElement(-1, count: slot + 1 - heapIndex.count))
    }
    heapIndex[slot] = index
    expiries[Int(index)].slot = slot
  }

  /// Fills up to four holes of the table's ring with its last entries, unless a purge walks
  /// it (positions must then stay put); keeps the hand, the expiry heap's positions and
  /// `followed` (a ring position, or -1) in step. O(1).
  @inlinable @inline(__always)
  mutating func fillRingHoles<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, following followed: inout Int
  ) {
    guard purgesRunning == 0, table.hasFreeRingPositions else { return }
    for _ in 0..<4 {
      guard let (from, to) = table.fillRingHole() else { return }
      if hand == from { hand = to }
      if followed == from { followed = to }
      guard table.ringNode(at: to).unsafelyUnwrapped.expiresAt != .max else { continue }
      setHeapIndex(heapIndex[from], at: to)
    }
  }

  // MARK: Expiry

  /// The earliest deadline of an entry or earlier (see `expiries`), or `Int64.max`.
  @inlinable
  var nextExpiry: Int64 { expiries.first?.deadline ?? .max }

  /// The entry whose deadline is the earliest, if it is at or before `now`; the caller
  /// removes it (which removes its item). Items that surfaced early sink to their entry's
  /// deadline on the way, at most `limit` of them.
  @inlinable
  mutating func takeExpired<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, now: Int64, limit: Int = 512
  ) -> _Node<Key, Value>? {
    var sunk = 0
    while let top = expiries.first, top.deadline <= now {
      // Safe: every item names the ring position of a live entry with a deadline.
      let node = table.ringNode(at: top.slot).unsafelyUnwrapped
      let deadline = node.expiresAt
      if deadline <= now { return node }
      guard sunk < limit else { return nil }
      sunk += 1
      expiries[0].deadline = deadline
      siftDown(0)
    }
    return nil
  }

  @inlinable
  mutating func addExpiry(slot: Int, at deadline: Int64) {
    if heapIndex.count <= slot {
      heapIndex.append(contentsOf: repeatElement(-1, count: slot + 1 - heapIndex.count))
    }
    expiries.append((deadline, slot))
    heapIndex[slot] = Int32(expiries.count - 1)
    siftUp(expiries.count - 1)
  }

  @inlinable
  mutating func removeExpiry(at index: Int) {
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

  // MARK: Eviction order

  /// Whether a store of `count` entries is above `fraction` of its limits.
  @inlinable
  func isOverLimits(count: Int, fraction: Double = 1) -> EvictionReason? {
    if countLimit > 0 && Double(count) > Double(countLimit) * fraction {
      return .countLimit
    }
    if costLimit > 0 && Double(totalCost) > Double(costLimit) * fraction { return .costLimit }
    return nil
  }

  /// The most entries the hand passes to find one victim: a bound on the work of one write,
  /// whatever the counters (a full table of counters at 3 would otherwise take three turns).
  @inlinable static var maximumHandSteps: Int { 256 }

  /// The next entry the clock hand evicts, skipping the entry `protected` (the one being
  /// written, named by its ring position, -1 for none) unless nothing else is left; the caller
  /// removes it.
  ///
  /// The hand lowers each counter it passes and stops at the first entry whose counter is 0.
  /// If it passes ``maximumHandSteps`` entries without finding one, it evicts the entry with
  /// the lowest counter among them (the first such), so one eviction is O(1) at worst.
  ///
  /// With `costOnly` (the store is over its cost limit, not its count limit), entries of cost 0
  /// are passed over without being counted or aged: they free no cost, so they are never
  /// evicted for it. Finding a costed entry then takes O(*n*) at worst, when few entries
  /// have a cost.
  @inlinable
  mutating func nextVictim<Key, Value>(
    in table: _ConcurrentTable<Key, Value>, protecting protected: Int, costOnly: Bool = false
  ) -> _Node<Key, Value>? {
    let count = table.stagedCount
    guard count > 0 else { return nil }
    var fallback: (node: _Node<Key, Value>, counter: UInt32)?
    var steps = 0
    var skipped = 0
    let ringCount = table.ringCount
    // Free positions (and, with `costOnly`, entries of cost 0) are skipped without counting;
    // at most the whole ring is, so the loop ends.
    while steps < Self.maximumHandSteps && skipped <= ringCount {
      if hand >= ringCount { hand = 0 }
      let position = hand
      hand += 1
      guard let node = table.ringNode(at: position), !costOnly || node.cost != 0 else {
        skipped += 1
        continue
      }
      guard position != protected else {
        if count == 1 { return node }
        continue
      }
      steps += 1
      let word = node.recency.pointee.load(ordering: .relaxed)
      let counter = word & 3
      if counter == 0 { return node }
      node.recency.pointee.store(word - 1, ordering: .relaxed)
      if fallback.map({ counter < $0.counter }) ?? true { fallback = (node, counter) }
    }
    return fallback?.node
  }
}

extension _Policy: Sendable {}

/// Fingerprints of the keys the limits evicted most recently: the last `capacity` of them,
/// first in, first out, with a hash set of 32-bit fingerprints (open addressing, half full at
/// most) to look them up. A key evicted and then written again while still remembered was
/// evicted too early: the policy keeps it longer (S3-FIFO's ghost queue). Two fingerprints
/// may collide (a chance of about one in 2³¹ per pair); the cost is one key kept longer.
///
/// Memory: 12 bytes per fingerprint of capacity, allocated at the first eviction. The set is
/// allocated zeroed by the system (`calloc`), so that making room costs no write to all of
/// it under the write lock: its pages are touched one at a time, by the insertions that reach
/// them. The memory belongs to a ``_GhostStorage``; the record keeps its addresses, so that
/// using it costs no reference counting and no exclusivity check.
@usableFromInline
struct _GhostKeys: @unchecked Sendable {
  // Safe: a store's record lives in its `_Policy`, which only the write lock holder reads or
  // writes; the one copy taken out of it (by `handleMemoryPressure`, to free the memory after
  // the lock is released) is only released, never used.

  /// The remembered fingerprints in the order they came, oldest at `head` once full.
  @usableFromInline var queue: UnsafeMutablePointer<UInt32>?
  @usableFromInline var queued = 0
  @usableFromInline var head = 0
  @usableFromInline private(set) var capacity = 0
  /// Open addressing, linear probing; 0 is an empty slot. A fingerprint's home is its
  /// fraction of `slotCount` (fingerprints are uniform), so the size need not be a power of
  /// two: twice `capacity`. A fingerprint evicted twice is in it twice.
  @usableFromInline var slots: UnsafeMutablePointer<UInt32>?
  /// The size of `slots`.
  @inlinable var slotCount: Int { 2 * capacity }
  /// Owns `queue` and `slots`.
  @usableFromInline var storage: _GhostStorage?

  @inlinable init() {}

  /// A key's fingerprint: never 0.
  @inlinable
  static func fingerprint(_ hash: Int) -> UInt32 {
    UInt32(truncatingIfNeeded: hash ^ (hash >> 32)) | 1
  }

  /// The slot where the probe for `fingerprint` starts.
  @inlinable @inline(__always)
  func home(_ fingerprint: UInt32) -> Int {
    Int(truncatingIfNeeded: (UInt64(fingerprint) &* UInt64(slotCount)) >> 32)
  }

  /// The slot after `index`, round the end of the set.
  @inlinable @inline(__always)
  func following(_ index: Int) -> Int {
    index + 1 == slotCount ? 0 : index + 1
  }

  /// The number of occupied slots (for tests). O(capacity).
  var occupiedCount: Int {
    guard let slots else { return 0 }
    return (0..<slotCount).reduce(0) { $0 + (slots[$1] != 0 ? 1 : 0) }
  }

  /// Makes room for `wanted` fingerprints, forgetting those remembered if it must grow (at
  /// least twofold, so that a store limited only by cost, whose count varies, rarely
  /// forgets). O(1) apart from the allocation, whose pages the system zeroes on first touch.
  @inlinable
  mutating func ensureCapacity(_ wanted: Int) {
    guard capacity < wanted else { return }
    capacity = capacity == 0 ? Swift.max(wanted, 16) : Swift.max(wanted, 2 * capacity)
    let storage = _GhostStorage(capacity: capacity, slotCount: slotCount)
    self.storage = storage
    queue = storage.queue
    slots = storage.slots
    queued = 0
    head = 0
  }

  @inlinable
  func contains(_ fingerprint: UInt32) -> Bool {
    guard let slots else { return false }
    var index = home(fingerprint)
    while true {
      let found = slots[index]
      if found == fingerprint { return true }
      if found == 0 { return false }
      index = following(index)
    }
  }

  /// Remembers `fingerprint`, forgetting the oldest if full; room must have been made. O(1)
  /// expected.
  @inlinable
  mutating func insert(_ fingerprint: UInt32) {
    guard let queue, let slots else { return }
    if queued < capacity {
      queue[queued] = fingerprint
      queued += 1
    } else {
      remove(queue[head])
      queue[head] = fingerprint
      head = head + 1 == capacity ? 0 : head + 1
    }
    var index = home(fingerprint)
    while slots[index] != 0 { index = following(index) }
    slots[index] = fingerprint
  }

  /// Removes one occurrence of `fingerprint` from the set, shifting the entries after it
  /// back so that every probe sequence stays unbroken.
  @inlinable
  mutating func remove(_ fingerprint: UInt32) {
    guard let slots else { return }
    var hole = home(fingerprint)
    while slots[hole] != fingerprint {
      if slots[hole] == 0 { return }
      hole = following(hole)
    }
    var index = hole
    while true {
      index = following(index)
      let moved = slots[index]
      if moved == 0 { break }
      let home = home(moved)
      // `moved` may fill the hole unless its home lies cyclically in (hole, index].
      let staysPut = hole <= index ? (hole < home && home <= index) : (hole < home || home <= index)
      if !staysPut {
        slots[hole] = moved
        hole = index
      }
    }
    slots[hole] = 0
  }
}

/// The memory of a ``_GhostKeys``, freed with the last copy of the record.
@usableFromInline
final class _GhostStorage {
  @usableFromInline let queue: UnsafeMutablePointer<UInt32>
  @usableFromInline let slots: UnsafeMutablePointer<UInt32>

  @usableFromInline
  init(capacity: Int, slotCount: Int) {
    guard let queue = malloc(capacity * 4), let slots = calloc(slotCount, 4) else {
      fatalError("out of memory for \(capacity) evicted keys")
    }
    self.queue = queue.bindMemory(to: UInt32.self, capacity: capacity)
    self.slots = slots.bindMemory(to: UInt32.self, capacity: slotCount)
  }

  deinit {
    free(queue)
    free(slots)
  }
}
