import Synchronization

/// One of the eviction order's three lists, oldest to newest, threaded through the order's
/// links.
@usableFromInline
struct _OrderSegment: Sendable {
  @usableFromInline var oldest = -1
  @usableFromInline var newest = -1
  @usableFromInline var count = 0

  @inlinable init() {}
}

/// The eviction order, guarded by the write lock as part of ``_Policy``: which entry a limit
/// evicts next. Its interface: ``admit(_:count:limits:)`` a new entry, ``untrack(_:)`` one
/// removed, ``nextVictim(in:_:protecting:costLimit:)``, ``endEvictions()`` at the end of each
/// write's evictions, ``adapt(hits:misses:cacheful:)`` now and then, and
/// ``moveEntry(from:to:)`` when the table moves an entry; a read records its use in the
/// entry's recency word, without a lock.
///
/// The order is **W-TinyLFU with an adaptive window**, its lists kept CLOCK-style, since a
/// read never takes a lock to move its entry:
/// - A new entry starts in the **window**, a small list (1 % of the entries at first) that
///   any new key enters: a burst of new keys that are used a few times then stops is served
///   there.
/// - The window's oldest entry, once the window is over its size, moves to **probation**, as a
///   *candidate*. To make room, the candidate and probation's oldest entry (the *victim*) are
///   compared by how often their keys were used lately (``_FrequencySketch``): the candidate
///   stays only if its key was used more, not counting the write that brought it in (which
///   the victim's count has had time to lose), or if the victim's key has no use left; the
///   other is evicted. A key used once never pushes
///   out one used often, and a loop over more keys than the store holds keeps most of the
///   store, where recency alone would keep none of it.
/// - An entry of probation read since it got there moves to **protected** (80 % of the
///   entries outside the window) instead of being judged; protected's oldest entry, when
///   protected is over its size, goes back to probation unless read since it was last looked
///   at (then it goes to protected's newest end).
/// - Reads raise their entry's 2-bit counter (to at most 3), without a lock; the writer adds a
///   counter to the sketch when it looks at the entry, and clears it.
/// - The window's size **adapts**: every ten cache-fuls of lookups, the hit ratio is
///   compared with the previous period's, and the window grows or shrinks by a step in the
///   direction that raised it (hill climbing, as Caffeine does): recency-heavy workloads get a
///   large window, behaving like LRU, frequency-heavy ones a small one. The step starts at
///   6.25 % of the entries, shrinks by 2 % per period, and starts again when the hit ratio
///   moves by 5 points; a change under 0.1 point moves nothing.
/// - Between the climber's periods, **evicted keys that come back** move the window too
///   (``_EvictionGhosts``): a rejected candidate written again soon after it left the window
///   would have hit in a larger window, a victim written again as soon would have hit in a
///   larger main region. Every 16 such returns, the window moves by 1/128 of the entries
///   towards the side with at least twice as many. A trace too short for the climber (a few
///   cachefuls) still gets the window it needs.
/// - When the **cost limit** is what evicts, the lists are sized in cost rather than in
///   entries, and admission weighs each key's uses against the fourth root of its entry's cost:
///   a large entry takes the place of several small ones, so it needs more uses than each to
///   come in, yet one used markedly more still does (see
///   ``nextVictim(in:_:protecting:costLimit:)``).
@usableFromInline
struct _EvictionOrder: Sendable {
  /// The lists of the order, per ring position: the next newer and the next older entry (-1:
  /// none) within the entry's list, and the entry's tag: the list it is in (``windowList``,
  /// ``probationList`` or ``protectedList``) and ``uncountedWrite``.
  @usableFromInline var links = _OrderLinks()
  @usableFromInline var window = _OrderSegment()
  @usableFromInline var probation = _OrderSegment()
  @usableFromInline var protected = _OrderSegment()
  /// The oldest candidate not yet judged (an entry moved from the window to probation by this
  /// write), or -1; ``candidates`` of them, from it towards probation's newest.
  @usableFromInline var candidate = -1
  @usableFromInline var candidates = 0
  /// Whether entries are kept in the eviction order: from the first limit on. A store with
  /// only a time to live or a decider never evicts for a limit, and pays nothing for it.
  @usableFromInline var isOrdered = false
  /// Whether the lists keep the total cost of their entries: while the store has a cost
  /// limit, which sizes them in cost when it is what evicts.
  @usableFromInline var weighsCosts = false
  /// The total cost of each list's entries, kept while the order ``weighsCosts``.
  @usableFromInline var costs: (window: Int, probation: Int, protected: Int) = (0, 0, 0)
  /// How often keys were used lately.
  @usableFromInline var sketch = _FrequencySketch()
  /// The keys evicted lately, and how: their returns move the window between the hill
  /// climber's periods.
  @usableFromInline var ghosts = _EvictionGhosts()
  /// The window's share of the entries, in 65 536ths.
  @usableFromInline var windowShare = 655
  /// The hill climber: the next step (in 65 536ths, signed), the previous period's hit ratio,
  /// the lookup counts where the period began, and the admissions since the period was last
  /// looked at.
  @usableFromInline var step = 4_096.0
  @usableFromInline var previousHitRatio = 0.0
  @usableFromInline var periodHits = 0
  @usableFromInline var periodLookups = 0
  @usableFromInline var admissionsSinceCheck = 0

