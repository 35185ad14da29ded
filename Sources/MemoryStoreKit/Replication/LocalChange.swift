/// A change that a write of this store's API made, as a ``LocalChangeFeed`` hands it over: what
/// another instance must hear of to stay coherent with this one.
///
/// Only writes are local changes: the subscript, ``MemoryStore/updateValue(_:forKey:)``,
/// ``MemoryStore/setValue(_:forKey:cost:timeToLive:)``, ``MemoryStore/removeValue(forKey:)``,
/// ``MemoryStore/addEntries(_:)``, ``MemoryStore/removeValues(forKeys:)``,
/// ``MemoryStore/removeAll()``, the read-modify-writes and `removeAll(where:)`. A removal is
/// reported even when the key was absent or had expired here, and a clear even of an empty
/// store: another instance may hold what this one does not. What the store does on its own
/// (evictions, expiries), what it copies from a source (get-or-create, get-or-load, refresh,
/// ``PersistenceManager/load()``) and what an invalidation drops are not local changes.
///
/// ```swift
/// for await changes in feed {
///   for change in changes {
///     switch change {
///     case .updated(let key, let value): publish(key, value)
///     case .removed(let key): publish(key, nil)
///     case .cleared: publishClear()
///     }
///   }
/// }
/// ```
public enum LocalChange<Key, Value> {
  /// The write stored `value` for the key.
  case updated(Key, Value)
  /// The write removed the key (it may have been absent here).
  case removed(Key)
  /// ``MemoryStore/removeAll()`` emptied the store.
  case cleared

  /// The key the change is about; `nil` for ``cleared``.
  public var key: Key? {
    switch self {
    case .updated(let key, _), .removed(let key): key
    case .cleared: nil
    }
  }
}

extension LocalChange: Sendable where Key: Sendable, Value: Sendable {}
extension LocalChange: Equatable where Key: Equatable, Value: Equatable {}
extension LocalChange: Hashable where Key: Hashable, Value: Hashable {}

extension LocalChange: CustomStringConvertible, CustomDebugStringConvertible {
  /// The change as it is written in Swift: `.updated("a", 1)`, `.removed("b")`, `.cleared`.
  public var description: String {
    switch self {
    case .updated(let key, let value):
      ".updated(\(String(reflecting: key)), \(String(reflecting: value)))"
    case .removed(let key): ".removed(\(String(reflecting: key)))"
    case .cleared: ".cleared"
    }
  }

  public var debugDescription: String { description }
}
