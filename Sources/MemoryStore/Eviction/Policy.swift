import Synchronization

/// What the policy knows about one entry. Times are nanoseconds since the store's origin.
@usableFromInline
struct _EntryRecord {
  @usableFromInline var writtenAt: Int64
  /// `Int64.max`: never.
  @usableFromInline var expiresAt: Int64
  @usableFromInline var cost: Int
  /// The policy's write counter when the value was written: tells a purge whether the value
  /// it judged is still the one stored.
  @usableFromInline var version: UInt64
  /// The entry's position in the clock ring.
  @usableFromInline var slot: Int

  @inlinable
  init(writtenAt: Int64, expiresAt: Int64, cost: Int, version: UInt64, slot: Int) {
    self.writtenAt = writtenAt
    self.expiresAt = expiresAt
    self.cost = cost
    self.version = version
    self.slot = slot
  }
}

/// The bookkeeping of a store with an eviction decider, limits or expiry, guarded by the
/// store's write lock. Its records mirror the store's keys exactly: every write of a store
/// with a policy updates both in the same critical section.
///
/// Eviction order is **CLOCK with a 2-bit reference counter** (generalised CLOCK): entries sit
/// in a ring; reads raise their key's counter (to at most 3) without a lock; the hand lowers the
/// counter of each entry it passes and evicts the first whose counter is 0. A key read often
/// survives up to three sweeps of the hand, so, on skewed workloads, the policy keeps hot keys
/// better than strict LRU, which drops a hot key after a single scan of cold ones.
@usableFromInline
struct _Policy<Key: Hashable> {
  @usableFromInline var records: [Key: _EntryRecord] = [:]
  /// Keys by slot; `nil` marks a free slot.
  @usableFromInline var ring: ContiguousArray<Key?> = []
  @usableFromInline var freeSlots: [Int] = []
  @usableFromInline var hand = 0
  @usableFromInline var totalCost = 0
  @usableFromInline var version: UInt64 = 0
  /// 0: no limit.
  @usableFromInline var countLimit = 0
  @usableFromInline var costLimit = 0
  @usableFromInline var defaultTimeToLive: Duration?
  /// A min-heap of deadlines; entries whose record no longer has that deadline are stale.
  @usableFromInline var expiries: [(deadline: Int64, key: Key)] = []
  @usableFromInline var expiringCount = 0
  /// Purges in progress: the ring is not compacted while one walks it.
  @usableFromInline var purgesRunning = 0
  @usableFromInline var evictions = StoreStatistics.Evictions()
  /// The deadline the expiry timer is armed for, if any.
  @usableFromInline var sweepArmedFor: Int64?
  @usableFromInline var memoryPressure = MemoryPressurePolicy()
  @usableFromInline var evictionInterval: Duration = .zero
  /// Bumped when the interval changes, so a superseded timer does nothing.
  @usableFromInline var intervalGeneration: UInt64 = 0
  /// The recency table readers update, if eviction needs recency.
  @usableFromInline var table = _RecencyTable()

  @usableFromInline init() {}

  // MARK: Records

  /// Records a write of `key`; returns whether the key is new.
  @discardableResult
  @inlinable
  mutating func write(_ key: Key, now: Int64, cost: Int, expiresAt: Int64) -> Bool {
    version &+= 1
    if let index = records.index(forKey: key) {
      let old = records.values[index]
      totalCost += cost - old.cost
      if old.expiresAt != .max { expiringCount -= 1 }
      records.values[index] = _EntryRecord(
        writtenAt: now, expiresAt: expiresAt, cost: cost, version: version, slot: old.slot)
      if expiresAt != .max { scheduleExpiry(key, at: expiresAt) }
      // Rewriting a key is a use of it; inserting one is not: a key inserted and never read
      // again is the first to go (it sits just behind the hand, so it has a full turn to be
      // read), which keeps one-time keys from pushing out the ones read often.
      table.touchOnWrite(key)
      return false
    }
    let slot: Int
    if let free = freeSlots.popLast() {
      slot = free
      ring[slot] = key
    } else {
      slot = ring.count
      ring.append(key)
    }
    records[key] = _EntryRecord(
      writtenAt: now, expiresAt: expiresAt, cost: cost, version: version, slot: slot)
    totalCost += cost
    if expiresAt != .max { scheduleExpiry(key, at: expiresAt) }
    return true
  }

  /// Forgets `key`; returns whether it was recorded.
  @discardableResult
  @inlinable
  mutating func remove(_ key: Key) -> Bool {
    guard let record = records.removeValue(forKey: key) else { return false }
    totalCost -= record.cost
    if record.expiresAt != .max { expiringCount -= 1 }
    ring[record.slot] = nil
    freeSlots.append(record.slot)
    return true
  }

