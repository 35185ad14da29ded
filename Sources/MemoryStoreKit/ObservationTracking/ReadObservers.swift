import Observation
import Synchronization

/// A store's tracked reads: which buckets of keys reads registered, and the notices that
/// reach their observers.
///
/// **How no registered observer is missed.** A read sets its bucket's bit, then (after a full
/// fence) reads the table; a write publishes the table, then (after a full fence) loads the
/// bits of what it changed, and notifies the buckets whose bit is set. Either the write sees
/// the bit, or the read sees the write. A bit stays set once a read set it (until tracking is
/// turned off): so every write after an observation registered notifies it, as an
/// `@Observable` type's setter does, and the bits only spare the writes of keys that no
/// tracked read ever read.
///
/// **Delivery.** A write hands its buckets over and returns: it never runs observers and
/// never waits for them. Handing over is lock-free: the write sets the buckets' bits in
/// `pending`, then swaps `isScheduled` to true and, if it was false, schedules a delivery on
/// the store's scheduler. One delivery at a time (the *delivery role*) runs, without any lock
/// held: it swaps `isScheduled` back to false, takes the pending bits and tells each bucket
/// once, however many writes set it, and repeats until nothing is pending. Observation removes
/// an observation only after its `onChange` returns, so two threads notifying at once could
/// both run it. Either a write's swap comes before a delivery's (the delivery, which then sees
/// the write's bits, takes them), or after it (the write schedules a delivery of its own).
/// ``sendPending()`` (what ``MemoryStore/flush()`` does) takes the role itself, waiting
/// without blocking a thread while another delivery holds it, and delivers what is pending.
///
/// **The registration's window.** Observation registers what a tracking scope read only when
/// the scope ends: a notice delivered between a read and that registration finds no observer,
/// as a setter of an `@Observable` type called then does; the next change is notified.
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

  let subject = _ObservedSubject()

  /// A bit per bucket: set by the first tracked read of it, cleared when tracking is turned
  /// off.
  private let bits: UnsafeMutablePointer<Atomic<UInt64>>
  /// A bit per bucket handed over and not yet delivered.
  private let pending: UnsafeMutablePointer<Atomic<UInt64>>
  /// Whether a delivery is scheduled or under way that will take the pending bits.
  private let isScheduled = Atomic<Bool>(false)
  /// Who holds the delivery role, and the calls of ``sendPending()`` waiting for it.
  private let role = _Protected(_DeliveryRole())

  init() {
    bits = .allocate(capacity: Self.wordCount)
    pending = .allocate(capacity: Self.wordCount)
    for index in 0..<Self.wordCount {
      (bits + index).initialize(to: Atomic(0))
      (pending + index).initialize(to: Atomic(0))
    }
  }

  deinit {
    bits.deinitialize(count: Self.wordCount)
    bits.deallocate()
    pending.deinitialize(count: Self.wordCount)
    pending.deallocate()
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

  /// Hands the buckets that `notices` changed, and that tracked reads registered, to the
  /// delivery on `scheduler`. Call after the write is published and the write lock released.
  /// Never waits and never runs an observer.
  @usableFromInline
  func notify(_ notices: _ObservationNotices, on scheduler: any StoreScheduler) {
    atomicMemoryFence(ordering: .sequentiallyConsistent)
    var handsOver = false
    if notices.cleared {
      for word in 0..<Self.wordCount {
        let registered = bits[word].load(ordering: .relaxed)
        if registered != 0 {
          pending[word].bitwiseOr(registered, ordering: .relaxed)
          handsOver = true
        }
      }
    } else {
      var changesMembership = false
      notices.forEachChange { change in
        let value = Self.bucket(change.hash, presence: false)
        if markPending(value) { handsOver = true }
        guard change.changesPresence else { return }
        if markPending(value | 1) { handsOver = true }
        changesMembership = true
      }
      if changesMembership && markPending(Self.membership) { handsOver = true }
      if markPending(Self.contents) { handsOver = true }
    }
    if handsOver { scheduleDelivery(on: scheduler) }
  }

  /// Marks bucket `index` pending if a tracked read registered it; returns whether it did.
  private func markPending(_ index: Int) -> Bool {
    let bit = UInt64(1) << UInt64(index & 63)
    guard bits[index >> 6].load(ordering: .relaxed) & bit != 0 else { return false }
    // Always the read-modify-write: a load could see a bit that a delivery has just taken.
    pending[index >> 6].bitwiseOr(bit, ordering: .relaxed)
    return true
  }

  /// Takes every bucket a tracked read registered, clearing them: tracking is turned off, and
  /// every observation registered so far is told.
  func takeRegisteredBuckets() -> [Int] { Self.takeAll(bits) }

  /// The buckets whose bits are set in `words`, clearing them.
  private static func takeAll(_ words: UnsafeMutablePointer<Atomic<UInt64>>) -> [Int] {
    var taken: [Int] = []
    for word in 0..<wordCount where words[word].load(ordering: .relaxed) != 0 {
      var set = words[word].exchange(0, ordering: .acquiring)
      while set != 0 {
        taken.append(word << 6 | set.trailingZeroBitCount)
        set &= set - 1
      }
    }
    return taken
  }

  /// Hands `buckets` over, and schedules a delivery on `scheduler` unless one is scheduled or
  /// under way (which then delivers them). Never waits.
  func hand(over buckets: [Int], on scheduler: any StoreScheduler) {
    guard !buckets.isEmpty else { return }
    for index in buckets {
      pending[index >> 6].bitwiseOr(UInt64(1) << UInt64(index & 63), ordering: .relaxed)
    }
    scheduleDelivery(on: scheduler)
  }

  /// Schedules a delivery, unless one is scheduled or under way that will take the bits this
  /// thread set (see the type's documentation).
  private func scheduleDelivery(on scheduler: any StoreScheduler) {
    guard !isScheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
    scheduler.schedule(after: .zero) { [weak self] in self?.deliverScheduled() }
  }

  /// The scheduled delivery: delivers what is pending, unless another delivery holds the role
  /// (which delivers it before it lets go).
  private func deliverScheduled() {
    guard role.withLock({ $0.claim() }) else { return }
    drainAndRelease()
  }

  /// Delivers what is pending until nothing is; the caller holds the delivery role. No lock is
  /// held while observers run.
  private func drain() {
    while true {
      // Swapped before the bits are taken: a write that swaps after this schedules anew.
      _ = isScheduled.exchange(false, ordering: .acquiringAndReleasing)
      let batch = Self.takeAll(pending)
      guard !batch.isEmpty else { return }
      send(batch)
    }
  }

  /// Delivers what is pending, then lets the delivery role go, resuming the calls of
  /// ``sendPending()`` that wait for it (to try again).
  private func drainAndRelease() {
    drain()
    for waiter in role.withLock({ $0.release() }) { waiter.resume(returning: false) }
  }

  /// Delivers now what was handed over before the call (taking the delivery role, after the
  /// delivery that holds it, if any), and returns once it was delivered: what
  /// ``MemoryStore/flush()`` does. Waits without blocking a thread.
  func sendPending() async {
    while true {
      let claimed = await withCheckedContinuation {
        (continuation: CheckedContinuation<Bool, Never>) in
        let claimed = role.withLock { role -> Bool? in
          if role.claim() { return true }
          role.waiters.append(continuation)
          return nil
        }
        if let claimed { continuation.resume(returning: claimed) }
      }
      guard claimed else { continue }
      drainAndRelease()
      return
    }
  }

  /// Tells the observers of `notice`'s buckets that they changed (`willSet`, then `didSet`:
  /// both kinds of tracking fire, after the change).
  private func send(_ buckets: [Int]) {
    let registrar = subject.registrar
    for index in buckets {
      _BucketPaths.shared.path(index)._withUnsafeGuaranteedRef { path in
        registrar.willSet(subject, keyPath: path)
        registrar.didSet(subject, keyPath: path)
      }
    }
  }
}
