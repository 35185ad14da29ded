import Foundation

extension PersistenceManager {
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
}
