import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

extension MemoryStore {
  /// Runs `body` with the store's contents at one instant, the metadata of those entries that
  /// have a cost or a deadline, and the write count at that instant, without blocking readers
  /// or writers while `body` runs.
  ///
  /// The contents are read at the version published at that instant, outside every lock:
  /// writes made meanwhile are published as usual, and the versions this read needs stay
  /// reachable until it is done. An entry whose deadline has passed is left out. `body` runs
  /// after the read, so it may run user code (an encoder) and may read and write the store.
  ///
  /// - Complexity: O(*n*) to copy the contents, on the calling thread only.
  func _withSnapshot<R, E: Error>(
    _ body: ([Key: Value], [Key: _SavedTerms], UInt64) throws(E) -> R
  ) throws(E) -> R {
    // Under the write lock, the published version is the one the write count describes.
    let (writeCount, version, token, carriesMetadata) = _writer.withAccess { access in
      let (version, token) = _table.enterReadSection()
      return (access.changes.writeCount, version, token, _table.carriesMetadata(access.held))
    }
    var contents: [Key: Value] = [:]
    var terms: [Key: _SavedTerms] = [:]
    contents.reserveCapacity(_table._writerCountHint)
    if carriesMetadata {
      let now = _clockNanos()
      _table._forEachNode(at: version) { node in
        guard node.hasMetadata else {
          contents[node.key.pointee] = node.value.pointee
          return
        }
        let (cost, expiresAt, idleExpiresAt) = (node.cost, node.expiresAt, node.idleExpiresAt)
        guard Swift.min(expiresAt, idleExpiresAt) > now else { return }
        contents[node.key.pointee] = node.value.pointee
        guard cost != 0 || expiresAt != .max || idleExpiresAt != .max else { return }
        terms[node.key.pointee] = _SavedTerms(
          cost: cost, expiresIn: expiresAt == .max ? nil : expiresAt - now,
          idleExpiresIn: idleExpiresAt == .max ? nil : idleExpiresAt - now)
      }
    } else {
      _table._forEach(at: version) { key, value in contents[key] = value }
    }
    _table.leaveReadSection(token)
    // Free what the writes made meanwhile replaced, now that this reader has left.
    defer { _settle() }
    return try body(contents, terms, writeCount)
  }

  /// The number of writes that changed the store so far.
  var _writeCount: UInt64 {
    _writer.withLock { $0.changes.writeCount }
  }

  /// Sets every entry of `entries`, as one atomic write logged with `reason`; returns how many
  /// of them the store holds once the write's evictions are done.
  func _merge(_ entries: [Key: Value], reason: ChangeReason) -> Int {
    let terms = _termsAll(entries)
    return _merge(entries, costs: terms.costs, lifetimes: terms.lifetimes, reason: reason)
  }

  /// Sets every entry of `entries` with the given costs, times to live and idle times left
  /// (`nil` or absent: the store's), as one atomic write logged with `reason`; returns how many
  /// of them the store holds once the write's evictions are done.
  func _merge(
    _ entries: [Key: Value], costs: [Key: Int]?, lifetimes: [Key: Duration]?,
    idleTimes: [Key: Int64]? = nil, reason: ChangeReason
  ) -> Int {
    // Given costs and deadlines need entries to carry metadata, and deadlines the clock.
    let timed = !(lifetimes?.isEmpty ?? true) || !(idleTimes?.isEmpty ?? true)
    let hasMetadata = timed || (costs?.values.contains { $0 != 0 } ?? false)
    return _transact(reason, timeToLive: timed ? .zero : nil, activatingPolicy: hasMetadata) {
      write in
      if reason == .loaded {
        write.policy.expiry.loadVersions.append(_table._stagingVersion(write.held))
      }
      write.setAll(
        entries, costs: costs, lifetimes: lifetimes, idleTimes: idleTimes, in: self)
      // Limits may evict some: only a store with a policy has any.
      guard write.carriesMetadata else { return entries.count }
      write.end(.toLimits, in: self)
      return entries.keys.reduce(0) {
        $0 + (_table.stagedNode(forKey: $1, write.held) != nil ? 1 : 0)
      }
    }
  }

  /// Sets the entries of a snapshot of format version 2 (see ``_SnapshotEntry``), read at
  /// `secondsSince1970`, as one atomic write logged with `reason`; returns how many of them the
  /// store holds once the write's evictions are done.
  ///
  /// An entry keeps its saved cost (one saved without a cost is weighed by ``entryCost``), its
  /// time to live less the time since the save (without one, it gets the store's, as any
  /// write), and, in a store with a ``timeToIdle``, its idle time left (without one, or with
  /// more than the store's time to idle, the store's). An entry whose deadline has passed is
  /// not loaded. Runs the store's functions: call it outside every lock.
  func _mergeSaved(
    _ saved: [Key: _SnapshotEntry<Value>], secondsSince1970 now: Double, reason: ChangeReason
  ) -> Int {
    var entries: [Key: Value] = Dictionary(minimumCapacity: saved.count)
    var savedCosts: [Key: Int] = [:]
    var savedLifetimes: [Key: Duration] = [:]
    var idleTimes: [Key: Int64] = [:]
    for (key, entry) in saved {
      var lifetime: Duration?
      var idleTime: Int64?
      if let expires = entry.expires {
        guard expires > now else { continue }
        lifetime = .seconds(expires - now)
      }
      if let idleExpires = entry.idleExpires {
        guard idleExpires > now else { continue }
        idleTime = Duration.seconds(idleExpires - now).nanoseconds
      }
      entries[key] = entry.value
      if entry.cost != 0 { savedCosts[key] = Self._clampedCost(entry.cost) }
      if let lifetime { savedLifetimes[key] = lifetime }
      if let idleTime { idleTimes[key] = idleTime }
    }
    var (costs, lifetimes) = _termsAll(entries)
    if !savedCosts.isEmpty {
      costs = (costs ?? [:]).merging(savedCosts) { _, saved in saved }
    }
    if !savedLifetimes.isEmpty {
      lifetimes = (lifetimes ?? [:]).merging(savedLifetimes) { _, saved in saved }
    }
    return _merge(
      entries, costs: costs, lifetimes: lifetimes, idleTimes: idleTimes, reason: reason)
  }
}
