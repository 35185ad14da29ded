import Synchronization

/// The net change of one key since the previous batch.
@usableFromInline
struct _KeyChange<Value> {
  // The value first: the small fields then fill the padding after it (one change per key
  // touched is kept until the batch is published, so its size matters).

  /// Its value now; `nil` if absent.
  @usableFromInline var current: Value?
  /// Whether the key was present when the previous batch was published.
  @usableFromInline var wasPresent: Bool
  /// The reason of its latest change.
  @usableFromInline var reason: ChangeReason
  /// The reason of the change that first removed it since the previous batch, if it was
  /// present then: the reason a batch reports for a key it reports removed.
  @usableFromInline var removalReason: ChangeReason?

  @inlinable
  init(
    wasPresent: Bool, current: Value?, reason: ChangeReason, removalReason: ChangeReason? = nil
  ) {
    self.wasPresent = wasPresent
    self.current = current
    self.reason = reason
    self.removalReason = removalReason
  }

  /// The reason a batch reports for the key: for a key present at the previous batch and
  /// absent now, the reason of its first removal, whatever changed it afterwards; otherwise
  /// the reason of its latest change.
  @inlinable
  var reportedReason: ChangeReason {
    current == nil && wasPresent ? removalReason ?? reason : reason
  }
}

/// One change as a writer logs it, in write order.
@usableFromInline
enum _LoggedChange<Key: Hashable, Value> {
  /// `key` now has the value (`nil`: absent); the flag says whether it was present just
  /// before this write.
  case key(Key, Value?, wasPresent: Bool, ChangeReason)
  /// `removeAll()`, with the store's contents just before it.
  case clear(_ClearedContents<Key, Value>, ChangeReason)
}

/// What a writer must do after it unlocks, because of what it logged.
@usableFromInline
struct _TrackingFollowUp {
  /// Schedule a publication after this delay.
  @usableFromInline var publishAfter: Duration?
  /// Start a background coalescing pass.
  @usableFromInline var coalesceInBackground = false
  /// Coalesce now, on the writing thread: the log is at its bound.
  @usableFromInline var coalesceNow = false
  /// Schedule the delivery of the removals logged for ``MemoryStore/removals(bufferingNewest:)``.
  @usableFromInline var deliversRemovals = false

  @usableFromInline init() {}
}

/// The changes made since the previous batch, as writers log them: guarded by the store's
/// write lock.
///
/// Logging a change is an append, with no hashing and nothing released, so it costs a
/// writer almost nothing. Full segments of the log are coalesced into a
/// ``_ChangeAccumulator`` outside the write lock, by a background pass or by the publisher;
/// a writer that finds ``maximumSegments`` waiting coalesces them itself, so the log never
/// holds more than about `segmentCapacity * maximumSegments` changes.
@usableFromInline
struct _ChangeTracker<Key: Hashable, Value> {
  @usableFromInline static var segmentCapacity: Int { 4_096 }
  @usableFromInline static var maximumSegments: Int { 16 }

  /// The notification interval.
  @usableFromInline var interval: Duration = .zero {
    didSet {
      isTracking = interval > .zero
      isReporting = isTracking || recordsRemovals
    }
  }
  /// Whether writes log what they remove or replace: while ``MemoryStore/removals(bufferingNewest:)``
  /// has subscribers.
  @usableFromInline var recordsRemovals = false {
    didSet { isReporting = isTracking || recordsRemovals }
  }
  /// Whether the interval was set (to anything, `.zero` included): then a new subscriber
  /// does not start batches at the default interval.
  @usableFromInline var intervalIsChosen = false
  /// Whether a publication is scheduled.
  @usableFromInline var isArmed = false
  /// Whether a background coalescing pass is scheduled.
  @usableFromInline var isCoalescing = false
  /// The segment being filled.
  @usableFromInline var log: [_LoggedChange<Key, Value>] = []
  /// Full segments, oldest first.
  @usableFromInline var segments: [[_LoggedChange<Key, Value>]] = []
  /// The number of writes that changed the store, whether batches are on or not: a version
  /// of the contents, for the persistence manager to tell whether anything changed.
  @usableFromInline var writeCount: UInt64 = 0

