import Foundation

/// Saves a store to a file and loads it back: atomic, checksummed snapshots that survive a
/// crash at any instant, with optional periodic auto-save.
///
/// ```swift
/// let quotes = MemoryStore<String, Quote>(name: "quotes")
/// let persistence = try PersistenceManager(
///   store: quotes, fileURL: directory.appending(path: "quotes.snapshot"), coder: .binary)
/// let restored = try persistence.load()        // 0 the first time
/// persistence.saveInterval = .seconds(30)      // auto-save while `persistence` is alive
/// // …
/// try persistence.save()                       // before the app quits
/// ```
///
/// ## Consistency and cost
/// A save writes the store's contents at one instant, as if every write were paused there.
/// It reads the store at the version published at that instant, copying the contents into a
/// `Dictionary` outside every lock, then encodes that copy with no lock held: readers and
/// writers go on meanwhile and never wait for it. The saving thread pays O(*n*) for the copy,
/// and the copy's memory until the save ends; values replaced or removed meanwhile are freed
/// after it.
///
/// ## Crash safety
/// The snapshot is written to a temporary file (mode 0600) in the same directory, flushed to
/// disk, renamed over the previous snapshot, and the directory is flushed: a crash at any
/// instant leaves the previous or the new snapshot, complete. Temporary files that a crash
/// left behind are removed when the next manager for the same file is created. The file
/// starts with a header (magic bytes, format version, the coder's name, the entry count and
/// checksums of header and payload) that ``load()`` verifies before decoding.
///
/// ## One file, one writer
/// A snapshot file belongs to one writer: one store, saved through any number of managers in
/// its process. A save does not replace a snapshot that another writer (a manager of another
/// store, in this process or in another) wrote since this manager last loaded or saved the
/// file: it fails with ``PersistenceError/Kind-swift.struct/conflict`` and writes nothing, and
/// the other writer's entries stay on disk. After ``load()``, which merges that snapshot into
/// the store, the next save replaces it. A file at the path that this manager never loaded nor
/// wrote (another writer's, or one left by an earlier run that the app did not load) is
/// another writer's too; a missing file is not, whether it never existed, was deleted, or was
/// moved aside by a load that rejected it. Set ``conflictPolicy`` to
/// ``ConflictPolicy/overwrite`` where replacing whatever is there is the point.
///
/// The check is made under the lock of saves (below), just before the rename: the file at the
/// path must be the one this manager last loaded or renamed into place, by its device and
/// inode number, size, modification time and 48-byte header, which holds the payload's
/// checksum. The managers of one store share what they have seen of the file, as they share
/// the store: a manager made anew for each save goes on where the last one stopped.
///
/// Two writers of one file therefore never lose each other's saves silently: one of them gets
/// the error. To share state between several processes or instances, use the companion package
/// `MemoryStorePostgres` (`Integrations/PostgresSync`) rather than one snapshot file.
///
/// ## Several managers, several processes
/// A save holds an advisory lock (`flock`) on the lock file `.<name>.lock` beside the
/// snapshot, created empty (mode 0600) and never removed, from the creation of its temporary
/// file until the directory is flushed after the rename. Saves of the same file by several
/// managers, in one process or in several (a rolling restart, an inspection tool), therefore
/// take turns, and the removal of stale temporary files removes them only while it holds the
/// lock: never the file of a save in progress. If a save holds the lock when a manager is
/// created, that manager removes stale files at the start of its first save instead. Loads
/// read without the lock; a load that rejects the file takes it to move the file aside. A
/// save fails with ``PersistenceError/Kind-swift.struct/writeFailed`` if the
/// lock file cannot be created or opened (a read-only directory, for one), like any other
/// file of the save; loading from such a directory works.
///
/// ## Errors
/// Every failure throws a ``PersistenceError`` that names the file (and the key, where there
/// is one); the store in memory and the previous snapshot on disk are left as they were. A file
/// that ``load()`` rejects is never deleted or overwritten: it is moved aside as
/// `<name>.corrupt-<date>`, unless a save (by another manager or process) has replaced it
/// since it was read, in which case the new snapshot is left in place.
///
/// Thread safety: every method and property may be used from any thread. Saves may overlap;
/// the file always ends up holding the newest of the snapshots they took, whichever of the
/// store's managers took them. The coder runs on the thread that saves or loads (a background
/// queue for auto-save), never while the manager or the store holds a lock, and may read and
/// write the store (but not save it: a save waits for the snapshot of the save in progress to
/// be released).
public final class PersistenceManager<
  Key: Hashable & Sendable & Codable, Value: Sendable & Codable
