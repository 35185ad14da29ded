import Foundation
import MemoryStoreKit
import Testing

@Suite("Entry terms and statistics since a moment") struct EntryTermsAndStatisticsTests {
  @Test func anEntryReportsItsAgeOnceTheStoreKeepsWriteTimes() {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store["before"] = 1
    // Without write times, no age: the terms of an entry without metadata say nothing.
    #expect(store.terms(forKey: "before")?.age == nil)
    scheduler.advance(by: .seconds(5))
    store.keepWriteTimes()
    store["after"] = 2
    scheduler.advance(by: .seconds(3))
    // Written before the store kept write times: counted from the call.
    #expect(store.terms(forKey: "before")?.age == .seconds(3))
    #expect(store.terms(forKey: "after")?.age == .seconds(3))
    store["after"] = 3
    scheduler.advance(by: .seconds(1))
    // A rewrite starts the age again; the other entry keeps aging.
    #expect(store.terms(forKey: "after")?.age == .seconds(1))
    #expect(store.terms(forKey: "before")?.age == .seconds(4))
    // A second call changes nothing.
    store.keepWriteTimes()
    #expect(store.terms(forKey: "before")?.age == .seconds(4))
    #expect(store.terms(forKey: "missing") == nil)
  }

  @Test func theAgeSitsBesideTheTimesLeft() {
    let scheduler = ManualScheduler()
    let store = MemoryStore<String, Int>(scheduler: scheduler)
    store.keepWriteTimes()
    store.timeToIdle = .seconds(60)
    store.setValue(1, forKey: "session", cost: 2, timeToLive: .seconds(100))
    scheduler.advance(by: .seconds(10))
    let terms = store.terms(forKey: "session")
    #expect(terms?.cost == 2)
    #expect(terms?.timeToLive == .seconds(90))
    #expect(terms?.timeToIdle == .seconds(50))
    #expect(terms?.age == .seconds(10))
    // Expired: no terms at all.
    scheduler.advance(by: .seconds(50))
    #expect(store.terms(forKey: "session") == nil)
  }

  @Test func statisticsSinceAMomentCountOnlyWhatHappenedAfterIt() {
    let store = MemoryStore<Int, Int>()
    for key in 0..<6 { store[key] = key }
    _ = store[0]
    _ = store[100]
    store.countLimit = 5
    let before = store.statistics
    #expect(before.hits == 1 && before.misses == 1)
    #expect(before.evictions[.countLimit] == 1)
    // Three keys still there (which one the limit evicted is the policy's choice);
    // `contains` is not a lookup.
    let present = (0..<6).filter { store.contains($0) }
    #expect(present.count == 5)
    for key in present.prefix(3) { #expect(store[key] != nil) }
    _ = store[200]
    store.countLimit = 3
    let now = store.statistics
    let since = now.since(before)
    #expect(since.hits == 3)
    #expect(since.misses == 1)
    #expect(since.evictions[.countLimit] == 2)
    #expect(since.evictions.total == 2)
    #expect(since.hitRate == 0.75)
    // The state is now's, not a difference.
    #expect(since.count == 3)
    #expect(since.count == now.count)
    // Taken the wrong way round, every counter stays at 0.
    let backwards = before.since(now)
    #expect(backwards.hits == 0 && backwards.misses == 0 && backwards.evictions.total == 0)
  }

  @Test func removalsIsAPropertyAndItsBoundIsChosenByTheMethod() async {
    let store = MemoryStore<String, Int>()
    var all = store.removals.makeAsyncIterator()
    var bounded = store.removals(bufferingNewest: 1).makeAsyncIterator()
    store["a"] = 1
    store["a"] = nil
    store["b"] = 2
    store["b"] = nil
    await store.flush()
    #expect(await all.next()?.key == "a")
    #expect(await all.next()?.key == "b")
    // A bound of 1 keeps only the newest removal.
    #expect(await bounded.next()?.key == "b")
  }
}