  @usableFromInline init() {}

  /// Whether writes are logged: the notification interval is above zero. Stored, because every
  /// write reads it.
  @usableFromInline private(set) var isTracking = false
  /// Whether a write reports anything: changes for batches, or removals. Stored, because every
  /// write reads it: one load and a branch, for a store that reports nothing.
  @usableFromInline private(set) var isReporting = false

  /// Appends that `key` now has `value` (`nil`: absent); `wasPresent` says whether it was
  /// present just before this write. Out of line: a write of a store without batches stays
  /// small enough for the table's staging to be inlined into it.
  @inlinable @inline(never)
  mutating func appendKey(_ key: Key, _ value: Value?, wasPresent: Bool, _ reason: ChangeReason) {
    log.append(.key(key, value, wasPresent: wasPresent, reason))
  }

  /// Counts a write that changed the store, and returns what it must do after unlocking for
  /// what it logged (`nil`, the common case: nothing): every write's last step before it
  /// publishes.
  ///
  /// - Parameters:
  ///   - logged: The length of the log when the write began.
  ///   - cleared: Whether the write emptied the store: its log entry is sealed at once.
  ///   - deliversRemovals: Whether it logged removals whose delivery must be scheduled.
  @inlinable @inline(__always)
  mutating func commit(logged: Int, cleared: Bool, deliversRemovals: Bool) -> _TrackingFollowUp? {
    writeCount &+= 1
    // A store that reports nothing logged nothing.
    guard isReporting else { return nil }
    var followUp: _TrackingFollowUp?
    if cleared {
      followUp = self.followUp(sealing: true)
    } else if log.count != logged {
      followUp = followUpIfNeeded()
    }
    if deliversRemovals {
      followUp = followUp ?? _TrackingFollowUp()
      followUp?.deliversRemovals = true
    }
    return followUp
  }

  /// What a write must do after unlocking, once it has appended everything it logs; `nil`
  /// for nothing (the common case). A write that logs several changes calls it once, at the
  /// end, so its segment may exceed ``segmentCapacity`` by that write's size.
  @inlinable @inline(__always)
  mutating func followUpIfNeeded() -> _TrackingFollowUp? {
    if isArmed && log.count < Self.segmentCapacity { return nil }
    return followUp()
  }

  /// Arms the publication and seals a full segment, as needed; with `sealing`, seals the
  /// current segment whatever its size (after a clear, so that the clear's view of the
  /// contents, which holds the table's memory reclamation back, is copied out soon).
  @usableFromInline
  mutating func followUp(sealing: Bool = false) -> _TrackingFollowUp {
    var followUp = _TrackingFollowUp()
    if !isArmed {
      isArmed = true
      followUp.publishAfter = interval
    }
    if log.count >= Self.segmentCapacity || (sealing && !log.isEmpty) {
      segments.append(log)
      log = []
      log.reserveCapacity(Self.segmentCapacity)
      if segments.count >= Self.maximumSegments {
        followUp.coalesceNow = true
      } else if !isCoalescing {
        isCoalescing = true
        followUp.coalesceInBackground = true
      }
    }
    return followUp
  }

  /// The first of its invariants that does not hold, or `nil`: the flags every write reads
  /// agree with the settings they are derived from, and the log keeps its bound. Write lock
  /// held.
  func _checkInvariants() -> String? {
    if isTracking != (interval > .zero) { return "the change log's tracking flag is stale" }
    if isReporting != (isTracking || recordsRemovals) {
      return "the change log's reporting flag is stale"
    }
    if segments.count > Self.maximumSegments {
      return "the change log holds \(segments.count) full segments"
    }
    return nil
  }

  /// Takes the logged changes, oldest first: every full segment, and the current one too if
  /// `includingCurrent`.
  @inlinable
  mutating func takeLogged(includingCurrent: Bool) -> [[_LoggedChange<Key, Value>]] {
    var taken = segments
    segments = []
    if includingCurrent && !log.isEmpty {
      taken.append(log)
      log = []
    }
    return taken
  }
}

