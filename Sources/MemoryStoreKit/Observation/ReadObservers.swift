import Dispatch
import Observation
import Synchronization

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Bionic)
  import Bionic
#endif

/// What a store's tracked reads register with the Observation framework: one subject per
/// store, and key paths that name what a read depended on.
///
/// A key is named by a bucket of its hash (``_ReadObservers/bucketCount`` of them, each with
/// a key path made once per process, see ``_BucketPaths``), not by a key path to the key
/// itself: making one costs about a microsecond, and comparing two hashes their arguments.
/// Two keys in one bucket notify each other's observers: a change that is not one, which
/// Observation allows (an observer re-reads and finds nothing new). Two more buckets name the
/// whole store's membership and contents (``_ReadObservers/membership``,
/// ``_ReadObservers/contents``).
final class _ObservedSubject: Observable, Sendable {
  /// Where observers of this subject are registered.
  let registrar = ObservationRegistrar()

  /// A bucket, named by key paths with the bucket as argument. Never read.
  subscript(bucket bucket: Int) -> Int { bucket }
}

/// The key path of every bucket of ``_ObservedSubject``, made on first use and kept for the
/// life of the process: at most ``_ReadObservers/pathCount`` of them, shared by every store.
///
/// `@unchecked Sendable`, safe: `slots` is written only by `init`, and the memory it points
/// to only through its atomics; a key path stored there is immutable and never released.
final class _BucketPaths: @unchecked Sendable {
  static let shared = _BucketPaths()

  /// `nil` until made; never replaced once stored.
  private let slots: UnsafeMutablePointer<Atomic<Unmanaged<KeyPath<_ObservedSubject, Int>>?>>

  private init() {
    slots = .allocate(capacity: _ReadObservers.pathCount)
    for index in 0..<_ReadObservers.pathCount { (slots + index).initialize(to: Atomic(nil)) }
  }

  /// The key path of bucket `index`, made if it is the first use. The reference is kept by
  /// the table, for ever.
  func path(_ index: Int) -> Unmanaged<KeyPath<_ObservedSubject, Int>> {
    if let path = slots[index].load(ordering: .acquiring) { return path }
    let path: KeyPath<_ObservedSubject, Int> = \_ObservedSubject.[bucket: index]
    let made = Unmanaged.passRetained(path)
    let (stored, current) = slots[index].compareExchange(
      expected: nil, desired: made, ordering: .acquiringAndReleasing)
    if stored { return made }
    made.release()
    return current!
  }
}

/// What a tracked read depended on.
@usableFromInline
enum _TrackedRead {
  /// The value of the key with this hash: a subscript read, ``MemoryStore/values(forKeys:)``.
  case value(hash: Int)
  /// Whether the key with this hash is present: ``MemoryStore/contains(_:)``.
  case presence(hash: Int)
  /// Which keys are present: ``MemoryStore/count``, ``MemoryStore/isEmpty``,
  /// ``MemoryStore/keys``.
  case membership
  /// Every entry: ``MemoryStore/values``, ``MemoryStore/allItems``.
  case contents
}

/// The changes one write made, for the store's read observers: logged under the write lock
/// while reads are tracked, handed over after unlocking.
///
/// A class, so that a write's follow-up holds one reference: what every write returns stays
/// small. Made only by writes of a store that tracks reads.
///
/// `@unchecked Sendable`, safe: it is mutated only under the store's write lock, then handed
/// to the one thread that delivers it, which only reads it.
@usableFromInline
final class _ObservationNotices: @unchecked Sendable {
  /// One key changed: its hash, and whether the change added or removed it.
  @usableFromInline typealias Change = (hash: Int, changesPresence: Bool)

  /// The first key changed (a write of one key allocates no array).
  @usableFromInline var first: Change?
  /// The keys changed after it.
  @usableFromInline var more: [Change] = []
  /// Whether the write emptied the store.
  @usableFromInline var cleared = false

