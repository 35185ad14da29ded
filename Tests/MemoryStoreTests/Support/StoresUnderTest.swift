import MemoryStoreKit

/// The operations the concurrent workloads perform, so that deliberately broken stores can
/// stand in for `MemoryStore` and show that the workloads catch what they claim to catch.
protocol StoreUnderTest: AnyObject, Sendable {
  /// The value for `key`, or `nil`.
  func read(_ key: Int) -> Int?
  /// Stores `value` for `key`; `nil` removes the key.
  func write(_ key: Int, _ value: Int?)
  /// Stores `value` for `key` (`nil` removes it) and returns the value it replaced.
  func exchange(_ key: Int, _ value: Int?) -> Int?
  /// Stores every entry as one atomic write.
  func addEntries(_ entries: [Int: Int])
  /// Reads several keys at one point in time; absent keys are left out.
  func readMany(_ keys: [Int]) -> [Int: Int]
  /// Runs `body` while a read of this thread stays parked inside the store, as a reader
  /// preempted in the middle of a read would. Stores without that notion just run `body`.
  func withParkedReader(_ body: () -> Void)
}

extension StoreUnderTest {
  func withParkedReader(_ body: () -> Void) { body() }
}

/// A store with a read-modify-write and a membership test.
protocol UpdatingStoreUnderTest: StoreUnderTest {
  /// Reads `key` and stores `transform` of what it read (`nil` removes), as one step; returns
  /// what the committed step read and stored.
  func update(_ key: Int, _ transform: (Int?) -> Int?) -> (old: Int?, new: Int?)
  /// Whether `key` is present.
  func contains(_ key: Int) -> Bool
  /// Renews `key`'s entry without changing its value; returns whether it was present.
  func touch(_ key: Int) -> Bool
}

/// A store with the batch operations and whole-store reads.
protocol BatchStoreUnderTest: StoreUnderTest {
  /// Removes every key in `keys` as one atomic write.
  func removeMany(_ keys: [Int])
  /// Removes every entry as one atomic write.
  func removeAll()
  /// A snapshot of every entry.
  var allItems: [Int: Int] { get }
  /// The number of entries.
  var count: Int { get }
}

extension MemoryStore: StoreUnderTest, BatchStoreUnderTest where Key == Int, Value == Int {
  func read(_ key: Int) -> Int? { self[key] }

  func write(_ key: Int, _ value: Int?) { self[key] = value }

  func exchange(_ key: Int, _ value: Int?) -> Int? {
    if let value { updateValue(value, forKey: key) } else { removeValue(forKey: key) }
  }

  func readMany(_ keys: [Int]) -> [Int: Int] { values(forKeys: keys) }

  func removeMany(_ keys: [Int]) { removeValues(forKeys: keys) }

  func withParkedReader(_ body: () -> Void) { _withReaderParked(body) }
}

extension MemoryStore: UpdatingStoreUnderTest where Key == Int, Value == Int {
  func touch(_ key: Int) -> Bool { touch(key, timeToLive: .seconds(3_600)) }

  func update(_ key: Int, _ transform: (Int?) -> Int?) -> (old: Int?, new: Int?) {
    update(forKey: key) { value in
      let old = value
      value = transform(old)
      return (old, value)
    }
  }
}
