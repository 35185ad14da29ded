import Dispatch
import Foundation

extension MemoryStore {
  /// Posted for every change batch when ``notificationCenter`` is set; `object` is the store.
  ///
  /// `userInfo` always holds both ``updatedItemsKey`` (a `[Key: Value]`, possibly empty) and
  /// ``removedKeysKey`` (a `Set<Key>`, possibly empty), as YMCache's
  /// `kYFCacheDidChangeNotification` did, plus ``changeBatchKey`` with the typed batch.
  public static var didChangeNotification: Notification.Name {
    Notification.Name("MemoryStoreDidChangeNotification")
  }

  /// The `userInfo` key of the keys added or replaced, with their latest values:
  /// a `[Key: Value]`.
  public static var updatedItemsKey: String { "MemoryStoreUpdatedItems" }

  /// The `userInfo` key of the keys removed: a `Set<Key>`.
  public static var removedKeysKey: String { "MemoryStoreRemovedKeys" }

  /// The `userInfo` key of the whole batch: a ``ChangeBatch``.
  public static var changeBatchKey: String { "MemoryStoreChangeBatch" }

  /// The notification center that receives ``didChangeNotification`` for every change batch;
  /// `nil` (the default) posts nothing.
  ///
  /// ```swift
  /// store.notificationCenter = .default
  /// let token = NotificationCenter.default.addObserver(
  ///   forName: MemoryStore<String, Double>.didChangeNotification, object: store, queue: nil
  /// ) { note in
  ///   let updated = note.userInfo?[MemoryStore<String, Double>.updatedItemsKey]
  ///     as? [String: Double]
  /// }
  /// ```
  ///
  /// Notifications are posted serially, in batch order, from a background queue of the
  /// store's, so no main run loop is needed (on Linux either); observers that need the main
  /// thread pass a `queue` when they register. Observers may read and write the store.
  /// ``flush()`` returns after the notification for what it published is posted.
  /// Batches published while the store is being freed are not posted, since the
  /// notification's object would be gone.
  ///
  /// Thread-safe.
  public var notificationCenter: NotificationCenter? {
    get {
      _hub.notificationCenter.withLock { $0?.center as? NotificationCenter }
    }
    set {
      let subscription = newValue.map { center in
        // The store is held weakly: posting must not keep it alive.
        observe(on: nil) { [weak self] batch in
          guard let self else { return }
          center.post(
            name: Self.didChangeNotification, object: self,
            userInfo: [
              Self.updatedItemsKey: batch.updated,
              Self.removedKeysKey: batch.removed,
              Self.changeBatchKey: batch,
            ])
        }
      }
      let replaced = _hub.notificationCenter.withLock { poster in
        let replaced = poster
        if let newValue, let subscription {
          poster = (center: newValue, subscription: subscription)
        } else {
          poster = nil
        }
        return replaced
      }
      replaced?.subscription.cancel()
    }
  }
}
