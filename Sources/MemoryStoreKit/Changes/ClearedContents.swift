import Synchronization

/// The contents of a store just before a `removeAll()`, for change batches: taken in O(1) under
/// the write lock, copied out later, outside it, by whoever coalesces the log.
///
/// It holds a read section of the table open at the version before the clear (so that
/// version stays readable) until ``dictionary`` is first read, or until it is released.
@usableFromInline
final class _ClearedContents<Key: Hashable, Value> {
  @usableFromInline let table: _ConcurrentTable<Key, Value>
  @usableFromInline let version: UInt64
  /// Keys left out (removed by the same write before the clear).
  @usableFromInline let excluded: [Key]
  @usableFromInline var section: (UnsafeMutablePointer<Atomic<Int>>, Int)?
  @usableFromInline var copied: [Key: Value]?

  /// The store's contents now; call with the write lock held, before the clear is staged.
  @usableFromInline
  init(table: _ConcurrentTable<Key, Value>, excluding excluded: [Key] = []) {
    self.table = table
    self.excluded = excluded
    // Under the write lock nothing is staged, so the published version is the newest state.
    let (version, section) = table.enterReadSection()
    self.version = version
    self.section = section
  }

  deinit {
    if let section { table.leaveReadSection(section) }
  }

  /// The contents, copied on first use. O(*n*) then, O(1) after.
  @usableFromInline
  var dictionary: [Key: Value] {
    if let copied { return copied }
    var result = _ReadView(table: table, version: version).dictionary
    for key in excluded { result[key] = nil }
    if let section { table.leaveReadSection(section) }
    section = nil
    copied = result
    return result
  }
}

// Safe: the contents are read, and `section` and `copied` written, only by the thread that
// applies the logged clear to the accumulator, under the accumulator's lock; the log entry that
// holds the object is taken from the tracker once, under the write lock. The table is Sendable.
extension _ClearedContents: @unchecked Sendable where Key: Sendable, Value: Sendable {}
