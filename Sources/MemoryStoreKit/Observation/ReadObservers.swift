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
/// Observation allows (an observer re-reads and finds nothing new); a change is never missed.
final class _ObservedSubject: Observable, Sendable {
  /// Where observers of this subject are registered.
  let registrar = ObservationRegistrar()

  /// A bucket of keys, named by key paths with the bucket as argument. Never read.
  subscript(bucket bucket: Int) -> Int { bucket }
  /// Which keys are present: what ``MemoryStore/count``, ``MemoryStore/isEmpty`` and
  /// ``MemoryStore/keys`` read. Never read.
  var membership: Int { 0 }
  /// Every entry: what ``MemoryStore/values`` and ``MemoryStore/allItems`` read. Never read.
  var contents: Int { 0 }
}

/// The key path of every bucket of ``_ObservedSubject``, made on first use and kept for the
/// life of the process: at most ``_ReadObservers/bucketCount`` of them, shared by every store.
///
/// `@unchecked Sendable`, safe: `slots` is written only by `init`, and the memory it points
/// to only through its atomics; a key path stored there is immutable and never released.
final class _BucketPaths: @unchecked Sendable {
  static let shared = _BucketPaths()

  /// `nil` until made; never replaced once stored.
  private let slots: UnsafeMutablePointer<Atomic<Unmanaged<KeyPath<_ObservedSubject, Int>>?>>