>: Sendable {
  /// What a save does when the snapshot file is another writer's: not the file this manager
  /// last loaded or saved.
  ///
  /// See "One file, one writer" in the type's discussion for the rule a save applies.
  public enum ConflictPolicy: Sendable, Equatable {
    /// The save fails with ``PersistenceError/Kind-swift.struct/conflict`` and writes
    /// nothing: the file, and the other writer's entries in it, stay as they are. The
    /// default.
    case fail
    /// The save replaces the file whoever wrote it, and what it held that the store does not
    /// is lost, as saves did before conflicts were detected: now a choice. Use it where
    /// replacing the file is the point: a cache rebuilt at each start that never loads, or a
    /// tool that resets a snapshot.
    case overwrite
  }

  /// What a save does with an entry whose value fails to encode.
  public enum EncodingFailurePolicy: Sendable, Equatable {
    /// The save fails with ``PersistenceError/Kind-swift.struct/encodingFailed``, naming the
    /// key, and writes nothing. The default.
    case failSave
    /// The entry is left out of the snapshot, and its key is listed in
    /// ``SaveReport/skippedKeys``.
    case skipEntry
  }

  /// The store this manager saves and loads.
  public let store: MemoryStore<Key, Value>
  /// The snapshot file.
  public let fileURL: URL
  /// The snapshot format.
  public let coder: any SnapshotCoder

  let _state: _Protected<_State>
  /// What the store's managers know of the file: the version they last loaded or saved, and
  /// the write count of the newest snapshot they wrote. Shared by every manager of the store
  /// for this file; held across the rename, so that an older snapshot never replaces a newer
  /// one and no save replaces another writer's file unawares.
  let _ledger: _SnapshotLedger

  struct _State: Sendable {
    var saveInterval: Duration = .zero
    /// Bumped by every change of `saveInterval`; an auto-save timer of an older generation
    /// does nothing.
    var generation: UInt64 = 0
    var maximumFileSize = 256 << 20
    var encodingFailurePolicy = EncodingFailurePolicy.failSave
    var conflictPolicy = ConflictPolicy.fail
    var lastSaveError: PersistenceError?
    var lastSaveDate: Date?
    var outcomeStreams: [UInt64: AsyncStream<SaveOutcome>.Continuation] = [:]
    var nextStreamID: UInt64 = 0
    /// Whether stale temporary files may remain because a save by another manager held the
    /// lock when this one was created: the next save removes them once it holds the lock.
    var removesStaleTemporaryFiles = false
    /// Called by a load that rejected the file it read, before it moves the file aside: lets
    /// tests replace the file at that instant.
    var beforeMovingAside: (@Sendable () -> Void)?
    /// The wall clock, in seconds since 1970, that saves and loads convert deadlines with;
    /// `nil`: the system's. Lets tests move it.
    var wallClock: (@Sendable () -> Double)?
  }

  /// Creates a manager for `store` and the snapshot at `fileURL`, creating missing parent
  /// directories and removing temporary files that a save interrupted by a crash left there.
  ///
  /// The removal takes the lock of saves of the file (see the type's discussion), creating
  /// the lock file if needed, without waiting: while another manager's save holds it, the
  /// removal is left to this manager's first save; where the lock file cannot be created, as
  /// in a read-only directory, nothing is removed and no error is thrown.
  ///
  /// Creating a manager neither loads nor saves; call ``load()`` to restore the store.
  ///
  /// - Parameters:
  ///   - store: The store to save and load.
  ///   - fileURL: A file URL for the snapshot.
  ///   - coder: The snapshot format: ``SnapshotCoder/json`` (the default, readable) or
  ///     ``SnapshotCoder/binary`` (compact and faster), or your own. Its `formatName` must be
  ///     1 to 8 ASCII bytes.
  /// - Throws: ``PersistenceError/Kind-swift.struct/directoryUnavailable`` if the directory
  ///   does not exist and cannot be created, cannot be reached (a directory on its path cannot
  ///   be searched), or is not a directory.
  public init(
    store: MemoryStore<Key, Value>, fileURL: URL, coder: some SnapshotCoder = .json
  ) throws(PersistenceError) {
    if !fileURL.isFileURL {
      _preconditionFailure("PersistenceManager needs a file URL, not \(fileURL)")
    }
    if _SnapshotFile.encodedName(coder.formatName) == nil {
      _preconditionFailure(
        "a SnapshotCoder's formatName must be 1 to 8 ASCII bytes, not \"\(coder.formatName)\"")
    }
    self.store = store
    self.fileURL = fileURL.standardizedFileURL
    self.coder = coder
    _state = _Protected(_State())
    _ledger = _SnapshotLedger.ledger(for: store, path: self.fileURL.path)
    let directory = self.fileURL.deletingLastPathComponent()
    do {
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    } catch {
      throw PersistenceError.directoryUnavailable(
        directory.path, fileURL: self.fileURL, underlyingError: error)
    }
    if _SnapshotFile.removeStaleTemporaryFiles(
      of: self.fileURL.lastPathComponent, in: directory.path) == nil
    {
      _state.withLock { $0.removesStaleTemporaryFiles = true }
    }
  }

  deinit {
    let (streams, interval) = _state.withLock { ($0.outcomeStreams.values, $0.saveInterval) }
    for stream in streams { stream.finish() }
    #if DEBUG
      if interval > .zero {
        FileHandle.standardError.write(
          Data(
            ("The PersistenceManager for \(fileURL.path) was released with saveInterval "
              + "\(interval): auto-save stopped. Keep a reference to the manager for as long as "
              + "it should save, and set saveInterval to .zero to stop it.\n").utf8))
      }
    #endif
  }

  // MARK: Settings

  /// The largest file ``load()`` reads, in bytes; a larger file is rejected before it is read.
  /// 256 MiB by default.
  ///
  /// A load holds the file's payload in memory once, and the entries it decodes. The binary
  /// coder takes at most about three times the file's size beyond those entries, whatever the
  /// bytes; `JSONDecoder`, behind the JSON coder, indexes the whole document first, which for
  /// a payload of many small values takes about 24 times its size.
  public var maximumFileSize: Int {
    get { _state.withLock { $0.maximumFileSize } }
    set { _state.withLock { $0.maximumFileSize = newValue } }
  }

  /// What a save does with an entry whose value fails to encode; ``EncodingFailurePolicy/failSave``
  /// by default.
  public var encodingFailurePolicy: EncodingFailurePolicy {
    get { _state.withLock { $0.encodingFailurePolicy } }
    set { _state.withLock { $0.encodingFailurePolicy = newValue } }
  }

  /// What a save does when the file at ``fileURL`` is not the one this manager last loaded or
  /// saved; ``ConflictPolicy/fail`` by default.
  ///
  /// ```swift
  /// let cache = try PersistenceManager(store: thumbnails, fileURL: url)
  /// cache.conflictPolicy = .overwrite  // rebuilt at each start: replace whatever is there
  /// ```
  ///
  /// It may be read and set from any thread, like every property of the manager. A save uses
  /// the value it reads as it starts: setting it while a save runs applies from the next save.
  public var conflictPolicy: ConflictPolicy {
    get { _state.withLock { $0.conflictPolicy } }
    set { _state.withLock { $0.conflictPolicy = newValue } }
  }

  // MARK: Outcomes

  /// The error of the most recent save, manual or automatic; `nil` once a save succeeds.
  public var lastSaveError: PersistenceError? { _state.withLock { $0.lastSaveError } }

  /// When the most recent successful save finished; `nil` before the first.
  public var lastSaveDate: Date? { _state.withLock { $0.lastSaveDate } }

  /// The outcome of every save, manual or automatic, from now on.
  ///
  /// ```swift
  /// for await outcome in persistence.saveOutcomes {
  ///   if case .failure(let error) = outcome.result { log.error("\(error)") }
  /// }
  /// ```
  ///
  /// Each access returns a new sequence, a subscriber of its own, which keeps the 64 most
  /// recent outcomes it has not consumed yet. It ends when the manager is released.
  public var saveOutcomes: AsyncStream<SaveOutcome> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: SaveOutcome.self, bufferingPolicy: .bufferingNewest(64))
    let id = _state.withLock { state in
      let id = state.nextStreamID
      state.nextStreamID &+= 1
      state.outcomeStreams[id] = continuation
      return id
    }
    continuation.onTermination = { [weak self] _ in
      _ = self?._state.withLock { $0.outcomeStreams.removeValue(forKey: id) }
    }
    return stream
  }
}
