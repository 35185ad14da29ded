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

/// What a writer must do after it unlocks, because of what it logged.
@usableFromInline
struct _TrackingFollowUp {
  /// Schedule a publication after this delay.
  @usableFromInline var publishAfter: Duration?
  /// Start a background coalescing pass.
  @usableFromInline var coalesceInBackground = false
  /// Coalesce now, on the writing thread: the log is at its bound.
  @usableFromInline var coalesceNow = false
  /// Schedule the delivery of the removals logged for ``MemoryStore/removals``.
  @usableFromInline var deliversRemovals = false
  /// Notify the observers of tracked reads of these changes. Retained; released by
  /// ``MemoryStore/_followUp(_:)``, which every follow-up reaches exactly once. Unmanaged, so
  /// that a follow-up stays a plain value, which every write copies and drops for nothing.
  @usableFromInline var notices: Unmanaged<_ObservationNotices>?
  /// Wake the open ``LocalChangeFeed``: it had nothing to take, and now has.
  @usableFromInline var wakesFeed = false

  @usableFromInline init() {}

  /// This follow-up, with `other`'s notices and feed wake-up (the only parts a commit makes
  /// before the rest).
  @inlinable
  func merging(_ other: _TrackingFollowUp?) -> _TrackingFollowUp {
    var merged = self
    if let notices = other?.notices { merged.notices = notices }
    if other?.wakesFeed == true { merged.wakesFeed = true }
    return merged
  }
}

