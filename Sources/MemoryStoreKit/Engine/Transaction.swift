import Synchronization

/// What a write leaves to do once the write lock is released.
@usableFromInline
struct _WriteEffects {
  /// What the write retired from the table: freed after unlocking (a value's deinit may use the
  /// store).
  @usableFromInline var garbage: _TableGarbage?
  /// Publication, coalescing and removal deliveries to schedule.
  @usableFromInline var followUp: _TrackingFollowUp?
  /// Arm the expiry timer for this deadline.
  @usableFromInline var armSweepAt: Int64?

  @inlinable init() {}

  /// Adds what a publication retired to what is freed after unlocking.
  @inlinable @inline(__always)
  mutating func retire(_ retired: consuming _TableGarbage?) {
    guard let retired else { return }
    if garbage == nil {
      garbage = retired
    } else {
      garbage?.items.append(contentsOf: retired.items)
    }
  }
}

/// The time a write runs at, decided under the write lock
/// (``MemoryStore/_writeTime(timeToLive:readBefore:_:)``).
@usableFromInline
struct _WriteTime {
  /// What the write compares deadlines with and records as write times: the clock, or a lower
  /// bound of it (the coarse clock) where nothing can have expired by its upper bound.
  @usableFromInline let now: Int64
  /// What the deadlines the write gives count from: `now`, or an upper bound of the clock
  /// for lifetimes long enough (see ``MemoryStore/_keyedWriteTime(lifetime:idleLifetime:readBefore:_:)``).
  @usableFromInline let deadlineBase: Int64

  /// The clock's reading `now`, for both.
  @inlinable @inline(__always)
  init(_ now: Int64) {
    self.now = now
    deadlineBase = now
  }

  @inlinable @inline(__always)
  init(now: Int64, deadlineBase: Int64) {
    self.now = now
    self.deadlineBase = deadlineBase
  }
}

/// How a write's end keeps the store within its limits.
@usableFromInline
struct _LimitsPass {
  /// The fraction of the limits to stay within: below 1 for a trim.
  @usableFromInline var fraction: Double
  /// The reason the evictions are reported with, for a trim; `nil`: the limit exceeded.
  @usableFromInline var reason: EvictionReason?
  /// The most entries this write evicts.
  @usableFromInline var maximumEvictions: Int

  /// Evict down to the limits, as every write does.
  @inlinable static var toLimits: _LimitsPass {
    _LimitsPass(fraction: 1, reason: nil, maximumEvictions: .max)
  }

  @inlinable
  init(fraction: Double, reason: EvictionReason?, maximumEvictions: Int) {
    self.fraction = fraction
    self.reason = reason
    self.maximumEvictions = maximumEvictions
  }
}

/// One write, in progress under the write lock: the only way to change the store. Made by
/// ``MemoryStore/_transact(_:timeToLive:activatingPolicy:collectingExpiredKeys:limits:freesHere:_:)``,
/// which begins it (removes the entries due to expire), runs the write's body on it, ends it
/// (evicts to the limits) and commits it (publishes the table's staged version and logs).
///
/// Each change is staged on the table, accounted for by the policy and logged for change
/// batches and removals in the same step, by ``set(_:_:cost:timeToLive:hash:in:)`` and
/// ``remove(_:hash:reason:checksExpiry:in:)`` and their kin.
///
/// Its methods take the store as an argument rather than keeping a reference to it: the
/// caller's `self` is guaranteed alive, so using it costs no reference counting, while a
/// stored unowned reference costs a retain and a release per use (slow ones, once a timer
/// holds a weak reference to the store).
@usableFromInline
struct _Transaction<Key: Hashable & Sendable, Value: Sendable>: ~Copyable {
  /// The proof that the write lock is held, and the way to the writers' state.
  @usableFromInline let access: _WriteAccess<Key, Value>
  /// The time the write runs at (0 when no entry's time matters; see
  /// ``MemoryStore/_writeTime(timeToLive:readBefore:_:)``).
  @usableFromInline let now: Int64
  /// What the deadlines the write gives count from (see ``_WriteTime/deadlineBase``).
  @usableFromInline let deadlineBase: Int64
  /// Why the write's changes happen, as change batches report it.
  @usableFromInline let reason: ChangeReason
  /// What is left to do after unlocking.
  @usableFromInline var effects = _WriteEffects()
  /// Whether the write staged anything.
  @usableFromInline var changed = false
  /// The ring position of the entry that the write set, which its end never evicts unless it
  /// is the only entry; -1 for none. The entry is named by its position, which it keeps
  /// until holes are filled, because growth may copy its node.
  @usableFromInline var protected = -1
  /// The number of entries removed because they expired.
  @usableFromInline var expiredCount = 0
  /// Those entries' keys, if the write collects them (a clear logs the contents without them).
  @usableFromInline var expiredKeys: [Key]?
  /// Whether the write emptied the store (its log entry is sealed at once).
  @usableFromInline var cleared = false
  /// The length of the change log when the write began.
  @usableFromInline let logged: Int
  /// Whether the store has a policy: its nodes carry metadata, and the policy keeps totals.
  @usableFromInline var carriesMetadata: Bool
  /// Whether the removals logged must have their delivery scheduled.
  @usableFromInline var deliversRemovals = false
  /// Whether the write has ended: a body may end it itself, to read what its end did.
  @usableFromInline var ended = false

