/// An array of plain values in fixed chunks of 4 096, reached through a directory: appending
/// never moves what is stored, so growing to millions of elements never copies them all at
/// once (an `Array` that doubles from 2 million entries of 16 bytes copies 32 MB inside one
/// write). An access costs one more load than an array's, of a directory that stays in cache.
///
/// The memory of the policy's per-entry records: the ring of entries, the expiry heap and its
/// index, the links of the eviction order. It has reference semantics, like the memory those
/// used before: it lives in the writer state, which only the write lock holder reads or writes.
/// Chunks emptied by removals are freed, one chunk of slack kept, so that a store that shrinks
/// gives its memory back.
@usableFromInline
struct _ChunkedArray<Element: BitwiseCopyable>: @unchecked Sendable {
  // Safe: it lives in a store's writer state, read and written only by the write lock holder;
  // copies taken out of it (by a check for tests) only read it under the same lock.

  /// The directory of chunks, as `storage` holds it (cached here: reading it through the class
  /// would cost reference counting on every access).
  @usableFromInline var directory: UnsafeMutablePointer<UnsafeMutablePointer<Element>>?
  /// The number of elements.
  @usableFromInline private(set) var count = 0
  /// Owns the chunks and the directory.
  @usableFromInline var storage: _ChunkStorage<Element>?

  @inlinable init() {}

  @inlinable @inline(__always)
  static var shift: Int { 12 }

  @inlinable @inline(__always)
  static var chunkSize: Int { 1 << shift }

  @inlinable @inline(__always)
  var isEmpty: Bool { count == 0 }

  @inlinable @inline(__always)
  var first: Element? { count == 0 ? nil : self[0] }

  @inlinable @inline(__always)
  var last: Element? { count == 0 ? nil : self[count - 1] }

  @inlinable
  var indices: Range<Int> { 0..<count }

  /// The element at `index`, which must be below ``count``.
  @inlinable
  subscript(index: Int) -> Element {
    @inline(__always) get {
      directory.unsafelyUnwrapped[index &>> Self.shift][index & (Self.chunkSize - 1)]
    }
    @inline(__always) nonmutating set {
      directory.unsafelyUnwrapped[index &>> Self.shift][index & (Self.chunkSize - 1)] = newValue
    }
  }

  /// Adds `element` at the end. O(1): a new chunk when the last is full.
  @inlinable @inline(__always)
  mutating func append(_ element: Element) {
    if count & (Self.chunkSize - 1) == 0 { addChunkIfNeeded() }
    count += 1
    self[count - 1] = element
  }

  /// Appends `element` until there are `newCount` elements.
  @inlinable
  mutating func append(_ element: Element, upTo newCount: Int) {
    while count < newCount { append(element) }
  }

  /// Removes and returns the last element. O(1).
  @inlinable @inline(__always)
  @discardableResult
  mutating func removeLast() -> Element {
    let element = self[count - 1]
    count -= 1
    if count & (Self.chunkSize - 1) == 0 { releaseChunksIfNeeded() }
    return element
  }

  /// Removes and returns the last element, or returns `nil` if there is none.
  @inlinable @inline(__always)
  mutating func popLast() -> Element? {
    count == 0 ? nil : removeLast()
  }

  /// Removes every element and frees the memory.
  @inlinable
  mutating func removeAll() {
    storage = nil
    directory = nil
    count = 0
  }

  @inlinable @inline(never)
  mutating func addChunkIfNeeded() {
    let storage = self.storage ?? _ChunkStorage()
    self.storage = storage
    if storage.chunkCount * Self.chunkSize <= count { storage.addChunk(Self.chunkSize) }
    directory = storage.directory
  }

  /// Frees the chunks past the one after the last element's: one chunk of slack, so that a
  /// store that adds and removes an element at a chunk's edge does not allocate each time.
  @inlinable @inline(never)
  mutating func releaseChunksIfNeeded() {
    guard let storage else { return }
    let needed = (count + Self.chunkSize - 1) >> Self.shift
    while storage.chunkCount > needed + 1 { storage.removeChunk() }
  }
}

/// The chunks of a ``_ChunkedArray`` and their directory, freed with the last reference.
@usableFromInline
final class _ChunkStorage<Element: BitwiseCopyable> {
  @usableFromInline private(set) var directory: UnsafeMutablePointer<UnsafeMutablePointer<Element>>
  @usableFromInline private(set) var chunkCount = 0
  @usableFromInline private(set) var directoryCapacity = 4

  @usableFromInline
  init() {
    directory = .allocate(capacity: directoryCapacity)
  }

  /// Adds a chunk of `size` elements, uninitialized; doubles the directory when it is full
  /// (a directory of pointers: 8 KB for 4 million elements).
  @usableFromInline
  func addChunk(_ size: Int) {
    if chunkCount == directoryCapacity {
      let larger = UnsafeMutablePointer<UnsafeMutablePointer<Element>>.allocate(
        capacity: directoryCapacity * 2)
      larger.moveInitialize(from: directory, count: chunkCount)
      directory.deallocate()
      directory = larger
      directoryCapacity *= 2
    }
    (directory + chunkCount).initialize(to: .allocate(capacity: size))
    chunkCount += 1
  }

  /// Frees the last chunk.
  @usableFromInline
  func removeChunk() {
    chunkCount -= 1
    directory[chunkCount].deallocate()
  }

  deinit {
    for index in 0..<chunkCount { directory[index].deallocate() }
    directory.deallocate()
  }
}
