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
  /// The number of elements the chunks hold.
  @usableFromInline private(set) var capacity = 0
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

  /// A view of the elements that reads and writes them without reloading the directory: for a
  /// loop that reads many elements while it writes other memory. Valid until the next append.
  @inlinable @inline(__always)
  var fixed: _ChunkedElements<Element> {
    _ChunkedElements(directory: directory.unsafelyUnwrapped)
  }

  /// Adds `element` at the end. O(1): a new chunk when the last is full.
  @inlinable @inline(__always)
  mutating func append(_ element: Element) {
    if count == capacity { addChunk() }
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
    if count &+ 2 &* Self.chunkSize <= capacity { releaseChunks() }
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
    capacity = 0
  }

  /// Adds a chunk: the array is full.
  @inlinable @inline(never)
  mutating func addChunk() {
    let storage = self.storage ?? _ChunkStorage()
    self.storage = storage
    storage.addChunk(Self.chunkSize)
    directory = storage.directory
    capacity += Self.chunkSize
  }

  /// Frees the chunks past the one after the last element's: one chunk of slack, so that an
  /// array that grows and shrinks across a chunk's edge does not allocate each time.
  @inlinable @inline(never)
  mutating func releaseChunks() {
    guard let storage else { return }
    while capacity - Self.chunkSize >= count + Self.chunkSize {
      storage.removeChunk()
      capacity -= Self.chunkSize
    }
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

/// The elements of a ``_ChunkedArray`` at one moment (see ``_ChunkedArray/fixed``): the
/// directory in a local, so that reads in a loop do not reload it.
@usableFromInline
struct _ChunkedElements<Element: BitwiseCopyable> {
  @usableFromInline let directory: UnsafeMutablePointer<UnsafeMutablePointer<Element>>

  @inlinable @inline(__always)
  init(directory: UnsafeMutablePointer<UnsafeMutablePointer<Element>>) {
    self.directory = directory
  }

  @inlinable
  subscript(index: Int) -> Element {
    @inline(__always) get {
      directory[index &>> _ChunkedArray<Element>.shift][
        index & (_ChunkedArray<Element>.chunkSize - 1)]
    }
    @inline(__always) nonmutating set {
      directory[index &>> _ChunkedArray<Element>.shift][
        index & (_ChunkedArray<Element>.chunkSize - 1)] = newValue
    }
  }
}
