import Foundation

/// Something a ``PostgresSync`` did or met that an operator may want to see: delivered on
/// ``PostgresSync/events`` and logged.
public enum PostgresSyncEvent: Sendable, Equatable, CustomStringConvertible {
  /// Why the store was flushed (every entry dropped, but those with local changes not yet
  /// committed).
  public enum FlushReason: Sendable, Equatable, CustomStringConvertible {
    /// The channel's connection was lost: messages sent until it is back would be missed.
    case connectionLost
    /// The channel is listened to again (or for the first time): messages sent while it was
    /// not may have been missed.
    case listening
    /// A message of another instance was missing (a sequence number was skipped).
    case sequenceGap(origin: UUID, expected: UInt64, got: UInt64)
    /// Another instance started a new epoch: one of its messages may not have arrived.
    case epochChanged(origin: UUID)
    /// Another instance cleared its store, or announced more keys than a message holds.
    case requested(origin: UUID)

    public var description: String {
      switch self {
      case .connectionLost: "the channel's connection was lost"
      case .listening: "the channel is listened to again"
      case .sequenceGap(let origin, let expected, let got):
        "message \(got) of instance \(origin) came where \(expected) was expected"
      case .epochChanged(let origin): "instance \(origin) started a new epoch"
      case .requested(let origin): "instance \(origin) invalidated everything"
      }
    }
  }

  /// The channel is listened to; the store was flushed first.
  case listening
  /// The shared table exists: found, or created because it was missing. Reported once it is
  /// ready after ``PostgresSync/run()`` starts, and again whenever it is created anew.
  case tableReady
  /// The store was flushed: `dropped` entries.
  case flushed(FlushReason, dropped: Int)
  /// The channel's connection was lost; the sync reconnects with backoff.
  case connectionLost(String)
  /// Publishing local changes failed; they stay pending and are retried with backoff.
  case publishFailed(String)
  /// A local value could not be written to the shared table (too large, or failed to
  /// encode): it stays in this store, and the other instances drop the key.
  case valueRejected(key: String, reason: String)
  /// A payload on the channel was not a message of a sync of this store, and was ignored.
  case ignoredPayload(reason: String)

  public var description: String {
    switch self {
    case .listening: "listening to the channel"
    case .tableReady: "the shared table is ready"
    case .flushed(let reason, let dropped): "flushed \(dropped) entries: \(reason)"
    case .connectionLost(let error): "the channel's connection was lost: \(error)"
    case .publishFailed(let error): "publishing local changes failed: \(error)"
    case .valueRejected(let key, let reason): "the value of \(key) was not shared: \(reason)"
    case .ignoredPayload(let reason): "ignored a payload on the channel: \(reason)"
    }
  }
}

/// Counters of a ``PostgresSync``, since it was created.
public struct PostgresSyncStatistics: Sendable, Equatable {
  /// Messages this instance sent.
  public var messagesPublished: UInt64 = 0
  /// Local changes (keys, and clears) this instance committed.
  public var changesPublished: UInt64 = 0
  /// Batches of local changes whose publication failed (and was retried).
  public var publishFailures: UInt64 = 0
  /// Messages of other instances received.
  public var messagesReceived: UInt64 = 0
  /// Messages of other instances ignored as duplicates or of an older epoch.
  public var messagesIgnored: UInt64 = 0
  /// Payloads on the channel that were not messages of this store's sync.
  public var payloadsRejected: UInt64 = 0
  /// Keys that messages of other instances invalidated.
  public var keysInvalidated: UInt64 = 0
  /// Flushes of the whole store.
  public var flushes: UInt64 = 0
  /// Reads that went to the shared table.
  public var tableReads: UInt64 = 0

  public init() {}
}
