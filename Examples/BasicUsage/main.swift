// BasicUsage: a MemoryStore used like a Dictionary: subscripts, updateValue and removeValue,
// atomic batches, multi-key reads, get-or-create, snapshots and counts.
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
let first = quotes.value(forKey: "TSLA") {
  creations += 1
  return Quote(bid: 248.0, ask: 248.1)
}
let second = quotes.value(forKey: "TSLA") {
  creations += 1
  return Quote(bid: 0, ask: 0)
}
print("TSLA: \(first), then \(second); the closure ran \(creations) time(s)")

// allItems: a consistent snapshot, taken in O(1); later writes do not change it.
let snapshot = quotes.allItems
quotes.removeValues(forKeys: ["NVDA", "AMZN"])
print("snapshot: \(snapshot.keys.sorted()); the store now: \(quotes.allItems.keys.sorted())")

quotes.removeAll()
print(
  "after removeAll: count \(quotes.count), isEmpty \(quotes.isEmpty); "
    + "the snapshot still has \(snapshot.count)")