  @inlinable
  mutating func removeAll() {
    version &+= 1
    records = [:]
    ring = []
    freeSlots = []
    hand = 0
    totalCost = 0
    expiries = []
    expiringCount = 0
  }

  /// Rebuilds the ring without free slots when more than half of it is free and no purge
  /// walks it. Amortised O(1) per removal.
  @inlinable
  mutating func compactIfSparse() {
    guard purgesRunning == 0, freeSlots.count > 1_024, freeSlots.count * 2 > ring.count else {
      return
    }
    var compacted = ContiguousArray<Key?>()
    compacted.reserveCapacity(records.count)
    for index in records.values.indices {
      records.values[index].slot = compacted.count
      compacted.append(records.keys[index])
    }
    ring = compacted
    freeSlots = []
    hand = 0
  }

  // MARK: Expiry

  @inlinable
  mutating func scheduleExpiry(_ key: Key, at deadline: Int64) {
    expiringCount += 1
    expiries.append((deadline, key))
    siftUp(expiries.count - 1)
    // Stale heap entries (keys rewritten or removed since) are dropped as they surface, and
    // all at once when they outnumber the live ones.
    if expiries.count > 2 * expiringCount + 64 { rebuildExpiries() }
  }

  /// The earliest deadline of a recorded entry, or `Int64.max`.
  @inlinable
  mutating func nextExpiry() -> Int64 {
    while let top = expiries.first {
      if records[top.key]?.expiresAt == top.deadline { return top.deadline }
      popExpiry()
    }
    return .max
  }

  /// Removes and returns up to `limit` keys whose deadline is at or before `now`.
  @inlinable
  mutating func takeExpired(now: Int64, limit: Int) -> [Key] {
    var keys: [Key] = []
    while keys.count < limit, let top = expiries.first, top.deadline <= now {
      popExpiry()
      if records[top.key]?.expiresAt == top.deadline {
        remove(top.key)
        keys.append(top.key)
      }
    }
    return keys
  }

  /// Whether `key` is recorded with a deadline at or before `now`.
  @inlinable
  func isExpired(_ key: Key, now: Int64) -> Bool {
    guard let record = records[key] else { return false }
    return record.expiresAt <= now
  }

  @inlinable
  mutating func rebuildExpiries() {
    expiries = records.compactMap { key, record in
      record.expiresAt == .max ? nil : (record.expiresAt, key)
    }
    expiries.sort { $0.deadline < $1.deadline }  // A sorted array is a valid min-heap.
  }

  @inlinable
  mutating func popExpiry() {
    let last = expiries.removeLast()
    guard !expiries.isEmpty else { return }
    expiries[0] = last
    var index = 0
    while true {
      let left = 2 * index + 1
      guard left < expiries.count else { break }
      let right = left + 1
      let child =
        right < expiries.count && expiries[right].deadline < expiries[left].deadline ? right : left
      guard expiries[child].deadline < expiries[index].deadline else { break }
      expiries.swapAt(child, index)
      index = child
    }
  }

  @inlinable
  mutating func siftUp(_ start: Int) {
    var index = start
    while index > 0 {
      let parent = (index - 1) / 2
      guard expiries[index].deadline < expiries[parent].deadline else { break }
      expiries.swapAt(index, parent)
      index = parent
    }
  }

  // MARK: Eviction order

  /// Whether the store is above `fraction` of its limits.
  @inlinable
  func isOverLimits(fraction: Double = 1) -> EvictionReason? {
    if countLimit > 0 && Double(records.count) > Double(countLimit) * fraction {
      return .countLimit
    }
    if costLimit > 0 && Double(totalCost) > Double(costLimit) * fraction { return .costLimit }
    return nil
  }

  /// The most entries the hand passes to find one victim: a bound on the work of one write,
  /// whatever the counters (a full table of counters at 3 would otherwise take three turns).
  @inlinable static var maximumHandSteps: Int { 256 }

  /// The next entry the clock hand evicts, skipping `protected` unless nothing else is left;
  /// the caller removes it.
  ///
  /// The hand lowers each counter it passes and stops at the first entry whose counter is 0.
  /// If it passes ``maximumHandSteps`` entries without finding one, it evicts the entry with
  /// the lowest counter among them (the first such), so one eviction is O(1) at worst.
  @inlinable
  mutating func nextVictim(protecting protected: Key? = nil) -> Key? {
    guard !records.isEmpty else { return nil }
    if let protected, records.count == 1, records[protected] != nil { return protected }
    var fallback: (key: Key, counter: UInt32)?
    var steps = 0
    // Free slots are skipped without counting; at most one free slot per record plus the
    // compaction slack exists, so the loop ends.
    while steps < Self.maximumHandSteps {
      if hand >= ring.count { hand = 0 }
      let slot = hand
      hand += 1
      guard let key = ring[slot], key != protected else { continue }
      steps += 1
      let counter = table.lowerCounter(of: key)
      if counter == 0 { return key }
      if fallback.map({ counter < $0.counter }) ?? true { fallback = (key, counter) }
    }
    return fallback?.key
  }
}

