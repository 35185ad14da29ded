#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The clock behind `ContinuousClock`, read directly in nanoseconds: what a store with the
/// system scheduler reads on every write and, while entries expire, on every read, without
/// the 128-bit arithmetic of `Duration`.
@usableFromInline
enum _SystemClock {
  /// Whether ``nanoseconds`` reads the same clock as `ContinuousClock` on this platform.
  @inlinable
  static var isAvailable: Bool {
    #if canImport(Glibc) || canImport(Darwin)
      return true
    #else
      return false
    #endif
  }

  /// The clock's reading in nanoseconds: `CLOCK_BOOTTIME` on Linux and `CLOCK_MONOTONIC_RAW`
  /// on Apple platforms, the clocks `ContinuousClock` reads there. Thread-safe; never waits.
  @inlinable
  static var nanoseconds: Int64 {
    #if canImport(Glibc)
      var time = timespec()
      clock_gettime(CLOCK_BOOTTIME, &time)
      return Int64(time.tv_sec) &* 1_000_000_000 &+ Int64(time.tv_nsec)
    #elseif canImport(Darwin)
      return Int64(truncatingIfNeeded: clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW))
    #else
      return 0
    #endif
  }
}
