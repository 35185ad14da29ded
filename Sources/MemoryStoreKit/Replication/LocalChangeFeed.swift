import Synchronization

/// The local changes of a store, in the order they were committed, for something that keeps
/// other instances coherent with this one: a bus, a replicator, a write-behind to a database.
///
/// Open it with ``MemoryStore/openLocalChangeFeed()``, then take what accumulated, either by
/// iterating it (each element is every change committed since the previous one, never empty)
/// or by calling ``take()``:
///
/// ```swift
/// let feed = store.openLocalChangeFeed()
/// Task {
///   for await changes in feed {
///     try await bus.publish(changes)   // invalidate these keys elsewhere
///   }
/// }
/// ```
///
/// A write hands its changes over under the lock it already holds, as an append to the feed's
/// buffer, and wakes a waiting iteration only when the buffer was empty, after unlocking: the
/// consumer decides how to batch. The buffer keeps every change (with its value) until it is
/// taken, so take promptly. What the store does on its own (evictions, expiries), what it
/// copies from a source (get-or-create, get-or-load, refresh, snapshot loads) and what an
/// invalidation drops never reach the feed (see ``LocalChange``), so applying another
/// instance's changes with ``MemoryStore/invalidateValues(forKeys:except:)`` does not echo.
///
/// A store has at most one open feed. The feed refers to its store weakly; when the store is
/// freed or the feed closed, an iteration ends. Iterate it from one task at a time.
///
/// Thread safety: every method may be called from any thread. ``take()`` takes the store's
/// write lock for the time of one swap. The feed's wake-up runs on the writing thread, after
/// the write has released every lock, and only resumes the waiting task.
public final class LocalChangeFeed<Key: Hashable & Sendable, Value: Sendable>: AsyncSequence,
  Sendable
{
  public typealias Element = [LocalChange<Key, Value>]
  public typealias Failure = Never

  let _store: _Protected<_WeakStore>
  let _signal: _FeedSignal
  /// The chunks the previous take emptied: the next take hands them back to the writes.
  let _emptied = _Protected<[_LocalChangeChunk<Key, Value>]>([])
  /// The most emptied chunks kept for the writes: room for 65 536 changes.
  static var _maximumEmptiedChunks: Int { 64 }

  struct _WeakStore: Sendable {
    weak var store: MemoryStore<Key, Value>?
  }

  init(store: MemoryStore<Key, Value>, signal: _FeedSignal) {
    _store = _Protected(_WeakStore(store: store))
    _signal = signal
  }

  deinit {
    close()
  }

  /// Takes every change committed since the previous take, oldest first; empty if there is
  /// none, or once the feed is closed.
  ///
  /// - Complexity: O(*n*) in the changes taken, on the calling thread: under the store's
  ///   write lock, only a swap of the chunks that hold them.
  public func take() -> [LocalChange<Key, Value>] {
    guard let store = _store.withLock({ $0.store }) else { return [] }
    // Concurrent takes each hand back what they find; each takes its own chunks.
    let emptied = _emptied.withLock { chunks in
      defer { chunks = [] }
      return chunks
    }
    let chunks = store._takeLocalChanges(for: _signal, handingBack: emptied)
    let taken = _LocalChangeBuffer.moveChanges(outOf: chunks)
    _emptied.withLock { kept in
      kept.append(contentsOf: chunks.prefix(Self._maximumEmptiedChunks - kept.count))
    }
    return taken
  }

  /// Closes the feed: the store stops keeping local changes and drops those not taken, and an
  /// iteration ends. Closing twice does nothing.
  public func close() {
    guard
      let store = _store.withLock({ state in
        defer { state.store = nil }
        return state.store
      })
    else {
      _signal.close()
      return
    }
    store._closeLocalChangeFeed(_signal)
  }

  /// Returns once there may be changes to take: at once if a write gave the feed changes
  /// since the previous wait, otherwise when one does, or when the feed closes, its store is
  /// freed or the calling task is cancelled.
  ///
  /// For a consumer that takes with ``take()`` under a lock of its own (so that every take is
  /// ordered with its own state), in place of iterating:
  ///
  /// ```swift
  /// while feed.isOpen && !Task.isCancelled {
  ///   state.withLock { $0.add(feed.take()) }
  ///   await publishWhatIsPending()
  ///   await feed.waitForChanges()
  /// }
  /// ```
  public func waitForChanges() async {
    await _signal.wait()
  }

  /// Whether the feed is open: not closed, and its store alive.
  public var isOpen: Bool {
    _store.withLock { $0.store != nil } && !_signal.isClosed
  }

  public func makeAsyncIterator() -> Iterator {
    Iterator(feed: self)
  }

  /// Waits for local changes and takes them.
  public struct Iterator: AsyncIteratorProtocol, Sendable {
    let feed: LocalChangeFeed

    /// The changes committed since the previous element, never empty; `nil` once the feed is
    /// closed, its store freed, or the calling task cancelled.
    public mutating func next() async -> [LocalChange<Key, Value>]? {
      await next(isolation: nil)
    }

    /// The changes committed since the previous element, never empty; `nil` once the feed is
    /// closed, its store freed, or the calling task cancelled.
    public mutating func next(isolation actor: isolated (any Actor)?) async
      -> [LocalChange<Key, Value>]?
    {
      while !Task.isCancelled {
        let changes = feed.take()
        if !changes.isEmpty { return changes }
        guard feed.isOpen else { return nil }
        await feed.waitForChanges()
      }
      return nil
    }
  }
}

/// Wakes a task waiting for a feed's changes: a write that gave the feed its first change
/// since it was woken signals it.
final class _FeedSignal: Sendable {
  struct State {
    var isPending = false
    var isClosed = false
    var isCancelled = false
    var waiter: CheckedContinuation<Void, Never>?
  }

  let state = _Protected(State())

  /// Resumes the waiting task, or lets the next wait return at once.
  func signal() {
    let waiter = state.withLock { state in
      guard let waiter = state.waiter else {
        state.isPending = true
        return nil as CheckedContinuation<Void, Never>?
      }
      state.waiter = nil
      return waiter
    }
    waiter?.resume()
  }

  /// Marks the feed closed and resumes the waiting task.
  func close() {
    let waiter = state.withLock { state in
      state.isClosed = true
      defer { state.waiter = nil }
      return state.waiter
    }
    waiter?.resume()
  }

  var isClosed: Bool { state.withLock { $0.isClosed } }

  /// Returns once signalled (or at once if it was since the previous wait), closed, or the
  /// calling task cancelled.
  func wait() async {
    state.withLock { $0.isCancelled = false }
    await withTaskCancellationHandler {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let resumesNow = state.withLock { state in
          if state.isPending || state.isClosed || state.isCancelled {
            state.isPending = false
            return true
          }
          state.waiter = continuation
          return false
        }
        if resumesNow { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock { state in
        state.isCancelled = true
        defer { state.waiter = nil }
        return state.waiter
      }
      waiter?.resume()
    }
  }
}

extension _FeedSignal.State: Sendable {}
