import Foundation
import MemoryStoreKit
import Synchronization
import Testing

@testable import MemoryStorePostgres

/// Three instances under a mixed workload for 30 seconds, with the server killed and
/// restarted in the middle, and a checker of the staleness bound.
@Suite("PostgresSync: mixed workload") struct MixedWorkloadTests {
  /// The bound the checker holds reads to: a read that starts this long after a newer write
  /// was confirmed committed must not return the older value. The sync's promise is the
  /// delivery of one notification; the margin absorbs a loaded test machine.
  static let bound: Duration = .seconds(1)

  /// How long the workload runs.
  static var seconds: Int {
    ProcessInfo.processInfo.environment["MEMORYSTORE_SOAK_SECONDS"].flatMap { Int($0) } ?? 30
  }

  /// Each instance writes keys of its own (so that each key's values only grow) and reads
  /// everyone's through the sync; a task per instance confirms its writes with
  /// `publishPending()`. The ledger keeps, for every key, each value written and when it was
  /// known committed.
  final class Ledger: Sendable {
    struct Write {
      var value: Int
      var confirmedAt: ContinuousClock.Instant?
    }

    let writes = Locked<[String: [Write]]>([:])
    let violations = Locked<[String]>([])
    let worstStaleness = Locked<Duration>(.zero)
    let reads = Atomic<Int>(0)
    let failedReads = Atomic<Int>(0)

    func wrote(_ key: String, _ value: Int) {
      writes.withLock { $0[key, default: []].append(Write(value: value)) }
    }

    /// Marks every write made before `instant` by `owner` confirmed at `confirmedAt`.
    func confirm(
      owner: Int, writtenBefore count: [String: Int], at confirmedAt: ContinuousClock.Instant
    ) {
      writes.withLock { writes in
        for (key, written) in count {
          guard var list = writes[key] else { continue }
          for index in list.indices.prefix(written) where list[index].confirmedAt == nil {
            list[index].confirmedAt = confirmedAt
          }
          writes[key] = list
        }
      }
    }

    func writtenCounts(ownedBy owner: Int) -> [String: Int] {
      writes.withLock { writes in
        writes.filter { $0.key.hasPrefix("i\(owner)-") }.mapValues(\.count)
      }
    }

    /// Checks a read of `key` that started at `start` and returned `value` (0: absent).
    func check(
      _ key: String, returned value: Int, startedAt start: ContinuousClock.Instant, on instance: Int
    ) {
      reads.add(1, ordering: .relaxed)
      let newer = writes.withLock { writes in
        (writes[key] ?? []).filter { $0.value > value }.compactMap(\.confirmedAt).min()
      }
      guard let newer, newer < start else { return }
      let staleness = start - newer
      worstStaleness.withLock { $0 = max($0, staleness) }
      if staleness > MixedWorkloadTests.bound {
        violations.withLock {
          $0.append(
            "instance \(instance) read \(key) = \(value) \(staleness) after a newer write was committed"
          )
        }
      }
    }
  }

  /// Runs for 30 seconds, or for `MEMORYSTORE_SOAK_SECONDS` when set (0 skips it).
  @Test(
    .timeLimit(.minutes(3)),
    .enabled(if: MixedWorkloadTests.seconds > 0, "MEMORYSTORE_SOAK_SECONDS is 0"))
  func threeInstancesStayWithinTheBoundThroughAServerCrash() async throws {
    try await TestDatabase.withExclusiveServer { database in
      try await withInstances(3, database: database) { instances in
        let ledger = Ledger()
        let start = ContinuousClock.now
        let duration: Duration = .seconds(Self.seconds)
        let keysPerInstance = 20
        try await withThrowingTaskGroup(of: Void.self) { group in
          for (index, instance) in instances.enumerated() {
            // The workload: 1 write in 5, the rest reads of anyone's keys.
            group.addTask {
              var random = SystemRandomNumberGenerator()
              var counters = [Int](repeating: 0, count: keysPerInstance)
              while ContinuousClock.now - start < duration {
                if Int.random(in: 0..<5, using: &random) == 0 {
                  let slot = Int.random(in: 0..<keysPerInstance, using: &random)
                  counters[slot] += 1
                  let key = "i\(index)-\(slot)"
                  // In the store before in the ledger: a confirmation that counts a write
                  // comes after the write, so publishPending() covers it.
                  instance.store[key] = counters[slot]
                  ledger.wrote(key, counters[slot])
                } else {
                  let owner = Int.random(in: 0..<instances.count, using: &random)
                  let key = "i\(owner)-\(Int.random(in: 0..<keysPerInstance, using: &random))"
                  let readStart = ContinuousClock.now
                  do {
                    let value = try await instance.sync.value(forKey: key) ?? 0
                    ledger.check(key, returned: value, startedAt: readStart, on: index)
                  } catch {
                    ledger.failedReads.add(1, ordering: .relaxed)
                  }
                }
                await Task.yield()
              }
            }
            // The confirmations of this instance's writes.
            group.addTask {
              while ContinuousClock.now - start < duration + .seconds(2) {
                let counts = ledger.writtenCounts(ownedBy: index)
                do {
                  try await instance.sync.publishPending(timeout: .seconds(5))
                  ledger.confirm(owner: index, writtenBefore: counts, at: .now)
                } catch {}
                try await Task.sleep(for: .milliseconds(20))
              }
            }
          }
          // The crash, in the middle.
          group.addTask {
            try await Task.sleep(until: start + duration * 0.4)
            trace("kill")
            try await database.kill()
            try await Task.sleep(for: .seconds(3))
            trace("restart")
            try await database.restart()
            trace("restarted")
          }
          try await group.waitForAll()
        }
        trace("workload done")
        // Everything confirmed, every instance agrees with the table on every key.
        for instance in instances { try await instance.sync.publishPending(timeout: .seconds(30)) }
        trace("confirmed")
        for instance in instances {
          try await eventually("listening again") { instance.sync.isListening }
        }
        trace("listening")
        let finalValues = ledger.writes.withLock { $0.mapValues { $0.last?.value ?? 0 } }
        for instance in instances {
          for (key, value) in finalValues {
            try await eventually("\(key) converged") {
              instance.store[key] == nil || instance.store[key] == value
            }
            #expect(try await instance.sync.value(forKey: key) == value, "\(key)")
          }
        }
        trace("converged")
        let violations = ledger.violations.withLock { $0 }
        #expect(violations.isEmpty, "\(violations.prefix(10))")
        let reads = ledger.reads.load(ordering: .relaxed)
        #expect(reads > 1_000, "the workload ran")
        print(
          "mixed workload: \(reads) reads checked, \(ledger.failedReads.load(ordering: .relaxed)) "
            + "failed during the outage, worst staleness \(ledger.worstStaleness.withLock { $0 }) "
            + "(bound \(Self.bound)); flushes: \(instances.map { $0.sync.statistics.flushes })")
      }
    }
  }
}

/// A line on the standard error, unbuffered, for following a long test.
func trace(_ line: String) {
  FileHandle.standardError.write(Data("[mixed workload] \(line)\n".utf8))
}