  @inlinable @inline(__always)
  init(
    store: MemoryStore<Key, Value>, access: consuming _WriteAccess<Key, Value>, time: _WriteTime,
    reason: ChangeReason, collectsExpiredKeys: Bool
  ) {
    now = time.now
    deadlineBase = time.deadlineBase
    self.reason = reason
    if collectsExpiredKeys { expiredKeys = [] }
    carriesMetadata = store._table.carriesMetadata(access.held)
    logged = access.changes.appendCount
    self.access = access
  }

  /// The proof that the write lock is held, which the table's writer methods take.
  @inlinable
  var held: _WriteLockHeld {
    @inline(__always) _read { yield access.held }
  }

  /// The policy: limits, expiry, the eviction order and settings.
  @inlinable
  var policy: _Policy {
    @inline(__always) unsafeAddress { UnsafePointer(access._state.pointer(to: \.policy)!) }
    @inline(__always) nonmutating unsafeMutableAddress { access._state.pointer(to: \.policy)! }
  }

  // MARK: Beginning, ending, committing

  /// Makes every entry written from now on carry metadata. O(1): the entries present keep
  /// their nodes (no cost, no deadline) until written again, or until
  /// ``giveEveryEntryMetadata(in:)`` copies them.
  @inlinable @inline(never)
  mutating func activatePolicy(in store: MemoryStore<Key, Value>) {
    guard !store._signals.policyActive.load(ordering: .relaxed) else { return }
    store._table.startCarryingMetadata(held)
    store._signals.policyActive.store(true, ordering: .relaxed)
    carriesMetadata = true
  }

  /// Activates the policy, and gives every entry present a node with metadata, so that it has
  /// a place in the ring: what the eviction order (a first limit) and a decider's purges, which
  /// walk the ring, need. O(*n*) once in the store's life, in a write that changes no value.
  @inlinable @inline(never)
  mutating func giveEveryEntryMetadata(in store: MemoryStore<Key, Value>) {
    activatePolicy(in: store)
    let metadata = _EntryMetadata(
      writtenAt: store._signals.keepsWriteTimes.load(ordering: .relaxed) ? now : 0,
      expiresAt: .max, cost: 0)
    let table = store._table
    var copied = false
    table.giveMetadataToEveryEntry(metadata, held) { old, new in
      access.policy.track(new, replacing: old, count: table.stagedCount(held))
      copied = true
    }
    if copied { changed = true }
  }

  /// Begins the write: removes the entries that have expired by its time, earliest first, a
  /// bounded number per write.
  @inlinable @inline(__always)
  mutating func begin(in store: MemoryStore<Key, Value>) {
    guard carriesMetadata, policy.expiry.next <= now else { return }
    removeExpired(in: store)
  }

  /// Removes the entries that have expired by the write's time, a bounded number.
  @inlinable @inline(never)
  mutating func removeExpired(in store: MemoryStore<Key, Value>) {
    while expiredCount < MemoryStore<Key, Value>._expiryChunk,
      let node = policy.expiry.takeExpired(store._table, held, now: now)
    {
      removeEntry(at: node.slot, reason: .expired, in: store)
    }
  }