/// The changes made since the previous batch, as writers log them: guarded by the store's
/// write lock.
///
/// Logging a change is an append to a ``_LogSegment``, with no hashing (the hash the table
/// computed is logged with it) and nothing released, so it costs a writer almost nothing. Full segments of the log are coalesced into a
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
      updateFlags()
    }
  }
  /// Whether writes log what they remove or replace: while ``MemoryStore/removals``
  /// has subscribers.
  @usableFromInline var recordsRemovals = false {
    didSet { updateFlags() }
  }
  /// Whether writes note the keys they change for the observers of tracked reads: while
  /// ``MemoryStore/tracksReads`` is on.
  @usableFromInline var observesReads = false {
    didSet { updateFlags() }
  }
  /// Whether writes hand their changes to a ``LocalChangeFeed``: while one is open.
  @usableFromInline var feedsLocalChanges = false {
    didSet { updateFlags() }
  }
  /// The local changes not yet taken by the open ``LocalChangeFeed``, in commit order.
  @usableFromInline var localChanges = _LocalChangeBuffer<Key, Value>()
  /// Whether the current write's changes stay out of the feed: a value that a get-or-create,
  /// a get-or-load or a refresh stores is a copy of what the source holds, not a local change.
  /// Set by the write, under the lock; cleared by ``commit(logged:cleared:deliversRemovals:)``.
  @usableFromInline var suppressesFeed = false
  /// Whether the feed's changes went from none to some since the feed was last woken: the
  /// write that commits then wakes it.
  @usableFromInline var feedNeedsWake = false
  /// What the current write changed, for the observers of tracked reads: handed over by
  /// ``commit(logged:cleared:deliversRemovals:)``.
  @usableFromInline var notices: _ObservationNotices?
  /// Whether the interval was set (to anything, `.zero` included): then a new subscriber
  /// does not start batches at the default interval.
  @usableFromInline var intervalIsChosen = false
  /// Whether a publication is scheduled.
  @usableFromInline var isArmed = false
  /// Whether a background coalescing pass is scheduled.
  @usableFromInline var isCoalescing = false
  /// The segment being filled: empty and without room until the first change is logged.
  @usableFromInline var log = _LogSegment<Key, Value>(capacity: 0)
  /// Full segments, oldest first.
  @usableFromInline var segments: [_LogSegment<Key, Value>] = []
  /// The number of writes that changed the store, whether batches are on or not: a version
  /// of the contents, for the persistence manager to tell whether anything changed.
  @usableFromInline var writeCount: UInt64 = 0

  @usableFromInline init() {}

  /// Whether writes are logged: the notification interval is above zero. Stored, because every
  /// write reads it.
  @usableFromInline private(set) var isTracking = false
  /// Whether writes pass each change to ``appendKey(_:_:wasPresent:_:hash:)``: batches are
  /// on, or reads are tracked. Stored, because every write reads it.
  @usableFromInline private(set) var isLogging = false
  /// Whether a write reports anything: changes for batches, or removals. Stored, because every
  /// write reads it: one load and a branch, for a store that reports nothing.
  @usableFromInline private(set) var isReporting = false

  /// Derives the flags every write reads from the settings.
  @usableFromInline
  mutating func updateFlags() {
    isLogging = isTracking || observesReads || feedsLocalChanges
    isReporting = isLogging || recordsRemovals
  }

  /// The number of changes and clears ever logged: a write compares it before and after to
  /// tell whether it logged anything.
  @usableFromInline private(set) var appendCount = 0

  /// Appends that `key` now has `value` (`nil`: absent) to the log, if batches are on, and
  /// notes it for the observers of tracked reads, if reads are tracked; `wasPresent` says
  /// whether it was present just before this write, `hash` is `key.hashValue` if the caller
  /// has it. Inlined into the write, which then appends to the feed or the log itself; the
  /// rarer notes for tracked reads are out of line.
  @inlinable @inline(__always)
  mutating func appendKey(
    _ key: Key, _ value: Value?, wasPresent: Bool, _ reason: ChangeReason, hash: Int?
  ) {
    if observesReads {
      noteObserved(key, hash: hash, changesPresence: wasPresent != (value != nil))
    }
    feedLocalChange(key, value, reason)
    guard isTracking else { return }
    logChange(key, value, wasPresent: wasPresent, reason, hash: hash)
  }

  /// Appends that `key` now has `value` (`nil`: absent) to the log for change batches, which
  /// are on; the arguments are ``appendKey(_:_:wasPresent:_:hash:)``'s.
  @inlinable @inline(__always)
  mutating func logChange(
    _ key: Key, _ value: Value?, wasPresent: Bool, _ reason: ChangeReason, hash: Int?
  ) {
    if log.count == log.capacity { log = log.grown(minimumCapacity: Self.segmentCapacity) }
    appendCount &+= 1
    log.append(
      key,
      _LoggedValue(
        value: value, hash: hash ?? key.hashValue, wasPresent: wasPresent, reason: reason))
  }

  /// Notes, for the observers of tracked reads, that `key` changed (`hash` is its hash if the
  /// caller has it); whether it was added or removed. Out of line: only a store that tracks
  /// reads notes anything.
  @inlinable @inline(never)
  mutating func noteObserved(_ key: Key, hash: Int?, changesPresence: Bool) {
    if notices == nil { notices = _ObservationNotices() }
    notices?.append((hash ?? key.hashValue, changesPresence))
  }

  /// Hands the open ``LocalChangeFeed`` the change of a write that left `key` with `value`
  /// (`nil`: removed) for `reason`, if a feed is open and the change is one to feed (a write's,
  /// not an eviction's or an expiry's, and not an invalidation's).
  @inlinable @inline(__always)
  mutating func feedLocalChange(_ key: Key, _ value: Value?, _ reason: ChangeReason) {
    if feedsLocalChanges && reason == .write && !suppressesFeed {
      appendLocal(value.map { .updated(key, $0) } ?? .removed(key))
    }
  }

  /// Appends `change` to the changes the open ``LocalChangeFeed`` has not taken. Consumes
  /// it, so that the key a write logs is retained once, by the buffer.
  @inlinable @inline(__always)
  mutating func appendLocal(_ change: consuming LocalChange<Key, Value>) {
    if localChanges.isEmpty { feedNeedsWake = true }
    localChanges.append(change)
  }

  /// Hands the open feed a removal by a plain write of `key` that found it absent (no
  /// transaction, so no commit); returns whether the write must wake the feed.
  @inlinable @inline(never)
  mutating func noteAbsentRemoval(_ key: Key) -> Bool {
    appendLocal(.removed(key))
    return settleFeed()
  }

  /// Ends the current write's part in the feed: its changes count again from the next write
  /// on; returns whether the write must wake the feed.
  @inlinable
  mutating func settleFeed() -> Bool {
    suppressesFeed = false
    guard feedNeedsWake else { return false }
    feedNeedsWake = false
    return true
  }

  /// Appends a `removeAll()`, with the store's contents just before it.
  @inlinable
  mutating func appendClear(_ contents: _ClearedContents<Key, Value>, _ reason: ChangeReason) {
    appendCount &+= 1
    log.clears.append(_LoggedClear(position: log.count, contents: contents, reason: reason))
  }

  /// Counts a write that changed the store, and returns what it must do after unlocking for
  /// what it logged (`nil`, the common case: nothing): every write's last step before it
  /// publishes.
  ///
  /// - Parameters:
  ///   - logged: ``appendCount`` when the write began.
  ///   - cleared: Whether the write emptied the store: its log entry is sealed at once.
  ///   - deliversRemovals: Whether it logged removals whose delivery must be scheduled.
  @inlinable @inline(__always)
  mutating func commit(logged: Int, cleared: Bool, deliversRemovals: Bool) -> _TrackingFollowUp? {
    writeCount &+= 1
    // A store that reports nothing logged nothing.
    guard isReporting else { return nil }
    var followUp = notices != nil ? takeNotices() : nil
    if feedsLocalChanges && settleFeed() {
      followUp = followUp ?? _TrackingFollowUp()
      followUp?.wakesFeed = true
    }
    if cleared {
      followUp = self.followUp(sealing: true, merging: followUp)
    } else if appendCount != logged && !(isArmed && log.count < Self.segmentCapacity) {
      // The write logged changes, and the publication is not armed or the segment is full.
      // A write that logs several changes comes here once, at the end, so its segment may
      // exceed ``segmentCapacity`` by that write's size.
      followUp = self.followUp(merging: followUp)
    }
    if deliversRemovals {
      followUp = followUp ?? _TrackingFollowUp()
      followUp?.deliversRemovals = true
    }
    return followUp
  }

  /// A follow-up that delivers the write's notices to the observers of tracked reads. Out of
  /// line: only a store that tracks reads has any.
  @inlinable @inline(never)
  mutating func takeNotices() -> _TrackingFollowUp {
    var followUp = _TrackingFollowUp()
    if let notices { followUp.notices = Unmanaged.passRetained(notices) }
    notices = nil
    return followUp
  }

  /// Arms the publication and seals a full segment, as needed; with `sealing`, seals the
  /// current segment whatever its size (after a clear, so that the clear's view of the
  /// contents, which holds the table's memory reclamation back, is copied out soon).
  @usableFromInline
  mutating func followUp(sealing: Bool = false, merging other: _TrackingFollowUp? = nil)
    -> _TrackingFollowUp
  {
    var followUp = _TrackingFollowUp().merging(other)
    if !isArmed {
      isArmed = true
      followUp.publishAfter = interval
    }
    if log.count >= Self.segmentCapacity || (sealing && !log.isEmpty) {
      segments.append(log)
      log = _LogSegment(capacity: Self.segmentCapacity)
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
    if isLogging != (isTracking || observesReads || feedsLocalChanges) {
      return "the change log's logging flag is stale"
    }
    if isReporting != (isLogging || recordsRemovals) {
      return "the change log's reporting flag is stale"
    }
    if !feedsLocalChanges && !localChanges.isEmpty {
      return "local changes are kept without an open feed"
    }
    if segments.count > Self.maximumSegments {
      return "the change log holds \(segments.count) full segments"
    }
    return nil
  }

  /// Takes the logged changes, oldest first: every full segment, and the current one too if
  /// `includingCurrent`.
  @inlinable
  mutating func takeLogged(includingCurrent: Bool) -> [_LogSegment<Key, Value>] {
    var taken = segments
    segments = []
    if includingCurrent && !log.isEmpty {
      taken.append(log)
      log = _LogSegment(capacity: 0)
    }
    return taken
  }
}

extension _KeyChange: Sendable where Value: Sendable {}
extension _ChangeTracker: Sendable where Key: Sendable, Value: Sendable {}
