import Foundation
import MemoryStoreKit

/// The sync's bookkeeping, as a plain value whose methods say what to do next: the local
/// changes waiting to be published and the batch being published, the numbering of this
/// instance's messages, and what it knows of the other instances' numbering. Guarded by the
/// sync's lock; nothing here does input or output.
@usableFromInline
struct SyncState<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// What a key's latest local change left to publish.
  @usableFromInline
  enum Pending: Sendable {
    case set(Value)
    case remove
  }

  /// Local changes on their way to the database: a clear (before the keys), then each key's
  /// latest change.
  @usableFromInline
  struct Changes: Sendable {
    @usableFromInline var clears = false
    @usableFromInline var keys: [Key: Pending] = [:]

    var isEmpty: Bool { !clears && keys.isEmpty }

    /// These changes followed by `later`'s.
    mutating func append(_ later: Changes) {
      if later.clears {
        self = later
      } else {
        keys.merge(later.keys) { _, newer in newer }
      }
    }

    /// These changes followed by `changes`, taken from the feed in their order. O(`changes`).
    ///
    /// Inlinable, so that it runs compiled for the store's key and value types (see
    /// ``SyncState/Coalescing``): generic, each change cost several lookups of type metadata,
    /// and the publisher adds every change the store's writes make.
    @inlinable
    mutating func add(_ changes: [LocalChange<Key, Value>]) {
      for change in changes {
        switch change {
        case .updated(let key, let value): keys[key] = .set(value)
        case .removed(let key): keys[key] = .remove
        case .cleared:
          clears = true
          keys.removeAll()
        }
      }
    }
  }

  /// Adds changes taken from the feed to the pending ones (``Changes/add(_:)``): a closure
  /// made where the sync is created, where the key and value types are known, so that it is
  /// compiled for them.
  @usableFromInline
  typealias Coalescing = @Sendable ([LocalChange<Key, Value>], inout Changes) -> Void

  /// What to do with a message from the channel.
  enum Reception: Equatable {
    /// Nothing: this instance's own message, a duplicate, or an older epoch's.
    case ignore(String)
    /// Drop these keys, but those about to be published from here.
    case invalidate([Key])
    /// Drop everything, but what is about to be published from here.
    case flush(PostgresSyncEvent.FlushReason)
  }

  /// This instance's id in messages.
  let origin: UUID
  /// This instance's epoch: changes when it cannot tell whether a message it sent arrived.
  private(set) var epoch: UInt64 = 1
  /// The sequence number of this instance's next message in its epoch.
  private(set) var nextSequence: UInt64 = 1

  /// Changes taken from the feed, not yet in a batch.
  private(set) var pending = Changes()
  /// The batch being published, if one is.
  private(set) var inFlight: Changes?
  /// Keys of the batch in flight that another instance changed meanwhile: whichever commit
  /// came last, this instance drops them once its batch is committed.
  private var overtakenInFlight: Set<Key> = []
  /// Whether everything was invalidated while a batch was in flight.
  private var everythingOvertakenInFlight = false

  /// The last message seen of each other instance: its epoch and sequence number.
  private var origins: [UUID: (epoch: UInt64, sequence: UInt64)] = [:]
  /// The most instances remembered; beyond, the record starts again (every instance is then
  /// new, which costs nothing but a missed gap).
  static var maximumOrigins: Int { 4_096 }

  /// Whether the channel is being listened to: only then may reads be kept in the store.
  var isListening = false

  /// Local changes taken so far, and how many of them are known committed.
  private(set) var taken: UInt64 = 0
  private(set) var committed: UInt64 = 0

  var statistics = PostgresSyncStatistics()

  /// How changes are added to the pending ones.
  let coalescing: Coalescing

  init(origin: UUID, coalescing: @escaping Coalescing) {
    self.origin = origin
    self.coalescing = coalescing
  }

  // MARK: Local changes

  /// Adds changes taken from the feed, in their order.
  mutating func add(_ changes: [LocalChange<Key, Value>]) {
    guard !changes.isEmpty else { return }
    taken += UInt64(changes.count)
    coalescing(changes, &pending)
  }

  /// The keys with changes not yet committed: kept by invalidations, as this instance's
  /// changes will reach the others after whatever the invalidation announces.
  var keysToKeep: Set<Key> {
    var keys = Set(pending.keys.keys)
    if let inFlight { keys.formUnion(inFlight.keys.keys) }
    return keys
  }

  /// Those of `keys` that ``keysToKeep`` holds, found key by key: what an invalidation of
  /// `keys` must keep, in O(`keys`) where ``keysToKeep`` costs O(every uncommitted change),
  /// which a busy instance may have many of when messages arrive.
  func keysToKeep(among keys: [Key]) -> Set<Key> {
    var kept = Set<Key>()
    for key in keys where pending.keys[key] != nil || inFlight?.keys[key] != nil {
      kept.insert(key)
    }
    return kept
  }

  /// The latest uncommitted change of `key`, if any: what a read-through must answer with,
  /// since the database does not have it yet.
  func uncommitted(_ key: Key) -> Pending?? {
    if let change = pending.keys[key] { return .some(change) }
    if pending.clears { return .some(nil) }
    if let change = inFlight?.keys[key] { return .some(change) }
    if inFlight?.clears == true { return .some(nil) }
    return nil
  }

  /// Starts a batch of at most `maximumKeys` keys (all of them with a clear), or returns
  /// `nil` if one is in flight or nothing is pending.
  mutating func beginBatch(maximumKeys: Int) -> (changes: Changes, epoch: UInt64, sequence: UInt64)?
  {
    guard inFlight == nil, !pending.isEmpty else { return nil }
    var batch: Changes
    if pending.clears || pending.keys.count <= maximumKeys {
      batch = pending
      pending = Changes()
    } else {
      batch = Changes()
      for key in pending.keys.keys.prefix(maximumKeys) {
        batch.keys[key] = pending.keys.removeValue(forKey: key)
      }
    }
    inFlight = batch
    overtakenInFlight = []
    everythingOvertakenInFlight = false
    return (batch, epoch, nextSequence)
  }

  /// Ends the batch in flight: committed with `messages` messages sent, or not (then its
  /// changes are pending again, under the pending ones, and the epoch changes, since the
  /// commit may or may not have happened). Returns the keys to drop here: those another
  /// instance changed while the batch was in flight (or all of the batch's, if everything was
  /// invalidated), unless changed here again since.
  mutating func endBatch(committedWith messages: Int?) -> [Key] {
    guard let batch = inFlight else { return [] }
    inFlight = nil
    defer {
      overtakenInFlight = []
      everythingOvertakenInFlight = false
    }
    guard let messages else {
      var restored = batch
      restored.append(pending)
      pending = restored
      epoch += 1
      nextSequence = 1
      statistics.publishFailures += 1
      return []
    }
    nextSequence += UInt64(messages)
    statistics.messagesPublished += UInt64(messages)
    statistics.changesPublished += UInt64(batch.keys.count) + (batch.clears ? 1 : 0)
    if pending.isEmpty { committed = taken }
    let overtaken = everythingOvertakenInFlight ? Set(batch.keys.keys) : overtakenInFlight
    return overtaken.filter { pending.keys[$0] == nil && !pending.clears }
  }

  // MARK: Messages of other instances

  /// What to do with `message`, whose keys decode to `keys` (for a message about keys).
  mutating func receive(_ message: SyncMessage, keys: [Key]) -> Reception {
    guard message.origin != origin else { return .ignore("sent by this instance") }
    statistics.messagesReceived += 1
    let known = origins[message.origin]
    if origins.count >= Self.maximumOrigins && known == nil { origins = [:] }
    origins[message.origin] = (message.epoch, message.sequence)
    var reception: Reception
    switch message.scope {
    case .keys: reception = .invalidate(keys)
    case .everything: reception = .flush(.requested(origin: message.origin))
    }
    if let known {
      if message.epoch < known.epoch
        || (message.epoch == known.epoch && message.sequence <= known.sequence)
      {
        origins[message.origin] = known
        statistics.messagesIgnored += 1
        return .ignore("an older message of instance \(message.origin)")
      }
      if message.epoch > known.epoch {
        reception = .flush(.epochChanged(origin: message.origin))
      } else if message.sequence != known.sequence + 1 {
        reception = .flush(
          .sequenceGap(origin: message.origin, expected: known.sequence + 1, got: message.sequence))
      }
    }
    noteInvalidation(reception)
    return reception
  }

  /// Notes an invalidation for the batch in flight.
  mutating func noteInvalidation(_ reception: Reception) {
    switch reception {
    case .ignore: break
    case .invalidate(let keys):
      statistics.keysInvalidated += UInt64(keys.count)
      guard let inFlight else { return }
      for key in keys where inFlight.keys[key] != nil { overtakenInFlight.insert(key) }
    case .flush:
      statistics.flushes += 1
      if inFlight != nil { everythingOvertakenInFlight = true }
    }
  }

  /// Forgets the other instances' numbering: after a time without listening, every message
  /// may have been missed, and the next of each instance starts its numbering anew.
  mutating func forgetOrigins() {
    origins = [:]
  }
}
