import Synchronization

/// What writers and readers check before taking any lock, each one relaxed atomic load: the
/// flags a write reads to know which work it has (whether it needs the clock, the policy,
/// the cost function), and the earliest expiry, which every read compares with the clock.
/// Written under the write lock.
@usableFromInline
struct _WriteSignals: ~Copyable, Sendable {
  /// Whether writes go through the eviction policy (entries carry metadata). Set once, never
  /// cleared; writers read it before locking to read the clock outside the lock, and again
  /// under the lock.
  @usableFromInline let policyActive = Atomic(false)
  /// The earliest expiry of any entry, in policy nanoseconds; `Int64.max` when no entry
  /// expires. Written under the write lock before the write that needs it is published.
  @usableFromInline let nextExpiry = Atomic<Int64>(.max)
  /// Whether writes read the clock for entries' times: set, never cleared, once the store has
  /// a decider (which reads write times) or a default time to live.
  @usableFromInline let timesEntries = Atomic(false)
  /// The current second since creation, plus one, for reads to record; 0 while no decider
  /// needs read times.
  @usableFromInline let readTick = Atomic<UInt32>(0)
  /// Whether the store has a function of each entry, ``MemoryStore/entryCost`` or
  /// ``MemoryStore/entryTimeToLive``: read by writers before they lock, to run them outside
  /// every lock. Set under the functions' lock, with them.
  @usableFromInline let judgesEntries = Atomic(false)
  /// Whether entries keep their write time: only a decider reads it. Set, never cleared, under
  /// the write lock, when the first decider is set.
  @usableFromInline let keepsWriteTimes = Atomic(false)
  /// ``MemoryStore/timeToIdle`` in nanoseconds (0: none), for a read to push an entry's idle
  /// deadline back.
  @usableFromInline let idleLifetime = Atomic<Int64>(0)
  /// ``MemoryStore/timeToRefresh`` in nanoseconds (0: none), for a get-or-load that hits to
  /// judge whether the entry is due for a reload.
  @usableFromInline let refreshLifetime = Atomic<Int64>(0)
  /// When entries started keeping their write time (``_Policy/writeTimesSince``, published
  /// for readers): the write time of an entry written before, for a refresh to judge it.
  @usableFromInline let writeTimesSince = Atomic<Int64>(0)
  /// Whether reads register with the Observation framework (``MemoryStore/tracksReads``).
  @usableFromInline let tracksReads = Atomic(false)
  /// Whether a load or a get-or-create has started: from then on, a removal by a write is
  /// recorded for the loads it may overtake (see ``_InvalidationRecord``). Set once.
  @usableFromInline let loadsStarted = Atomic(false)

  @usableFromInline init() {}
}
