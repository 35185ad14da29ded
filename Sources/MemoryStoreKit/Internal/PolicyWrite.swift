import Synchronization

/// One write of a store with a policy, in progress under the write lock: stages each change
/// on the table, keeps the policy's totals and logs it for change batches in the same step.
///
/// Its methods take the store as an argument rather than keeping a reference to it: the
/// caller's `self` is guaranteed alive, so using it costs no reference counting, while a
/// stored unowned reference costs a retain and a release per use (slow ones, once a timer
/// holds a weak reference to the store).
@usableFromInline
struct _PolicyWrite<Key: Hashable & Sendable, Value: Sendable>: ~Copyable {
  @usableFromInline let now: Int64
  @usableFromInline let reason: ChangeReason
  @usableFromInline var outcome = MemoryStore<Key, Value>._PolicyOutcome()
  /// The number of entries removed because they expired.
  @usableFromInline var expiredCount = 0
  /// Those entries' keys, if the write collects them (a clear logs the contents without them).
  @usableFromInline var expiredKeys: [Key]?
  /// Whether the write emptied the store (its log entry is sealed at once).
  @usableFromInline var cleared = false
  @usableFromInline let logged: Int
  /// Whether the store has a policy: its nodes carry metadata, and the policy keeps totals.
  @usableFromInline let carriesMetadata: Bool
  /// Whether removals are logged for ``MemoryStore/removals(bufferingNewest:)``.
  @usableFromInline let recordsRemovals: Bool
  /// Whether the removals logged must have their delivery scheduled.
  @usableFromInline var deliversRemovals = false

  @inlinable
  init(
    store: MemoryStore<Key, Value>, now: Int64, reason: ChangeReason, collectsExpiredKeys: Bool
  ) {
    self.now = now
    self.reason = reason
    if collectsExpiredKeys { expiredKeys = [] }
    carriesMetadata = store._table.carriesMetadata
    recordsRemovals = store._tracker.pointer.pointee.recordsRemovals
    logged = store._tracker.pointer.pointee.log.count
  }

  /// The current node of `key` unless it is absent or expired (then it is removed as such).
  @inlinable
  mutating func liveNode(_ key: Key, in store: MemoryStore<Key, Value>) -> _Node<Key, Value>? {
    guard let node = store._table.stagedNode(forKey: key) else { return nil }
    guard node.expiresAt > now else {
      remove(key, reason: .expired, in: store)
      return nil
    }
    return node
  }

  /// Stages `key` → `value`; returns the live value it replaces (an expired one is logged as
  /// removed by expiry first) and the entry's ring position (-1 on a store without a policy).
  @inlinable @inline(__always)
  mutating func set(
    _ key: Key, _ value: Value, _ metadata: _EntryMetadata, in store: MemoryStore<Key, Value>
  ) -> (previous: Value?, position: Int) {
    let (old, node) = store._table.stageSet(
      key, value, metadata: carriesMetadata ? metadata : nil)
    if carriesMetadata {
      store._policy.pointer.pointee.track(node, replacing: old, count: store._table.stagedCount)
    }
    outcome.changed = true
    var previous: Value?
    if let old, !old.isTombstone {
      let expired = old.hasMetadata && old.expiresAt <= now
      if expired {
        noteExpired(key, in: store)
      } else {
        previous = old.value.pointee
      }
      if recordsRemovals {
        logRemoval(key, old.value.pointee, expired ? .evicted(.expired) : .replaced, in: store)
      }
    }
    store._logPolicyChange(key, value, wasPresent: previous != nil, reason)
    return (previous, node.hasMetadata ? node.slot : -1)
  }

  /// Restages `key`'s live entry with the same value, its expiry moved to `lifetime` from now
  /// (unchanged if `nil`), counted as a use; logged as no change. Returns the entry's value and
  /// ring position, or `nil` if the key is absent or expired.
  @inlinable
  mutating func renew(
    _ key: Key, lifetime: Int64?, in store: MemoryStore<Key, Value>
  ) -> (value: Value, position: Int)? {
    guard let node = liveNode(key, in: store) else { return nil }
    var metadata = node.metadata
    if let lifetime { metadata.expiresAt = now.addingSaturating(lifetime) }
    let value = node.value.pointee
    let (old, new) = store._table.stageSet(key, value, metadata: metadata)
    store._policy.pointer.pointee.track(new, replacing: old, count: store._table.stagedCount)
    outcome.changed = true
    return (value, new.slot)
  }

  /// Counts and logs the removal of `key` because it expired.
  @inlinable
  mutating func noteExpired(_ key: Key, in store: MemoryStore<Key, Value>) {
    expiredCount += 1
    expiredKeys?.append(key)
    store._logPolicyChange(key, nil, wasPresent: true, .expired)
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
    guard let old = store._table.stageRemoveNode(key, hash: hash) else { return nil }
    return removed(old, key: key, reason: reason, checksExpiry: checksExpiry, in: store)
  }

