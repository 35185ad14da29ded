// Eviction: a decider run by purges, count and cost limits, time to live, memory pressure, each
// removal in a change batch with its reason, and statistics. A ManualScheduler moves time.
//
//     swift run -c release Eviction

import MemoryStoreKit
import Synchronization

let clock = ManualScheduler()  // the time of every store below; advance(by:) moves it
let removals = Mutex<[String]>([])

/// Turns batches on for `store` and records the keys they report removed, with the reason.
func watch<Value: Sendable>(_ store: MemoryStore<String, Value>) -> Subscription {
  store.notificationInterval = .seconds(1)
  return store.observe { batch in  // `!`: every key in `removed` has a reason
    let lines = batch.removed.sorted().map { "\($0) (\(batch.reason(forKey: $0)!))" }
    removals.withLock { $0 += lines }
  }
}

func printRemovals<Value: Sendable>(_ store: MemoryStore<String, Value>) async {
  await store.flush()  // publishes now; returns when every handler has run
  print("  batch: removed " + removals.withLock { exchange(&$0, with: []) }.joined(separator: ", "))
}

print("Decider: evict quotes not updated for 60 s, or for as long as the purge's payload says")
let quotes = MemoryStore<String, Double>(name: "quotes", scheduler: clock) { _, _, context in
  context.age > (context.userInfo as? Duration ?? .seconds(60))
}
quotes.addEntries(["AAPL": 231.40, "MSFT": 415.20, "NVDA": 131.90])
let quoteBatches = watch(quotes)  // batches on: they report changes from now on
clock.advance(by: .seconds(45))
quotes["AAPL"] = 231.55  // AAPL is fresh; MSFT and NVDA were written 45 s ago
print("  purge: evicted \(quotes.purgeEvictableItems().keys.sorted())")
let stale = quotes.purgeEvictableItems(trigger: .manual(Duration.seconds(30)))
print("  purge with payload 30 s: evicted \(stale.keys.sorted())")
await printRemovals(quotes)

print("Count limit 4: AAPL and NVDA are read twice, then TSLA and META inserted")
let recent = MemoryStore<String, Int>(name: "recent", scheduler: clock)
recent.countLimit = 4
for (rank, symbol) in ["AAPL", "MSFT", "NVDA", "AMZN"].enumerated() { recent[symbol] = rank }
let recentBatches = watch(recent)
// W-TinyLFU order: a new key stays only if used more often than the entry it would push out.
for _ in 0..<2 { _ = (recent["AAPL"], recent["NVDA"]) }  // reads raise counters, lock-free
recent["TSLA"] = 4
recent["META"] = 5
print("  kept \(recent.allItems.keys.sorted())")
await printRemovals(recent)

print("Cost limit 100 KiB, each image weighed by its size: logo 40, banner 50, photo 30 loaded")
let images = MemoryStore<String, [UInt8]>(name: "images", scheduler: clock)
images.entryCost = { _, bytes in bytes.count / 1_024 }  // runs outside every lock
images.costLimit = 100
for (name, size) in [("logo", 40), ("banner", 50), ("photo", 30)] {
  _ = try await images.value(forKey: name, orLoad: { [UInt8](repeating: 0, count: size * 1_024) })
}
print("  kept \(images.allItems.keys.sorted()), total cost \(images.statistics.totalCost)")

print("A page of three images: one request for the ones missing")
let page = try await images.values(forKeys: ["banner", "photo", "icon"]) { missing in
  print("  fetching \(missing)")  // one call, each missing image once
  return Dictionary(
    uniqueKeysWithValues: missing.map { ($0, [UInt8](repeating: 0, count: 10 * 1_024)) })
}
print("  got \(page.keys.sorted()), kept \(images.allItems.keys.sorted())")

print("Time to live: 30 s by default, 300 s for bob's token")
let tokens = MemoryStore<String, String>(name: "tokens", scheduler: clock)
tokens.defaultTimeToLive = .seconds(30)
tokens["alice"] = "token-1"
tokens.setValue("token-2", forKey: "bob", timeToLive: .seconds(300))
let tokenBatches = watch(tokens)
clock.advance(by: .seconds(30))  // the expiry timer removes alice's token; no read needed
print("  after 30 s: \(tokens.allItems.keys.sorted())")
await printRemovals(tokens)

print("Memory pressure, warning: TSLA and META are read, then the store trimmed to half its limit")
for _ in 0..<2 { _ = (recent["TSLA"], recent["META"]) }
recent.handleMemoryPressure(.warning)  // on Linux the app calls it; see the Eviction article
print("  kept \(recent.allItems.keys.sorted())")
await printRemovals(recent)

let stores = [quotes.statistics, recent.statistics, images.statistics, tokens.statistics]
for (name, stats) in zip(["quotes", "recent", "images", "tokens"], stores) {
  let counts = EvictionReason.allCases.map { "\($0) \(stats.evictions[$0])" }
  print("\(name) statistics: \(stats)\n  evicted by " + counts.joined(separator: ", "))
}