  @usableFromInline init() {}

  @inlinable var isEmpty: Bool { first == nil && !cleared }

  @inlinable
  func append(_ change: Change) {
    if first == nil { first = change } else { more.append(change) }
  }

  func forEachChange(_ body: (Change) -> Void) {
    if let first { body(first) }
    for change in more { body(change) }
  }
}

/// A store's tracked reads: which buckets of keys reads registered, and the notices that
/// reach their observers.
///
/// **How no change is missed.** A read sets its bucket's bit, then (after a full fence) reads
/// the table; a write publishes the table, then (after a full fence) takes the bits of what it
/// changed (clearing them), and notifies the buckets whose bit was set. Either the write sees
/// the bit, or the read sees the write. A read that saw the bit set just before a write took it
/// is covered by that write's notices, which are sent again (below): its observation, once
/// registered, is told, and registering again sets the bit again.
///
/// **The registration's window.** Observation registers what a tracking scope read only when
/// the scope ends: a write notified between a read and that registration finds no observer.
/// So every bucket notified is notified again ``renoticeDelays`` later (and at once by
/// ``MemoryStore/flush()``): an observer registered meanwhile is then told, and one that had
/// read the new value re-reads it. A registration later than the last of them (a thread
/// descheduled for longer) misses the change.
///
/// **Delivery.** One thread at a time delivers a store's notices, without any lock held:
/// Observation removes an observation only after its `onChange` returns, so two threads
/// notifying at once could both run it. Notices handed over while a thread delivers are
/// delivered by that thread, merged.
///
/// `@unchecked Sendable`, safe: `bits` is written only by `init` and `deinit`, and the memory
/// it points to only through its atomics; the key paths are immutable; the rest is Sendable.
@usableFromInline
final class _ReadObservers: @unchecked Sendable {
  /// The number of buckets: keys are told apart by 15 bits of their hash, twice (their value,
  /// their presence).
  static let bucketCount = 1 << 16
  /// The bucket of which keys are present: what ``MemoryStore/count``,
  /// ``MemoryStore/isEmpty`` and ``MemoryStore/keys`` read.
  static let membership = bucketCount
  /// The bucket of every entry: what ``MemoryStore/values`` and ``MemoryStore/allItems`` read.
  static let contents = bucketCount + 1
  /// The number of buckets with key paths: the keys' and the two of the whole store.
  static let pathCount = bucketCount + 2
  /// The words of the bits, one bit per bucket.
  static let wordCount = (pathCount + 63) / 64
  /// How long after a notice the same buckets are notified again: a short delay for a
  /// registration that was under way, then a long one for a thread that was descheduled.
  static let renoticeDelays: [Duration] = [.milliseconds(5), .milliseconds(250)]

  let subject = _ObservedSubject()

  /// A bit per bucket: set by a tracked read of it, taken by the next write that changes it.
  private let bits: UnsafeMutablePointer<Atomic<UInt64>>
  /// The notices handed over and not yet delivered, those to send again, and the waiters of
  /// ``sendPending()``.
  private let delivery = _Protected(_Delivery(rounds: _ReadObservers.renoticeDelays.count))

  init() {
    bits = .allocate(capacity: Self.wordCount)
    for index in 0..<Self.wordCount { (bits + index).initialize(to: Atomic(0)) }
  }

  deinit {
    bits.deinitialize(count: Self.wordCount)
    bits.deallocate()
  }

  // MARK: Reads

