import Dispatch
import Synchronization

/// An entry that left a store, or whose value a write replaced: what
/// ``MemoryStore/removals(bufferingNewest:)`` delivers.
public struct Removal<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// The entry's key.
  public let key: Key
  /// The value that left the store (for ``RemovalCause/replaced``, the value replaced).
  public let value: Value
  /// Why it left.
  public let cause: RemovalCause

  @usableFromInline
  init(key: Key, value: Value, cause: RemovalCause) {
    self.key = key
    self.value = value
    self.cause = cause
  }
}

extension Removal: Equatable where Value: Equatable {}

/// Why a value left a store.
public enum RemovalCause: Hashable, Sendable, CustomStringConvertible {
  /// A write stored another value for the key: the subscript, ``MemoryStore/updateValue(_:forKey:)``,
  /// ``MemoryStore/setValue(_:forKey:cost:timeToLive:)``, ``MemoryStore/addEntries(_:)``,
  /// ``MemoryStore/update(forKey:_:)``, `merge(_:uniquingKeysWith:)` or a load.
  case replaced
  /// A write removed the key: assigning `nil`, ``MemoryStore/removeValue(forKey:)``,
  /// ``MemoryStore/removeValues(forKeys:)``, ``MemoryStore/removeAll()``,
  /// ``MemoryStore/removeAll(where:)`` or an update to `nil`.
  case removed
  /// The store removed the entry on its own: a limit, the decider, memory pressure, or its
  /// time to live (``EvictionReason/expired``), as ``StoreStatistics/evictions`` counts them.
  case evicted(EvictionReason)
  /// Another instance changed the key, or the link to the other instances was lost:
  /// ``MemoryStore/invalidateValues(forKeys:except:)`` or ``MemoryStore/invalidateAll(except:)``
  /// dropped it.
  case invalidated

  /// Whether the store removed the entry on its own, rather than a write.
  public var isEviction: Bool {
    if case .evicted = self { return true }
    return false
  }

  public var description: String {
    switch self {
    case .replaced: "replaced"
    case .removed: "removed"
    case .evicted(let reason): "evicted (\(reason))"
    case .invalidated: "invalidated"
    }
  }

  /// The cause of a removal logged with `reason`.
  @usableFromInline
  static func removal(_ reason: ChangeReason) -> RemovalCause {
    if reason == .invalidated { return .invalidated }
    return reason.evictionReason.map(RemovalCause.evicted) ?? .removed
  }
}

/// The removals written since the last delivery, and who receives them; guarded by the
/// store's write lock.
@usableFromInline
struct _RemovalLog<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  @usableFromInline
  struct Subscriber: Sendable {
    let continuation: AsyncStream<Removal<Key, Value>>.Continuation
    /// The position in the log of the first removal it receives.
    let start: UInt64
  }

  @usableFromInline var entries: [Removal<Key, Value>] = []
  /// The number of removals logged before `entries`, for subscribers to start at.
  @usableFromInline var delivered: UInt64 = 0
  /// Whether a delivery is scheduled.
  @usableFromInline var isDeliveryScheduled = false
  @usableFromInline var subscribers: [Int: Subscriber] = [:]
  @usableFromInline var nextSubscriberID = 0

  @usableFromInline init() {}

  /// The first of its invariants that does not hold, or `nil`: removals logged have their
  /// delivery scheduled, and no subscriber starts after the last removal logged. Write lock
  /// held.
  func _checkInvariants() -> String? {
    if !entries.isEmpty && !isDeliveryScheduled {
      return "\(entries.count) removals logged with no delivery scheduled"
    }
    let end = delivered &+ UInt64(entries.count)
    if subscribers.values.contains(where: { $0.start > end }) {
      return "a removals subscriber starts after the last removal logged"
    }
    return nil
  }

  /// Logs a removal; returns whether the caller must schedule a delivery after unlocking.
  @inlinable
  mutating func append(_ key: Key, _ value: Value, _ cause: RemovalCause) -> Bool {
    entries.append(Removal(key: key, value: value, cause: cause))
    guard !isDeliveryScheduled else { return false }
    isDeliveryScheduled = true
    return true
  }
}

/// The queue that delivers every store's removals, in the order each store logged them.
enum _RemovalQueue {
  static let queue: DispatchQueue = {
    let queue = DispatchQueue(label: "MemoryStore.removals", qos: .utility)
    queue.setSpecific(key: key, value: ())
    return queue
  }()

  /// Marks the queue, so that code running on it can tell.
  static let key = DispatchSpecificKey<Void>()
}

extension MemoryStore {
  /// Every entry that leaves the store while an iteration runs, with its value and why:
  /// replaced or removed by a write, or evicted by a limit, the decider, memory pressure or its
  /// time to live. The notifications Caffeine, Guava and PINCache give, which change batches
  /// (net differences) cannot: a key added and evicted within one interval is reported here.
  ///
  /// ```swift
  /// for await removal in images.removals where removal.cause.isEviction {
  ///   diskCache.write(removal.value, forKey: removal.key)   // spill evicted images to disk
  /// }
  /// ```
  ///
  /// Like ``changes`` and ``updates(of:)``, the sequence subscribes nothing by itself: each
  /// iteration is a subscriber of its own from the moment it starts (when `for await` makes
  /// its iterator), and receives the removals of writes ordered after that point. Removals
  /// arrive in the order the writes made them, shortly after each write returns, on the
  /// iteration's own task: no lock of the store is held, so the consumer may read and write
  /// the store. ``flush()`` returns once they have been handed to every iteration.
  ///
  /// **A slow consumer loses the oldest.** Up to 10 000 removals wait for the consumer
  /// (``removals(bufferingNewest:)`` chooses another bound); when another comes, the oldest
  /// waiting one is dropped, so memory stays bounded. Leaving the loop, cancelling its task or dropping the iterator ends the
  /// subscription; an iteration ends when the store is freed, after the removals made until
  /// then.
  ///
  /// While there is a subscriber, each write that removes or replaces a value logs it under
  /// the write lock (an append, and a retain of the value) and a background queue delivers
  /// them; ``removeAll()`` then costs O(*n*) to log every entry. Without subscribers a write
  /// pays nothing more: the flag it reads is the one it already reads for change batches.
  ///
  /// Thread-safe: the sequence refers to the store weakly. O(1) to start an iteration.
  public var removals: Removals { Removals(store: self, limit: 10_000) }

