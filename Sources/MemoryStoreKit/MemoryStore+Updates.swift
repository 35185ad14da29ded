// MARK: - Read-modify-write

extension MemoryStore {
  /// Reads the value for `key`, lets `body` change it, and stores the result, as one atomic,
  /// ordered write: no other write to `key` comes between the read and the write.
  ///
  /// ```swift
  /// // Count a visit; two threads counting at once never lose one.
  /// visits.update(forKey: page) { count in count = (count ?? 0) + 1 }
  ///
  /// // Refresh a session only if it still exists: a removed session stays removed.
  /// sessions.update(forKey: id) { session in session?.lastSeen = .now }
  /// ```
  ///
  /// `body` receives the current value, or `nil` if `key` is absent; setting it to `nil`
  /// removes the key, and leaving it `nil` changes nothing. A value it changes keeps the
  /// entry's expiry (its time to live is not renewed) and its cost, unless the store has an
  /// ``entryCost``, which weighs the new value; a value it creates gets the
  /// ``defaultTimeToLive`` and the ``entryCost`` or 0 (use
  /// ``setValue(_:forKey:cost:timeToLive:)`` to give others).
  ///
  /// **`body` runs outside every lock, and may run more than once.** The store reads the
  /// entry, runs `body`, then commits only if the entry is still the one it read; if another
  /// write changed it meanwhile, it runs `body` again on the new value. So `body` may read
  /// and write the store (a write to `key` itself makes it run again), and should be a short
  /// computation without side effects; the value stored and the result returned are those of
  /// its last run. Reads and writes of other keys never wait for it, and it never waits for
  /// another thread's `body`.
  ///
  /// The read is neither a hit nor a miss in ``statistics``.
  ///
  /// - Parameters:
  ///   - key: The key to update.
  ///   - body: Changes the value in place; its result is returned.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` throws; then nothing is stored.
  /// - Complexity: O(1) on average, plus `body`, per attempt.
  @discardableResult
  public func update<R, E: Error>(
    forKey key: Key, _ body: (inout Value?) throws(E) -> R
  ) throws(E) -> R {
    while true {
      let (current, version) = _withReadAccess { view -> (Value?, UInt64?) in
        guard let node = view.node(forKey: key) else { return (nil, nil) }
        return (node.value.pointee, node.version)
      }
      var value = current
      let result = try body(&value)
      // Absent and left absent: the read alone is the whole operation.
      if version == nil && value == nil { return result }
      let terms = value.map { _terms(key, $0) }
      // A time to live from the store's rule: the write reads the precise clock.
      let applied = _transact(timeToLive: terms?.timeToLive) {
        $0.replace([(key, value, version, terms?.cost, terms?.timeToLive)], in: self)
      }
      if applied { return result }
    }
  }

  /// Reads the value for `key`, or `defaultValue` if it is absent, lets `body` change it, and
  /// stores the result, as one atomic, ordered write (see ``update(forKey:_:)``, whose rules
  /// it follows).
  ///
  /// ```swift
  /// wordCounts.update(forKey: word, default: 0) { $0 += 1 }
  /// tags.update(forKey: photo, default: []) { $0.insert("beach") }
  /// ```
  ///
  /// The store's subscript with a default is read-only, so that `store[key, default: 0] += 1`,
  /// which would read and then write in two steps, does not compile: this is its atomic form.
  ///
  /// - Parameters:
  ///   - key: The key to update.
  ///   - defaultValue: The value to start from when `key` is absent; evaluated only then.
  ///   - body: Changes the value in place; its result is returned.
  /// - Returns: What `body` returned.
  /// - Throws: What `body` throws; then nothing is stored.
  /// - Complexity: O(1) on average, plus `body`, per attempt.
  @discardableResult
  public func update<R, E: Error>(
    forKey key: Key, default defaultValue: @autoclosure () -> Value,
    _ body: (inout Value) throws(E) -> R
  ) throws(E) -> R {
    try update(forKey: key) { (value: inout Value?) throws(E) -> R in
      var current = value ?? defaultValue()
      defer { value = current }
      return try body(&current)
    }
  }