  /// Registers `read` with the current tracking scope, if any (Observation's `access`), and
  /// marks its bucket for writes to notify. Call before reading the table.
  @usableFromInline
  func access(_ read: _TrackedRead) {
    let index =
      switch read {
      case .value(let hash): Self.bucket(hash, presence: false)
      case .presence(let hash): Self.bucket(hash, presence: true)
      case .membership: Self.membership
      case .contents: Self.contents
      }
    let bit = UInt64(1) << UInt64(index & 63)
    if bits[index >> 6].load(ordering: .relaxed) & bit == 0 {
      bits[index >> 6].bitwiseOr(bit, ordering: .relaxed)
    }
    _BucketPaths.shared.path(index)._withUnsafeGuaranteedRef { path in
      subject.registrar.access(subject, keyPath: path)
    }
    // Ordered before the table's read: see the type's documentation.
    atomicMemoryFence(ordering: .sequentiallyConsistent)
  }

  /// The bucket of the key with `hash`.
  static func bucket(_ hash: Int, presence: Bool) -> Int {
    (hash & (bucketCount / 2 - 1)) << 1 | (presence ? 1 : 0)
  }

  // MARK: Notices

  /// Notifies the observers of what `notices` changed and schedules the same notices again
  /// (see ``renoticeDelays``): on the calling thread, or with `later` on a background queue.
  /// Call after the write is published and the write lock released; with `later` false, only
  /// where no lock of the store is held: observers may run here.
  @usableFromInline
  func notify(_ notices: _ObservationNotices, later: Bool) {
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    var sent: Set<Int> = []
    if notices.cleared {
      sent = takeEveryBucket(keepingPending: true)
    } else {
      var changesMembership = false
      notices.forEachChange { change in
        let value = Self.bucket(change.hash, presence: false)
        if takeBit(value) { sent.insert(value) }
        guard change.changesPresence else { return }
        if takeBit(value | 1) { sent.insert(value | 1) }
        changesMembership = true
      }
      if changesMembership && takeBit(Self.membership) { sent.insert(Self.membership) }
      if takeBit(Self.contents) { sent.insert(Self.contents) }
    }
    guard !sent.isEmpty else { return }
    deliver(sent, renoticing: true, later: later)
  }

  /// Takes the bit of bucket `index`: whether a read registered it since the last notice.
  private func takeBit(_ index: Int) -> Bool {
    let bit = UInt64(1) << UInt64(index & 63)
    guard bits[index >> 6].load(ordering: .relaxed) & bit != 0 else { return false }
    return bits[index >> 6].bitwiseAnd(~bit, ordering: .relaxed).oldValue & bit != 0
  }

  /// Takes every bit: the notices that tell every observation registered since the last
  /// notices (after a `removeAll()`, or when the store stops tracking reads). Unless
  /// `keepingPending`, the notices waiting to be sent again are dropped into it too.
  func takeEveryBucket(keepingPending: Bool = false) -> Set<Int> {
    var taken: Set<Int> = []
    for word in 0..<Self.wordCount {
      guard bits[word].load(ordering: .relaxed) != 0 else { continue }
      var set = bits[word].exchange(0, ordering: .relaxed)
      while set != 0 {
        taken.insert(word << 6 | set.trailingZeroBitCount)
        set &= set - 1
      }
    }
    if !keepingPending { taken.formUnion(delivery.withLock { $0.takeAllRounds() }) }
    return taken
  }

  /// Delivers `notice` at once (see ``deliver(_:renoticing:later:)``), not to be sent again.
  func deliver(_ notice: Set<Int>) {
    deliver(notice, renoticing: false, later: false)
  }

  /// Hands `notice` over for delivery, to be sent again later if `renoticing`; delivers it
  /// (and what other threads hand over meanwhile) unless another thread is delivering: here,
  /// or with `later` on a background queue.
  ///
  /// Unless `later`, returns once `notice` was delivered: by this thread, or by the thread
  /// delivering, which this one waits for. An observer's own write (this thread delivers)
  /// returns at once: its notice is delivered when the observer returns.
  private func deliver(_ notice: Set<Int>, renoticing: Bool, later: Bool) {
    let thread = _currentThreadID()
    let (handOver, isReentrant, schedules) = delivery.withLock { state in
      let isReentrant = state.isDelivering && state.deliverer == thread
      return (
        state.hand(over: notice), isReentrant,
        renoticing && state.addToRound(notice, round: 0)
      )
    }
    if schedules { scheduleRound(0) }
    let (ticket, delivers) = handOver
    if delivers {
      if later {
        DispatchQueue.global(qos: .utility).async { [self] in drain() }
      } else {
        drain()
      }
    } else if !later && !isReentrant {
      // Another thread delivers: the write returns once its observers have run.
      while delivery.withLock({ $0.delivered }) < ticket { sched_yield() }
    }
  }

