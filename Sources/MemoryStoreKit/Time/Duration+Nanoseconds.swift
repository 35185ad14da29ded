extension Duration {
  /// The duration in nanoseconds, saturating at the bounds of `Int64`.
  @inlinable
  var nanoseconds: Int64 {
    let (seconds, attoseconds) = components
    let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    if overflow { return seconds < 0 ? .min : .max }
    return scaled.addingSaturating(attoseconds / 1_000_000_000)
  }
}

extension Int64 {
  @inlinable
  func addingSaturating(_ other: Int64) -> Int64 {
    let (sum, overflow) = addingReportingOverflow(other)
    if overflow { return other < 0 ? .min : .max }
    return sum
  }
}