  /// Ends the write: evicts to stay within `limits`, never the ``protected`` entry unless it
  /// is the only entry. An entry whose cost alone exceeds the cost limit is removed by its
  /// own write, and evicts nothing else. Only the first call does anything.
  @inlinable @inline(__always)
  mutating func end(_ limits: _LimitsPass, in store: MemoryStore<Key, Value>) {
    guard carriesMetadata && !ended else { return }
    ended = true
    // A store within its limits has nothing to evict: the call is skipped unless the write
    // expired entries (to count) or the policy has other work at the end.
    guard expiredCount > 0 || policy.hasWorkAtEnd(store._table, held, fraction: limits.fraction)
    else { return }
    evict(to: limits, in: store)
  }

  /// The work of ``end(_:in:)`` on a store with a policy: kept out of line, so that the write
  /// of a store without one stays small enough for its staging to be inlined.
  @inlinable @inline(never)
  mutating func evict(to limits: _LimitsPass, in store: MemoryStore<Key, Value>) {
    let table = store._table
    var evictions = 0
    if protected >= 0, policy.limits.costLimit > 0,
      let node = table.ringNode(at: protected, held), node.cost > policy.limits.costLimit
    {
      removeEntry(at: protected, reason: .evictedByCostLimit, in: store)
      policy.evictions[.costLimit] += 1
      evictions += 1
      protected = -1
    }
    while evictions < limits.maximumEvictions,
      let over = policy.limits.isOver(count: table.stagedCount(held), fraction: limits.fraction)
    {
      // The sketch of uses and the record of evicted keys are made at the first eviction of
      // the limits (a store within its limits, or trimmed under memory pressure, does without
      // them), sized to the store then.
      if limits.reason == nil {
        policy.prepareForEvictions(policy.limits.cacheful(count: table.stagedCount(held)))
      }
      guard
        let victim = policy.nextVictim(
          in: table, held, protecting: protected,
          costLimit: over == .costLimit ? policy.limits.costLimit : 0)
      else { break }
      let evictionReason = limits.reason ?? over
      if victim.slot == protected { protected = -1 }  // It was the only entry.
      removeEntry(at: victim.slot, reason: .evicted(evictionReason), in: store)
      policy.evictions[evictionReason] += 1
      evictions += 1
    }
    if expiredCount > 0 { policy.evictions[.expired] += UInt64(expiredCount) }
    policy.endEvictions()
    if policy.isAdaptationDue { adaptEvictionOrder(in: store) }
    policy.fillRingHoles(table, held)
  }

  /// Lets the eviction order's hill climber look at the store's lookup counts (see
  /// ``_EvictionOrder/adapt(hits:misses:cacheful:)``): every 64 admissions, out of line.
  @inlinable @inline(never)
  mutating func adaptEvictionOrder(in store: MemoryStore<Key, Value>) {
    policy.adapt(
      hits: store._readers.total(ofCounter: _ReaderIndicator.hitCounter),
      misses: store._readers.total(ofCounter: _ReaderIndicator.missCounter),
      cacheful: policy.limits.cacheful(count: store._table.stagedCount(held)))
  }

  /// Ends and commits the write: what is left to do after unlocking is then ``effects``.
  @inlinable @inline(__always)
  mutating func close(_ limits: _LimitsPass, in store: MemoryStore<Key, Value>) {
    end(limits, in: store)
    commit(in: store)
  }

  /// Commits the write: publishes what it staged and completes ``effects``, what is left to do
  /// after unlocking.
  @inlinable @inline(__always)
  mutating func commit(in store: MemoryStore<Key, Value>) {
    let nextExpiry = carriesMetadata ? policy.expiry.next : .max
    if nextExpiry != .max && policy.expiry.sweepArmedFor.map({ nextExpiry < $0 }) ?? true {
      policy.expiry.sweepArmedFor = nextExpiry
      effects.armSweepAt = nextExpiry
    }
    guard changed else {
      // A removal of an absent key changes nothing here, but is a local change to feed.
      if access.changes.feedsLocalChanges && access.changes.settleFeed() {
        var followUp = _TrackingFollowUp()
        followUp.wakesFeed = true
        effects.followUp = followUp
      }
      // Nothing to publish; the earliest deadline may have moved back (items that surfaced
      // early sank), and no entry expires before it.
      if carriesMetadata && nextExpiry != store._signals.nextExpiry.load(ordering: .relaxed) {
        store._signals.nextExpiry.store(nextExpiry, ordering: .releasing)
      }
      return
    }
    let (garbage, followUp) = store._commitStaged(
      access, logged: logged, cleared: cleared, deliversRemovals: deliversRemovals,
      nextExpiry: carriesMetadata ? nextExpiry : nil)
    effects.followUp = followUp
    effects.retire(garbage)
  }

