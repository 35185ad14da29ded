import MemoryStorePostgres

/// Every event one sync reported, in order, for the example to wait on.
final class EventLog: Sendable {
  private let events = Locked<[PostgresSyncEvent]>([])

  /// Starts collecting `stream`'s events; the collection ends when the stream does (when its
  /// sync is freed).
  init(_ stream: AsyncStream<PostgresSyncEvent>) {
    Task { [self] in
      for await event in stream {
        events.withLock { $0.append(event) }
      }
    }
  }

  /// The number of events collected so far: the position to wait from for the next one.
  var count: Int {
    events.withLock { $0.count }
  }

  /// The first event from position `start` on that satisfies `predicate`, waiting for it for
  /// up to `limit`.
  ///
  /// - Throws: ``TimedOut``, naming `what`.
  @discardableResult
  func first(
    after start: Int = 0, within limit: Duration, _ what: String,
    where predicate: (PostgresSyncEvent) -> Bool
  ) async throws -> PostgresSyncEvent {
    try await poll(within: limit, what) {
      events.withLock { $0.dropFirst(start).first(where: predicate) }
    }
  }
}
