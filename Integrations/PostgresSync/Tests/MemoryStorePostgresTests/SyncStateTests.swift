import Foundation
import MemoryStoreKit
import Testing

@testable import MemoryStorePostgres

/// The sync's bookkeeping of local changes, without a server.
@Suite("PostgresSync: pending changes") struct SyncStateTests {
  /// What `key` has pending: its value, "removed", or `nil` for nothing.
  static func pending(_ state: SyncState<String, Int>, _ key: String) -> String? {
    switch state.pending.keys[key] {
    case .set(let value): "\(value)"
    case .remove: "removed"
    case nil: nil
    }
  }

  /// A state that adds changes as the sync's public initialiser has it add them.
  static func state() -> SyncState<String, Int> {
    SyncState(origin: UUID(), coalescing: { changes, pending in pending.add(changes) })
  }

  @Test func eachKeyKeepsItsLatestChangeAndAClearDropsTheChangesBeforeIt() {
    var state = Self.state()
    state.add([.updated("a", 1), .removed("b"), .updated("a", 2), .updated("c", 3)])
    #expect(Self.pending(state, "a") == "2")
    #expect(Self.pending(state, "b") == "removed")
    #expect(Self.pending(state, "c") == "3")
    #expect(!state.pending.clears)

    state.add([.removed("c"), .cleared, .updated("d", 4)])
    #expect(state.pending.clears)
    #expect(state.pending.keys.count == 1)
    #expect(Self.pending(state, "d") == "4")
    #expect(state.taken == 7)
  }

  @Test func anInvalidationKeepsTheKeysOfItsOwnThatArePendingOrInFlight() {
    var state = Self.state()
    state.add([.updated("flying", 1), .removed("gone")])
    #expect(state.beginBatch(maximumKeys: 100) != nil)
    state.add([.updated("pending", 2), .updated("other", 3)])
    let message = ["flying", "gone", "pending", "elsewhere"]
    #expect(state.keysToKeep(among: message) == ["flying", "gone", "pending"])
    #expect(state.keysToKeep(among: message) == state.keysToKeep.intersection(message))
    #expect(state.keysToKeep(among: []).isEmpty)
  }

  @Test func theSyncAddsTheFeedsChangesAsTheyWereMade() throws {
    let store = MemoryStore<String, Int>(name: "pending")
    let sync = try PostgresSync(
      store: store, endpoint: PostgresEndpoint(url: "postgres://nobody@127.0.0.1:1/none"),
      configuration: .init(channel: "pending_changes"))
    store["a"] = 1
    store["b"] = 2
    store["a"] = nil
    store.removeAll()
    store["c"] = 3
    store["c"] = 4
    sync.state.withLock { $0.add(sync.feed.take()) }
    let state = sync.state.withLock { $0 }
    #expect(state.pending.clears)
    #expect(state.pending.keys.count == 1)
    #expect(Self.pending(state, "c") == "4")
    #expect(state.taken == 6)
  }
}
