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
/// ``_EntryMetadata``); it keeps only totals, the expiry heap, the eviction order and its
/// hand, and every write of a store with a policy updates them in the same critical section.
///
/// Eviction order is **SIEVE with a 2-bit reference counter**: entries are kept in the order
/// they came (a list threaded through the table's ring positions, oldest to newest), reads
/// raise their entry's counter (to at most 3) without a lock, and the hand walks from the
/// oldest entry towards the newest, lowering the counter of each entry it passes and evicting
/// the first whose counter is 0; past the newest it starts again from the oldest. Entries it
/// keeps stay where they are, so a new key, which starts at the newest end, is reached within
/// one pass of the hand: a key used once leaves soon, while an entry read often survives up
/// to three passes. Two records refine where a new key starts (see ``admit(_:count:)``): a key the
/// limits evicted recently came back too soon, and starts just behind the hand (a whole pass
/// away); and when most new keys are keys evicted long ago (a loop over more keys than the
/// store holds), new keys start at the hand, so that one position churns and the rest of the
/// store stays put.
@usableFromInline
struct _Policy {
  /// The hand: the ring position of the entry it looks at next, or -1 for the oldest.
  @usableFromInline var hand = -1
  /// The eviction order, per ring position: the next newer and the next older entry (-1:
  /// none). Every entry is in it (but a new one waiting in `pendingAtHand`).
  @usableFromInline var links = _OrderLinks()
  @usableFromInline var newest = -1
  @usableFromInline var oldest = -1
  /// A new entry to place at the hand once its write's evictions are done, or -1.
  @usableFromInline var pendingAtHand = -1
  /// Whether entries are kept in the eviction order: from the first limit on. A store with
  /// only a time to live or a decider never evicts for a limit, and pays nothing for it.
  @usableFromInline var isOrdered = false
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
  /// The keys the limits evicted most recently (see ``_GhostKeys``): the last cache-ful.
  @usableFromInline var ghosts = _GhostKeys()
  /// A sample of the keys the limits evicted (one in 16, by hash), over the last 16
  /// cache-fuls of evictions: how a loop over more keys than the store holds is recognised.
  @usableFromInline var sampledEvictions = _GhostKeys()
  /// How often, lately, a new key of the sample was in `sampledEvictions`, in 65 536ths
  /// (an exponential moving average over 128 such keys).
  @usableFromInline var returnScore = 0
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