  private init() {
    slots = .allocate(capacity: _ReadObservers.bucketCount)
    for index in 0..<_ReadObservers.bucketCount { (slots + index).initialize(to: Atomic(nil)) }
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
/// the table; a write publishes the table, then (after a full fence) reads the bits of what it
/// changed, and notifies the buckets whose bit is set. Either the write sees the bit, or the
/// read sees the write. Bits are never cleared while reads are tracked.
///
/// **The registration's window.** Observation registers what a tracking scope read only when
/// the scope ends: a write notified between a read and that registration finds no observer.
/// So every bucket notified is notified again ``renoticeDelays`` later (and at once by
/// ``MemoryStore/flush()``): an observer registered meanwhile is then told, and one that had
/// read the new value re-reads it.
///
/// `@unchecked Sendable`, safe: `bits` is written only by `init` and `deinit`, and the memory
/// it points to only through its atomics; the key paths are immutable; the rest is Sendable.
@usableFromInline
final class _ReadObservers: @unchecked Sendable {
  /// The number of buckets: keys are told apart by 15 bits of their hash, twice (their value,
  /// their presence).
  static let bucketCount = 1 << 16
  /// How long after a notice the same buckets are notified again: a short delay for a
  /// registration that was under way, then a long one for a thread that was descheduled.
  static let renoticeDelays: [Duration] = [.milliseconds(5), .milliseconds(250)]

  let subject = _ObservedSubject()
  let membershipPath: KeyPath<_ObservedSubject, Int> = \.membership
  let contentsPath: KeyPath<_ObservedSubject, Int> = \.contents

  /// A bit per bucket: set by the first tracked read of it.
  private let bits: UnsafeMutablePointer<Atomic<UInt64>>
  /// Bit 0: ``_TrackedRead/membership`` was read; bit 1: ``_TrackedRead/contents`` was.
  private let wholeBits = Atomic<UInt8>(0)
  /// The notices to send again, one set per delay of ``renoticeDelays``.
  private let pending: _Protected<_Renotices>
  /// The notices handed over for delivery, and whether a thread delivers them.
  private let delivery = _Protected(_Delivery())

  init() {
    let words = Self.bucketCount / 64
    bits = .allocate(capacity: words)
    for index in 0..<words { (bits + index).initialize(to: Atomic(0)) }
    pending = _Protected(_Renotices(rounds: Self.renoticeDelays.count))
  }

  deinit {
    bits.deinitialize(count: Self.bucketCount / 64)
    bits.deallocate()
  }

  // MARK: Reads

  /// Registers `read` with the current tracking scope, if any (Observation's `access`), and
  /// marks its bucket for writes to notify. Call before reading the table.
  @usableFromInline
  func access(_ read: _TrackedRead) {
    switch read {
    case .value(let hash): accessBucket(Self.bucket(hash, presence: false))
    case .presence(let hash): accessBucket(Self.bucket(hash, presence: true))
    case .membership: accessWhole(1, path: membershipPath)
    case .contents: accessWhole(2, path: contentsPath)
    }
    // Ordered before the table's read: see the type's documentation.
    atomicMemoryFence(ordering: .sequentiallyConsistent)
  }

  private func accessBucket(_ index: Int) {
    let bit = UInt64(1) << UInt64(index & 63)
    if bits[index >> 6].load(ordering: .relaxed) & bit == 0 {
      bits[index >> 6].bitwiseOr(bit, ordering: .relaxed)
    }
    _BucketPaths.shared.path(index)._withUnsafeGuaranteedRef { path in
      subject.registrar.access(subject, keyPath: path)
    }
  }

  private func accessWhole(_ bit: UInt8, path: KeyPath<_ObservedSubject, Int>) {
    if wholeBits.load(ordering: .relaxed) & bit == 0 {
      wholeBits.bitwiseOr(bit, ordering: .relaxed)
    }
    subject.registrar.access(subject, keyPath: path)
  }

  /// The bucket of the key with `hash`.
  static func bucket(_ hash: Int, presence: Bool) -> Int {
    (hash & (bucketCount / 2 - 1)) << 1 | (presence ? 1 : 0)
  }

  // MARK: Notices

  /// Notifies the observers of what `notices` changed, on the calling thread, and schedules
  /// the same notices again (see ``renoticeDelays``). Call after the write is published and
  /// every store lock released: observers run here.
  @usableFromInline
  func notify(_ notices: _ObservationNotices) {
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    var sent = _Renotice()
    let whole = wholeBits.load(ordering: .relaxed)
    if notices.cleared {
      for word in 0..<(Self.bucketCount / 64) {
        var set = bits[word].load(ordering: .relaxed)
        while set != 0 {
          sent.buckets.insert(word << 6 | set.trailingZeroBitCount)
          set &= set - 1
        }
      }
      sent.membership = whole & 1 != 0
    } else {
      notices.forEachChange { change in
        let value = Self.bucket(change.hash, presence: false)
        if isSet(value) { sent.buckets.insert(value) }
        guard change.changesPresence else { return }
        if isSet(value | 1) { sent.buckets.insert(value | 1) }
        if whole & 1 != 0 { sent.membership = true }
      }
    }
    sent.contents = whole & 2 != 0
    guard !sent.isEmpty else { return }
    deliver(sent)
    schedule(sent, round: 0)
  }

  /// Sends every notice waiting to be sent again, now, and returns once it and every notice
  /// before it were delivered: what ``MemoryStore/flush()`` does.
  func sendPending() {
    // A pass under way delivers first (unless this runs in one).
    if DispatchQueue.getSpecific(key: Self.queueKey) == nil { Self.queue.sync {} }
    let ticket = deliver(pending.withLock { $0.takeAll() })
    while delivery.withLock({ $0.delivered }) < ticket { sched_yield() }
  }

  /// Notifies every bucket read so far, and clears the bits: when the store stops tracking
  /// reads, so that no observation waits for a notice that will not come.
  func releaseAll() {
    var sent = _Renotice()
    for word in 0..<(Self.bucketCount / 64) {
      var set = bits[word].exchange(0, ordering: .relaxed)
      while set != 0 {
        sent.buckets.insert(word << 6 | set.trailingZeroBitCount)
        set &= set - 1
      }
    }
    let whole = wholeBits.exchange(0, ordering: .relaxed)
    sent.membership = whole & 1 != 0
    sent.contents = whole & 2 != 0
    _ = pending.withLock { $0.takeAll() }
    deliver(sent)
  }

  /// Hands `notice` to the delivery, and delivers it (and what other threads hand over
  /// meanwhile) if no other thread is delivering; returns its ticket (see ``_Delivery``).
  ///
  /// One thread at a time delivers a store's notices, and without any lock held: Observation
  /// removes an observation only after its `onChange` returns, so two threads notifying at
  /// once could both run it.
  @discardableResult
  private func deliver(_ notice: _Renotice) -> UInt64 {
    let (ticket, delivers) = delivery.withLock { state in
      state.waiting.formUnion(notice)
      state.handedOver &+= 1
      defer { state.isDelivering = true }
      return (state.handedOver, !state.isDelivering)
    }
    guard delivers else { return ticket }
    while true {
      let (batch, through) = delivery.withLock { state in
        defer { state.waiting = _Renotice() }
        if state.waiting.isEmpty {
          state.isDelivering = false
          state.delivered = state.handedOver
        }
        return (state.waiting, state.handedOver)
      }
      if batch.isEmpty { return ticket }
      send(batch)
      delivery.withLock { $0.delivered = Swift.max($0.delivered, through) }
    }
  }

  private func isSet(_ index: Int) -> Bool {
    bits[index >> 6].load(ordering: .relaxed) & (UInt64(1) << UInt64(index & 63)) != 0
  }

  /// Tells the observers of `notice`'s buckets that they changed (`willSet`, then `didSet`:
  /// both kinds of tracking fire, after the change).
  private func send(_ notice: _Renotice) {
    let registrar = subject.registrar
    for index in notice.buckets {
      _BucketPaths.shared.path(index)._withUnsafeGuaranteedRef { path in
        registrar.willSet(subject, keyPath: path)
        registrar.didSet(subject, keyPath: path)
      }
    }
    if notice.membership {
      registrar.willSet(subject, keyPath: membershipPath)
      registrar.didSet(subject, keyPath: membershipPath)
    }
    if notice.contents {
      registrar.willSet(subject, keyPath: contentsPath)
      registrar.didSet(subject, keyPath: contentsPath)
    }
  }

  /// Adds `notice` to round `round`'s set, and schedules that round if it is not.
  private func schedule(_ notice: _Renotice, round: Int) {
    guard round < Self.renoticeDelays.count else { return }
    let needsScheduling = pending.withLock { $0.add(notice, round: round) }
    guard needsScheduling else { return }
    Self.queue.asyncAfter(
      deadline: .now() + .nanoseconds(Int(Self.renoticeDelays[round].nanoseconds))
    ) { [weak self] in
      guard let self else { return }
      let due = self.pending.withLock { $0.take(round: round) }
      self.deliver(due)
      self.schedule(due, round: round + 1)
    }
  }

  /// Where notices are sent again: observers run there.
  static let queue: DispatchQueue = {
    let queue = DispatchQueue(label: "MemoryStore.observation", qos: .utility)
    queue.setSpecific(key: queueKey, value: ())
    return queue
  }()
  static let queueKey = DispatchSpecificKey<Void>()
}

/// A set of notices to send: buckets, and the two whole-store paths.
struct _Renotice: Sendable {
  var buckets: Set<Int> = []
  var membership = false
  var contents = false

  var isEmpty: Bool { buckets.isEmpty && !membership && !contents }

  mutating func formUnion(_ other: _Renotice) {
    buckets.formUnion(other.buckets)
    membership = membership || other.membership
    contents = contents || other.contents
  }
}

/// The notices waiting to be sent again, per round, and which rounds are scheduled.
struct _Renotices: Sendable {
  var rounds: [_Renotice]
  var isScheduled: [Bool]

  init(rounds count: Int) {
    rounds = Array(repeating: _Renotice(), count: count)
    isScheduled = Array(repeating: false, count: count)
  }

  /// Adds `notice` to round `round`; returns whether the round must be scheduled.
  mutating func add(_ notice: _Renotice, round: Int) -> Bool {
    guard !notice.isEmpty else { return false }
    rounds[round].formUnion(notice)
    if isScheduled[round] { return false }
    isScheduled[round] = true
    return true
  }

  /// Takes round `round`'s notices, which its scheduled pass sends.
  mutating func take(round: Int) -> _Renotice {
    isScheduled[round] = false
    defer { rounds[round] = _Renotice() }
    return rounds[round]
  }

  /// Takes every round's notices (the passes scheduled then send nothing).
  mutating func takeAll() -> _Renotice {
    var all = _Renotice()
    for round in rounds.indices {
      all.formUnion(rounds[round])
      rounds[round] = _Renotice()
    }
    return all
  }
}

/// The notices handed over for delivery: the delivering thread takes them all at once.
struct _Delivery: Sendable {
  /// What waits to be delivered.
  var waiting = _Renotice()
  /// Whether a thread is delivering.
  var isDelivering = false
  /// The number of hand-overs so far: a hand-over's ticket.
  var handedOver: UInt64 = 0
  /// Every hand-over up to this ticket was delivered.
  var delivered: UInt64 = 0
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

  /// Runs `body` with the observers, if they were made; the slot keeps them alive meanwhile.
  @usableFromInline
  func with<R>(_ body: (_ReadObservers) -> R) -> R? {
    observers.load(ordering: .acquiring)?._withUnsafeGuaranteedRef(body)
  }
}
