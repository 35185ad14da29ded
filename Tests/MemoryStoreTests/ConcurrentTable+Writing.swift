@testable import MemoryStoreKit

/// The table's writer methods for a table that no store owns, written from one thread at a
/// time: each makes the proof that the write lock is held (``_WriteLockHeld``) that the
/// table's own methods ask for.
extension _ConcurrentTable {
  var stagedCount: Int { stagedCount(.forATableOfItsOwn) }
  var ringCount: Int { ringCount(.forATableOfItsOwn) }
  var retainedCount: Int { retainedCount(.forATableOfItsOwn) }
  var tombstoneCount: Int { _writer.pointer(.forATableOfItsOwn).pointee.tombstoneCount }

  func stagedValue(forKey key: Key) -> Value? { stagedValue(forKey: key, .forATableOfItsOwn) }

  @discardableResult
  func stageSet(_ key: Key, _ value: Value) -> Value? {
    stageSet(key, value, .forATableOfItsOwn)
  }

  func stageSet(
    _ key: Key, _ value: Value, metadata: _EntryMetadata?
  ) -> (old: _Node<Key, Value>?, new: _Node<Key, Value>) {
    stageSet(key, value, metadata: metadata, .forATableOfItsOwn)
  }

  @discardableResult
  func stageRemove(_ key: Key) -> Value? { stageRemove(key, .forATableOfItsOwn) }

  @discardableResult
  func stageRemoveAll() -> Bool { stageRemoveAll(.forATableOfItsOwn) }

  func publish() -> _TableGarbage? { publish(.forATableOfItsOwn) }

  func reclaimStep() -> (garbage: _TableGarbage?, isFinished: Bool) {
    reclaimStep(.forATableOfItsOwn)
  }

  func ringNode(at position: Int) -> _Node<Key, Value>? {
    ringNode(at: position, .forATableOfItsOwn)
  }

  func fillRingHole() -> (from: Int, to: Int)? { fillRingHole(.forATableOfItsOwn) }

  func startCarryingMetadata() { startCarryingMetadata(.forATableOfItsOwn) }

  func startKeepingHashes() { startKeepingHashes(.forATableOfItsOwn) }

  func _checkInvariants() { _checkInvariants(.forATableOfItsOwn) }
}
