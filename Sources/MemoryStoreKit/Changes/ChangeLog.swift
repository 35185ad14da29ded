import Synchronization

/// One change of a key as a writer logs it, less the key (a segment keeps keys apart).
@usableFromInline
struct _LoggedValue<Value> {
  // The hash first: the value's optional tag and the flags then share its last word.

  /// The key's `hashValue`, as the table computed it: coalescing hashes nothing.
  @usableFromInline var hash: Int
  /// The key's value now; `nil` if absent.
  @usableFromInline var value: Value?
  /// Whether the key was present just before this write.
  @usableFromInline var wasPresent: Bool
  @usableFromInline var reason: ChangeReason

  @inlinable @inline(__always)
  init(value: Value?, hash: Int, wasPresent: Bool, reason: ChangeReason) {
    self.value = value
    self.hash = hash
    self.wasPresent = wasPresent
    self.reason = reason
  }
}

/// A `removeAll()` as a writer logs it.
@usableFromInline
struct _LoggedClear<Key: Hashable, Value> {
  /// The number of key changes logged before it in its segment.
  @usableFromInline let position: Int
  /// The store's contents just before it.
  @usableFromInline let contents: _ClearedContents<Key, Value>
  @usableFromInline let reason: ChangeReason

  @inlinable
  init(position: Int, contents: _ClearedContents<Key, Value>, reason: ChangeReason) {
    self.position = position
    self.contents = contents
    self.reason = reason
  }
}

/// A segment of the change log: key changes in write order, in two fixed buffers (keys, and
/// the rest), and the clears between them.
///
/// Appending is two stores and an increment: no hashing, no uniqueness check, nothing
/// released. Coalescing moves each change's value out (``takeRecord(at:)``), so nothing is
/// copied; the keys stay until the segment is released, outside every lock, so that no key's
/// last release happens under one.
///
/// Owned by the change log while it is filled (write lock held), then by the one pass that
/// takes it from the log and coalesces it.
@usableFromInline
final class _LogSegment<Key: Hashable, Value> {
  @usableFromInline let keys: UnsafeMutablePointer<Key>
  @usableFromInline let records: UnsafeMutablePointer<_LoggedValue<Value>>
  @usableFromInline let capacity: Int
  // Unchecked exclusivity: the variables are read and written only by the segment's one owner
  // at a time (see the type), and every write reads them, so that a check would cost each
  // write two runtime calls.

  /// The number of key changes logged.
  @usableFromInline @exclusivity(unchecked) var count = 0
  /// Whether the records were moved out by coalescing.
  @usableFromInline @exclusivity(unchecked) var recordsTaken = false
  /// The clears, in write order.
  @usableFromInline @exclusivity(unchecked) var clears: [_LoggedClear<Key, Value>] = []

  /// An empty segment for `capacity` key changes.
  @usableFromInline
  init(capacity: Int) {
    self.capacity = capacity
    keys = .allocate(capacity: capacity)
    records = .allocate(capacity: capacity)
  }

  deinit {
    keys.deinitialize(count: count)
    if !recordsTaken { records.deinitialize(count: count) }
    keys.deallocate()
    records.deallocate()
  }

  /// Whether it logged nothing.
  @inlinable
  var isEmpty: Bool { count == 0 && clears.isEmpty }

  /// The key changes and clears it logged.
  @inlinable
  var loggedCount: Int { count &+ clears.count }

  /// Appends a key change; the caller made sure it is not full.
  @inlinable @inline(__always)
  func append(_ key: Key, _ record: _LoggedValue<Value>) {
    (keys + count).initialize(to: key)
    (records + count).initialize(to: record)
    count &+= 1
  }

  /// A segment of at least `minimumCapacity` and twice this one's capacity, holding
  /// everything this one logged, which is left empty.
  @usableFromInline
  func grown(minimumCapacity: Int) -> _LogSegment {
    let grown = _LogSegment(capacity: Swift.max(minimumCapacity, capacity * 2))
    grown.keys.moveInitialize(from: keys, count: count)
    grown.records.moveInitialize(from: records, count: count)
    grown.count = count
    grown.clears = clears
    count = 0
    clears = []
    return grown
  }

  /// Moves the record at `index` out; the coalescing pass does so once for every record, then
  /// sets ``recordsTaken``.
  @inlinable @inline(__always)
  func takeRecord(at index: Int) -> _LoggedValue<Value> {
    (records + index).move()
  }
}

// Safe: a segment is reached by one thread at a time. The change log fills it under the write
// lock; the pass that takes it from the log (under the write lock) then coalesces it under the
// accumulator's lock, and releases it. Keys and values are Sendable.
extension _LogSegment: @unchecked Sendable where Key: Sendable, Value: Sendable {}
extension _LoggedValue: Sendable where Value: Sendable {}
extension _LoggedClear: Sendable where Key: Sendable, Value: Sendable {}