/// The table in which reads record recency without a lock: one 32-bit slot per key hash,
/// holding a 2-bit CLOCK counter and the second of the last read (bits 2...31, 0 = never).
///
/// Readers find it through the store's `_recencyTable` atomic. A larger table replaces a full
/// one; the old one stays allocated until the store is freed, because a reader may still be
/// using it (it is at most as large as all later ones together, so memory stays within twice
/// the current table).
@usableFromInline
struct _RecencyTable {
  /// Layout: the slot mask (an `Int`), then `mask + 1` slots of `Atomic<UInt32>`.
  @usableFromInline var base: UnsafeMutableRawPointer?
  @usableFromInline var mask = 0
  @usableFromInline var retired: [UnsafeMutableRawPointer] = []

  @usableFromInline init() {}

  @inlinable static var headerSize: Int { MemoryLayout<Int>.stride }

  @inlinable var slotCount: Int { base == nil ? 0 : mask + 1 }

  /// Allocates a table of `slots` (a power of two) initialised from the current one.
  @inlinable
  static func allocate(slots: Int, from old: UnsafeMutableRawPointer?, oldMask: Int)
    -> UnsafeMutableRawPointer
  {
    let raw = UnsafeMutableRawPointer.allocate(
      byteCount: headerSize + slots * MemoryLayout<UInt32>.stride, alignment: 64)
    raw.initializeMemory(as: Int.self, repeating: slots - 1, count: 1)
    let slotBase = (raw + headerSize).bindMemory(to: Atomic<UInt32>.self, capacity: slots)
    for index in 0..<slots {
      let initial: UInt32 =
        old.map {
          _RecencyTable.slot(in: $0, index: index & oldMask).pointee.load(ordering: .relaxed)
        }
        ?? 0
      (slotBase + index).initialize(to: Atomic(initial))
    }
    return raw
  }

  @inline(__always)
  @inlinable
  static func slot(in base: UnsafeMutableRawPointer, index: Int)
    -> UnsafeMutablePointer<Atomic<UInt32>>
  {
    (base + headerSize + index &* MemoryLayout<UInt32>.stride)
      .assumingMemoryBound(to: Atomic<UInt32>.self)
  }

  /// Grows the table to at least four slots per entry for `entries`; returns the new base to
  /// publish, if it changed.
  @inlinable
  mutating func reserve(forEntries entries: Int) -> UnsafeMutableRawPointer? {
    var slots = max(1_024, slotCount)
    while slots < 4 * entries { slots <<= 1 }
    guard slots != slotCount else { return nil }
    let new = Self.allocate(slots: slots, from: base, oldMask: mask)
    if let base { retired.append(base) }
    base = new
    mask = slots - 1
    return new
  }

  @inlinable
  func slot(for key: some Hashable) -> UnsafeMutablePointer<Atomic<UInt32>>? {
    guard let base else { return nil }
    return Self.slot(in: base, index: key.hashValue & mask)
  }

  /// Rewriting a key gives it at least one reference (inserting one does not; see
  /// `_Policy.write`). (A new key keeps the read time of a key
  /// that shares its slot: it may appear read more recently than it was, never less.)
  @inlinable
  func touchOnWrite(_ key: some Hashable) {
    guard let slot = slot(for: key) else { return }
    let value = slot.pointee.load(ordering: .relaxed)
    if value & 3 == 0 { slot.pointee.store(value | 1, ordering: .relaxed) }
  }

  /// Lowers the key's counter if it is above zero; returns the counter before.
  @inlinable
  func lowerCounter(of key: some Hashable) -> UInt32 {
    guard let slot = slot(for: key) else { return 0 }
    let value = slot.pointee.load(ordering: .relaxed)
    guard value & 3 != 0 else { return 0 }
    slot.pointee.store(value - 1, ordering: .relaxed)
    return value & 3
  }

  /// The second of the key's last read (1-based), or 0.
  @inlinable
  func lastReadTick(of key: some Hashable) -> UInt32 {
    guard let slot = slot(for: key) else { return 0 }
    return slot.pointee.load(ordering: .relaxed) >> 2
  }

  @inlinable
  func deallocate() {
    for table in retired + (base.map { [$0] } ?? []) {
      let slots = table.load(as: Int.self) + 1
      (table + Self.headerSize).assumingMemoryBound(to: Atomic<UInt32>.self)
        .deinitialize(count: slots)
      table.deallocate()
    }
  }
}

// Safe: a policy is only ever accessed by the thread holding its store's write lock (see
// `MemoryStore._policy`); the recency table it points to is accessed by readers only through
// `Atomic` operations, and freed with the store.
extension _Policy: @unchecked Sendable where Key: Sendable {}
