import MemoryStoreKit

/// The value of the `store` dimension of metrics and of the `memorystore.store` metadata of
/// logs.
enum StoreLabel {
  /// The store's name, or `store` for a store created without one.
  static func name<Key, Value>(of store: MemoryStore<Key, Value>) -> String {
    store.name ?? "store"
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