  /// Removes the entry at ring position `position` (the store has a policy), which the policy
  /// chose: its key is neither hashed nor compared.
  @inlinable @inline(__always)
  mutating func removeEntry(
    at position: Int, reason: ChangeReason, in store: MemoryStore<Key, Value>
  ) {
    let old = store._table.stageRemoveEntry(at: position)
    _ = removed(old, key: old.key.pointee, reason: reason, checksExpiry: false, in: store)
  }

  /// Accounts for `old`, just removed, and logs it as `key` (the caller's key, as every
  /// write logs it); returns its value unless it had expired.
  @inlinable @inline(__always)
  mutating func removed(
    _ old: _Node<Key, Value>, key: @autoclosure () -> Key, reason: ChangeReason,
    checksExpiry: Bool, in store: MemoryStore<Key, Value>
  ) -> Value? {
    if carriesMetadata { store._policy.pointer.pointee.untrack(old) }
    outcome.changed = true
    if reason == .expired || (checksExpiry && old.expiresAt <= now) {
      noteExpired(key(), in: store)
      if recordsRemovals { logRemoval(key(), old.value.pointee, .evicted(.expired), in: store) }
      return nil
    }
    if recordsRemovals { logRemoval(key(), old.value.pointee, .removal(reason), in: store) }
    // Checked here too so that an untracked store does not copy the key out of the node.
    if store._tracker.pointer.pointee.isTracking {
      store._logPolicyChange(key(), nil, wasPresent: true, reason)
    }
    return old.value.pointee
  }

  /// Stages the removal of every entry.
  @inlinable
  mutating func removeAll(in store: MemoryStore<Key, Value>) {
    let table = store._table
    let count = table.stagedCount
    guard count > 0 else { return }
    let policy = store._policy.pointer
    if let evictionReason = reason.evictionReason {
      policy.pointee.evictions[evictionReason] += UInt64(count)
    }
    let tracker = store._tracker.pointer
    if tracker.pointee.isTracking {
      // What readers see now, less the expired entries this write removed first.
      tracker.pointee.log.append(
        .clear(_ClearedContents(table: table, excluding: expiredKeys ?? []), reason))
      cleared = true
    }
    if recordsRemovals {
      // What readers see now, less the expired entries this write removed first.
      let expired = Set(expiredKeys ?? [])
      let cause = RemovalCause.removal(reason)
      table._forEach(at: table._writer.pointer.pointee.version) { key, value in
        if !expired.contains(key) { logRemoval(key, value, cause, in: store) }
      }
    }
    table.stageRemoveAll()
    policy.pointee.removeAll()
    outcome.changed = true
  }

  /// Logs a removal for ``MemoryStore/removals(bufferingNewest:)``.
  @inlinable
  mutating func logRemoval(
    _ key: Key, _ value: Value, _ cause: RemovalCause, in store: MemoryStore<Key, Value>
  ) {
    if store._logRemovalLocked(key, value, cause) { deliversRemovals = true }
  }

  /// Publishes the write and completes ``outcome``: what is left to do after unlocking.
  @inlinable @inline(__always)
  mutating func finish(in store: MemoryStore<Key, Value>) {
    let policy = store._policy.pointer
    let nextExpiry = policy.pointee.nextExpiry
    if nextExpiry != .max && policy.pointee.sweepArmedFor.map({ nextExpiry < $0 }) ?? true {
      policy.pointee.sweepArmedFor = nextExpiry
      outcome.armSweepAt = nextExpiry
    }
    guard outcome.changed else {
      // Nothing to publish; the earliest deadline may have moved back (items that surfaced
      // early sank), and no entry expires before it.
      if nextExpiry != store._nextExpiry.load(ordering: .relaxed) {
        store._nextExpiry.store(nextExpiry, ordering: .releasing)
      }
      return
    }
    let tracker = store._tracker.pointer
    if cleared {
      outcome.followUp = tracker.pointee.followUp(sealing: true)
    } else if tracker.pointee.log.count != logged {
      outcome.followUp = tracker.pointee.followUpIfNeeded()
    }
    if deliversRemovals {
      outcome.followUp = outcome.followUp ?? _TrackingFollowUp()
      outcome.followUp?.deliversRemovals = true
    }
    // A read that sees this write must see an earlier expiry it brings; a later one only
    // once the expired entries are gone from what readers see. Stored only when it changes:
    // every read loads it.
    let current = store._nextExpiry.load(ordering: .relaxed)
    if nextExpiry < current { store._nextExpiry.store(nextExpiry, ordering: .relaxed) }
    outcome.garbage = store._table.publish()
    if nextExpiry > current { store._nextExpiry.store(nextExpiry, ordering: .releasing) }
    tracker.pointee.writeCount &+= 1
  }
}
