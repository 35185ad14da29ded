import Foundation

extension PersistenceManager {
  // MARK: Auto-save

  /// The auto-save period; `.zero` (the default) turns auto-save off.
  ///
  /// While it is above zero, the manager saves on a background queue every `saveInterval`
  /// (timed by the store's ``StoreScheduler``), skipping the save when nothing was written to
  /// the store since the last successful save. Results are reported through ``lastSaveError``,
  /// ``lastSaveDate`` and ``saveOutcomes``; a failed auto-save is tried again one period later.
  /// Setting the interval restarts the period. Failures reach ``lastSaveError`` and every
  /// ``saveOutcomes`` subscriber, which is where to handle them.
  ///
  /// **Auto-save lasts as long as the manager.** The timer does not keep the manager alive
  /// (it would keep the store alive with it): keep a reference to the manager, beside the
  /// store, for as long as it should save. A manager released while its interval is above
  /// zero stops saving, and says so on the standard error in debug builds.
  public var saveInterval: Duration {
    get { _state.withLock { $0.saveInterval } }
    set {
      if newValue < .zero { _preconditionFailure("saveInterval must not be negative") }
      let generation = _state.withLock { state in
        state.saveInterval = newValue
        state.generation &+= 1
        return state.generation
      }
      if newValue > .zero { _scheduleAutoSave(generation: generation, after: newValue) }
    }
  }

  func _scheduleAutoSave(generation: UInt64, after delay: Duration) {
    store._clock.scheduler.schedule(after: delay) { [weak self] in
      self?._autoSave(generation: generation)
    }
  }

  /// One auto-save period: saves if the store changed since the last save, then schedules
  /// the next period, unless the interval changed meanwhile.
  func _autoSave(generation: UInt64) {
    guard _state.withLock({ $0.generation == generation }) else { return }
    let saved = _ledger.state.withLock { $0.committedWriteCount }
    if saved != store._writeCount {
      _ = try? _save(trigger: .automatic)
    }
    let interval = _state.withLock { $0.generation == generation ? $0.saveInterval : nil }
    if let interval, interval > .zero {
      _scheduleAutoSave(generation: generation, after: interval)
    }
  }
}
