import Foundation

extension PersistenceManager {
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
