/// What the managers of one store know of one snapshot file: the version of the file they last
/// loaded or renamed into place, and the write count of the newest snapshot they renamed.
///
/// A snapshot file belongs to one writer, and the writer is the store: the managers of one
/// store for one path, in this process, share one ledger (``ledger(for:path:)``), so a
/// manager created anew for each save (as a tool or a benchmark does) goes on where the
/// previous one stopped, and an older snapshot of the store never replaces a newer one
/// whichever manager took them. Managers of two stores are two writers, in one process as
/// in two: each has a ledger of its own.
///
/// The rule a save applies, under the lock of saves, just before its rename
/// (``decide(_:writeCount:checksConflicts:)``): the file at the path must be the one the
/// ledger last saw, or there must be none. A file that was never seen (the manager never
/// loaded, or loaded when there was none, or moved the file it rejected aside) counts as
/// another writer's: replacing it would lose its entries. A missing file does not: there is
/// nothing to lose, whether it never existed, was deleted, or was moved aside by a load.
/// What holds no snapshot (a directory, a FIFO, a socket, a device) is left to the rename, as
/// before.
final class _SnapshotLedger: Sendable {
  struct State: Sendable {
    /// The write count of the newest snapshot the store's managers renamed into place.
    var committedWriteCount: UInt64?
    /// The file the store's managers last loaded or renamed into place, if it is still
    /// expected at the path; `nil`: no file is expected there.
    var seen: _SnapshotFile.FileVersion?

    /// What a save of the snapshot taken at `writeCount` does, `occupant` being what is at the
    /// path under the lock of saves (not looked up, and taken as `.nothing`, unless
    /// `checksConflicts`).
    func decide(
      _ occupant: _SnapshotFile.Occupant, writeCount: UInt64, checksConflicts: Bool
    ) -> SaveDecision {
      if checksConflicts, let conflict = conflict(with: occupant) { return .conflict(conflict) }
      // An overlapping save that took a newer snapshot already replaced the file.
      if let committedWriteCount, committedWriteCount > writeCount { return .keepNewer }
      return .replace
    }

    /// Why `occupant` may not be replaced, if it may not.
    func conflict(with occupant: _SnapshotFile.Occupant) -> Conflict? {
      guard case .file(let version) = occupant, version != seen else { return nil }
      return seen == nil ? .unseenFile : .replacedSinceSeen
    }

    /// A save renamed the snapshot taken at `writeCount` into place, as `version`.
    mutating func renamed(_ version: _SnapshotFile.FileVersion, writeCount: UInt64) {
      committedWriteCount = writeCount
      seen = version
    }

    /// A load read `version` and merged it into the store, or found no file or moved the
    /// file it rejected aside (`nil`); `occupant` is what the path holds now, looked up under
    /// the ledger's lock. The ledger takes `version` as seen only if it is still at the path:
    /// if a save (of this store or another) has replaced it since it was read, what the
    /// ledger saw before stands, and a save of this store's may not replace the new file
    /// unless the ledger already saw it.
    mutating func loaded(
      _ version: _SnapshotFile.FileVersion?, now occupant: _SnapshotFile.Occupant
    ) {
      switch (version, occupant) {
      case (nil, .nothing):
        seen = nil
      case (let version?, .file(let current)) where current == version:
        seen = version
      default:
        break
      }
    }
  }

  /// What a save does at its rename.
  enum SaveDecision: Equatable {
    /// Rename the new snapshot over the file.
    case replace
    /// Leave the file: it holds a newer snapshot of the store.
    case keepNewer
    /// Fail with ``PersistenceError/Kind-swift.struct/conflict``: the file is another
    /// writer's.
    case conflict(Conflict)
  }

  /// Why a file at the path is another writer's.
  enum Conflict: Equatable {
    /// The ledger expected no file: a file that the store's managers never loaded nor wrote
    /// is there.
    case unseenFile
    /// Another file has replaced the one the store's managers last loaded or wrote.
    case replacedSinceSeen
  }

  let state = _Protected(State())

  private init() {}

  /// The ledger of `store`'s managers of the snapshot at `path` (a standardized path), made
  /// the first time and kept for as long as the store lives.
  ///
  /// - Complexity: O(*l*), *l* being the number of ledgers of the process, whose entries for
  ///   released stores are dropped here.
  static func ledger(for store: some AnyObject & Sendable, path: String) -> _SnapshotLedger {
    let key = Key(path: path, store: ObjectIdentifier(store))
    return ledgers.withLock { ledgers in
      // The identifier of a released store may be a new store's: the weak reference tells.
      if let entry = ledgers[key], entry.store === store { return entry.ledger }
      ledgers = ledgers.filter { $0.value.store != nil }
      let ledger = _SnapshotLedger()
      ledgers[key] = Entry(store: store, ledger: ledger)
      return ledger
    }
  }

  private struct Key: Hashable {
    var path: String
    var store: ObjectIdentifier
  }

  private final class Entry: Sendable {
    /// Weak: the registry does not keep a store alive.
    weak let store: (any AnyObject & Sendable)?
    let ledger: _SnapshotLedger

    init(store: any AnyObject & Sendable, ledger: _SnapshotLedger) {
      self.store = store
      self.ledger = ledger
    }
  }

  /// Every ledger of the process, by path and store.
  private static let ledgers = _Protected<[Key: Entry]>([:])
}
