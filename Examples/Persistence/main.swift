// Persistence: save a store to a snapshot file, load it into a fresh store, auto-save with
// saveInterval, and start afresh when the file turns out to be damaged.
//
//     swift run -c release Persistence

import Foundation
import MemoryStoreKit

struct Quote: Codable, Sendable, Equatable {
  var bid: Double
  var ask: Double
}

let directory = FileManager.default.temporaryDirectory
  .appending(path: "MemoryStore-Persistence-\(UUID().uuidString)", directoryHint: .isDirectory)
let fileURL = directory.appending(path: "quotes.snapshot")
print("snapshot: \(fileURL.path)")

// Save: the store as it was at one instant, written to a temporary file and renamed over the
// snapshot. Pass `coder: .binary` for smaller files and faster saves than the default JSON.
let quotes = MemoryStore<String, Quote>(name: "quotes")
quotes.addEntries([
  "AAPL": Quote(bid: 231.40, ask: 231.45),
  "MSFT": Quote(bid: 415.20, ask: 415.30),
  "NVDA": Quote(bid: 131.90, ask: 132.00),
])
let persistence = try PersistenceManager(store: quotes, fileURL: fileURL)
let report = try persistence.save()
let micros = Int(report.duration / .microseconds(1))
print("saved \(report.entryCount) quotes, \(report.byteCount) bytes, in \(micros) µs")

// Load into a fresh store, as the next launch of the app would.
let relaunched = MemoryStore<String, Quote>(name: "quotes")
let loaded = try PersistenceManager(store: relaunched, fileURL: fileURL).load()
let same = relaunched.allItems == quotes.allItems
print("loaded \(loaded) quotes into a fresh store; the same as saved: \(same)")

// Auto-save: every saveInterval while the store changes. Subscribe to the outcomes first.
let outcomes = persistence.saveOutcomes
persistence.saveInterval = .milliseconds(100)
quotes["TSLA"] = Quote(bid: 248.00, ask: 248.10)
for await outcome in outcomes {
  switch outcome.result {
  case .success(let report): print("\(outcome.trigger) save: \(report.entryCount) quotes")
  case .failure(let error): print("\(outcome.trigger) save failed: \(error)")
  }
  break
}
persistence.saveInterval = .zero

// Damage the file (as a failing disk might), then start the app again.
var bytes = try Data(contentsOf: fileURL)
bytes.replaceSubrange(60..<68, with: Data("garbage!".utf8))
try bytes.write(to: fileURL)

let afterDamage = MemoryStore<String, Quote>(name: "quotes")
let manager = try PersistenceManager(store: afterDamage, fileURL: fileURL)
do {
  try manager.load()
} catch {
  // The error is a typed PersistenceError: the kind, the file, and where the file was moved.
  print("load failed [\(error.kind)]: \(error.detail)")
  print("the damaged file was kept as \(error.movedTo?.lastPathComponent ?? "-")")
}
print("starting afresh with \(afterDamage.count) quotes")
afterDamage["AAPL"] = Quote(bid: 232.00, ask: 232.05)
try manager.save()  // a new snapshot: the damaged file is not overwritten

let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
print("files: \(files.joined(separator: ", "))")
try FileManager.default.removeItem(at: directory)
