import MemoryStoreKit

extension PostgresSync {
  /// The settings of a ``PostgresSync``: the channel, the shared table, and the limits and
  /// delays of its work.
  ///
  /// ```swift
  /// var configuration = PostgresSync<String, Quote>.Configuration(channel: "quotes", table: "quotes")
  /// configuration.warmStartLimit = 100_000
  /// ```
  public struct Configuration: Sendable {
    /// The channel that the instances sharing the store announce their changes on: a name of
    /// `[a-z0-9_]`, 1 to 63 long, not starting with a digit. Every instance of one store
    /// uses the same.
    public var channel: String
    /// The shared table (`name` or `schema.name`, of `[a-z0-9_]`), or `nil` to share
    /// invalidations only: then each instance loads from a source of its own.
    public var table: String?
    /// Whether ``PostgresSync/run()`` creates the table (and its index) if it is missing.
    public var createsTable = true
    /// How values are encoded in the table: a one-entry snapshot of the key and the value.
    /// Every instance uses the same coder.
    public var coder: any SnapshotCoder = .json
    /// How keys are written as text in messages and in the table.
    public var keyCoding: SyncKeyCoding<Key> = .standard
    /// The most keys one commit writes and announces.
    public var maximumBatchKeys = 1_000
    /// The largest encoded value the table takes; a larger one stays local and is reported.
    public var maximumValueBytes = 1 << 20
    /// How long a read of the table or a commit may take before it counts as failed. The
    /// sync's connections also give it to the server as `statement_timeout`, so that a
    /// statement held behind a lock ends there too (a warm start's read included).
    public var databaseTimeout: Duration = .seconds(5)
    /// The first delay before a failed commit or connection is retried; it doubles up to
    /// ``maximumRetryDelay``, with jitter.
    public var retryDelay: Duration = .milliseconds(50)
    /// The longest delay between retries.
    public var maximumRetryDelay: Duration = .seconds(2)
    /// How often the listening connection is checked while idle: a lost connection is
    /// noticed within about this, plus the check's timeout.
    public var keepAliveInterval: Duration = .seconds(1)
    /// How long ``PostgresSync/run()`` keeps committing pending changes once cancelled.
    public var shutdownGracePeriod: Duration = .seconds(5)
    /// The most rows a new instance loads from the table, newest first, once it listens;
    /// `nil` (the default): none.
    public var warmStartLimit: Int?

    /// Settings with a channel and, if given, a shared table; the rest as documented.
    public init(channel: String, table: String? = nil) {
      self.channel = channel
      self.table = table
    }
  }
}
