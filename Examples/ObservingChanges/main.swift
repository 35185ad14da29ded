// ObservingChanges: the three ways to receive a store's change batches (the `changes`
// AsyncSequence, an `observe` handler and NotificationCenter), made deterministic with
// flush(), which publishes at once and returns when every handler has run; then a mirror
// started from the whole store, one key followed, and the values that left the store.
//
//     swift run -c release ObservingChanges

import Foundation
import MemoryStoreKit
import Synchronization

typealias Prices = MemoryStore<String, Double>

func describe(_ updated: [String: Double], _ removed: Set<String>) -> String {
  let updates = updated.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
  return "updated [\(updates.joined(separator: ", "))], removed \(removed.sorted())"
}

let prices = Prices(name: "prices")
prices.notificationInterval = .milliseconds(250)  // batches on: at most one per 250 ms
let received = Mutex<[String]>([])  // what the handler and the notification observer got

// An `observe` handler runs on a serial queue of its own, until the subscription goes.
let subscription = prices.observe { batch in
  received.withLock { $0.append("observe       \(describe(batch.updated, batch.removed))") }
}

// NotificationCenter: posted from a background queue of the store's, so no run loop is needed.
prices.notificationCenter = .default
let observer = NotificationCenter.default.addObserver(
  forName: Prices.didChangeNotification, object: prices, queue: nil
) { note in
  let updated = note.userInfo?[Prices.updatedItemsKey] as? [String: Double] ?? [:]
  let removed = note.userInfo?[Prices.removedKeysKey] as? Set<String> ?? []
  received.withLock { $0.append("notification  \(describe(updated, removed))") }
}

do {
  // The `changes` AsyncSequence: `for await batch in prices.changes` subscribes when its loop
  // starts; making the iterator here subscribes before the first write.
  var changes = prices.changes.makeAsyncIterator()

  /// Publishes now, then prints what each subscriber received.
  func publish() async {
    await prices.flush()  // every handler and observer has run when this returns
    if let batch = await changes.next() {
      print("  batch \(batch.sequenceNumbers), new keys \(batch.addedKeys.sorted())")
      print("  changes       \(describe(batch.updated, batch.removed))")
    }
    for line in received.withLock({ $0 }).sorted() { print("  " + line) }
    received.withLock { $0.removeAll() }
  }

  print("AAPL set twice, MSFT set, NVDA set then removed: one batch, the net difference")
  prices["AAPL"] = 231.40
  prices["AAPL"] = 231.55
  prices["MSFT"] = 415.20
  prices["NVDA"] = 131.90
  prices["NVDA"] = nil
  await publish()

  print("MSFT removed, AAPL updated")
  prices["MSFT"] = nil
  prices["AAPL"] = 232.10
  await publish()

  // Without flush(), the batch comes one interval after the first change.
  let start = ContinuousClock.now
  prices["TSLA"] = 248.00
  if let batch = await changes.next() {
    let waited = Int((ContinuousClock.now - start) / .milliseconds(1))
    print("TSLA set, no flush: batch \(batch.sequenceNumbers) came after \(waited) ms")
  }
}

subscription.cancel()
NotificationCenter.default.removeObserver(observer)

do {
  // A mirror that starts from the whole store: its first batch is a snapshot, taken where the
  // batches that follow begin, so the mirror stays exact.
  var mirrorChanges = prices.changes(includingInitialSnapshot: true).makeAsyncIterator()
  var mirror: [String: Double] = ["stale": 0]
  // One key, now and after each batch that changes it.
  var aapl = prices.updates(of: "AAPL").makeAsyncIterator()
  // Every value that leaves the store, with why: batches cannot show a key added and removed
  // within one interval, this does. Subscribed from here on: the iterator is made now.
  var removals = prices.removals.makeAsyncIterator()

  if let snapshot = await mirrorChanges.next() {
    snapshot.apply(to: &mirror)
    print("mirror from the snapshot: \(mirror.sorted { $0.key < $1.key })")
  }
  if let now = await aapl.next() { print("AAPL now: \(now.value.map { "\($0)" } ?? "absent")") }

  prices["AAPL"] = 233.00
  prices["AMZN"] = 186.40
  prices["AMZN"] = nil
  await prices.flush()
  if let batch = await mirrorChanges.next() { batch.apply(to: &mirror) }
  let store = prices.allItems
  print("mirror after a batch equals the store: \(mirror == store) (\(mirror.count) entries)")
  if let next = await aapl.next() { print("AAPL next: \(next.value.map { "\($0)" } ?? "absent")") }
  await prices.flush()  // the removals so far are handed over
  var left: [String] = []
  while let removal = await removals.next() {
    left.append("\(removal.key)=\(removal.value) (\(removal.cause))")
    if removal.key == "AMZN" { break }
  }
  print("left the store: \(left.joined(separator: ", "))")
}