/// The net change per key since the previous batch, coalesced from the log in write order;
/// guarded by its own lock, never by the write lock. One entry per distinct key changed.
///
/// Inlinable, like the write path, so that coalescing runs specialised for the client's types.
@usableFromInline
struct _ChangeAccumulator<Key: Hashable, Value> {
  /// The keys touched since the previous batch, or since the last `removeAll()` if `cleared`.
  @usableFromInline var changes: [Key: _KeyChange<Value>] = [:]
  /// Set by the first `removeAll()` since the previous batch.
  @usableFromInline var cleared: _Cleared<Key, Value>?

  @usableFromInline init() {}

  /// Applies one logged change.
  ///
  /// - Returns: What the accumulator let go of, appended to `displaced` for the caller to
  ///   release after unlocking.
  @inlinable
  mutating func apply(_ logged: _LoggedChange<Key, Value>, displaced: inout [Value]) {
    switch logged {
    case .key(let key, let value, let wasPresent, let reason):
      let base = cleared?.wasPresent(key) ?? wasPresent
      let removal = cleared?.firstRemovalReason(key)
      if let old = Self.update(
        &changes[
          key,
          default: _KeyChange(
            wasPresent: base, current: nil, reason: reason, removalReason: removal)],
        to: value, reason: reason, removes: value == nil && wasPresent)
      {
        displaced.append(old)
      }
    case .clear(let contents, let reason):
      if cleared == nil {
        cleared = _Cleared(contents: contents.dictionary, before: changes, reason: reason)
      } else {
        // A second clear: every key touched since the first is absent again, and whether it
        // was present at the previous batch is known from the first clear.
        for change in changes.values {
          if let value = change.current { displaced.append(value) }
        }
      }
      changes = [:]
    }
  }

  /// Sets `entry`'s current value and reason in place, and its removal reason if `removes`
  /// (the change removes a present key) is its first removal since the previous batch;
  /// returns the value it held.
  @inlinable @inline(__always)
  static func update(
    _ entry: inout _KeyChange<Value>, to value: Value?, reason: ChangeReason, removes: Bool
  ) -> Value? {
    let old = entry.current
    entry.current = value
    entry.reason = reason
    if removes && entry.wasPresent && entry.removalReason == nil { entry.removalReason = reason }
    return old
  }
}

extension _ChangeAccumulator where Key: Sendable, Value: Sendable {
  /// Takes the changes accumulated so far, leaving none.
  @inlinable
  mutating func take() -> _RecordedChanges<Key, Value> {
    let taken = _RecordedChanges(changes: changes, cleared: cleared)
    changes = [:]
    cleared = nil
    return taken
  }
}

/// The state of a `removeAll()` since the previous batch.
@usableFromInline
struct _Cleared<Key: Hashable, Value> {
  /// The store's entries just before the clear.
  @usableFromInline let contents: [Key: Value]
  /// The changes recorded before the clear.
  @usableFromInline let before: [Key: _KeyChange<Value>]
  @usableFromInline let reason: ChangeReason

  @inlinable
  init(contents: [Key: Value], before: [Key: _KeyChange<Value>], reason: ChangeReason) {
    self.contents = contents
    self.before = before
    self.reason = reason
  }

  /// Whether `key` was present when the previous batch was published.
  @inlinable
  func wasPresent(_ key: Key) -> Bool {
    if let change = before[key] { return change.wasPresent }
    return contents[key] != nil
  }

  /// The reason of the change that first removed `key` since the previous batch, up to and
  /// including the clear; `nil` if `key` was absent at the previous batch.
  @inlinable
  func firstRemovalReason(_ key: Key) -> ChangeReason? {
    guard let change = before[key] else { return contents[key] != nil ? reason : nil }
    guard change.wasPresent else { return nil }
    // Removed before the clear, or present until the clear removed it.
    return change.removalReason ?? reason
  }
}

/// Changes taken from the tracker, resolved into a batch outside every lock.
@usableFromInline
struct _RecordedChanges<Key: Hashable & Sendable, Value: Sendable> {
  let changes: [Key: _KeyChange<Value>]
  let cleared: _Cleared<Key, Value>?

  @usableFromInline
  init(changes: [Key: _KeyChange<Value>], cleared: _Cleared<Key, Value>?) {
    self.changes = changes
    self.cleared = cleared
  }

