import Synchronization

/// The eviction order, guarded by the write lock as part of ``_Policy``: which entry a limit
/// evicts next. Its interface: ``admit(_:count:limits:)`` a new entry, ``untrack(slot:)`` one
/// removed, ``nextVictim(in:protecting:costOnly:)``, ``noteEvicted(hash:cacheful:)``, and
/// ``moveEntry(from:to:)`` when the table moves an entry; a read records its use in the
/// entry's recency word, without a lock.
///
/// The order is **SIEVE with a 2-bit reference counter**: entries are kept in the order
/// they came (a list threaded through the table's ring positions, oldest to newest), reads
/// raise their entry's counter (to at most 3) without a lock, and the hand walks from the
/// oldest entry towards the newest, lowering the counter of each entry it passes and evicting
/// the first whose counter is 0; past the newest it starts again from the oldest. Entries it
/// keeps stay where they are, so a new key, which starts at the newest end, is reached within
/// one pass of the hand: a key used once leaves soon, while an entry read often survives up
/// to three passes. Two records refine where a new key starts (see ``admit(_:count:limits:)``): a key the
/// limits evicted recently came back too soon, and starts just behind the hand (a whole pass
/// away); and when most new keys are keys evicted long ago (a loop over more keys than the
/// store holds), new keys start at the hand, so that one position churns and the rest of the
/// store stays put.
@usableFromInline
struct _EvictionOrder: Sendable {
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
  /// The keys the limits evicted most recently (see ``_GhostKeys``): the last cache-ful.
  @usableFromInline var ghosts = _GhostKeys()
  /// A sample of the keys the limits evicted (one in 16, by hash), over the last 16
  /// cache-fuls of evictions: how a loop over more keys than the store holds is recognised.
  @usableFromInline var sampledEvictions = _GhostKeys()
  /// How often, lately, a new key of the sample was in `sampledEvictions`, in 65 536ths
  /// (an exponential moving average over 128 such keys).
  @usableFromInline var returnScore = 0
  /// How often, lately, a returning key of the sample was evicted after the previous one that
  /// returned, in 65 536ths (an exponential moving average over 32 such keys): keys that come
  /// back in the order they left are a loop; keys that come back in any order are a working
  /// set larger than the store, which starting new keys at the hand would only hurt.
  @usableFromInline var orderScore = 0
  /// The sample's insertion number of the last returning key.
  @usableFromInline var lastReturned: UInt32 = 0

  @usableFromInline init() {}

  /// Takes the entry at ring position `slot`, just removed, out of the order.
  @inlinable @inline(__always)
  mutating func untrack(slot: Int) {
    if pendingAtHand == slot {
      pendingAtHand = -1
    } else if isOrdered {
      unlink(slot)
    }
  }

  /// Forgets every entry (the store was emptied); the records of evicted keys stay.
  @inlinable
  mutating func removeAll() {
    hand = -1
    links = _OrderLinks()
    newest = -1
    oldest = -1
    pendingAtHand = -1
  }

  /// Notes that the limits evicted the key whose hash is `hash`, a cache-ful being `cacheful`
  /// entries. O(1).
  @inlinable
  mutating func noteEvicted(hash: Int, cacheful: Int) {
    // Room for a quarter more than a cache-ful: a store limited by cost varies in count.
    let room = cacheful * 5 / 4
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

  /// `orderScore` above which returning keys are taken for a loop: 0.75.
  @inlinable static var orderThreshold: Int { 49_152 }

  /// Places `node`, an entry just inserted, in the eviction order, if entries are kept in it.
  /// O(1).
  ///
  /// In a store without limits (any more), or for a key not seen lately, at the newest end. A
  /// key the limits evicted within the last cache-ful of evictions came back too soon: just
  /// behind the hand, a whole pass away. While most new keys of the sample were evicted within the
  /// last 16 cache-fuls, and most of those came back in the order they left (a loop over more
  /// keys than the store holds, which any order that keeps the newest would miss entirely; keys
  /// that come back in any order are a working set larger than the store, which the rule would
  /// freeze on keys it has left), new keys start at the hand instead, placed there
  /// once the write's evictions are done (see ``placePendingEntry()``): the next eviction
  /// takes the newest key unless it was read, and the rest of the store stays.
  @inlinable @inline(__always)
  mutating func admit<Key, Value>(_ node: _Node<Key, Value>, count: Int, limits: _Limits) {
    guard isOrdered else { return }
    let position = node.slot
    ensureOrderCapacity(position)
    guard limits.isLimited else { return linkNewest(position) }
    // Kept by every node written since the first limit, which this one is.
    let hash = node.hash
    // The store's entries before this one.
    let window = limits.cacheful(count: count - 1)
    if Self.isSampled(hash) {
      let returned = sampledEvictions.insertionNumber(
        of: _GhostKeys.fingerprint(hash), within: window)
      returnScore += ((returned != nil ? 65_536 : 0) - returnScore) >> 7
      if let returned {
        let inOrder = Int32(bitPattern: returned &- lastReturned) > 0
        lastReturned = returned
        orderScore += ((inOrder ? 65_536 : 0) - orderScore) >> 5
      }
    }
    if returnScore > Self.loopThreshold && orderScore > Self.orderThreshold && hand >= 0 {
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
  mutating func moveEntry(from: Int, to: Int) {
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
    // The loop appends to neither: their directories stay in locals.
    let ring = table.ringNodes
    let links = self.links.words.fixed
    // Entries of cost 0 (with `costOnly`) and the protected entry are skipped without
    // counting; at most every entry is, so the loop ends.
    while steps < Self.maximumHandSteps && skipped <= count {
      // Safe: every position in the order holds an entry.
      let node = _Node<Key, Value>(bits: ring[position]).unsafelyUnwrapped
      let newer = Int(Int32(truncatingIfNeeded: links[position]))
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

  /// The first of its invariants that does not hold in `table`, or `nil`: every entry once,
  /// oldest to newest, each link matched, the hand on an entry, no entry waiting; no order
  /// kept before the first limit. Write lock held.
  func _checkInvariants<Key, Value>(_ table: _ConcurrentTable<Key, Value>) -> String? {
    if pendingAtHand >= 0 { return "an entry waits to be placed at the hand" }
    if !isOrdered { return oldest < 0 && newest < 0 ? nil : "an order kept without a limit" }
    var entries = 0
    for position in 0..<table.ringCount where table.ringNode(at: position) != nil {
      entries += 1
    }
    var ordered = 0
    var position = oldest
    var previous = -1
    var handSeen = hand < 0
    while position >= 0 {
      guard ordered < entries, table.ringNode(at: position) != nil,
        Int(links.older(position)) == previous
      else { return "the eviction order is broken at ring position \(position)" }
      if position == hand { handSeen = true }
      ordered += 1
      previous = position
      position = Int(links.newer(position))
    }
    if previous != newest { return "the eviction order does not end at its newest" }
    if ordered != entries {
      return "the eviction order has \(ordered) entries, the ring \(entries)"
    }
    if !handSeen { return "the hand is not on an entry" }
    return nil
  }
}
