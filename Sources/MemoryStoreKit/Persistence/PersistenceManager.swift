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

  // MARK: Saving

  /// Writes a snapshot of the store, taken at one instant, atomically replacing the file.
  ///
  /// Readers and writers of the store are not blocked while the snapshot is encoded and
  /// written; see the type's discussion.
  ///
  /// Under ``ConflictPolicy/fail``, the default, the file it replaces must be the one this
  /// manager last loaded or saved, or there must be none (see "One file, one writer" in the
  /// type's discussion).
  ///
  /// - Returns: What was written.
  /// - Throws: ``PersistenceError``: ``PersistenceError/Kind-swift.struct/conflict`` if the
  ///   file is another writer's (nothing is written; ``load()`` it, then save again),
  ///   ``PersistenceError/Kind-swift.struct/encodingFailed`` naming the key whose value failed
  ///   to encode (nothing is written), or ``PersistenceError/Kind-swift.struct/writeFailed``
  ///   with the system error (disk full, read-only file system, permission denied, path is a
  ///   directory, …). Whatever the error, the previous snapshot is byte-identical and no
  ///   temporary file is left.
  /// - Complexity: O(n) to encode the n entries, outside every lock; O(1) under the store's
  ///   write lock.
  @discardableResult
  public func save() throws(PersistenceError) -> SaveReport {
    try _save(trigger: .manual)
  }

  func _save(trigger: SaveOutcome.Trigger) throws(PersistenceError) -> SaveReport {
    let start = ContinuousClock.now
    let result = Result { () throws(PersistenceError) -> SaveReport in
      let (policy, checksConflicts) = _state.withLock {
        ($0.encodingFailurePolicy, $0.conflictPolicy == .fail)
      }
      // A conflict found now fails the save before it encodes anything; the check that
      // decides is made again under the lock of saves, just before the rename.
      if checksConflicts { try _checkForConflict() }
      let encoded = try store._withSnapshot {
        (entries, terms, writeCount) throws(PersistenceError) in
        try _encode(entries, terms: terms, writeCount: writeCount, policy: policy)
      }
      try _write(encoded, checksConflicts: checksConflicts)
      return SaveReport(
        fileURL: fileURL, entryCount: encoded.entryCount,
        byteCount: _SnapshotFile.headerSize + encoded.payload.count,
        skippedKeys: encoded.skippedKeys, date: Date(), duration: .now - start)
    }
    let streams = _state.withLock { state in
      switch result {
      case .success(let report):
        state.lastSaveError = nil
        state.lastSaveDate = report.date
      case .failure(let error):
        state.lastSaveError = error
      }
      return Array(state.outcomeStreams.values)
    }
    let outcome = SaveOutcome(trigger: trigger, result: result)
    for stream in streams { stream.yield(outcome) }
    return try result.get()
  }

  /// A snapshot, encoded.
  struct _Encoded {
    /// Its format version (see ``_SnapshotFile``).
    var version: UInt32
    var payload: Data
    var entryCount: Int
    var writeCount: UInt64
    var skippedKeys: [String]
  }

  /// The time now, in seconds since 1970: the wall clock that snapshots' deadlines are
  /// written in.
  var _secondsSince1970: Double {
    _state.withLock { $0.wallClock }?() ?? Date().timeIntervalSince1970
  }

  /// Encodes `entries` with `terms`, the metadata of those that have some: as values only
  /// (format version 1) if none has, else as ``_SnapshotEntry`` values (version 2), their
  /// deadlines made wall-clock times.
  func _encode(
    _ entries: [Key: Value], terms: [Key: _SavedTerms], writeCount: UInt64,
    policy: EncodingFailurePolicy
  ) throws(PersistenceError) -> _Encoded {
    guard !terms.isEmpty else {
      return try _encode(
        entries, version: _SnapshotFile.valuesVersion, writeCount: writeCount, policy: policy)
    }
    let now = _secondsSince1970
    func wallClock(_ nanoseconds: Int64?) -> Double? {
      nanoseconds.map { now + Double($0) / 1e9 }
    }
    var saved: [Key: _SnapshotEntry<Value>] = Dictionary(minimumCapacity: entries.count)
    for (key, value) in entries {
      guard let terms = terms[key] else {
        saved[key] = _SnapshotEntry(value: value)
        continue
      }
      saved[key] = _SnapshotEntry(
        value: value, cost: terms.cost, expires: wallClock(terms.expiresIn),
        idleExpires: wallClock(terms.idleExpiresIn))
    }
    return try _encode(
      saved, version: _SnapshotFile.entriesVersion, writeCount: writeCount, policy: policy)
  }

  /// Encodes `entries` as a payload of format version `version`; on failure, finds the key
  /// whose value fails, by encoding the entries one at a time.
  func _encode<Saved: Encodable>(
    _ entries: [Key: Saved], version: UInt32, writeCount: UInt64, policy: EncodingFailurePolicy
  ) throws(PersistenceError) -> _Encoded {
    let failure: any Error
    do {
      return _Encoded(
        version: version, payload: try coder.encode(entries), entryCount: entries.count,
        writeCount: writeCount, skippedKeys: [])
    } catch {
      failure = error
    }
    var failing: [(key: Key, error: any Error)] = []
    for (key, value) in entries {
      do {
        _ = try coder.encode([key: value])
      } catch {
        failing.append((key, error))
        if policy == .failSave { break }
      }
    }
    guard let first = failing.first else {
      throw PersistenceError(
        .encodingFailed, fileURL: fileURL,
        detail: "Saving \(fileURL.path) failed: the coder could not encode the entries, though "
          + "it encodes each one alone; nothing was written",
        underlyingError: failure)
    }
    if policy == .failSave {
      throw PersistenceError(
        .encodingFailed, fileURL: fileURL,
        detail: "Saving \(fileURL.path) failed: the value for key \(String(reflecting: first.key)) "
          + "could not be encoded (\(first.error)); nothing was written",
        key: String(reflecting: first.key), underlyingError: first.error)
    }
    var kept = entries
    for (key, _) in failing { kept.removeValue(forKey: key) }
    do {
      return _Encoded(
        version: version, payload: try coder.encode(kept), entryCount: kept.count,
        writeCount: writeCount, skippedKeys: failing.map { String(reflecting: $0.key) })
    } catch {
      throw PersistenceError(
        .encodingFailed, fileURL: fileURL,
        detail: "Saving \(fileURL.path) failed: the entries could not be encoded even without "
          + "the \(failing.count) whose values fail; nothing was written",
        underlyingError: error)
    }
  }

  /// Writes `encoded` over the snapshot, unless a newer snapshot of the store is already there;
  /// if `checksConflicts`, fails with ``PersistenceError/Kind-swift.struct/conflict`` unless
  /// the file it would replace is the one the ledger last saw, or none.
  func _write(_ encoded: _Encoded, checksConflicts: Bool) throws(PersistenceError) {
    let header = _SnapshotFile.Header(
      version: encoded.version, formatName: coder.formatName,
      entryCount: UInt64(encoded.entryCount),
      payloadLength: UInt64(encoded.payload.count),
      payloadChecksum: encoded.payload.withUnsafeBytes { _SnapshotFile.checksum($0) })
    // The name was checked by init.
    let headerBytes = _SnapshotFile.headerBytes(header)!
    var removesStaleTemporaryFiles = _state.withLock { $0.removesStaleTemporaryFiles }
    defer {
      if !removesStaleTemporaryFiles {
        _state.withLock { $0.removesStaleTemporaryFiles = false }
      }
    }
    var conflict: _SnapshotLedger.Conflict?
    var lookupFailure: _SnapshotFile.SystemCallFailure?
    do throws(_SnapshotFile.SystemCallFailure) {
      _ = try _SnapshotFile.replace(
        at: fileURL.path, header: headerBytes, payload: encoded.payload,
        removingStaleTemporaryFiles: &removesStaleTemporaryFiles
      ) { rename in
        _ledger.state.withLock { ledger in
          var occupant = _SnapshotFile.Occupant.nothing
          if checksConflicts {
            do throws(_SnapshotFile.SystemCallFailure) {
              occupant = try _SnapshotFile.occupant(of: fileURL.path)
            } catch {
              lookupFailure = error
              return false
            }
          }
          switch ledger.decide(
            occupant, writeCount: encoded.writeCount, checksConflicts: checksConflicts)
          {
          case .conflict(let found):
            conflict = found
            return false
          case .keepNewer:
            return false
          case .replace:
            if let version = rename() {
              ledger.renamed(version, writeCount: encoded.writeCount)
            }
            return true
          }
        }
      }
    } catch {
      throw _writeFailure(error)
    }
    if let lookupFailure { throw _writeFailure(lookupFailure) }
    if let conflict { throw _conflictError(conflict) }
  }

  /// The error of a save whose system call failed.
  func _writeFailure(_ error: _SnapshotFile.SystemCallFailure) -> PersistenceError {
    let outcome =
      error.isAfterRename
      ? "the new snapshot replaced the previous one, but a power loss could still undo that"
      : "the previous snapshot is unchanged"
    return PersistenceError(
      .writeFailed, fileURL: fileURL,
      detail: "Saving \(fileURL.path) failed: \(PersistenceError.describe(error.code)) while "
        + "\(error.step) \(error.path); \(outcome)",
      code: POSIXErrorCode(rawValue: error.code))
  }

  /// Throws ``PersistenceError/Kind-swift.struct/conflict`` if the file at the path is not
  /// one a save may replace now; lets the save go on if that cannot be told (a failed lookup),
  /// leaving the failure to the save's own steps and check.
  func _checkForConflict() throws(PersistenceError) {
    let conflict = _ledger.state.withLock { ledger in
      (try? _SnapshotFile.occupant(of: fileURL.path)).flatMap { ledger.conflict(with: $0) }
    }
    if let conflict { throw _conflictError(conflict) }
  }

  /// The error of a save that found another writer's file at the path.
  func _conflictError(_ conflict: _SnapshotLedger.Conflict) -> PersistenceError {
    let path = fileURL.path
    let found =
      switch conflict {
      case .replacedSinceSeen:
        "another writer replaced the snapshot since this manager last loaded or saved it"
      case .unseenFile:
        "a snapshot that this manager has neither loaded nor written is there (another "
          + "writer's, or one left by an earlier run)"
      }
    return PersistenceError(
      .conflict, fileURL: fileURL,
      detail: "Saving \(path) failed: \(found), and replacing it would lose that writer's "
        + "entries; nothing was written, and the file and the store are unchanged. A snapshot "
        + "file belongs to one writer: call load() to merge the file into the store, then save "
        + "again, or set conflictPolicy to .overwrite if this manager is meant to replace it; "
        + "to share state between processes, use MemoryStorePostgres")
  }

  // MARK: Auto-save

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

  // MARK: Loading

  /// Reads the snapshot and merges its entries into the store, as one write.
  ///
  /// Entries of the store whose keys are not in the snapshot stay; entries in the snapshot
  /// replace the store's. With change batches on, the entries appear in one batch, with the
  /// reason ``ChangeReason/loaded``.
  ///
  /// Each entry keeps its saved cost and what was left of its deadlines, the time since the
  /// save counted (an entry whose deadline has passed is not loaded); one saved without them
  /// gets the store's, as any write does, and a ``MemoryStore/defaultTimeToLive`` or
  /// ``MemoryStore/timeToIdle`` set after the load applies to it too (see "What persistence
  /// keeps" in <doc:Eviction>).
  ///
  /// A store with a ``MemoryStore/countLimit`` or ``MemoryStore/costLimit`` smaller than the
  /// snapshot keeps what its policy keeps: the load evicts like any write.
  ///
  /// Once the entries are in the store, the manager counts the file as seen: its next save
  /// may replace it, even if another writer wrote it (see "One file, one writer" in the
  /// type's discussion), provided no other save replaced it meanwhile. A load that finds no
  /// file, or moves the file it rejects aside, leaves the path free for the next save.
  ///
  /// - Returns: The number of the snapshot's entries that the store holds after the load:
  ///   fewer than the file's when limits evicted some; 0 if the file does not exist (not an
  ///   error).
  /// - Throws: ``PersistenceError`` if the file is larger than ``maximumFileSize``, is not a
  ///   snapshot, is truncated or damaged, comes from another format version or coder, or does
  ///   not decode as `[Key: Value]`. The store is then untouched, and the file is moved aside
  ///   (``PersistenceError/movedTo``) so that the next save does not overwrite it, unless
  ///   another file has replaced it since it was read: that file is left in place, and
  ///   ``PersistenceError/movedTo`` is `nil`.
  ///   ``PersistenceError/Kind-swift.struct/readFailed`` if it cannot be read at all, or if the
  ///   path names a directory, a FIFO, a socket or a device, which is refused at once without
  ///   waiting for a writer (the file is left in place).
  /// - Complexity: O(n) to decode n entries, then one write of n entries.
  @discardableResult
  public func load() throws(PersistenceError) -> Int {
    let maximum = maximumFileSize
    let outcome: _SnapshotFile.ReadOutcome
    do {
      outcome = try _SnapshotFile.readSnapshot(
        at: fileURL.path, maximumSize: maximum, formatName: coder.formatName,
        payloadAsBytes: coder is BinarySnapshotCoder)
    } catch {
      let detail =
        if let reason = error.reason {
          "Loading \(fileURL.path) failed: \(reason); it was left as it is"
        } else {
          "Loading \(fileURL.path) failed: \(PersistenceError.describe(error.code)) while "
            + error.step
        }
      throw PersistenceError(
        .readFailed, fileURL: fileURL, detail: detail, code: POSIXErrorCode(rawValue: error.code))
    }
    switch outcome {
    case .missing:
      _noteLoaded(nil)
      return 0
    case .tooLarge(let size, let identity):
      throw _reject(
        PersistenceError(
          .fileTooLarge, fileURL: fileURL,
          detail: "Loading \(fileURL.path) failed: the file is \(size) bytes, more than "
            + "maximumFileSize (\(maximum)); it was not read"),
        identity: identity)
    case .rejected(let rejection, let identity):
      throw _reject(_rejection(rejection), identity: identity)
    case .snapshot(let header, let payload, let version):
      let count: Int
      do {
        switch try _decode(payload, header: header) {
        case .values(let entries):
          count = store._merge(entries, reason: .loaded)
        case .entries(let entries):
          count = store._mergeSaved(
            entries, secondsSince1970: _secondsSince1970, reason: .loaded)
        }
      } catch {
        throw _reject(error, identity: version.identity)
      }
      // Only once the entries are in the store: a save that the ledger lets replace the file
      // must hold them.
      _noteLoaded(version)
      return count
    }
  }

  /// Records in the ledger that a load read `version` and merged it into the store, or left
  /// no file at the path (`nil`: it found none, or moved the file it rejected aside), provided
  /// the path still holds that (see ``_SnapshotLedger/State/loaded(_:now:)``).
  func _noteLoaded(_ version: _SnapshotFile.FileVersion?) {
    _ledger.state.withLock { ledger in
      // If the path cannot be looked up, what the ledger saw before stands.
      guard let occupant = try? _SnapshotFile.occupant(of: fileURL.path) else { return }
      ledger.loaded(version, now: occupant)
    }
  }

  /// What a snapshot's payload holds, by its format version.
  enum _Decoded {
    /// Version 1.
    case values([Key: Value])
    /// Version 2.
    case entries([Key: _SnapshotEntry<Value>])

    var count: Int {
      switch self {
      case .values(let entries): entries.count
      case .entries(let entries): entries.count
      }
    }
  }

  /// Verifies and decodes a whole snapshot file held in memory, as ``load()`` does a file it
  /// reads.
  func _decode(_ file: [UInt8]) throws(PersistenceError) -> _Decoded {
    let header: _SnapshotFile.Header
    let payload: Range<Int>
    do {
      (header, payload) = try _SnapshotFile.verify(file, formatName: coder.formatName)
    } catch {
      throw _rejection(error)
    }
    return try _decode(
      coder is BinarySnapshotCoder ? .bytes(Array(file[payload])) : .data(Data(file[payload])),
      header: header)
  }

  /// Decodes a verified payload of the header's format version: the binary coder's straight
  /// from the array the file was read into (``BinarySnapshotCoder/decode(_:as:)`` would copy
  /// it), any other coder's with its `decode(_:as:)`.
  func _decode(
    _ payload: _SnapshotFile.Payload, header: _SnapshotFile.Header
  ) throws(PersistenceError) -> _Decoded {
    let decoded: _Decoded
    if header.version == _SnapshotFile.valuesVersion {
      decoded = .values(try _decode(payload, as: Value.self))
    } else {
      decoded = .entries(try _decode(payload, as: _SnapshotEntry<Value>.self))
    }
    guard UInt64(decoded.count) == header.entryCount else {
      throw PersistenceError(
        .corrupted, fileURL: fileURL,
        detail: "Loading \(fileURL.path) failed: the header declares \(header.entryCount) "
          + "entries, the payload holds \(decoded.count)")
    }
    return decoded
  }

  /// Decodes a payload as `[Key: Saved]`.
  func _decode<Saved: Decodable>(
    _ payload: _SnapshotFile.Payload, as type: Saved.Type
  ) throws(PersistenceError) -> [Key: Saved] {
    do {
      switch payload {
      case .bytes(let bytes):
        return try _BinaryDecoding.decode(bytes: bytes)
      case .data(let data):
        return try coder.decode(data, as: [Key: Saved].self)
      }
    } catch {
      var detail =
        "Loading \(fileURL.path) failed: the payload does not decode as "
        + "[\(Key.self): \(Value.self)]"
      if Saved.self != Value.self { detail += " with each entry's metadata" }
      if let context = (error as? DecodingError).flatMap(Self._context) {
        let path = context.codingPath.map(\.stringValue).joined(separator: ".")
        detail += " at \(path.isEmpty ? "the top level" : path): \(context.debugDescription)"
      }
      throw PersistenceError(
        .decodingFailed, fileURL: fileURL, detail: detail, underlyingError: error)
    }
  }

  static func _context(_ error: DecodingError) -> DecodingError.Context? {
    switch error {
    case .typeMismatch(_, let context), .valueNotFound(_, let context),
      .keyNotFound(_, let context), .dataCorrupted(let context):
      context
    @unknown default:
      nil
    }
  }

  /// The error for a file the header check rejected.
  func _rejection(_ rejection: _SnapshotFile.Rejection) -> PersistenceError {
    let prefix = "Loading \(fileURL.path) failed: "
    switch rejection {
    case .notASnapshot:
      return PersistenceError(
        .notASnapshot, fileURL: fileURL,
        detail: prefix + "the file does not start with the snapshot magic bytes \"MEMSTORE\"")
    case .truncated(let expected, let found):
      return PersistenceError(
        .truncated, fileURL: fileURL,
        detail: prefix + "the file is truncated: \(found) bytes, \(expected) expected")
    case .trailingBytes(let expected, let found):
      return PersistenceError(
        .corrupted, fileURL: fileURL,
        detail: prefix + "the file has \(found) bytes, but its header declares \(expected)")
    case .headerChecksum:
      return PersistenceError(
        .corrupted, fileURL: fileURL, detail: prefix + "the header's checksum does not match")
    case .unsupportedVersion(let version):
      return PersistenceError(
        .unsupportedVersion, fileURL: fileURL,
        detail: prefix + "format version \(version); this version reads versions "
          + "\(_SnapshotFile.valuesVersion) and \(_SnapshotFile.entriesVersion)")
    case .formatMismatch(let found):
      return PersistenceError(
        .formatMismatch, fileURL: fileURL,
        detail: prefix
          + "the file was written by the \"\(found)\" coder, not \"\(coder.formatName)\"")
    case .implausibleCount(let count):
      return PersistenceError(
        .corrupted, fileURL: fileURL,
        detail: prefix + "the header declares \(count) entries, more than the payload can hold")
    case .payloadChecksum:
      return PersistenceError(
        .corrupted, fileURL: fileURL, detail: prefix + "the payload's checksum does not match")
    }
  }

  /// Moves the rejected file, the file of `identity`, aside so that no save overwrites it,
  /// and returns `error` noting where it went; leaves in place a file that has replaced it
  /// since it was read (see ``_SnapshotFile/moveAside(_:identity:to:)``).
  func _reject(
    _ error: PersistenceError, identity: _SnapshotFile.FileIdentity
  ) -> PersistenceError {
    _state.withLock { $0.beforeMovingAside }?()
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime, .withTimeZone]
    let stamp = formatter.string(from: Date())
    let base = fileURL.path + ".corrupt-" + stamp
    switch _SnapshotFile.moveAside(fileURL.path, identity: identity, to: base) {
    case .moved(let target):
      // The path is free: the next save writes a new snapshot there.
      _noteLoaded(nil)
      return error.moved(to: URL(fileURLWithPath: target))
    case .replaced:
      return error.appendingToDetail(
        "; it was not moved aside, as another file has replaced it since it was read")
    case .failed:
      return error
    }
  }
}

/// What a successful save wrote.
public struct SaveReport: Sendable, Equatable {
  /// The snapshot file.
  public let fileURL: URL
  /// The number of entries written.
  public let entryCount: Int
  /// The file's size in bytes, header included.
  public let byteCount: Int
  /// The keys (as `String(reflecting:)` prints them) of the entries left out because their
  /// values failed to encode, under ``PersistenceManager/EncodingFailurePolicy/skipEntry``.
  public let skippedKeys: [String]
  /// When the save finished.
  public let date: Date
  /// How long the save took: snapshot, encoding and writing.
  public let duration: Duration
}

/// The outcome of one save, as ``PersistenceManager/saveOutcomes`` reports it.
public struct SaveOutcome: Sendable {
  /// What started a save.
  public enum Trigger: Sendable, Equatable {
    /// A call to ``PersistenceManager/save()``.
    case manual
    /// The auto-save timer (``PersistenceManager/saveInterval``).
    case automatic
  }

  /// What started the save.
  public let trigger: Trigger
  /// What it wrote, or why it failed.
  public let result: Result<SaveReport, PersistenceError>
}
