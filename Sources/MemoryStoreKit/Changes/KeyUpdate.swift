/// One key's value at a point of a store's history: what ``MemoryStore/updates(of:)`` yields.
///
/// ```swift
/// for await update in quotes.updates(of: "AAPL") {
///   if let price = update.value { render(price) } else { renderAbsent() }
/// }
/// ```
///
/// A value type: thread-safe to share.
public struct KeyUpdate<Key: Hashable & Sendable, Value: Sendable>: Sendable {
  /// The key watched.
  public let key: Key
  /// The key's value; `nil` while the key is absent.
  public let value: Value?

  /// Creates an update of `key` to `value` (`nil`: absent).
  public init(key: Key, value: Value?) {
    self.key = key
    self.value = value
  }

  /// Whether the key has a value.
  public var isPresent: Bool { value != nil }
}

extension KeyUpdate: Equatable where Value: Equatable {}
extension KeyUpdate: Hashable where Value: Hashable {}
