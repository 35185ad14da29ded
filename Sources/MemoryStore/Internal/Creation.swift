#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Bionic)
  import Bionic
#endif

/// One value being created by `MemoryStore.value(forKey:orInsert:)`.
///
/// The creating thread holds ``lock`` from before the creation becomes visible to other
/// threads until ``outcome`` is set, so other callers for the same key wait by taking the lock.
@usableFromInline
final class _Creation<Value> {
  @usableFromInline let lock = _Lock()
  @usableFromInline let owner: pthread_t = pthread_self()
  /// The stored value, or `nil` if `makeValue` threw. Written by the creating thread while it
  /// holds ``lock``; read by waiters only while they hold it.
  @usableFromInline var outcome: Value?

  @usableFromInline init() {}

  /// Whether the calling thread is the one creating the value.
  @usableFromInline var isOwnedByCurrentThread: Bool {
    pthread_equal(owner, pthread_self()) != 0
  }

  deinit { lock.deallocate() }
}

// Safe: `outcome` is only accessed under `lock` (see above); the other properties are
// immutable.
extension _Creation: @unchecked Sendable where Value: Sendable {}
