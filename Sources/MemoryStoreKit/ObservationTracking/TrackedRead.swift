import Observation
import Synchronization

/// What a tracked read depended on.
@usableFromInline
enum _TrackedRead {
  /// The value of the key with this hash: a subscript read, ``MemoryStore/values(forKeys:)``.
  case value(hash: Int)
  /// Whether the key with this hash is present: ``MemoryStore/contains(_:)``.
  case presence(hash: Int)
  /// Which keys are present: ``MemoryStore/count``, ``MemoryStore/isEmpty``,
  /// ``MemoryStore/keys``.
  case membership
  /// Every entry: ``MemoryStore/values``, ``MemoryStore/allItems``.
  case contents
}
