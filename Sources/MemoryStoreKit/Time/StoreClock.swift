/// A store's time: its scheduler, and what reads the system clock directly when the scheduler
/// is the system's. Policy times are nanoseconds since the store was created.
///
/// A class, so that reading one of its fields is a load: a field of a struct holding an
/// existential is read through the struct's type metadata, a call on every write that reads
/// the clock.
@usableFromInline
final class _StoreClock: Sendable {
  /// The source of time for everything that happens on an interval.
  @usableFromInline let scheduler: any StoreScheduler
  /// The scheduler's time at creation.
  @usableFromInline let origin: ContinuousClock.Instant
  /// With the system scheduler, the system clock's reading at `origin`, in nanoseconds, so
  /// that the store reads that clock directly (see `_SystemClock`); otherwise 0.
  @usableFromInline let systemOrigin: Int64
  /// With the system scheduler where the clock has a coarse variant, what makes the coarse
  /// reading an upper bound of the store's time when added to it (the coarse clock's margin
  /// less `systemOrigin`; see `_SystemClock.coarseMargin`); otherwise 0.
  @usableFromInline let coarseOffset: Int64
  /// The shortest lifetime (time to live or to idle) whose deadline a keyed write may take
  /// from the coarse clock's upper bound rather than the clock: 64 coarse margins, so that an
  /// entry outlives such a lifetime by at most 1/64 of it (see
  /// `MemoryStore._keyedWriteTime`); `Int64.max` where there is no coarse clock.
  @usableFromInline let coarseLifetimeFloor: Int64

  @usableFromInline
  init(scheduler: some StoreScheduler) {
    self.scheduler = scheduler
    origin = scheduler.now
    systemOrigin =
      type(of: scheduler) == DispatchScheduler.self && _SystemClock.isAvailable
      ? _SystemClock.nanoseconds - (ContinuousClock.now - origin).nanoseconds : 0
    let coarseMargin = systemOrigin != 0 ? _SystemClock.coarseMargin : 0
    coarseOffset = coarseMargin != 0 ? (coarseMargin &- systemOrigin) | 1 : 0
    coarseLifetimeFloor = coarseMargin != 0 ? 64 &* coarseMargin : .max
  }
}
