import Dispatch
import Synchronization

/// An entry that left a store, or whose value a write replaced: what
/// ``MemoryStore/removals`` delivers.
public struct Removal<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// The entry's key.
  public let key: Key
  /// The value that left the store (for ``RemovalCause/replaced``, the value replaced).
  public let value: Value
  /// Why it left.
  public let cause: RemovalCause

  @usableFromInline
  init(key: Key, value: Value, cause: RemovalCause) {
    self.key = key
    self.value = value
    self.cause = cause
  }
}

extension Removal: Equatable where Value: Equatable {}
