/// What changed in a store between two published batches: the net difference, not a log.
///
/// A batch compares the store as it was when the previous batch was published with the store
/// now. A key written twice appears once, with its latest value; a key added and removed again
/// within one interval does not appear at all; a key removed and added again appears in
/// ``updated``. Applying every batch, in order, to a dictionary that started equal to the
/// store reproduces the store:
///
/// ```swift
/// var mirror: [String: Double] = [:]
/// for await batch in store.changes {
///   batch.apply(to: &mirror)
/// }
/// ```
///
/// Batches are values: compare them with `==` (when `Value` is `Equatable`) and send them
/// anywhere.
public struct ChangeBatch<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// Keys added or replaced, with their latest values.
  public let updated: [Key: Value]
  /// The keys of ``updated`` that were absent at the previous batch (added rather than
  /// replaced). Useful for inserting rather than reloading rows in a list.
  public let addedKeys: Set<Key>
  /// Keys that were present at the previous batch and are absent now.
  public let removed: Set<Key>
  /// The sequence numbers this batch covers, `n...n` for one published batch.
  ///
  /// The store numbers its batches 1, 2, 3, … A subscriber that falls behind receives several
  /// batches merged into one, which covers their whole range. A subscriber has missed nothing
  /// when each batch's `lowerBound` is the previous batch's `upperBound + 1`.
  public let sequenceNumbers: ClosedRange<UInt64>
  /// Whether the batch is a snapshot of the whole store, the first element of
  /// ``MemoryStore/changes(includingInitialSnapshot:)``, rather than a difference:
  /// ``apply(to:)`` then replaces the mirror's contents.
  public let isInitialSnapshot: Bool
  /// The reported reasons that are not a plain write; sparse. An updated key's reason is that
  /// of its latest change, a removed key's that of its first removal.
  let reasons: [Key: ChangeReason]

  @usableFromInline
  init(
    updated: [Key: Value], addedKeys: Set<Key>, removed: Set<Key>,
    sequenceNumbers: ClosedRange<UInt64>, reasons: [Key: ChangeReason],
    isInitialSnapshot: Bool = false
  ) {
    self.updated = updated
    self.addedKeys = addedKeys
    self.removed = removed
    self.sequenceNumbers = sequenceNumbers
    self.reasons = reasons
    self.isInitialSnapshot = isInitialSnapshot
  }

  /// A snapshot of the whole store, numbered after the last batch published before it.
  init(snapshot entries: [Key: Value], sequenceNumber: UInt64) {
    self.init(
      updated: entries, addedKeys: Set(entries.keys), removed: [],
      sequenceNumbers: sequenceNumber...sequenceNumber, reasons: [:], isInitialSnapshot: true)
  }

  /// Whether the batch reports no change. Published batches are never empty.
  public var isEmpty: Bool { updated.isEmpty && removed.isEmpty }

  /// The number of keys the batch reports: `updated.count + removed.count`.
  public var count: Int { updated.count + removed.count }

  /// Why `key` changed, or `nil` if the batch does not report `key`.
  ///
  /// For a key in ``removed``, the reason of the change that first removed it from the
  /// contents the previous batch showed (an expiry followed by ``MemoryStore/removeAll()`` is
  /// ``ChangeReason/expired``); for a key in ``updated``, the reason of its latest change.
  ///
  /// - Complexity: O(1) on average.
  public func reason(forKey key: Key) -> ChangeReason? {
    if let reason = reasons[key] { return reason }
    return updated[key] != nil || removed.contains(key) ? .write : nil
  }

  /// Applies the batch to `mirror`, a dictionary that was equal to the store at the previous
  /// batch; afterwards it equals the store as of this batch. An initial snapshot
  /// (``isInitialSnapshot``) replaces the mirror's contents.
  ///
  /// - Complexity: O(``count``).
  public func apply(to mirror: inout [Key: Value]) {
    if isInitialSnapshot {
      mirror = updated
      return
    }
    for key in removed { mirror.removeValue(forKey: key) }
    mirror.merge(updated) { _, new in new }
  }

  /// The batch that has the same effect as `self` followed by `next`: what a subscriber that
  /// fell behind receives.
  ///
  /// ```swift
  /// var waiting: ChangeBatch<String, Double>? = nil
  /// for await batch in store.changes {
  ///   waiting = waiting.map { $0.merged(with: batch) } ?? batch   // while the screen is hidden
  /// }
  /// ```
  ///
  /// - Parameter next: The batch published right after `self`:
  ///   `next.sequenceNumbers.lowerBound == sequenceNumbers.upperBound + 1`.
  /// - Complexity: O(`count + next.count`).
  public func merged(with next: ChangeBatch) -> ChangeBatch {
    if next.sequenceNumbers.lowerBound != sequenceNumbers.upperBound + 1 {
      _preconditionFailure("merged(with:) needs the batch that follows this one")
    }
    var updated = self.updated
    var addedKeys = self.addedKeys
    var removed = self.removed
    var reasons = self.reasons
    for key in next.removed {
      // Present at `next`'s start, absent now. If `self` added it, it is as if it never was.
      if updated.removeValue(forKey: key) != nil, addedKeys.remove(key) != nil {
        reasons.removeValue(forKey: key)
        continue
      }
      removed.insert(key)
      reasons[key] = next.reasons[key]
    }
    for (key, value) in next.updated {
      let wasRemoved = removed.remove(key) != nil
      let wasKnown = updated.updateValue(value, forKey: key) != nil
      // Absent at `self`'s start only if `self` did not touch it and `next` added it, or `self`
      // added it.
      if !wasRemoved && !wasKnown && next.addedKeys.contains(key) { addedKeys.insert(key) }
      reasons[key] = next.reasons[key]
    }
    return ChangeBatch(
      updated: updated, addedKeys: addedKeys, removed: removed,
      sequenceNumbers: sequenceNumbers.lowerBound...next.sequenceNumbers.upperBound,
      reasons: reasons, isInitialSnapshot: isInitialSnapshot)
  }
}

extension ChangeBatch: Equatable where Value: Equatable {}

extension ChangeBatch: CustomStringConvertible {
  /// A short summary: sequence numbers and counts.
  public var description: String {
    let numbers =
      sequenceNumbers.count == 1
      ? "#\(sequenceNumbers.lowerBound)"
      : "#\(sequenceNumbers.lowerBound)–\(sequenceNumbers.upperBound)"
    return
      "ChangeBatch(\(numbers): \(updated.count) updated (\(addedKeys.count) added), \(removed.count) removed)"
  }
}