  @usableFromInline init() {}

  @inlinable static var windowList: UInt8 { 1 }
  @inlinable static var probationList: UInt8 { 2 }
  @inlinable static var protectedList: UInt8 { 3 }
  /// The bit of a list tag that marks an entry admitted before the sketch was made: its write
  /// is a use not counted yet.
  @inlinable static var uncountedWrite: UInt8 { 4 }

  /// The list `list`.
  @inlinable
  subscript(list list: UInt8) -> _OrderSegment {
    @inline(__always) get {
      list == Self.windowList ? window : list == Self.probationList ? probation : protected
    }
    @inline(__always) set {
      switch list {
      case Self.windowList: window = newValue
      case Self.probationList: probation = newValue
      default: protected = newValue
      }
    }
  }

  /// Takes `node`, an entry just removed, out of the order.
  @inlinable @inline(__always)
  mutating func untrack<Key, Value>(_ node: _Node<Key, Value>) {
    guard isOrdered else { return }
    let slot = node.slot
    if slot == candidate { passCandidate() }
    unlink(slot, cost: listCost(of: node))
  }

  /// Records that the entry at ring position `slot` now costs `change` more (a write changed
  /// its cost). O(1).
  @inlinable @inline(__always)
  mutating func recost(slot: Int, by change: Int) {
    guard isOrdered && weighsCosts && change != 0 else { return }
    addCost(change, to: links.tag(slot) & ~Self.uncountedWrite)
  }

  /// The total cost of the entries of `list` (0 unless the order ``weighsCosts``).
  @inlinable @inline(__always)
  func cost(of list: UInt8) -> Int {
    list == Self.windowList
      ? costs.window : list == Self.probationList ? costs.probation : costs.protected
  }

  /// Adds `cost` to the total cost of `list`.
  @inlinable @inline(__always)
  mutating func addCost(_ cost: Int, to list: UInt8) {
    switch list {
    case Self.windowList: costs.window += cost
    case Self.probationList: costs.probation += cost
    default: costs.protected += cost
    }
  }

  /// Forgets every entry (the store was emptied); how often keys were used stays.
  @inlinable
  mutating func removeAll() {
    links = _OrderLinks()
    window = _OrderSegment()
    probation = _OrderSegment()
    protected = _OrderSegment()
    costs = (0, 0, 0)
    candidate = -1
    candidates = 0
  }

  /// Places `node`, an entry just inserted, in the eviction order, if entries are kept in it:
  /// at the window's newest end, its key's use counted. O(1).
  @inlinable @inline(__always)
  mutating func admit<Key, Value>(_ node: _Node<Key, Value>, count: Int, limits: _Limits) {
    guard isOrdered else { return }
    let position = node.slot
    ensureOrderCapacity(position)
    link(position, newestOf: Self.windowList, cost: listCost(of: node))
    guard limits.isLimited else { return }
    if sketch.words != nil {
      // Kept by every node written since the first limit, which this one is.
      let hash = node.hash
      sketch.increment(hash)
      let change = ghosts.windowChange(returning: hash)
      if change != 0 { moveWindow(by: change) }
    } else {
      // Before the first eviction there is no sketch: the use waits in the entry's list tag
      // (``uncountedWrite``), added to the sketch when the writer first looks at the entry.
      links.setTag(position, Self.windowList | Self.uncountedWrite)
    }
    admissionsSinceCheck &+= 1
  }