  /// Counts `new`, which the write lock holder just staged in place of `old` (`nil`, a
  /// tombstone, or the entry's previous node, at the same ring position), in a store now of
  /// `count` entries; a new entry is placed in the eviction order (see ``admit(_:count:)``).
  ///
  /// - Complexity: O(1), unless the deadline is removed or brought forward (O(log *n*)).
  @inlinable @inline(__always)
  mutating func track<Key, Value>(
    _ new: _Node<Key, Value>, replacing old: _Node<Key, Value>?, count: Int
  ) {
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
      admit(new, count: count)
    }
    if deadline != .max { addExpiry(slot: new.slot, at: deadline) }
  }

  /// Uncounts an entry the write lock holder just removed.
  @inlinable @inline(__always)
  mutating func untrack<Key, Value>(_ node: _Node<Key, Value>) {
    totalCost -= node.cost
    if pendingAtHand == node.slot {
      pendingAtHand = -1
    } else if isOrdered {
      unlink(node.slot)
    }
    if node.expiresAt != .max { removeExpiry(at: Int(heapIndex[node.slot])) }
  }

  /// Forgets every entry (the store was emptied).
  @inlinable
  mutating func removeAll() {
    hand = -1
    links = _OrderLinks()
    newest = -1
    oldest = -1
    pendingAtHand = -1
    totalCost = 0
    expiries = []
    heapIndex = []
  }

  // MARK: Eviction order

  /// A cache-ful, in entries, for a store of `count` entries: what the records of evicted
  /// keys measure their memory in.
  @inlinable @inline(__always)
  func cacheful(count: Int) -> Int { Swift.max(countLimit, count) }

  /// Notes that the limits evicted the key whose hash is `hash` from a store now of `count`
  /// entries. O(1).
  @inlinable
  mutating func noteEvicted(hash: Int, count: Int) {
    // Room for a quarter more than a cache-ful: a store limited by cost varies in count.
    let room = cacheful(count: count) * 5 / 4
    ghosts.ensureCapacity(room)
    ghosts.insert(_GhostKeys.fingerprint(hash))
    if Self.isSampled(hash) {
      // Room for all of them, nearly: a loop is recognised only if most come back in time.
      sampledEvictions.ensureCapacity(
        Swift.max(16, room), slotsPerFourFingerprints: 12)
      sampledEvictions.insert(_GhostKeys.fingerprint(hash))
    }
  }

  /// Whether the key whose hash is `hash` is in the sample that recognises loops.
  @inlinable @inline(__always)
  static func isSampled(_ hash: Int) -> Bool { (hash >> 40) & 15 == 0 }

  /// `returnScore` above which new keys start at the hand: 0.9.
  @inlinable static var loopThreshold: Int { 58_982 }

  /// Places `node`, an entry just inserted, in the eviction order, if entries are kept in it.
  /// O(1).
  ///
  /// In a store without limits (any more), or for a key not seen lately, at the newest end. A
  /// key the limits evicted within the last cache-ful of evictions came back too soon: just
  /// behind the hand, a whole pass away. While most new keys of the sample were evicted within the
  /// last 16 cache-fuls (a loop over more keys than the store holds, which any order that
  /// keeps the newest would miss entirely), new keys start at the hand instead, placed there
  /// once the write's evictions are done (see ``placePendingEntry()``): the next eviction
  /// takes the newest key unless it was read, and the rest of the store stays.
  @inlinable @inline(__always)
  mutating func admit<Key, Value>(_ node: _Node<Key, Value>, count: Int) {
    guard isOrdered else { return }
    let position = node.slot
    ensureOrderCapacity(position)
    guard countLimit | costLimit != 0 else { return linkNewest(position) }
    // Safe: a node with metadata keeps its hash.
    let hash = node.storedHash.unsafelyUnwrapped
    // The store's entries before this one.
    let window = cacheful(count: count - 1)
    if Self.isSampled(hash) {
      let returned = sampledEvictions.contains(
        _GhostKeys.fingerprint(hash), within: window)
      returnScore += ((returned ? 65_536 : 0) - returnScore) >> 7
    }
    if returnScore > Self.loopThreshold && hand >= 0 {
      placePendingEntry()
      pendingAtHand = position
      return
    }
    if hand >= 0 && ghosts.contains(_GhostKeys.fingerprint(hash), within: window) {
      link(position, olderThan: hand)
      return
    }
    linkNewest(position)
  }

  /// Places the entry waiting to start at the hand, if any: the hand looks at it next, then
  /// goes on as it would have. O(1).
  @inlinable @inline(__always)
  mutating func placePendingEntry() {
    let position = pendingAtHand
    guard position >= 0 else { return }
    pendingAtHand = -1
    guard hand >= 0 else { return linkNewest(position) }
    link(position, olderThan: hand)
    hand = position
  }

  /// Makes room for ring position `position` in the order's links.
  @inlinable @inline(__always)
  mutating func ensureOrderCapacity(_ position: Int) {
    if position >= links.capacity { links.grow(toHold: position) }
  }

  /// Makes the entry at `newer` follow the one at `older` in the order; -1 for either end
  /// (`newer` becomes the oldest, or `older` the newest).
  @inlinable @inline(__always)
  mutating func connect(_ older: Int, _ newer: Int) {
    if older >= 0 {
      links.setNewer(older, Int32(truncatingIfNeeded: newer))
    } else {
      oldest = newer
    }
    if newer >= 0 {
      links.setOlder(newer, Int32(truncatingIfNeeded: older))
    } else {
      newest = older
    }
  }

  /// Links the entry at `position` as the newest.
  @inlinable @inline(__always)
  mutating func linkNewest(_ position: Int) {
    connect(newest, position)
    connect(position, -1)
  }

  /// Links the entry at `position` just older than the entry at `other`.
  @inlinable
  mutating func link(_ position: Int, olderThan other: Int) {
    connect(Int(links.older(other)), position)
    connect(position, other)
  }

  /// Takes the entry at `position` out of the order; the hand, if there, moves to the next
  /// newer entry.
  @inlinable @inline(__always)
  mutating func unlink(_ position: Int) {
    let after = Int(links.newer(position))
    if hand == position { hand = after }
    connect(Int(links.older(position)), after)
  }

  /// Records that the entry at ring position `from` moved to `to` (a hole was filled).
  @inlinable
  mutating func moveInOrder(from: Int, to: Int) {
    guard isOrdered else { return }
    if pendingAtHand == from {
      pendingAtHand = to
      return
    }
    ensureOrderCapacity(to)
    let after = Int(links.newer(from))
    connect(Int(links.older(from)), to)
    connect(to, after)
    if hand == from { hand = to }
  }

  /// Puts every entry of `table` in the order, oldest first by ring position, and keeps the
  /// order from now on: when the first limit is set. O(*n*).
  @inlinable
  mutating func orderAllEntries<Key, Value>(of table: _ConcurrentTable<Key, Value>) {
    isOrdered = true
    for position in 0..<table.ringCount where table.ringNode(at: position) != nil {
      ensureOrderCapacity(position)
      linkNewest(position)
    }
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

  /// Fills up to four holes of the table's ring with its last entries once there are more
  /// than a sixteenth of the ring (and 16), unless a purge walks it (positions must then stay
  /// put); keeps the eviction order, the hand and the expiry heap's positions in step. O(1).
  @inlinable @inline(__always)
  mutating func fillRingHoles<Key, Value>(_ table: _ConcurrentTable<Key, Value>) {
    // A few holes are left for the next insertions to take (an evicting write leaves one for
    // the next): filling them would move an entry per eviction for nothing.
    guard purgesRunning == 0,
      table.freeRingPositionCount > Swift.max(16, table.ringCount / 16)
    else { return }
    for _ in 0..<4 {
      guard let (from, to) = table.fillRingHole() else { return }
      moveInOrder(from: from, to: to)
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
  /// whatever the counters (a store of counters at 3 would otherwise take three passes).
  @inlinable static var maximumHandSteps: Int { 256 }

  /// The next entry the hand evicts, skipping the entry `protected` (the one being written,
  /// named by its ring position, -1 for none) unless nothing else is left; the caller removes
  /// it (which moves the hand past it).
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
    var position = hand >= 0 ? hand : oldest
    guard count > 0, position >= 0 else { return nil }
    var fallback: (node: _Node<Key, Value>, counter: UInt32)?
    var steps = 0
    var skipped = 0
    // Entries of cost 0 (with `costOnly`) and the protected entry are skipped without
    // counting; at most every entry is, so the loop ends.
    while steps < Self.maximumHandSteps && skipped <= count {
      // Safe: every position in the order holds an entry.
      let node = table.ringNode(at: position).unsafelyUnwrapped
      let newer = Int(links.newer(position))
      let next = newer >= 0 ? newer : oldest
      if (costOnly && node.cost == 0) || position == protected {
        if position == protected && count == 1 { return node }
        skipped += 1
        position = next
        continue
      }
      steps += 1
      let word = node.recency.pointee.load(ordering: .relaxed)
      let counter = word & 3
      if counter == 0 {
        hand = position
        return node
      }
      node.recency.pointee.store(word - 1, ordering: .relaxed)
      if fallback.map({ counter < $0.counter }) ?? true { fallback = (node, counter) }
      position = next
    }
    hand = position
    return fallback?.node
  }
}

extension _Policy: Sendable {}

/// The links of the eviction order: per ring position, the next newer and the next older
/// entry, side by side (one cache line serves both), in memory of its own, so that using it
/// costs no reference counting, no exclusivity check and no uniqueness check of an array.
///
/// Memory: 8 bytes per ring position. A position's links are meaningful only while its
/// entry is in the order.
@usableFromInline
struct _OrderLinks: @unchecked Sendable {
  // Safe: a store's links live in its `_Policy`, which only the write lock holder reads or
  // writes; copies taken out of it (by a check for tests) only read it under the same lock.

  /// Newer in the low 32 bits, older in the high ones, per position.
  @usableFromInline var base: UnsafeMutablePointer<UInt64>?
  @usableFromInline private(set) var capacity = 0
  /// Owns `base`.
  @usableFromInline var storage: _ZeroedWords?

  @inlinable init() {}

  @inlinable @inline(__always)
  func newer(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: base.unsafelyUnwrapped[position])
  }

  @inlinable @inline(__always)
  func older(_ position: Int) -> Int32 {
    Int32(truncatingIfNeeded: base.unsafelyUnwrapped[position] >> 32)
  }

  @inlinable @inline(__always)
  func setNewer(_ position: Int, _ newer: Int32) {
    let word = base.unsafelyUnwrapped[position]
    base.unsafelyUnwrapped[position] =
      word & 0xFFFF_FFFF_0000_0000 | UInt64(UInt32(bitPattern: newer))
  }

  @inlinable @inline(__always)
  func setOlder(_ position: Int, _ older: Int32) {
    let word = base.unsafelyUnwrapped[position]
    base.unsafelyUnwrapped[position] =
      word & 0xFFFF_FFFF | UInt64(UInt32(bitPattern: older)) << 32
  }

  /// Grows to hold position `position` at least, keeping the links. O(capacity), amortised
  /// O(1) per position (it grows by half at least).
  @inlinable
  mutating func grow(toHold position: Int) {
    let newCapacity = Swift.max(position + 1, capacity + capacity / 2, 64)
    let storage = _ZeroedWords(count: newCapacity)
    if let base { storage.base.update(from: base, count: capacity) }
    self.storage = storage
    base = storage.base
    capacity = newCapacity
  }
}

