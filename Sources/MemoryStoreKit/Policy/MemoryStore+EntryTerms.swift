import Synchronization

// MARK: - The store's functions of an entry

/// What a write gives an entry: its cost toward ``MemoryStore/costLimit`` and its time to live;
/// `nil` for each that falls to the default (cost 0, ``MemoryStore/defaultTimeToLive``).
@usableFromInline
typealias _EntryTerms = (cost: Int?, timeToLive: Duration?)

extension MemoryStore {
  /// The terms of a write of `value` for `key`: `cost` and `timeToLive` where the caller gave
  /// them, else what ``entryCost`` and ``entryTimeToLive`` give. Runs user code: call it
  /// outside every lock. One relaxed load while the store has neither function, or when the
  /// caller gave both.
  @inlinable @inline(__always)
  func _terms(
    _ key: Key, _ value: Value, cost: Int? = nil, timeToLive: Duration? = nil
  ) -> _EntryTerms {
    guard cost == nil || timeToLive == nil, _signals.judgesEntries.load(ordering: .relaxed)
    else { return (cost, timeToLive) }
    return _termsSlow(key, value, cost: cost, timeToLive: timeToLive)
  }

  /// ``_terms(_:_:cost:timeToLive:)`` once the store has a function: takes both functions
  /// under their lock, then runs those needed outside it.
  @usableFromInline
  func _termsSlow(_ key: Key, _ value: Value, cost: Int?, timeToLive: Duration?) -> _EntryTerms {
    let (entryCost, entryTimeToLive) = _functions.withLock {
      (cost == nil ? $0.entryCost : nil, timeToLive == nil ? $0.entryTimeToLive : nil)
    }
    return (
      cost ?? entryCost.map { Self._clampedCost($0(key, value)) },
      timeToLive ?? entryTimeToLive?(key, value)
    )
  }

  /// The terms of a write of every entry of `entries` by the store's functions: `nil` for a
  /// function the store does not have. Runs user code: call it outside every lock.
  @inlinable
  func _termsAll(
    _ entries: [Key: Value]
  ) -> (costs: [Key: Int]?, lifetimes: [Key: Duration]?) {
    guard _signals.judgesEntries.load(ordering: .relaxed) else { return (nil, nil) }
    return _termsAllSlow(entries)
  }

  @usableFromInline
  func _termsAllSlow(
    _ entries: [Key: Value]
  ) -> (costs: [Key: Int]?, lifetimes: [Key: Duration]?) {
    let (entryCost, entryTimeToLive) = _functions.withLock { ($0.entryCost, $0.entryTimeToLive) }
    var costs: [Key: Int]?
    var lifetimes: [Key: Duration]?
    if let entryCost {
      costs = Dictionary(minimumCapacity: entries.count)
      for (key, value) in entries { costs?[key] = Self._clampedCost(entryCost(key, value)) }
    }
    if let entryTimeToLive {
      lifetimes = [:]
      for (key, value) in entries { lifetimes?[key] = entryTimeToLive(key, value) }
    }
    return (costs, lifetimes)
  }
}