  /// Makes the sketch of uses and the record of evicted keys ready for a store of `entries`
  /// entries (see ``_FrequencySketch/ensureCapacity(_:)`` and
  /// ``_EvictionGhosts/ensureCapacity(_:)``): at each eviction for a limit. O(1) apart from
  /// their allocations.
  @inlinable @inline(__always)
  mutating func prepareForEvictions(_ entries: Int) {
    sketch.ensureCapacity(entries)
    ghosts.ensureCapacity(entries)
  }

  /// Frees the sketch of uses and the record of evicted keys, made again, empty, by the next
  /// ``prepareForEvictions(_:)``; returns them, so that the caller frees their memory after
  /// releasing the write lock. O(1).
  @inlinable
  mutating func releaseEvictionMemory() -> (_FrequencySketch, _EvictionGhosts) {
    defer { (sketch, ghosts) = (_FrequencySketch(), _EvictionGhosts()) }
    return (sketch, ghosts)
  }

  /// Moves the window's share by `change` 65 536ths, within 0 and 65 535.
  @inlinable @inline(__always)
  mutating func moveWindow(by change: Int) {
    windowShare = Swift.min(Swift.max(windowShare + change, 0), 65_535)
  }

  /// Makes room for ring position `position` in the order's links.
  @inlinable @inline(__always)
  mutating func ensureOrderCapacity(_ position: Int) {
    if position >= links.capacity { links.grow(toHold: position) }
  }

  /// Links the entry at `position` as the newest of `list`.
  @inlinable @inline(__always)
  mutating func link(_ position: Int, newestOf list: UInt8, cost: Int) {
    var segment = self[list: list]
    let previous = segment.newest
    links.set(position, newer: -1, older: Int32(truncatingIfNeeded: previous), tag: list)
    if previous >= 0 {
      links.setNewer(previous, Int32(truncatingIfNeeded: position))
    } else {
      segment.oldest = position
    }
    segment.newest = position
    segment.count += 1
    self[list: list] = segment
    if cost != 0 { addCost(cost, to: list) }
  }

  /// Takes the entry at `position` out of its list.
  @inlinable @inline(__always)
  mutating func unlink(_ position: Int, cost: Int) {
    let list = links.tag(position) & ~Self.uncountedWrite
    var segment = self[list: list]
    links.connect(Int(links.older(position)), Int(links.newer(position)), in: &segment)
    segment.count -= 1
    self[list: list] = segment
    if cost != 0 { addCost(-cost, to: list) }
  }

  /// What the entry `node` adds to its list's cost: its cost while the order
  /// ``weighsCosts``, else 0.
  @inlinable @inline(__always)
  func listCost<Key, Value>(of node: _Node<Key, Value>) -> Int {
    weighsCosts ? node.cost : 0
  }