  // MARK: Changes

  /// The metadata of an entry written now. The write time is kept only for a decider, the
  /// one reader of it.
  @inlinable @inline(__always)
  func metadata(
    cost: Int, timeToLive: Duration?, in store: MemoryStore<Key, Value>
  ) -> _EntryMetadata {
    policy.expiry.metadata(
      cost: cost, timeToLive: timeToLive, at: _WriteTime(now: now, deadlineBase: deadlineBase),
      keepsWriteTime: store._signals.keepsWriteTimes.load(ordering: .relaxed))
  }

  /// The idle deadline of an entry written or touched now (`Int64.max`: none, without a time to
  /// idle).
  @inlinable @inline(__always)
  var idleDeadline: Int64 { policy.expiry.idleDeadline(now: now) }

  /// The current node of `key` unless it is absent or expired (then it is removed as such).
  @inlinable
  mutating func liveNode(_ key: Key, in store: MemoryStore<Key, Value>) -> _Node<Key, Value>? {
    guard let node = store._table.stagedNode(forKey: key, held) else { return nil }
    guard node.deadline > now else {
      remove(key, reason: .expired, in: store)
      return nil
    }
    return node
  }

  /// Stages `key` → `value` with `cost` and `timeToLive` (`nil`: the default), and makes it
  /// the entry this write's end does not evict; returns the live value it replaces. `hash`
  /// is `key.hashValue` if the caller has it.
  @inlinable @inline(__always)
  mutating func set(
    _ key: Key, _ value: Value, cost: Int, timeToLive: Duration?, hash: Int? = nil,
    in store: MemoryStore<Key, Value>
  ) -> Value? {
    guard carriesMetadata else {
      // Without metadata, the table's staging is specialised for none: no entry has a cost,
      // a deadline or a place in the eviction order.
      let hash = hash ?? key.hashValue
      return noteSet(
        key, value, replacingValue: store._table.stageSet(key, value, hash: hash, held), hash: hash)
    }
    return setWithMetadata(key, value, cost: cost, timeToLive: timeToLive, hash: hash, in: store)
  }

  /// ``set(_:_:cost:timeToLive:hash:in:)`` on a store with a policy (out of line: see
  /// ``evict(to:in:)``).
  @inlinable @inline(never)
  mutating func setWithMetadata(
    _ key: Key, _ value: Value, cost: Int, timeToLive: Duration?, hash: Int? = nil,
    in store: MemoryStore<Key, Value>
  ) -> Value? {
    let entryMetadata = metadata(cost: cost, timeToLive: timeToLive, in: store)
    let applied = set(key, value, entryMetadata, hash: hash, in: store)
    protected = applied.position
    return applied.previous
  }

  /// Stages `key` → `value` with `metadata` (`nil`: in a table without metadata); returns the
  /// live value it replaces (an expired one is logged as removed by expiry first) and the
  /// entry's ring position (-1 on a store without a policy).
  @inlinable @inline(__always)
  mutating func set(
    _ key: Key, _ value: Value, _ metadata: _EntryMetadata?, hash: Int? = nil,
    in store: MemoryStore<Key, Value>
  ) -> (previous: Value?, position: Int) {
    // Hashed once, for the table and the change log (a node keeps its hash only with a limit).
    let hash = hash ?? key.hashValue
    let (old, node) = store._table.stageSet(
      key, value, metadata: metadata, hash: hash, held)
    return noteStaged(key, value, replacing: old, node: node, hash: hash, in: store)
  }

