import Dispatch

/// What a sink decides, under its lock, about a batch delivered to it.
enum _Placement<Key: Hashable & Sendable, Value: Sendable, Effect> {
  /// The batch was placed (or dropped); `Effect` says what to do after unlocking.
  case placed(Effect)
  /// A batch already waits; it was taken out, to be merged with the delivered one.
  case occupied(by: ChangeBatch<Key, Value>)
}

/// Delivers `batch` to a sink in which at most one batch waits: `place` either places it or
/// hands back the waiting batch, which is merged with it outside the lock (the consumer may
/// take the merge as soon as it is back) and offered again.
///
/// - Returns: The effect `place` asked for, the batch finally placed, and the batch the
///   delivery displaced, for the caller to release after every lock.
func _deliverMerging<State, Key, Value, Effect>(
  _ batch: ChangeBatch<Key, Value>, to state: _Protected<State>,
  place: (inout State, ChangeBatch<Key, Value>) -> _Placement<Key, Value, Effect>
) -> (effect: Effect, placed: ChangeBatch<Key, Value>, displaced: ChangeBatch<Key, Value>?) {
  var outgoing = batch
  var displaced: ChangeBatch<Key, Value>?
  while true {
    switch state.withLock({ place(&$0, outgoing) }) {
    case .placed(let effect):
      return (effect, outgoing, displaced)
    case .occupied(let waiting):
      outgoing = waiting.merged(with: outgoing)
      displaced = waiting
    }
  }
}
