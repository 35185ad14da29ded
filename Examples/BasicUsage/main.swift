// BasicUsage: a MemoryStore used like a Dictionary: subscripts, updateValue and removeValue,
// atomic batches, multi-key reads, read-modify-writes, get-or-create (and load), snapshots and
// counts.
//
//     swift run -c release BasicUsage

import MemoryStoreKit

struct Quote: Sendable, Equatable, CustomStringConvertible {
  var bid: Double
  var ask: Double
  var description: String { "\(bid)/\(ask)" }
}

func describe(_ quote: Quote?) -> String { quote.map(String.init(describing:)) ?? "nil" }

let quotes = MemoryStore<String, Quote>(name: "quotes")

// Subscript: assign to insert or replace, read synchronously, assign nil to remove.
quotes["AAPL"] = Quote(bid: 231.40, ask: 231.45)
print("AAPL: \(describe(quotes["AAPL"]))")
quotes["AAPL"] = nil
print("AAPL after assigning nil: \(describe(quotes["AAPL"]))")

// updateValue and removeValue return the value they replaced or removed, as Dictionary does.
let previous = quotes.updateValue(Quote(bid: 415.2, ask: 415.3), forKey: "MSFT")
let replaced = quotes.updateValue(Quote(bid: 415.6, ask: 415.7), forKey: "MSFT")
let removed = quotes.removeValue(forKey: "MSFT")
print(
  "MSFT: updateValue returned \(describe(previous)), then \(describe(replaced)); "
    + "removeValue returned \(describe(removed))")

// addEntries: several entries as one atomic write; no read sees some without the others.
quotes.addEntries([
  "NVDA": Quote(bid: 131.9, ask: 132.0),
  "AMZN": Quote(bid: 186.4, ask: 186.5),
  "GOOG": Quote(bid: 164.7, ask: 164.8),
])
print("after addEntries: \(quotes.count) quotes")

// values(forKeys:): several keys read at one instant; absent keys are left out.
let found = quotes.values(forKeys: ["NVDA", "AMZN", "IBM"])
let listed = found.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }
print("values(forKeys: NVDA, AMZN, IBM): \(listed.joined(separator: ", "))")

// Get-or-create: the closure runs only when the key is absent, and its value is stored.
var creations = 0
let first = quotes.valueOrInsert(forKey: "TSLA") {
  creations += 1
  return Quote(bid: 248.0, ask: 248.1)
}
let second = quotes.valueOrInsert(forKey: "TSLA") {
  creations += 1
  return Quote(bid: 0, ask: 0)
}
print("TSLA: \(first), then \(second); the closure ran \(creations) time(s)")

// Get-or-load: the asynchronous form; concurrent callers that miss share one load.
let loads = await withTaskGroup(of: Quote?.self) { group in
  for _ in 0..<4 {
    group.addTask {
      try? await quotes.value(forKey: "META") {
        await Task.yield()  // a network request, say
        return Quote(bid: 585.1, ask: 585.2)
      }
    }
  }
  var loaded: [Quote?] = []
  for await quote in group { loaded.append(quote) }
  return loaded
}
print("META for 4 concurrent callers: \(Set(loads.map(describe)))")

// Read-modify-write: one atomic write whatever other threads do; the closure runs outside every
// lock, again if the entry changed meanwhile.
quotes.update(forKey: "TSLA") { quote in quote?.bid += 1 }
quotes.update(forKey: "IBM") { quote in quote?.bid += 1 }  // absent: stays absent
print("TSLA after update: \(describe(quotes["TSLA"])); IBM: \(describe(quotes["IBM"]))")
let volumes = MemoryStore<String, Int>(name: "volumes")
await withTaskGroup(of: Void.self) { group in
  for _ in 0..<8 {
    group.addTask {
      for _ in 0..<1_000 { volumes.update(forKey: "TSLA", default: 0) { $0 += 1 } }
    }
  }
}
volumes.merge(["TSLA": 500, "NVDA": 250], uniquingKeysWith: +)
print(
  "volumes: TSLA \(volumes["TSLA", default: 0]) (8 000 increments + 500), NVDA \(volumes["NVDA", default: 0])"
)
volumes.removeAll { $0.value < 1_000 }
print("after removeAll(where: volume < 1 000): \(volumes.keys)")

// allItems: a consistent snapshot, taken at one instant; later writes do not change it.
let snapshot = quotes.allItems
quotes.removeValues(forKeys: ["NVDA", "AMZN"])
print("snapshot: \(snapshot.keys.sorted()); the store now: \(quotes.allItems.keys.sorted())")

quotes.removeAll()
print(
  "after removeAll: count \(quotes.count), isEmpty \(quotes.isEmpty); "
    + "the snapshot still has \(snapshot.count)")