/// Fingerprints of the keys the limits evicted most recently, each with the number of its
/// eviction, in a two-way set-associative table: a fingerprint goes to one bucket of two slots
/// (its fraction of the bucket count), in place of the older of the two. A lookup asks for the
/// keys evicted within the last *n* evictions, *n* up to `capacity`: a store whose count
/// varies (a cost limit) asks for the last cache-ful exactly. With 1.25 slots per
/// fingerprint of `capacity`, a fingerprint may be pushed out early by two later ones of
/// its bucket: the record forgets a little, at random, which measured no worse than an exact
/// one, and it costs one bucket, in one cache line, per insertion and per lookup, with nothing
/// to remove. Two keys may share a fingerprint (a chance of about one in 2³¹ per pair); the
/// cost is one key kept longer.
///
/// Memory: 8 bytes per slot (1.25 slots per fingerprint of capacity by default), allocated
/// at the first eviction, zeroed by the system (`calloc`), so that making room costs no write
/// to all of it under the write lock: its pages are touched one at a time, by the insertions
/// that reach them. The memory
/// belongs to a ``_ZeroedWords``; the record keeps its address, so that using it costs no
/// reference counting and no exclusivity check.
@usableFromInline
struct _GhostKeys: @unchecked Sendable {
  // Safe: a store's record lives in its `_Policy`, which only the write lock holder reads or
  // writes; the one copy taken out of it (by `handleMemoryPressure`, to free the memory after
  // the lock is released) is only released, never used.

