import MemoryStoreKit
import Testing

/// Invalidations: what another instance's changes, or a lost link to them, do to this store.
@Suite("Invalidation") struct InvalidationTests {
  /// A load that signals when it starts and returns what the test releases it with.
  struct GatedLoad: Sendable {
    let started: AsyncStream<Void>
    private let startedContinuation: AsyncStream<Void>.Continuation
    private let releases: AsyncStream<Int>
    private let releaseContinuation: AsyncStream<Int>.Continuation

    init() {
      (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
      (releases, releaseContinuation) = AsyncStream.makeStream(of: Int.self)
    }

    func run() async -> Int {
      startedContinuation.yield()
      for await value in releases { return value }
      return -1
    }

    func waitUntilStarted() async {
      for await _ in started { return }
    }

    func release(_ value: Int) { releaseContinuation.yield(value) }
  }

  @Test func invalidatingDropsTheKeysWithTheirOwnReason() async throws {
    let observed = ObservedStore<String, Int>()
    let store = observed.store
    store.addEntries(["a": 1, "b": 2, "c": 3])
    _ = await observed.flushedBatches()
    var removals = store.removals.makeAsyncIterator()
    #expect(store.invalidateValues(forKeys: ["a", "b", "absent"]) == 2)
    #expect(store.allItems == ["c": 3])
    let batches = await observed.flushedBatches()
    let batch = try #require(batches.last)
    #expect(batch.removed == ["a", "b"])
    #expect(batch.reason(forKey: "a") == .invalidated)
    let first = await removals.next()
    let second = await removals.next()
    #expect(first?.cause == .invalidated && second?.cause == .invalidated)
    #expect(Set([first?.key, second?.key]) == ["a", "b"])
  }

  @Test func invalidatingEverythingEmptiesTheStoreAsOneWrite() async throws {
    let observed = ObservedStore<String, Int>()
    let store = observed.store
    store.addEntries(["a": 1, "b": 2])
    _ = await observed.flushedBatches()
    #expect(store.invalidateAll() == 2)
    #expect(store.isEmpty)
    let batch = try #require(await observed.flushedBatches().last)
    #expect(batch.removed == ["a", "b"])
    #expect(batch.reason(forKey: "b") == .invalidated)
    #expect(store.statistics.evictions.total == 0, "an invalidation is not an eviction")
  }

  @Test func localChangesNotYetTakenAndKeptKeysSurvive() {
    let store = MemoryStore<String, Int>()
    store.addEntries(["a": 1, "b": 2, "c": 3, "d": 4])
    let feed = store.openLocalChangeFeed()
    store["a"] = 10  // a local change on its way to the others
    #expect(store.invalidateValues(forKeys: ["a", "b", "c"], except: ["c"]) == 1)
    #expect(store.allItems == ["a": 10, "c": 3, "d": 4])
    #expect(store.invalidateAll(except: ["d"]) == 1)
    #expect(store.allItems == ["a": 10, "d": 4])
    #expect(feed.take() == [.updated("a", 10)])
    #expect(store.invalidateAll() == 2, "once taken, a local change is no longer kept")
    #expect(store.isEmpty)
  }

  @Test func invalidatingEverythingWithKeptKeysWorksInChunks() {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 10_000
    for key in 0..<5_000 { store[key] = key }
    #expect(store.invalidateAll(except: [7, 4_999]) == 4_998)
    #expect(store.allItems == [7: 7, 4_999: 4_999])
  }

  @Test func aLoadThatAnInvalidationOvertakesDoesNotStore() async throws {
    let store = MemoryStore<String, Int>()
    let load = GatedLoad()
    let caller = Task { try await store.value(forKey: "k") { await load.run() } }
    await load.waitUntilStarted()
    store.invalidateValues(forKeys: ["k"])
    load.release(1)
    #expect(try await caller.value == 1, "the caller gets what was loaded")
    #expect(store["k"] == nil, "the store does not keep a value read before the change")
    // A load that starts after the invalidation stores what it loads.
    #expect(try await store.value(forKey: "k") { 2 } == 2)
    #expect(store["k"] == 2)
  }

  @Test func aLoadThatAnInvalidationOfOtherKeysOvertakesStores() async throws {
    let store = MemoryStore<String, Int>()
    let load = GatedLoad()
    let caller = Task { try await store.value(forKey: "k") { await load.run() } }
    await load.waitUntilStarted()
    store.invalidateValues(forKeys: ["other"])
    load.release(1)
    #expect(try await caller.value == 1)
    #expect(store["k"] == 1)
  }

  @Test func aFlushOvertakesEveryLoadInFlight() async throws {
    let store = MemoryStore<String, Int>()
    let single = GatedLoad()
    let bulk = GatedLoad()
    let singleCaller = Task { try await store.value(forKey: "k") { await single.run() } }
    let bulkCaller = Task {
      try await store.values(forKeys: ["x", "y"]) { keys in
        let value = await bulk.run()
        return Dictionary(uniqueKeysWithValues: keys.map { ($0, value) })
      }
    }
    await single.waitUntilStarted()
    await bulk.waitUntilStarted()
    store.invalidateAll()
    single.release(1)
    bulk.release(2)
    #expect(try await singleCaller.value == 1)
    #expect(try await bulkCaller.value == ["x": 2, "y": 2])
    #expect(store.isEmpty)
  }

  @Test func aCreationThatAnInvalidationOvertakesDoesNotStore() {
    let store = MemoryStore<String, Int>()
    // makeValue runs outside every lock and may use the store.
    let value = store.valueOrInsert(forKey: "k") {
      store.invalidateValues(forKeys: ["k"])
      return 1
    }
    #expect(value == 1)
    #expect(store["k"] == nil)
    #expect(store.valueOrInsert(forKey: "k") { 2 } == 2)
    #expect(store["k"] == 2)
  }

