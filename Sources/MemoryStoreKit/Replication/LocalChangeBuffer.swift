/// A run of local changes in one fixed buffer: filled by writes, then emptied by the take that
/// took it, then filled again.
///
/// Owned by the store's ``_LocalChangeBuffer`` while it is filled (write lock held), then by
/// the one take that took it, which moves its changes out and hands it back empty at the next
/// take.
@usableFromInline
final class _LocalChangeChunk<Key, Value> {
  /// The changes one chunk holds: 32 KiB of them for a `String` key and an `Int` value, small
  /// enough to come from the allocator's own memory rather than fresh pages.
  @usableFromInline static var capacity: Int { 1_024 }

  @usableFromInline let base: UnsafeMutablePointer<LocalChange<Key, Value>>
  // Unchecked exclusivity: read and written only by the chunk's one owner at a time (see the
  // type), and every write of the store reads it.
  /// The number of changes it holds, from its start.
  @usableFromInline @exclusivity(unchecked) var count = 0

  @usableFromInline
  init() {
    base = .allocate(capacity: Self.capacity)
  }

  deinit {
    base.deinitialize(count: count)
    base.deallocate()
  }

  /// Whether it has no room left.
  @inlinable
  var isFull: Bool { count == Self.capacity }

  /// Appends `change`; the caller made sure it is not full.
  @inlinable @inline(__always)
  func append(_ change: consuming LocalChange<Key, Value>) {
    (base + count).initialize(to: change)
    count &+= 1
  }
}

// Safe: a chunk is reached by one thread at a time. Writes fill it under the store's write lock;
// the take that swaps it out (under the write lock) empties it alone, and hands it back under
// the write lock. Keys and values are Sendable.
extension _LocalChangeChunk: @unchecked Sendable where Key: Sendable, Value: Sendable {}

/// The local changes not yet taken by the open ``LocalChangeFeed``, in commit order: guarded
/// by the store's write lock.
///
/// Kept in fixed chunks rather than one growing array, so that a write appends with no
/// regrowth, no copy of the changes before it and no first touch of fresh memory: a take hands
/// back the chunks it emptied, and the writes after the next take fill them again. A write
/// allocates a chunk only when the changes outgrow those (a burst larger than the previous
/// take), once per ``_LocalChangeChunk/capacity`` changes.
@usableFromInline
struct _LocalChangeBuffer<Key, Value> {
  /// The chunk being filled; `nil` while no change is held.
  @usableFromInline var current: _LocalChangeChunk<Key, Value>?
  /// The chunks filled before it, oldest first.
  @usableFromInline var full: [_LocalChangeChunk<Key, Value>] = []
  /// Empty chunks, filled next.
  @usableFromInline var spares: [_LocalChangeChunk<Key, Value>] = []

  @usableFromInline init() {}

  /// Whether it holds no change.
  @inlinable
  var isEmpty: Bool { current == nil }

  /// The room left before a write must allocate a chunk.
  var room: Int {
    spares.count * _LocalChangeChunk<Key, Value>.capacity
      + (current.map { _LocalChangeChunk<Key, Value>.capacity - $0.count } ?? 0)
  }

  /// Appends `change`. O(1); allocates a chunk once per ``_LocalChangeChunk/capacity``
  /// changes at most, and only when no spare chunk is left.
  @inlinable @inline(__always)
  mutating func append(_ change: consuming LocalChange<Key, Value>) {
    if let current, !current.isFull {
      current.append(change)
    } else {
      appendToNextChunk(change)
    }
  }

  /// ``append(_:)`` once the current chunk is full or there is none: out of line.
  @inlinable @inline(never)
  mutating func appendToNextChunk(_ change: consuming LocalChange<Key, Value>) {
    if let current { full.append(current) }
    let chunk = spares.popLast() ?? _LocalChangeChunk()
    chunk.append(change)
    current = chunk
  }

  /// Takes every chunk that holds changes, oldest first, and keeps `emptied` to fill next.
  /// O(1) unless spare chunks are left from before (then O(chunks)): in the common case it
  /// allocates nothing, so that it holds the write lock for no allocation.
  mutating func takeAll(keeping emptied: [_LocalChangeChunk<Key, Value>])
    -> (full: [_LocalChangeChunk<Key, Value>], current: _LocalChangeChunk<Key, Value>?)
  {
    var taken: [_LocalChangeChunk<Key, Value>] = []
    swap(&taken, &full)
    defer { current = nil }
    if spares.isEmpty { spares = emptied } else { spares.append(contentsOf: emptied) }
    return (taken, current)
  }

  /// `full` followed by `current`, if any: the chunks in the order of their changes.
  static func inOrder(
    _ full: [_LocalChangeChunk<Key, Value>], _ current: _LocalChangeChunk<Key, Value>?
  ) -> [_LocalChangeChunk<Key, Value>] {
    current.map { full + [$0] } ?? full
  }

  /// The keys of the changes it holds.
  func keys() -> Set<Key> where Key: Hashable {
    var keys = Set<Key>()
    for chunk in Self.inOrder(full, current) {
      for index in 0..<chunk.count {
        if let key = chunk.base[index].key { keys.insert(key) }
      }
    }
    return keys
  }

  /// The changes held by `chunks`, oldest first, moved out: the chunks are left empty.
  /// O(changes), and no change is copied.
  static func moveChanges(outOf chunks: [_LocalChangeChunk<Key, Value>])
    -> [LocalChange<Key, Value>]
  {
    let total = chunks.reduce(0) { $0 + $1.count }
    guard total > 0 else { return [] }
    return [LocalChange<Key, Value>](unsafeUninitializedCapacity: total) { buffer, initialized in
      var next = buffer.baseAddress.unsafelyUnwrapped
      for chunk in chunks {
        next.moveInitialize(from: chunk.base, count: chunk.count)
        next += chunk.count
        chunk.count = 0
      }
      initialized = total
    }
  }
}

extension _LocalChangeBuffer: Sendable where Key: Sendable, Value: Sendable {}