  /// Two slots per bucket; 0 is an empty slot, else the insertion's number in the high 32
  /// bits and the fingerprint in the low ones.
  @usableFromInline var slots: UnsafeMutablePointer<UInt64>?
  @usableFromInline var bucketCount = 0
  /// The most recent insertions a lookup may ask about.
  @usableFromInline private(set) var capacity = 0
  /// The number of the next insertion (wrapping).
  @usableFromInline var insertions: UInt32 = 0
  /// Insertions since the memory was made, for tests.
  @usableFromInline var inserted = 0
  /// Owns `slots`.
  @usableFromInline var storage: _ZeroedWords?

  @inlinable init() {}

  /// A key's fingerprint: never 0.
  @inlinable
  static func fingerprint(_ hash: Int) -> UInt32 {
    UInt32(truncatingIfNeeded: hash ^ (hash >> 32)) | 1
  }

  /// The first slot of the bucket of `fingerprint`: its fraction of the bucket count.
  @inlinable @inline(__always)
  func bucket(_ fingerprint: UInt32) -> Int {
    Int(truncatingIfNeeded: (UInt64(fingerprint) &* UInt64(bucketCount)) >> 32) &* 2
  }

  /// How many insertions ago the slot's fingerprint was inserted (1: the last one).
  @inlinable @inline(__always)
  func age(_ slot: UInt64) -> Int {
    Int(insertions &- UInt32(truncatingIfNeeded: slot >> 32))
  }