  /// Starts or stops keeping the lists' costs (the store gained or lost its cost limit);
  /// starting adds up the costs of the entries of `table`. O(*n*) when it starts, else O(1).
  @inlinable
  mutating func weighCosts<Key, Value>(
    _ weighs: Bool, of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {
    guard weighs != weighsCosts else { return }
    weighsCosts = weighs
    costs = (0, 0, 0)
    guard weighs else { return }
    for list in [Self.windowList, Self.probationList, Self.protectedList] {
      var position = self[list: list].oldest
      while position >= 0 {
        addCost(table.ringNode(at: position, held)?.cost ?? 0, to: list)
        position = Int(links.newer(position))
      }
    }
  }

  /// Moves the entry at `position`, adding `cost` to its new list's cost (see ``listCost(of:)``),
  /// to the newest end of `list`; within its own list, `cost` does not matter.
  @inlinable @inline(__always)
  mutating func move(_ position: Int, toNewestOf list: UInt8, cost: Int = 0) {
    unlink(position, cost: cost)
    link(position, newestOf: list, cost: cost)
  }

  /// Records that the entry at ring position `from` moved to `to` (a hole was filled).
  @inlinable
  mutating func moveEntry(from: Int, to: Int) {
    guard isOrdered else { return }
    ensureOrderCapacity(to)
    let tag = links.tag(from)
    let list = tag & ~Self.uncountedWrite
    var segment = self[list: list]
    let older = Int(links.older(from))
    let newer = Int(links.newer(from))
    links.setTag(to, tag)
    links.connect(older, to, in: &segment)
    links.connect(to, newer, in: &segment)
    self[list: list] = segment
    if candidate == from { candidate = to }
  }

  /// Puts every entry of `table` in the order, in probation, oldest first by ring position,
  /// and keeps the order from now on: when the first limit is set. O(*n*).
  @inlinable
  mutating func orderAllEntries<Key, Value>(
    of table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) {
    isOrdered = true
    for position in 0..<table.ringCount(held) where table.ringNode(at: position, held) != nil {
      ensureOrderCapacity(position)
      link(position, newestOf: Self.probationList, cost: 0)
    }
  }

  /// The most entries one call of ``nextVictim(in:_:protecting:costLimit:)`` moves or passes in
  /// each list: a bound on the work of one write, whatever the counters.
  @inlinable static var maximumSteps: Int { 256 }

  /// Takes the counter of the entry `node` at `position`, adding it (and a write not counted
  /// yet) to its key's uses; returns the counter: how often it was read since last looked at.
  /// Write lock held; a read racing it may raise the counter again.
  @inlinable @inline(__always)
  mutating func takeCounter<Key, Value>(_ node: _Node<Key, Value>, at position: Int) -> UInt32 {
    let word = node.recency.pointee.load(ordering: .relaxed)
    let counter = word & 3
    let tag = links.tag(position)
    let uncounted = tag >= Self.uncountedWrite && sketch.words != nil ? 1 : 0
    if uncounted != 0 { links.setTag(position, tag & ~Self.uncountedWrite) }
    if counter != 0 { node.recency.pointee.store(word & ~3, ordering: .relaxed) }
    if counter != 0 || uncounted != 0 {
      sketch.increment(node.hash, by: Int(counter) + uncounted)
    }
    return counter
  }

  /// The estimated uses of the entry `node` at `position`: its key's in the sketch, its
  /// counter's, and a write not counted yet.
  @inlinable @inline(__always)
  func uses<Key, Value>(_ node: _Node<Key, Value>, at position: Int) -> Int {
    sketch.frequency(node.hash) + Int(node.recency.pointee.load(ordering: .relaxed) & 3)
      + (links.tag(position) & Self.uncountedWrite != 0 ? 1 : 0)
  }

  /// Passes the oldest candidate: it stays in probation, judged.
  @inlinable @inline(__always)
  mutating func passCandidate() {
    candidates -= 1
    candidate = candidates > 0 ? Int(links.newer(candidate)) : -1
    if candidate < 0 { candidates = 0 }
  }

  /// Ends a write's evictions: candidates not judged stay in probation as they are. O(1).
  @inlinable @inline(__always)
  mutating func endEvictions() {
    candidate = -1
    candidates = 0
  }

  /// The next entry to evict, skipping the entry `protected` (the one being written, named by
  /// its ring position, -1 for none) unless nothing else is left; the caller removes it.
  ///
  /// First the lists are brought to their sizes: protected's oldest entries go back to
  /// probation (or, if read, to protected's newest end), and the window's oldest go to
  /// probation as candidates (or, if read, to the window's newest end). Then probation's
  /// oldest entry not read since it got there is the victim (those read move to protected);
  /// if a candidate waits, it is evicted unless its key was used more lately than the victim's,
  /// not counting the write that brought it in. Each step is bounded by ``maximumSteps``, so
  /// one eviction is O(1).
  ///
  /// With a `costLimit` (the store is over its cost limit, not its count limit, and the order
  /// ``weighsCosts``):
  /// - the lists are sized in cost: the window holds its share of the cost limit, protected 80 %
  ///   of the rest, so a list of large entries holds fewer of them;
  /// - a candidate's and the victim's uses are each weighed against the fourth root of their
  ///   cost (``weight(ofCost:)``);
  /// - entries of cost 0 are passed over: they free no cost, so they are never evicted for it.
  ///   Finding a costed entry then takes O(*n*) at worst, when few entries have a cost.
  @inlinable
  mutating func nextVictim<Key, Value>(
    in table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld,
    protecting protectedSlot: Int, costLimit: Int = 0
  ) -> _Node<Key, Value>? {
    let count = table.stagedCount(held)
    guard count > 0 else { return nil }
    let ring = table.ringNodes(held)
    func node(_ position: Int) -> _Node<Key, Value> {
      // Safe: every position in the order holds an entry.
      _Node<Key, Value>(bits: ring[position]).unsafelyUnwrapped
    }
    let byCost = costLimit > 0
    func isSkipped(_ position: Int) -> Bool {
      position == protectedSlot || (byCost && node(position).cost == 0)
    }
    // The lists' sizes: in entries, or in cost when the cost limit is what evicts.
    let windowSize: Int
    let protectedSize: Int
    if byCost {
      // In two parts, so that no cost limit overflows (the share is under 2^16).
      windowSize = (costLimit >> 16) * windowShare + ((costLimit & 0xFFFF) * windowShare) >> 16
      protectedSize = (costLimit - windowSize) / 5 * 4
    } else {
      windowSize = Swift.max(1, Swift.min(count - 1, (count &* windowShare) &>> 16))
      protectedSize = (count - windowSize) * 4 / 5
    }
    // Protected over its size: its oldest go back to probation, unless read.
    var steps = 0
    while (byCost ? costs.protected : protected.count) > protectedSize, steps < Self.maximumSteps {
      steps += 1
      let position = protected.oldest
      let oldest = node(position)
      let list = takeCounter(oldest, at: position) > 0 ? Self.protectedList : Self.probationList
      move(position, toNewestOf: list, cost: listCost(of: oldest))
    }
    // The window over its size: its oldest go to probation as candidates, unless read.
    steps = 0
    while (byCost ? costs.window : window.count) > windowSize && steps < Self.maximumSteps {
      steps += 1
      let position = window.oldest
      let oldest = node(position)
      if takeCounter(oldest, at: position) > 0 || position == protectedSlot {
        move(position, toNewestOf: Self.windowList)
        continue
      }
      move(position, toNewestOf: Self.probationList, cost: listCost(of: oldest))
      ghosts.countWindowExit()
      if candidates == 0 { candidate = position }
      candidates += 1
    }
    // The victim: probation's oldest not read since it got there.
    steps = 0
    var victim = firstEvictable(from: probation.oldest, skipping: isSkipped)
    while victim >= 0 && steps < Self.maximumSteps,
      case let read = node(victim), takeCounter(read, at: victim) > 0
    {
      steps += 1
      let newer = Int(links.newer(victim))
      if victim == candidate { passCandidate() }
      move(victim, toNewestOf: Self.protectedList, cost: listCost(of: read))
      victim = firstEvictable(from: newer, skipping: isSkipped)
    }
    // A candidate against the victim.
    while candidates > 0 && (candidate == victim || isSkipped(candidate)) {
      if candidate == victim {
        passCandidate()
        return node(victim)
      }
      passCandidate()
    }
    if candidates > 0 && victim >= 0 {
      let contender = candidate
      passCandidate()
      // The write that brought the candidate in is not counted: the victim's has had time to be
      // forgotten. A victim with no use left gives way to any candidate. When the cost limit
      // evicts, uses are weighed against the fourth root of the cost: a large entry displaces
      // several small ones, so it needs more uses than each to come in, yet one used markedly
      // more still does.
      let victimUses = uses(node(victim), at: victim)
      let contenderUses = uses(node(contender), at: contender) - 1
      let admitted: Bool
      if victimUses == 0 {
        admitted = true
      } else if byCost {
        admitted =
          Double(contenderUses) * Self.weight(ofCost: node(victim).cost)
          > Double(victimUses) * Self.weight(ofCost: node(contender).cost)
      } else {
        admitted = contenderUses > victimUses
      }
      let evicted = admitted ? node(victim) : node(contender)
      ghosts.record(evicted.hash, rejected: !admitted)
      return evicted
    }
    if victim >= 0 {
      let evicted = node(victim)
      ghosts.record(evicted.hash, rejected: false)
      return evicted
    }
    // Probation has nothing to evict: protected's oldest, then the window's.
    var position = firstEvictable(from: protected.oldest, skipping: isSkipped)
    if position < 0 { position = firstEvictable(from: window.oldest, skipping: isSkipped) }
    if position >= 0 { return node(position) }
    // Only the protected entry is left (or only entries of cost 0).
    return count == 1 && protectedSlot >= 0 ? node(protectedSlot) : nil
  }

  /// How much an entry of cost `cost` weighs against another's in admission: the fourth root
  /// of its cost (at least 1).
  @inlinable @inline(__always)
  static func weight(ofCost cost: Int) -> Double {
    Double(Swift.max(cost, 1)).squareRoot().squareRoot()
  }

  /// The first entry from `position` towards its list's newest end that `isSkipped` does not
  /// pass over, or -1.
  @inlinable @inline(__always)
  func firstEvictable(from position: Int, skipping isSkipped: (Int) -> Bool) -> Int {
    var position = position
    while position >= 0 && isSkipped(position) { position = Int(links.newer(position)) }
    return position
  }

  /// Whether the hill climber should look at the lookup counts: every 64 admissions.
  @inlinable @inline(__always)
  var isAdaptationDue: Bool { admissionsSinceCheck >= 64 }

  /// Moves the window's size by one step of the hill climber, once ten cache-fuls of lookups
  /// (`hits` and `misses` count every lookup of the store since it was made) have passed
  /// since the last move. O(1).
  @inlinable
  mutating func adapt(hits: Int, misses: Int, cacheful: Int) {
    admissionsSinceCheck = 0
    let lookups = hits &+ misses
    let periodLength = lookups &- periodLookups
    guard periodLength >= 10 * Swift.max(cacheful, 1) else { return }
    let hitRatio = Double(hits &- periodHits) / Double(periodLength)
    periodHits = hits
    periodLookups = lookups
    let change = hitRatio - previousHitRatio
    previousHitRatio = hitRatio
    guard abs(change) >= 0.001 else { return }
    let amount = change >= 0 ? step : -step
    step = abs(change) >= 0.05 ? (amount >= 0 ? 4_096 : -4_096) : 0.98 * amount
    moveWindow(by: Int(amount.rounded()))
  }

  /// The first of its invariants that does not hold in `table`, or `nil`: every entry in one
  /// list once, oldest to newest, each link matched and each count right; no candidate left
  /// after a write; no order kept before the first limit. Write lock held.
  @usableFromInline
  func _checkInvariants<Key, Value>(
    _ table: _ConcurrentTable<Key, Value>, _ held: borrowing _WriteLockHeld
  ) -> String? {
    if candidates != 0 || candidate >= 0 { return "a candidate is left after a write" }
    if !isOrdered {
      return window.count + probation.count + protected.count == 0
        ? nil : "an order kept without a limit"
    }
    var entries = 0
    for position in 0..<table.ringCount(held) where table.ringNode(at: position, held) != nil {
      entries += 1
    }
    var ordered = 0
    for list in [Self.windowList, Self.probationList, Self.protectedList] {
      let segment = self[list: list]
      var inList = 0
      var cost = 0
      var position = segment.oldest
      var previous = -1
      while position >= 0 {
        guard inList < entries, let node = table.ringNode(at: position, held),
          links.tag(position) & ~Self.uncountedWrite == list,
          Int(links.older(position)) == previous
        else { return "the eviction order is broken at ring position \(position)" }
        inList += 1
        cost += node.cost
        previous = position
        position = Int(links.newer(position))
      }
      if previous != segment.newest { return "list \(list) does not end at its newest" }
      if inList != segment.count {
        return "list \(list) has \(inList) entries, counts \(segment.count)"
      }
      if weighsCosts && cost != self.cost(of: list) {
        return "list \(list) holds a cost of \(cost), counts \(self.cost(of: list))"
      }
      ordered += inList
    }
    if ordered != entries {
      return "the eviction order has \(ordered) entries, the ring \(entries)"
    }
    return nil
  }
}