  /// Accounts for and logs `key` → `value`, whose hash is `hash`, just staged as `node` in
  /// place of `old`; returns the live value it replaces (an expired one is logged as removed
  /// by expiry first) and the entry's ring position (-1 on a store without a policy).
  @inlinable @inline(__always)
  mutating func noteStaged(
    _ key: Key, _ value: Value, replacing old: _Node<Key, Value>?, node: _Node<Key, Value>,
    hash: Int, in store: MemoryStore<Key, Value>
  ) -> (previous: Value?, position: Int) {
    if carriesMetadata { policy.track(node, replacing: old, count: store._table.stagedCount(held)) }
    return (noteSet(key, value, replacing: old, hash: hash), node.hasMetadata ? node.slot : -1)
  }

  /// Accounts for and logs `key` → `value`, just staged without metadata in place of
  /// `previous`; returns `previous`. `hash` is `key.hashValue` if the caller has it.
  @inlinable @inline(__always)
  mutating func noteSet(
    _ key: Key, _ value: Value, replacingValue previous: Value?, hash: Int?
  ) -> Value? {
    changed = true
    if access.state.logWrite(key, value, previous: previous, reason: reason, hash: hash) {
      deliversRemovals = true
    }
    return previous
  }

  /// Accounts for and logs `key` → `value`, just staged in place of `old`; returns the live
  /// value it replaced (an expired one is logged as removed by expiry first). `hash` is
  /// `key.hashValue` if the caller has it.
  @inlinable @inline(__always)
  mutating func noteSet(
    _ key: Key, _ value: Value, replacing old: _Node<Key, Value>?, hash: Int?
  ) -> Value? {
    guard let old, !old.isTombstone else {
      return noteSet(key, value, replacingValue: nil, hash: hash)
    }
    guard old.hasMetadata && old.deadline <= now else {
      return noteSet(key, value, replacingValue: old.value.pointee, hash: hash)
    }
    // It replaces an entry that had expired: that entry's removal comes first.
    changed = true
    noteExpired(key, old.value.pointee, hash: old.storedHash)
    logChange(key, value, wasPresent: false, reason, hash: old.storedHash)
    return nil
  }

  /// Restages `key`'s live entry with the same value, its expiry moved to `lifetime` from now
  /// (unchanged if `nil`), counted as a use, and protected from this write's evictions;
  /// logged as no change. Returns the entry's value, or `nil` if the key is absent or expired.
  @inlinable
  mutating func renew(
    _ key: Key, lifetime: Int64?, in store: MemoryStore<Key, Value>
  ) -> Value? {
    guard let node = liveNode(key, in: store) else { return nil }
    // Without metadata (written before the policy was active): no cost, no deadline.
    var metadata = node.metadata
    if let lifetime { metadata.expiresAt = now.addingSaturating(lifetime) }
    // A touch is a use: it renews the idle deadline too.
    metadata.idleExpiresAt = idleDeadline
    let value = node.value.pointee
    let (old, new) = store._table.stageSet(key, value, metadata: metadata, held)
    policy.track(new, replacing: old, count: store._table.stagedCount(held))
    changed = true
    protected = new.slot
    return value
  }

  /// Counts and logs the removal of `key`, which held `value`, because it expired. `hash` is
  /// `key.hashValue` if the caller has it.
  @inlinable
  mutating func noteExpired(_ key: Key, _ value: Value, hash: Int?) {
    expiredCount += 1
    expiredKeys?.append(key)
    logChange(key, nil, wasPresent: true, .expired, hash: hash)
    if access.changes.recordsRemovals { logRemoval(key, value, .evicted(.expired)) }
  }

  /// Stages the removal of `key`; returns the value removed, unless it had expired (then the
  /// removal is counted and logged as an expiry). An eviction (`checksExpiry` false) is logged
  /// with its own reason.
  @inlinable @inline(__always)
  @discardableResult
  mutating func remove(
    _ key: Key, hash: Int? = nil, reason: ChangeReason, checksExpiry: Bool = true,
    in store: MemoryStore<Key, Value>
  ) -> Value? {
    if reason == .write && store._signals.loadsStarted.load(ordering: .relaxed) {
      // A load of the key that read its source before this removal must not store it.
      store._recordRemovalForLoads(hash: hash ?? key.hashValue, in: &access.state)
    }
    guard let old = store._table.stageRemoveNode(key, hash: hash, held) else {
      if access.changes.feedsLocalChanges { noteLocalRemoval(key, reason) }
      return nil
    }
    let value = removed(old, key: key, reason: reason, checksExpiry: checksExpiry)
    if value == nil && access.changes.feedsLocalChanges { noteLocalRemoval(key, reason) }
    return value
  }