  var isEmpty: Bool { changes.isEmpty && cleared == nil }

  /// The batch these changes make, or `nil` if they cancel out.
  ///
  /// - Complexity: O(k) for k keys touched; after a `removeAll()`, O(n) for the n entries the
  ///   store had then.
  func batch(sequenceNumber: UInt64) -> ChangeBatch<Key, Value>? {
    var updated: [Key: Value] = [:]
    var addedKeys: Set<Key> = []
    var removed: Set<Key> = []
    var reasons: [Key: ChangeReason] = [:]
    func add(_ key: Key, _ change: _KeyChange<Value>) {
      if let value = change.current {
        updated[key] = value
        if !change.wasPresent { addedKeys.insert(key) }
      } else if change.wasPresent {
        removed.insert(key)
      } else {
        return
      }
      let reason = change.reportedReason
      if reason != .write { reasons[key] = reason }
    }
    if let cleared {
      // Every key present before the clear and not written since is now absent.
      // Its reason is that of its first removal: an expiry or an eviction before the clear
      // is not overwritten by the clear's.
      for (key, change) in cleared.before where changes[key] == nil {
        add(
          key,
          _KeyChange(
            wasPresent: change.wasPresent, current: nil, reason: cleared.reason,
            removalReason: cleared.firstRemovalReason(key)))
      }
      for key in cleared.contents.keys where changes[key] == nil && cleared.before[key] == nil {
        add(key, _KeyChange(wasPresent: true, current: nil, reason: cleared.reason))
      }
    }
    updated.reserveCapacity(changes.count)
    for (key, change) in changes { add(key, change) }
    if updated.isEmpty && removed.isEmpty { return nil }
    return ChangeBatch(
      updated: updated, addedKeys: addedKeys, removed: removed,
      sequenceNumbers: sequenceNumber...sequenceNumber, reasons: reasons)
  }
}

extension _KeyChange: Sendable where Value: Sendable {}
extension _Cleared: Sendable where Key: Sendable, Value: Sendable {}
extension _LoggedChange: Sendable where Key: Sendable, Value: Sendable {}
extension _ChangeTracker: Sendable where Key: Sendable, Value: Sendable {}
extension _ChangeAccumulator: Sendable where Key: Sendable, Value: Sendable {}

/// The contents of a store just before a `removeAll()`, for change batches: taken in O(1) under
/// the write lock, copied out later, outside it, by whoever coalesces the log.
///
/// It holds a read section of the table open at the version before the clear (so that
/// version stays readable) until ``dictionary`` is first read, or until it is released.
@usableFromInline
final class _ClearedContents<Key: Hashable, Value> {
  @usableFromInline let table: _ConcurrentTable<Key, Value>
  @usableFromInline let version: UInt64
  /// Keys left out (removed by the same write before the clear).
  @usableFromInline let excluded: [Key]
  @usableFromInline var section: (UnsafeMutablePointer<Atomic<Int>>, Int)?
  @usableFromInline var copied: [Key: Value]?

  /// The store's contents now; call with the write lock held, before the clear is staged.
  @usableFromInline
  init(table: _ConcurrentTable<Key, Value>, excluding excluded: [Key] = []) {
    self.table = table
    self.excluded = excluded
    // Under the write lock nothing is staged, so the published version is the newest state.
    let (version, section) = table.enterReadSection()
    self.version = version
    self.section = section
  }

  deinit {
    if let section { table.leaveReadSection(section) }
  }

  /// The contents, copied on first use. O(*n*) then, O(1) after.
  @usableFromInline
  var dictionary: [Key: Value] {
    if let copied { return copied }
    var result = _ReadView(table: table, version: version).dictionary
    for key in excluded { result[key] = nil }
    if let section { table.leaveReadSection(section) }
    section = nil
    copied = result
    return result
  }
}

// Safe: the contents are read, and `section` and `copied` written, only by the thread that
// applies the logged clear to the accumulator, under the accumulator's lock; the log entry that
// holds the object is taken from the tracker once, under the write lock. The table is Sendable.
extension _ClearedContents: @unchecked Sendable where Key: Sendable, Value: Sendable {}