  /// Delivers what was handed over, until nothing is left; the caller is the delivering
  /// thread. No lock is held while observers run.
  private func drain() {
    let thread = _currentThreadID()
    delivery.withLock { $0.deliverer = thread }
    while true {
      let (batch, through, resumed) = delivery.withLock {
        state -> (Set<Int>?, UInt64, [CheckedContinuation<Void, Never>]) in
        guard !state.waiting.isEmpty else {
          state.isDelivering = false
          state.deliverer = nil
          return (nil, state.handedOver, state.finishDelivery(through: state.handedOver))
        }
        defer { state.waiting = [] }
        return (state.waiting, state.handedOver, [])
      }
      guard let batch else {
        for waiter in resumed { waiter.resume() }
        return
      }
      send(batch)
      let finished = delivery.withLock { $0.finishDelivery(through: through) }
      for waiter in finished { waiter.resume() }
    }
  }

  /// Schedules the pass of round `round` (see ``renoticeDelays``).
  private func scheduleRound(_ round: Int) {
    let delay = Self.renoticeDelays[round]
    DispatchQueue.global(qos: .utility).asyncAfter(
      deadline: .now() + .nanoseconds(Int(delay.nanoseconds))
    ) { [weak self] in
      self?.sendRound(round)
    }
  }

  /// Round `round`'s pass: sends its notices again, and moves them to the next round.
  private func sendRound(_ round: Int) {
    let (delivers, schedulesNext) = delivery.withLock { state -> (Bool, Bool) in
      let due = state.takeRound(round)
      guard !due.isEmpty else { return (false, false) }
      let (_, delivers) = state.hand(over: due)
      return (delivers, round + 1 < state.rounds.count && state.addToRound(due, round: round + 1))
    }
    if schedulesNext { scheduleRound(round + 1) }
    if delivers { drain() }
  }

  /// Sends every notice waiting to be sent again, now, and returns once they and every notice
  /// handed over before them were delivered: what ``MemoryStore/flush()`` does. Waits without
  /// blocking a thread.
  func sendPending() async {
    let (ticket, delivers) = delivery.withLock { $0.hand(over: $0.takeAllRounds()) }
    if delivers { drain() }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let isDelivered = delivery.withLock { state in
        guard state.delivered < ticket else { return true }
        state.waiters.append((ticket, continuation))
        return false
      }
      if isDelivered { continuation.resume() }
    }
  }

  /// Tells the observers of `notice`'s buckets that they changed (`willSet`, then `didSet`:
  /// both kinds of tracking fire, after the change).
  private func send(_ buckets: Set<Int>) {
    let registrar = subject.registrar
    for index in buckets {
      _BucketPaths.shared.path(index)._withUnsafeGuaranteedRef { path in
        registrar.willSet(subject, keyPath: path)
        registrar.didSet(subject, keyPath: path)
      }
    }
  }
}

