import Testing

@testable import MemoryStorePostgres

/// Reads a listener's events in a task of its own and hands them out one at a time, each wait
/// bounded by a deadline, so a test never sleeps and never hangs.
///
/// ```swift
/// let events = EventQueue(listener.events)
/// let backendPID = try await events.nextListening()
/// ```
final class EventQueue: Sendable {
  /// The listener's event.
  typealias Event = NotificationListener.Event

  /// How long a wait lasts by default.
  static let deadline: Duration = .seconds(10)

  private let storage = Storage()

  /// Starts reading `events`.
  init(_ events: AsyncStream<Event>) {
    let storage = storage
    Task {
      for await event in events {
        storage.push(event)
      }
      storage.finish()
    }
  }

  /// The next event; `nil` when the stream has finished.
  ///
  /// - Throws: ``EventQueueTimeout`` when none comes within `deadline`.
  func next(within deadline: Duration = deadline) async throws -> Event? {
    try await storage.next(within: deadline)?.event
  }

  /// The next event, which must be `.listening`; returns its backend PID.
  func nextListening(
    within deadline: Duration = deadline, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws -> Int32 {
    let event = try await next(within: deadline)
    guard case .listening(let backendPID)? = event else {
      Issue.record("expected .listening, got \(describe(event))", sourceLocation: sourceLocation)
      throw UnexpectedEvent()
    }
    return backendPID
  }

  /// The next event, which must be `.notification`; returns its payload and sender.
  func nextNotification(
    within deadline: Duration = deadline, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws -> (payload: String, senderPID: Int32) {
    let event = try await next(within: deadline)
    guard case .notification(let payload, let senderPID)? = event else {
      Issue.record("expected .notification, got \(describe(event))", sourceLocation: sourceLocation)
      throw UnexpectedEvent()
    }
    return (payload, senderPID)
  }

  /// The next event, which must be `.disconnected`; returns its error and when the listener
  /// yielded it.
  func nextDisconnected(
    within deadline: Duration = deadline, sourceLocation: SourceLocation = #_sourceLocation
  ) async throws -> (error: any Error, arrival: ContinuousClock.Instant) {
    let arrival = try await storage.next(within: deadline)
    guard case (.disconnected(let error), let instant)? = arrival else {
      Issue.record(
        "expected .disconnected, got \(describe(arrival?.event))", sourceLocation: sourceLocation)
      throw UnexpectedEvent()
    }
    return (error, instant)
  }

  private func describe(_ event: Event?) -> String {
    guard let event else { return "the end of the stream" }
    switch event {
    case .listening(let backendPID): return ".listening(backendPID: \(backendPID))"
    case .notification(let payload, let senderPID):
      return
        ".notification(payload: \(payload.prefix(80).debugDescription), senderPID: \(senderPID))"
    case .disconnected(let error): return ".disconnected(\(error))"
    }
  }

  private final class Storage: Sendable {
    typealias Arrival = (event: Event, instant: ContinuousClock.Instant)

    private enum Outcome {
      case event(Arrival)
      case finished
      case timedOut
    }

    private struct State {
      var buffered: [Arrival] = []
      var isFinished = false
      var waiter: (id: Int, continuation: CheckedContinuation<Outcome, Never>)?
      var expiredEarly: Set<Int> = []
      var nextID = 0
    }

    private let state = Locked(State())

    func push(_ event: Event) {
      let arrival = (event, ContinuousClock.now)
      let waiter = state.withLock { state in
        guard let waiter = state.waiter else {
          state.buffered.append(arrival)
          return nil as CheckedContinuation<Outcome, Never>?
        }
        state.waiter = nil
        return waiter.continuation
      }
      waiter?.resume(returning: .event(arrival))
    }

    func finish() {
      let waiter = state.withLock { state in
        state.isFinished = true
        defer { state.waiter = nil }
        return state.waiter?.continuation
      }
      waiter?.resume(returning: .finished)
    }

    func next(within deadline: Duration) async throws -> Arrival? {
      let id = state.withLock { state in
        defer { state.nextID += 1 }
        return state.nextID
      }
      let timer = Task {
        try? await Task.sleep(for: deadline)
        if !Task.isCancelled { expire(id) }
      }
      defer { timer.cancel() }
      let outcome = await withCheckedContinuation {
        (continuation: CheckedContinuation<Outcome, Never>) in
        let immediate: Outcome? = state.withLock { state in
          if state.expiredEarly.remove(id) != nil { return .timedOut }
          if !state.buffered.isEmpty { return .event(state.buffered.removeFirst()) }
          if state.isFinished { return .finished }
          state.waiter = (id, continuation)
          return nil
        }
        if let immediate { continuation.resume(returning: immediate) }
      }
      switch outcome {
      case .event(let arrival): return arrival
      case .finished: return nil
      case .timedOut: throw EventQueueTimeout(deadline: deadline)
      }
    }

    private func expire(_ id: Int) {
      let waiter = state.withLock { state in
        guard let waiter = state.waiter, waiter.id == id else {
          state.expiredEarly.insert(id)
          return nil as CheckedContinuation<Outcome, Never>?
        }
        state.waiter = nil
        return waiter.continuation
      }
      waiter?.resume(returning: .timedOut)
    }
  }
}

/// No event came within the deadline.
struct EventQueueTimeout: Error, CustomStringConvertible {
  /// How long the wait was.
  let deadline: Duration

  var description: String { "no listener event within \(deadline)" }
}

/// An event of another kind than the test expected (already recorded as an issue).
struct UnexpectedEvent: Error {}
