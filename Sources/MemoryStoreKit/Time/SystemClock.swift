#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The system clock the store reads directly, in nanoseconds: what a store with the system
/// scheduler reads on every write that times entries and, while entries expire, on reads,
/// without the 128-bit arithmetic of `Duration`.
///
/// On Linux it is `CLOCK_MONOTONIC`, which has a coarse variant reading the same time base at
/// a fraction of the cost (see ``coarse``); it does not advance while the machine is
/// suspended, so neither do times to live there. On Apple platforms it is
/// `CLOCK_MONOTONIC_RAW`, the clock `ContinuousClock` reads, which does.
@usableFromInline
enum _SystemClock {
  /// Whether ``nanoseconds`` can be read on this platform.
  @inlinable
  static var isAvailable: Bool {
    #if canImport(Glibc) || canImport(Darwin)
      return true
    #else
      return false
    #endif
  }

  /// The clock's reading in nanoseconds. Thread-safe; never waits.
  @inlinable
  static var nanoseconds: Int64 {
    #if canImport(Glibc)
      return read(CLOCK_MONOTONIC)
    #elseif canImport(Darwin)
      return Int64(truncatingIfNeeded: clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW))
    #else
      return 0
    #endif
  }

  /// The coarse clock's reading in nanoseconds, on the time base of ``nanoseconds``, where
  /// there is one (Linux: `CLOCK_MONOTONIC_COARSE`, updated at every scheduler tick, and a
  /// fraction of the clock's cost to read); 0 elsewhere. Thread-safe; never waits.
  @inlinable
  static var coarse: Int64 {
    #if canImport(Glibc)
      return read(CLOCK_MONOTONIC_COARSE)
    #else
      return 0
    #endif
  }

  /// How far ``coarse`` plus this margin is ahead of ``nanoseconds`` at least, so that the sum
  /// bounds the precise reading from above: eight ticks of the coarse clock (32 ms at 250 Hz);
  /// 0 where there is no coarse clock. The coarse clock moves when the CPU in charge of
  /// timekeeping takes its tick; on a virtual machine that CPU can be stalled by the host
  /// while a thread runs on another, and Linux hands the duty to a running CPU only once five
  /// ticks have gone by without an update, so the coarse clock can lag by five ticks and more
  /// (two ticks were seen to fall short, on a 2-CPU virtual machine under load).
  static var coarseMargin: Int64 {
    #if canImport(Glibc)
      var resolution = timespec()
      guard clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) == 0 else { return 0 }
      return 8 * max(nanoseconds(resolution), 1_000_000)
    #else
      return 0
    #endif
  }

  #if canImport(Glibc)
    /// Reads `clock` in nanoseconds.
    @inlinable @inline(__always)
    static func read(_ clock: clockid_t) -> Int64 {
      var time = timespec()
      clock_gettime(clock, &time)
      return nanoseconds(time)
    }

    @inlinable @inline(__always)
    static func nanoseconds(_ time: timespec) -> Int64 {
      Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    }
  #endif
}