  /// The value for `key`, or `defaultValue` if `key` is absent. A read, like the subscript's.
  ///
  /// ```swift
  /// let count = wordCounts["swift", default: 0]
  /// ```
  ///
  /// Read-only: to change a value from its default, use ``update(forKey:default:_:)``, which
  /// reads and writes as one atomic step.
  ///
  /// - Complexity: O(1) on average. Never blocks.
  @inlinable
  public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
    self[key] ?? defaultValue()
  }

  /// Merges key-value pairs into the store as one atomic, ordered write, calling `combine`
  /// for each key that is already present (or repeated in `other`) to decide its value.
  ///
  /// ```swift
  /// totals.merge([("apples", 3), ("pears", 2)]) { old, new in old + new }
  /// ```
  ///
  /// As with `Dictionary.merge(_:uniquingKeysWith:)`, a key's pairs are combined in order,
  /// starting from its current value: `combine(current, new)`. No read sees some of the keys
  /// merged without the others, and no other write to these keys comes between the reads of
  /// their current values and the write.
  ///
  /// Like ``update(forKey:_:)``, `combine` runs outside every lock, on values read before the
  /// write; if another write changes one of the keys meanwhile, the keys so changed are
  /// combined again with their new values. Keep it a short computation without side effects.
  /// As there, a key already present keeps its expiry and its cost (unless ``entryCost``
  /// weighs the merged value), and a new key gets the ``defaultTimeToLive`` and the
  /// ``entryCost`` or 0.
  ///
  /// - Parameters:
  ///   - other: The pairs to merge; iterated once, before anything is read.
  ///   - combine: Returns the value to store for a key from its current and its new value.
  /// - Throws: What `combine` throws; then nothing is stored.
  /// - Complexity: O(*m*) for *m* pairs, plus the calls to `combine`.
  public func merge<E: Error>(
    _ other: some Sequence<(Key, Value)>,
    uniquingKeysWith combine: (Value, Value) throws(E) -> Value
  ) throws(E) {
    // The caller's sequence is user code: iterate it first. Each key's values, in order.
    var keys: [Key] = []
    var incoming: [Key: [Value]] = [:]
    for (key, value) in other {
      if incoming[key] == nil { keys.append(key) }
      incoming[key, default: []].append(value)
    }
    guard !keys.isEmpty else { return }
    // Each key's merged value, and the version of the entry it was merged with.
    var merged: [Key: (value: Value, expected: UInt64?)] = [:]
    while true {
      // Whichever keys are new or changed since they were last combined, with their values.
      let stale = _withReadAccess { view -> [(key: Key, current: Value?, version: UInt64?)] in
        var stale: [(key: Key, current: Value?, version: UInt64?)] = []
        for key in keys {
          let node = view.node(forKey: key)
          let version = node?.version
          if let done = merged[key], done.expected == version { continue }
          stale.append((key, node?.value.pointee, version))
        }
        return stale
      }
      for (key, current, version) in stale {
        var values = incoming[key].unsafelyUnwrapped[...]
        var value = current ?? values.removeFirst()
        for next in values { value = try combine(value, next) }
        merged[key] = (value, version)
      }
      let entries = keys.map { key in
        let done = merged[key].unsafelyUnwrapped
        let terms = _terms(key, done.value)
        return (
          key: key, value: Optional(done.value), expected: done.expected, cost: terms.cost,
          timeToLive: terms.timeToLive
        )
      }
      let lifetime = entries.lazy.compactMap(\.timeToLive).first
      let applied = _transact(timeToLive: lifetime) { $0.replace(entries, in: self) }
      if applied { return }
    }
  }

  /// Merges a dictionary into the store as one atomic, ordered write, calling `combine` for
  /// each key that is already present; see `merge(_:uniquingKeysWith:)`.
  ///
  /// ```swift
  /// totals.merge(["apples": 3, "pears": 2], uniquingKeysWith: +)
  /// ```
  ///
  /// - Throws: What `combine` throws; then nothing is stored.
  /// - Complexity: O(*m*) for *m* entries, plus the calls to `combine`.
  public func merge<E: Error>(
    _ other: [Key: Value], uniquingKeysWith combine: (Value, Value) throws(E) -> Value
  ) throws(E) {
    try merge(other.lazy.map { ($0.key, $0.value) }, uniquingKeysWith: combine)
  }

  /// Removes every entry that `shouldBeRemoved` selects, in one ordered write: no read sees
  /// some of them removed and others not, and no entry is removed unless it still holds the
  /// value judged.
  ///
  /// ```swift
  /// sessions.removeAll { _, session in session.isLoggedOut }
  /// ```
  ///
  /// The predicate runs outside every lock, on a snapshot of the store, so writers never wait
  /// for it. If no write lands while it runs, the call is atomic: every entry is judged, and
  /// the selected ones are removed at one point of the write order. Entries written while it
  /// runs are judged in further rounds (up to three in all); if writes still land during the
  /// last round, the entries they wrote are neither judged nor removed (the others are removed
  /// as above). The predicate may read and write the store, and should not have side effects:
  /// an entry rewritten while it runs is judged again.
  ///
  /// - Parameter shouldBeRemoved: Whether to remove an entry.
  /// - Throws: What `shouldBeRemoved` throws; then nothing is removed.
  /// - Complexity: O(*n*) for *n* entries per round, plus the predicate's calls; writers never
  ///   wait for the predicate.
  public func removeAll<E: Error>(
    where shouldBeRemoved: ((key: Key, value: Value)) throws(E) -> Bool
  ) throws(E) {
    typealias Entry = (key: Key, value: Value, version: UInt64)
    // Every key judged, with the version of the entry judged and the verdict.
    var judged: [Key: (version: UInt64, removes: Bool)] = [:]
    let rounds = 3
    var round = 1
    while true {
      let (entries, version) = _withReadAccess { view -> ([Entry], UInt64) in
        var entries: [Entry] = []
        view.table._forEachNode(at: view.version) { node in
          let version = node.version
          if judged[node.key.pointee]?.version != version {
            entries.append((node.key.pointee, node.value.pointee, version))
          }
        }
        return (entries, view.version)
      }
      for entry in entries {
        judged[entry.key] = (entry.version, try shouldBeRemoved((entry.key, entry.value)))
      }
      let targets = judged.compactMap { key, verdict in
        verdict.removes ? (key: key, version: verdict.version) : nil
      }
      // Commit if nothing was published since the snapshot (every entry is judged), or, in
      // the last round, whatever is still as judged.
      let outcome = _transact(collectingExpiredKeys: false) { write in
        write.removeUnchangedUnlessCopied(
          targets, since: version, requiringNoWrite: round < rounds, in: self)
      }
      switch outcome {
      case .applied: return
      case .written: round += 1
      case .copied: break  // Every entry got a new node, once: judge them again.
      }
    }
  }
}