  /// Hands the open ``LocalChangeFeed`` a removal by a write of `key` that found it absent or
  /// expired, which logs no change: the other instances may hold it.
  @inlinable @inline(never)
  func noteLocalRemoval(_ key: Key, _ reason: ChangeReason) {
    guard reason == .write && !access.changes.suppressesFeed else { return }
    access.changes.appendLocal(.removed(key))
  }

  /// Removes the entry at ring position `position` (the store has a policy), which the policy
  /// chose: its key is neither hashed nor compared.
  @inlinable @inline(__always)
  mutating func removeEntry(
    at position: Int, reason: ChangeReason, in store: MemoryStore<Key, Value>
  ) {
    let old = store._table.stageRemoveEntry(at: position, held)
    _ = removed(old, key: old.key.pointee, reason: reason, checksExpiry: false)
  }

  /// Accounts for `old`, just removed, and logs it as `key` (the caller's key, as every
  /// write logs it); returns its value unless it had expired.
  @inlinable @inline(__always)
  mutating func removed(
    _ old: _Node<Key, Value>, key: @autoclosure () -> Key, reason: ChangeReason,
    checksExpiry: Bool
  ) -> Value? {
    // An entry written before the policy was active may have no metadata, and no place in it.
    if carriesMetadata && old.hasMetadata { policy.untrack(old) }
    changed = true
    if reason == .expired || (checksExpiry && old.deadline <= now) {
      noteExpired(key(), old.value.pointee, hash: old.storedHash)
      return nil
    }
    // Checked here so that a store reporting nothing does not copy the key out of the node.
    if access.changes.isReporting,
      access.state.logWrite(
        key(), nil, previous: old.value.pointee, reason: reason, hash: old.storedHash)
    {
      deliversRemovals = true
    }
    return old.value.pointee
  }

  /// Stages the removal of every entry.
  @inlinable
  mutating func removeAll(in store: MemoryStore<Key, Value>) {
    if access.changes.feedsLocalChanges && reason == .write && !access.changes.suppressesFeed {
      // Even of an empty store: the other instances may hold entries.
      access.changes.appendLocal(.cleared)
    }
    if reason == .write && store._signals.loadsStarted.load(ordering: .relaxed) {
      // Loads that read their source before this clear must not store what they read.
      store._recordClearForLoads(in: &access.state)
    }
    let table = store._table
    let count = table.stagedCount(held)
    guard count > 0 else { return }
    if let evictionReason = reason.evictionReason {
      policy.evictions[evictionReason] += UInt64(count)
    }
    if access.changes.observesReads {
      if access.changes.notices == nil { access.changes.notices = _ObservationNotices() }
      access.changes.notices?.cleared = true
    }
    if access.changes.isTracking {
      // What readers see now, less the expired entries this write removed first.
      access.changes.appendClear(
        _ClearedContents(table: table, excluding: expiredKeys ?? []), reason)
      cleared = true
    }
    if access.changes.recordsRemovals {
      // What readers see now, less the expired entries this write removed first.
      let expired = Set(expiredKeys ?? [])
      let cause = RemovalCause.removal(reason)
      table._forEach(at: table.publishedVersion(held)) { key, value in
        if !expired.contains(key) { logRemoval(key, value, cause) }
      }
    }
    table.stageRemoveAll(held)
    policy.removeAll()
    changed = true
  }

  // MARK: Logging

  /// Logs a change for change batches, if they are on; `hash` is `key.hashValue` if the
  /// caller has it.
  @inlinable @inline(__always)
  func logChange(
    _ key: Key, _ value: Value?, wasPresent: Bool, _ reason: ChangeReason, hash: Int? = nil
  ) {
    guard access.changes.isLogging else { return }
    access.changes.appendKey(key, value, wasPresent: wasPresent, reason, hash: hash)
  }

  /// Logs a removal for ``MemoryStore/removals``.
  @inlinable @inline(never)
  mutating func logRemoval(_ key: Key, _ value: Value, _ cause: RemovalCause) {
    if access.removals.append(key, value, cause) { deliversRemovals = true }
  }
}
