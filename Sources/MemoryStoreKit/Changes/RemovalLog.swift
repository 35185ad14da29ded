import Dispatch
import Synchronization

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
