import Synchronization

// MARK: - Count and cost limits, costs

extension MemoryStore {
  /// The most entries the store holds; `nil` (the default) or 0 for no limit.
  ///
  /// ```swift
  /// let recent = MemoryStore<String, Quote>(name: "recent")
  /// recent.countLimit = 10_000
  /// ```
  ///
  /// Enforced strictly: when a write returns, the store is within the limit. The write that
  /// goes over it evicts the entry the eviction order picks — W-TinyLFU's, with an adaptive
  /// window: a new key stays only if its key was used more often lately than the entry it
  /// would push out (see <doc:Eviction>) — never the entry being written, unless it is the
  /// only one left.
  /// Each entry has a read counter of its own. Lowering the limit evicts at once, in chunks.
  /// Evictions appear in change batches with reason ``ChangeReason/evictedByCountLimit``.
  ///
  /// Setting a limit makes entries carry their metadata in their nodes (16 bytes each, more
  /// for a cost or a deadline), and reads note recency in the node they found (one relaxed
  /// atomic load per hit, and a store only when the entry's counter changes); the eviction
  /// order takes 8 bytes per entry and, once it evicts, its sketch of how often keys were used
  /// 8 to 16 bytes per entry of the limit (one 64-bit word per entry, rounded up to a power of
  /// two). A store with a limit holds at most 2^30 - 1 (1 073 741 823) entries. Setting the
  /// first limit on a large store is O(*n*). Thread-safe.
  public var countLimit: Int? {
    get { _writer.withLock { $0.policy.limits.countLimit }.nonZero }
    set { _setLimit(\.limits.countLimit, to: newValue) }
  }

  /// The most total cost the entries may have; `nil` (the default) or 0 for no limit.
  ///
  /// ```swift
  /// let thumbnails = MemoryStore<URL, Data>(name: "thumbnails")
  /// thumbnails.entryCost = { _, data in data.count }   // every write is weighed
  /// thumbnails.costLimit = 4 << 20                      // 4 MiB
  /// ```
  ///
  /// An entry's cost is, in this order: the `cost` its write gives
  /// (``setValue(_:forKey:cost:timeToLive:)``, or `cost:` of a get-or-create), what
  /// ``entryCost`` returns for it, or 0. A read-modify-write (``update(forKey:_:)``,
  /// `merge(_:uniquingKeysWith:)`) without ``entryCost`` keeps the cost of the entry it
  /// changes, as does ``touch(_:timeToLive:)``. Enforced like ``countLimit``, with reason
  /// ``ChangeReason/evictedByCostLimit``, in the same order with two differences while the
  /// cost limit is what evicts: the order's lists are sized in cost, and a new key's uses are
  /// weighed against the fourth root of its cost, so that a large entry needs more uses than
  /// the small ones it would push out (see <doc:Eviction>).
  /// An entry whose cost alone exceeds the limit is evicted by its own write and evicts
  /// nothing else (a key it replaced is then gone too); a get-or-create still returns such a
  /// value to its callers. Entries of cost 0 are never evicted to meet the cost limit (only
  /// the count limit removes them); finding a costed entry to evict is O(*n*) at worst, when
  /// few entries have a cost. Setting a cost limit where there was none is O(*n*) (the order
  /// adds up its lists' costs). Thread-safe.
  public var costLimit: Int? {
    get { _writer.withLock { $0.policy.limits.costLimit }.nonZero }
    set { _setLimit(\.limits.costLimit, to: newValue) }
  }

  /// Computes the cost of an entry from its key and value, such as its size in bytes.
  ///
  /// Called outside every lock of the store, before the write takes its lock: on the writing
  /// thread, or in the load's task for get-or-load, and after the closure for
  /// ``update(forKey:_:)``; it may run more than once for one write (a read-modify-write that
  /// runs again). It must be a fast, pure function, and it must not wait for the store. A
  /// negative result counts as 0, and one above 2^48 as 2^48.
  public typealias EntryCost = @Sendable (Key, Value) -> Int

  /// The store's cost function (a *weigher*): the cost of every value written without a
  /// cost of its own; `nil` (the default) for none, when such writes cost 0.
  ///
  /// ```swift
  /// let thumbnails = MemoryStore<URL, Data>(name: "thumbnails")
  /// thumbnails.entryCost = { _, data in data.count }
  /// thumbnails.costLimit = 4 << 20
  /// let data = try await thumbnails.value(forKey: url) { try await download(url) }
  /// ```
  ///
  /// It weighs the values of every write that gives no cost: the subscript,
  /// ``updateValue(_:forKey:)``, ``addEntries(_:)``, ``setValue(_:forKey:cost:timeToLive:)``
  /// without `cost`, get-or-create (``valueOrInsert(forKey:cost:timeToLive:_:)``,
  /// ``value(forKey:cost:timeToLive:orLoad:)``) without `cost`, ``update(forKey:_:)``,
  /// `merge(_:uniquingKeysWith:)` and a persistence manager's `load()`. It runs outside every
  /// lock (see ``EntryCost``). Entries written before it is set keep their costs.
  ///
  /// Setting it makes entries written from then on carry their metadata, in O(1), and writes go
  /// through the eviction policy. Thread-safe.
  public var entryCost: EntryCost? {
    get { _functions.withLock { $0.entryCost } }
    set {
      if newValue != nil { _transact(activatingPolicy: true) { _ in } }
      _replaceFunction(\.entryCost, with: newValue)
    }
  }

  /// The largest cost an entry counts: 2^48 (a larger one counts as this, a negative one as
  /// 0), so that the total cost of entries never overflows.
  @inlinable static var _maximumCost: Int { 1 << 48 }

  /// `cost` within 0...``_maximumCost``.
  @inlinable @inline(__always)
  static func _clampedCost(_ cost: Int) -> Int { min(max(cost, 0), _maximumCost) }

  /// Inserts or replaces the value for `key` with a cost and a time to live, and returns the
  /// value it replaced.
  ///
  /// ```swift
  /// images.setValue(image, forKey: url, cost: image.byteCount)
  /// tokens.setValue(token, forKey: user, timeToLive: .seconds(300))
  /// ```
  ///
  /// An ordered write, like ``updateValue(_:forKey:)``. The write may evict other entries to
  /// stay within ``countLimit`` and ``costLimit``; they are removed in the same atomic write.
  ///
  /// - Parameters:
  ///   - value: The value to store.
  ///   - key: The key to store it for.
  ///   - cost: The entry's cost toward ``costLimit``, such as its size in bytes; `nil` (the
  ///     default) weighs the value with ``entryCost``, or gives 0 without one. Negative: 0;
  ///     above 2^48: 2^48.
  ///   - timeToLive: How long the entry lives; `nil` uses ``defaultTimeToLive``. Zero or
  ///     less: the entry is expired at once.
  /// - Returns: The previous value, or `nil` if the key was absent or expired.
  /// - Complexity: O(1) on average, plus O(1) amortised per eviction.
  @discardableResult
  public func setValue(
    _ value: Value, forKey key: Key, cost: Int? = nil, timeToLive: Duration? = nil
  ) -> Value? {
    _performKeyed(
      key, value, cost: cost.map(Self._clampedCost), timeToLive: timeToLive,
      activatingPolicy: true)
  }
}

extension Int {
  /// `nil` for 0 (no limit), else the value.
  fileprivate var nonZero: Int? { self == 0 ? nil : self }
}