  @Test func aCopyReadAfterAMarkIsStoredUnlessAnInvalidationOvertookIt() {
    let store = MemoryStore<String, Int>()
    let feed = store.openLocalChangeFeed()
    let mark = store.loadMark()
    store.invalidateValues(forKeys: ["stale"])
    #expect(!store.insertLoaded(1, forKey: "stale", after: mark))
    #expect(store["stale"] == nil)
    let stored = store.insertLoaded(2, forKey: "fresh", cost: 3, after: mark)
    #expect(stored)
    #expect(store["fresh"] == 2)
    let cost: Int? = store.terms(forKey: "fresh")?.cost
    #expect(cost == 3)
    store["local"] = 4
    let replaced = store.insertLoaded(5, forKey: "local", after: store.loadMark())
    #expect(!replaced, "a held value wins")
    #expect(store["local"] == 4)
    #expect(store.insertLoaded(6, forKey: "stale", after: store.loadMark()))
    #expect(feed.take() == [.updated("local", 4)], "copies are not local changes")
  }

  /// A removal by a write is as new as an invalidation: a get-or-create or a load that read
  /// its source before the key was removed returns what it read but does not store it.
  @Test func aRemovalDuringACreationOrALoadKeepsItsValueOut() async throws {
    for limited in [false, true] {
      let store = MemoryStore<String, Int>()
      if limited { store.countLimit = 100 }
      let created = store.valueOrInsert(forKey: "k") {
        store["k"] = nil  // the source changed: the key is removed meanwhile
        return 1
      }
      #expect(created == 1)
      #expect(store["k"] == nil, "limited: \(limited)")
      let loaded = try await store.value(forKey: "l") { () async throws -> Int in
        store.removeValue(forKey: "l")
        return 2
      }
      #expect(loaded == 2)
      #expect(store["l"] == nil, "limited: \(limited)")
      let cleared = store.valueOrInsert(forKey: "m") {
        store.removeAll()
        return 3
      }
      #expect(cleared == 3)
      #expect(store["m"] == nil, "limited: \(limited)")
      // With no removal meanwhile, what is made is stored.
      #expect(store.valueOrInsert(forKey: "n") { 4 } == 4)
      #expect(store["n"] == 4)
    }
  }

  @Test func aWriteAfterAnInvalidationIsKept() {
    let store = MemoryStore<String, Int>()
    store["k"] = 1
    store.invalidateValues(forKeys: ["k"])
    store["k"] = 2
    #expect(store["k"] == 2)
  }

  /// A source of truth shared by "instances", and a store kept coherent with it on four
  /// threads: local writes change the source and the store together, remote writes change the
  /// source and then invalidate the key (as a message arrives after its commit), creations
  /// read the source, and now and then the link is "lost" (everything invalidated). Once all
  /// is quiet, every entry the store holds is the source's value: no load that read the
  /// source before a remote write stored its value after that write's invalidation.
  @Test func aStoreKeptByInvalidationsAgreesWithItsSource() throws {
    let store = MemoryStore<Int, Int>()
    store.countLimit = 500
    let source = Locked<[Int: Int]>([:])
    let finished = runOnThreads(4) { thread in
      var random = SplitMix64(seed: UInt64(thread))
      for step in 0..<4_000 {
        let key = random.below(1_000)
        let value = thread * 1_000_000 + step
        switch random.below(5) {
        case 0:
          source.withLock { source in
            source[key] = value
            store[key] = value
          }
        case 1:
          source.withLock { $0[key] = value }
          store.invalidateValues(forKeys: [key])
        case 2:
          _ = store.valueOrInsert(forKey: key) { source.withLock { $0[key] } ?? -1 }
        case 3:
          if step % 1_000 == 0 { store.invalidateAll() } else { _ = store[key] }
        default:
          source.withLock { source in
            source[key] = nil
            store[key] = nil
          }
        }
      }
      return true
    }
    try #require(finished != nil)
    #expect(store.count <= 500)
    let truth = source.value
    for (key, value) in store.allItems {
      #expect(value == truth[key] ?? -1, "key \(key) holds a stale value")
    }
  }
}

/// `terms(forKey:)`: an entry's cost and the times it has left, without using it.
@Suite("Entry terms") struct EntryTermsTests {
  @Test func termsGiveTheCostAndTheTimesLeft() {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store["plain"] = 1
    let plain: EntryTerms? = store.terms(forKey: "plain")
    #expect(plain == EntryTerms())
    let absent: EntryTerms? = store.terms(forKey: "absent")
    #expect(absent == nil)
    store.setValue(2, forKey: "timed", cost: 3, timeToLive: .seconds(10))
    let timed: EntryTerms? = store.terms(forKey: "timed")
    #expect(timed == EntryTerms(cost: 3, timeToLive: Duration.seconds(10)))
    scheduler.advance(by: .seconds(4))
    let later: Duration? = store.terms(forKey: "timed")?.timeToLive
    #expect(later == Duration.seconds(6))
    store.timeToIdle = .seconds(5)
    store["idle"] = 4
    let idle: Duration? = store.terms(forKey: "idle")?.timeToIdle
    #expect(idle == Duration.seconds(5))
    scheduler.advance(by: .seconds(2))
    let idleLater: Duration? = store.terms(forKey: "idle")?.timeToIdle
    #expect(idleLater == Duration.seconds(3), "a look is not a read")
    scheduler.advance(by: .seconds(10))
    let expired: EntryTerms? = store.terms(forKey: "timed")
    #expect(expired == nil, "an expired entry has no terms")
    let statistics = store.statistics
    #expect(statistics.hits == 0)
    #expect(statistics.misses == 0)
  }
}