  /// ``removals``, with up to `limit` removals waiting for each iteration's consumer (at
  /// least 1) before the oldest is dropped.
  ///
  /// ```swift
  /// for await removal in images.removals(bufferingNewest: 100) {
  ///   print("\(removal.key) left: \(removal.cause)")
  /// }
  /// ```
  ///
  /// - Parameter limit: The most removals that wait for each iteration's consumer; at least 1.
  /// - Returns: The removals, as an `AsyncSequence`; thread-safe, and it refers to the store
  ///   weakly.
  public func removals(bufferingNewest limit: Int) -> Removals {
    Removals(store: self, limit: max(limit, 1))
  }

  /// The `AsyncSequence` of the entries that leave a store; see ``MemoryStore/removals``.
  ///
  /// Thread-safe; refers to the store weakly. Each iterator is a subscriber of its own.
  public struct Removals: AsyncSequence, Sendable {
    public typealias Element = Removal<Key, Value>
    public typealias Failure = Never

    weak var store: MemoryStore?
    /// The most removals that wait for an iteration's consumer.
    let limit: Int

    /// The sequence itself: `store.removals`, the spelling from when ``MemoryStore/removals``
    /// was a method.
    @available(*, deprecated, message: "removals is a property: write store.removals")
    public func callAsFunction() -> Self { self }

    /// Subscribes: the iterator receives the removals of every write ordered after this call.
    public func makeAsyncIterator() -> Iterator {
      let (stream, continuation) = AsyncStream.makeStream(
        of: Removal<Key, Value>.self, bufferingPolicy: .bufferingNewest(limit))
      if let store {
        store._subscribeToRemovals(continuation)
      } else {
        continuation.finish()
      }
      return Iterator(base: stream.makeAsyncIterator())
    }

    /// Iterates one subscription; dropping it ends the subscription.
    ///
    /// Sendable, as the iterators of ``MemoryStore/changes`` and ``MemoryStore/updates(of:)``
    /// are, so that an iteration may be started (subscribed) on one task and consumed on
    /// another; it is consumed by one task at a time: a second task that waits while one
    /// already does stops the program.
    public struct Iterator: AsyncIteratorProtocol, @unchecked Sendable {
      // Safe (`@unchecked Sendable`): the only stored property is `AsyncStream`'s iterator,
      // a reference to the stream's storage, which guards its state with a lock and stops the
      // program if two tasks wait on it at once; it is not Sendable only to discourage sharing.
      var base: AsyncStream<Removal<Key, Value>>.Iterator

      /// The next removal, waiting for it if necessary; `nil` when the store is gone and every
      /// removal was taken, or when the task is cancelled.
      public mutating func next() async -> Removal<Key, Value>? {
        await base.next()
      }

      /// The next removal, waiting for it if necessary; `nil` when the store is gone and every
      /// removal was taken, or when the task is cancelled.
      public mutating func next(
        isolation actor: isolated (any Actor)?
      ) async -> Removal<Key, Value>? {
        await base.next(isolation: actor)
      }
    }
  }

  /// Registers `continuation` as a subscriber of the removals of writes ordered after this
  /// call; its termination unregisters it.
  func _subscribeToRemovals(_ continuation: AsyncStream<Removal<Key, Value>>.Continuation) {
    // Under the write lock: every write ordered after this point is logged and delivered.
    let id = _writer.withLock { state in
      state.removals.nextSubscriberID += 1
      state.removals.subscribers[state.removals.nextSubscriberID] = .init(
        continuation: continuation,
        start: state.removals.delivered &+ UInt64(state.removals.entries.count))
      state.changes.recordsRemovals = true
      return state.removals.nextSubscriberID
    }
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      // Released after unlocking: it may hold the last reference to removals still buffered.
      let removed = _writer.withLock { state in
        defer { state.changes.recordsRemovals = !state.removals.subscribers.isEmpty }
        return state.removals.subscribers.removeValue(forKey: id)
      }
      withExtendedLifetime(removed) {}
    }
  }

  /// Delivers the logged removals on the removals queue.
  @usableFromInline
  func _scheduleRemovalDelivery() {
    _RemovalQueue.queue.async { [weak self] in self?._deliverRemovals() }
  }

  /// Hands the logged removals to the subscribers, oldest first (on the removals queue, or in
  /// deinit).
  func _deliverRemovals(finishing: Bool = false) {
    let (entries, first, subscribers) = _writer.withLock { state in
      state.removals.isDeliveryScheduled = false
      let first = state.removals.delivered
      state.removals.delivered &+= UInt64(state.removals.entries.count)
      let subscribers = Array(state.removals.subscribers.values)
      if finishing { state.removals.subscribers = [:] }
      defer { state.removals.entries = [] }
      return (state.removals.entries, first, subscribers)
    }
    for subscriber in subscribers {
      for (offset, removal) in entries.enumerated()
      where first &+ UInt64(offset) >= subscriber.start {
        subscriber.continuation.yield(removal)
      }
      if finishing { subscriber.continuation.finish() }
    }
    // The values are released here, outside every lock: a deinit may use the store.
  }
}
