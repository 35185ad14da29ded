import Observation
import Synchronization

/// What a store's tracked reads register with the Observation framework: one subject per
/// store, and key paths that name what a read depended on.
///
/// A key is named by a bucket of its hash (``_ReadObservers/bucketCount`` of them, each with
/// a key path made once per process, see ``_BucketPaths``), not by a key path to the key
/// itself: making one costs about a microsecond, and comparing two hashes their arguments.
/// Two keys in one bucket notify each other's observers: a change that is not one, which
/// Observation allows (an observer re-reads and finds nothing new). Two more buckets name the
/// whole store's membership and contents (``_ReadObservers/membership``,
/// ``_ReadObservers/contents``).
final class _ObservedSubject: Observable, Sendable {
  /// Where observers of this subject are registered.
  let registrar = ObservationRegistrar()

  /// A bucket, named by key paths with the bucket as argument. Never read.
  subscript(bucket bucket: Int) -> Int { bucket }
}
