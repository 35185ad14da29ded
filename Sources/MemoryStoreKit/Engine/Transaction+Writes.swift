/// The writes of several entries, shared by more than one entry point.
extension _Transaction {
  /// Stages every entry of `entries`, each with its cost in `costs` (0 if absent or `nil`),
  /// its time to live in `lifetimes` (the default if absent or `nil`) and its idle time left in
  /// `idleTimes`, in nanoseconds (the time to idle if absent or `nil`, or if more; ignored
  /// without a time to idle).
  @inlinable
  mutating func setAll(
    _ entries: [Key: Value], costs: [Key: Int]?, lifetimes: [Key: Duration]? = nil,
    idleTimes: [Key: Int64]? = nil, in store: MemoryStore<Key, Value>
  ) {
    var entryMetadata = carriesMetadata ? metadata(cost: 0, timeToLive: nil, in: store) : nil
    let defaultExpiry = entryMetadata?.expiresAt ?? .max
    let defaultIdleExpiry = entryMetadata?.idleExpiresAt ?? .max
    let idleLifetime = policy.expiry.idleLifetime
    for (key, value) in entries {
      if let costs { entryMetadata?.cost = costs[key] ?? 0 }
      if let lifetimes {
        entryMetadata?.expiresAt =
          lifetimes[key].map { now.addingSaturating($0.nanoseconds) } ?? defaultExpiry
      }
      if let idleTimes {
        entryMetadata?.idleExpiresAt =
          idleLifetime.flatMap { idleLifetime in
            idleTimes[key].map { now.addingSaturating(Swift.min($0, idleLifetime)) }
          } ?? defaultIdleExpiry
      }
      _ = set(key, value, entryMetadata, in: store)
    }
  }

  /// The keys of the entries that a persistence manager's load wrote and no write has
  /// replaced since: those that follow the store's expiry settings whatever their order with
  /// the load. O(*n*) when the store has loaded entries, O(1) otherwise.
  @inlinable
  func loadedKeys(in store: MemoryStore<Key, Value>) -> [Key] {
    let loads = policy.expiry.loadVersions
    guard !loads.isEmpty else { return [] }
    var keys: [Key] = []
    store._table._forEachNode(at: store._table.publishedVersion(held)) { node in
      if loads.contains(node.version) { keys.append(node.key.pointee) }
    }
    return keys
  }

  /// Gives each entry of `keys` that has no time to live one of `lifetime` from now, and, with
  /// an `idleLifetime`, each one without an idle deadline one of `idleLifetime` from now: a
  /// default set after a load applies to what it loaded. Logged as no change. O(`keys`).
  @inlinable
  mutating func giveDeadlines(
    to keys: [Key], lifetime: Int64?, idleLifetime: Int64?, in store: MemoryStore<Key, Value>
  ) {
    guard carriesMetadata, lifetime != nil || idleLifetime != nil else { return }
    let table = store._table
    for key in keys {
      // A node without metadata (loaded before the policy was active) reads as no deadline.
      guard let node = table.stagedNode(forKey: key, held) else { continue }
      var metadata = node.metadata
      if let lifetime, metadata.expiresAt == .max {
        metadata.expiresAt = now.addingSaturating(lifetime)
      }
      if let idleLifetime, !node.expiresWhenIdle {
        metadata.idleExpiresAt = now.addingSaturating(idleLifetime)
      }
      guard metadata.expiresAt != node.expiresAt || metadata.idleExpiresAt != node.idleExpiresAt
      else { continue }
      let (old, new) = table.stageSet(key, node.value.pointee, metadata: metadata, held)
      policy.track(new, replacing: old, count: table.stagedCount(held))
      changed = true
    }
  }

  /// Stages `entries`, read outside the lock, all or none: only if every key still holds the
  /// entry it was read with (`expected`, its version; `nil`: absent). A value `nil` removes the
  /// key; a live entry keeps its deadline unless `timeToLive` is given (by the store's
  /// lifetime rule), and its cost unless `cost` is given.
  ///
  /// - Returns: Whether they were staged.
  @inlinable
  mutating func replace(
    _ entries: [(key: Key, value: Value?, expected: UInt64?, cost: Int?, timeToLive: Duration?)],
    in store: MemoryStore<Key, Value>
  ) -> Bool {
    for entry in entries where liveNode(entry.key, in: store)?.version != entry.expected {
      return false
    }
    let fresh = carriesMetadata ? metadata(cost: 0, timeToLive: nil, in: store) : nil
    for (key, value, expected, cost, timeToLive) in entries {
      guard let value else {
        remove(key, reason: reason, in: store)
        continue
      }
      var kept = fresh
      if expected != nil, carriesMetadata, let node = store._table.stagedNode(forKey: key, held) {
        kept?.expiresAt = node.expiresAt
        kept?.cost = node.cost
      }
      if let cost { kept?.cost = cost }
      if let timeToLive { kept?.expiresAt = now.addingSaturating(timeToLive.nanoseconds) }
      let applied = set(key, value, kept, in: store)
      if entries.count == 1 { protected = applied.position }
    }
    return true
  }

  /// Removes each key whose entry is still the one at `version`, judged outside the lock (by
  /// a purge's decider, or `removeAll(where:)`), with the write's reason; one that has
  /// expired since goes as expired.
  ///
  /// - Returns: The entries removed.
  @inlinable
  mutating func removeUnchanged(
    _ entries: [(key: Key, version: UInt64)], in store: MemoryStore<Key, Value>
  ) -> [Key: Value] {
    var removed: [Key: Value] = [:]
    for (key, version) in entries {
      guard let node = store._table.stagedNode(forKey: key, held), node.version == version,
        let value = remove(key, hash: node.storedHash, reason: reason, in: store)
      else { continue }
      removed[key] = value
      if let evictionReason = reason.evictionReason { policy.evictions[evictionReason] += 1 }
    }
    return removed
  }
}

/// What a write made of reads taken outside the lock at one version did.
@usableFromInline
enum _ConditionalOutcome {
  /// The write was applied.
  case applied
  /// It was not: a write was published since the reads.
  case written
  /// It was not: every entry was copied with metadata since the reads.
  case copied
}

extension _Transaction {
  /// ``removeUnchanged(_:in:)``, for entries read at `version`, unless every entry has been
  /// copied with metadata since, or, with `requiringNoWrite`, any write was published since.
  @inlinable
  mutating func removeUnchangedUnlessCopied(
    _ entries: [(key: Key, version: UInt64)], since version: UInt64, requiringNoWrite: Bool,
    in store: MemoryStore<Key, Value>
  ) -> _ConditionalOutcome {
    let table = store._table
    if table.metadataCopiesVersion(held) > version { return .copied }
    if requiringNoWrite && table.publishedVersion(held) != version { return .written }
    _ = removeUnchanged(entries, in: store)
    return .applied
  }
}