  /// The fingerprints remembered (within `capacity`), for tests. O(capacity).
  var rememberedCount: Int {
    guard let slots else { return 0 }
    return (0..<(2 * bucketCount)).reduce(0) {
      $0 + (slots[$1] != 0 && age(slots[$1]) <= capacity ? 1 : 0)
    }
  }

  /// Makes room for `wanted` fingerprints, `slotsPerFourFingerprints` slots for every four
  /// (5: 1.25 slots per fingerprint), forgetting those remembered if it must grow (at least
  /// twofold, so that a store limited only by cost, whose count varies, rarely forgets). O(1)
  /// apart from the allocation, whose pages the system zeroes on first touch.
  @inlinable
  mutating func ensureCapacity(_ wanted: Int, slotsPerFourFingerprints: Int = 5) {
    guard capacity < wanted else { return }
    capacity = capacity == 0 ? Swift.max(wanted, 16) : Swift.max(wanted, 2 * capacity)
    bucketCount = capacity * slotsPerFourFingerprints / 8 + 1
    let storage = _ZeroedWords(count: 2 * bucketCount)
    self.storage = storage
    slots = storage.base
    inserted = 0
  }

  /// Whether `fingerprint` is among the last `window` inserted and still remembered.
  @inlinable @inline(__always)
  func contains(_ fingerprint: UInt32, within window: Int) -> Bool {
    guard let slots else { return false }
    let first = bucket(fingerprint)
    return remembers(slots[first], fingerprint, within: window)
      || remembers(slots[first + 1], fingerprint, within: window)
  }

  /// Whether `slot` holds `fingerprint`, inserted within the last `window` insertions.
  @inlinable @inline(__always)
  func remembers(_ slot: UInt64, _ fingerprint: UInt32, within window: Int) -> Bool {
    slot != 0 && UInt32(truncatingIfNeeded: slot) == fingerprint && age(slot) <= window
  }

  /// Remembers `fingerprint` in its bucket, in place of its previous copy there, else of the
  /// older slot; room must have been made. O(1).
  @inlinable
  mutating func insert(_ fingerprint: UInt32) {
    guard let slots else { return }
    let first = bucket(fingerprint)
    let a = slots[first]
    let b = slots[first + 1]
    let target: Int
    if UInt32(truncatingIfNeeded: a) == fingerprint || a == 0 {
      target = first
    } else if UInt32(truncatingIfNeeded: b) == fingerprint || b == 0 {
      target = first + 1
    } else {
      target = age(a) >= age(b) ? first : first + 1
    }
    slots[target] = UInt64(insertions) << 32 | UInt64(fingerprint)
    insertions &+= 1
    inserted += 1
  }
}

/// Zeroed 64-bit words of memory (from `calloc`, whose pages the system zeroes on first
/// touch), freed with the last reference: the memory of an ``_OrderLinks`` and of a
/// ``_GhostKeys``, which keep its address so that using it costs no reference counting.
@usableFromInline
final class _ZeroedWords {
  @usableFromInline let base: UnsafeMutablePointer<UInt64>

  @usableFromInline
  init(count: Int) {
    guard let memory = calloc(Swift.max(count, 1), 8) else {
      fatalError("out of memory for \(count) words of eviction records")
    }
    base = memory.bindMemory(to: UInt64.self, capacity: count)
  }

  deinit { free(base) }
}