/// What a store's read observers have to deliver, guarded by their lock.
struct _Delivery: Sendable {
  /// The buckets handed over, not yet taken by the delivering thread.
  var waiting: Set<Int> = []
  /// Whether a thread is delivering.
  var isDelivering = false
  /// The thread delivering, once it started (see ``_currentThreadID()``).
  var deliverer: UInt?
  /// The number of hand-overs so far: a hand-over's ticket.
  var handedOver: UInt64 = 0
  /// Every hand-over up to this ticket was delivered.
  var delivered: UInt64 = 0
  /// The notices to send again, per round of ``_ReadObservers/renoticeDelays``, and whether
  /// each round's pass is scheduled.
  var rounds: [Set<Int>]
  var isScheduled: [Bool]
  /// Calls of ``_ReadObservers/sendPending()`` waiting for a ticket to be delivered.
  var waiters: [(ticket: UInt64, continuation: CheckedContinuation<Void, Never>)] = []

  init(rounds count: Int) {
    rounds = Array(repeating: [], count: count)
    isScheduled = Array(repeating: false, count: count)
  }

  /// Hands `notice` over; returns its ticket, and whether the caller becomes the delivering
  /// thread (no thread was delivering).
  mutating func hand(over notice: Set<Int>) -> (ticket: UInt64, delivers: Bool) {
    waiting.formUnion(notice)
    handedOver &+= 1
    defer { isDelivering = true }
    return (handedOver, !isDelivering)
  }

  /// Records that every hand-over up to `ticket` was delivered; returns the waiters to resume
  /// (after unlocking).
  mutating func finishDelivery(through ticket: UInt64) -> [CheckedContinuation<Void, Never>] {
    delivered = Swift.max(delivered, ticket)
    guard !waiters.isEmpty else { return [] }
    let done = waiters.filter { $0.ticket <= delivered }.map(\.continuation)
    waiters.removeAll { $0.ticket <= delivered }
    return done
  }

  /// Adds `notice` to round `round`; returns whether the round's pass must be scheduled.
  mutating func addToRound(_ notice: Set<Int>, round: Int) -> Bool {
    guard !notice.isEmpty else { return false }
    rounds[round].formUnion(notice)
    if isScheduled[round] { return false }
    isScheduled[round] = true
    return true
  }

  /// Takes round `round`'s notices, which its scheduled pass sends.
  mutating func takeRound(_ round: Int) -> Set<Int> {
    isScheduled[round] = false
    defer { rounds[round] = [] }
    return rounds[round]
  }

  /// Takes every round's notices (the passes scheduled then send nothing).
  mutating func takeAllRounds() -> Set<Int> {
    var all: Set<Int> = []
    for round in rounds.indices {
      all.formUnion(rounds[round])
      rounds[round] = []
    }
    return all
  }
}

/// A store's ``_ReadObservers``, made when tracking is first turned on and kept until the
/// store goes: reached without reference counting (a read that tracks pays no retain).
@usableFromInline
struct _ReadObserversSlot: ~Copyable, Sendable {
  /// Set once, by ``make()``; released by `deinit`.
  private let observers = Atomic<Unmanaged<_ReadObservers>?>(nil)

  @usableFromInline init() {}

  deinit { observers.load(ordering: .acquiring)?.release() }

  /// The observers, made if they were not.
  func make() {
    guard observers.load(ordering: .acquiring) == nil else { return }
    let made = Unmanaged.passRetained(_ReadObservers())
    let (stored, _) = observers.compareExchange(
      expected: nil, desired: made, ordering: .acquiringAndReleasing)
    if !stored { made.release() }
  }

  /// The observers, if they were made.
  var current: _ReadObservers? { observers.load(ordering: .acquiring)?.takeUnretainedValue() }

  /// Runs `body` with the observers, if they were made; the slot keeps them alive meanwhile.
  @usableFromInline
  func with<R>(_ body: (_ReadObservers) -> R) -> R? {
    observers.load(ordering: .acquiring)?._withUnsafeGuaranteedRef(body)
  }
}

/// The calling thread's identity, for comparison only.
func _currentThreadID() -> UInt {
  #if canImport(Glibc)
    UInt(pthread_self())
  #else
    // A pointer on the other platforms.
    UInt(bitPattern: pthread_self())
  #endif
}
