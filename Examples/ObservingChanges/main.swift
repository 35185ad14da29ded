// ObservingChanges: the three ways to receive a store's change batches (the `changes`
// AsyncSequence, an `observe` handler and NotificationCenter), made deterministic with
// flushChanges(), which publishes at once and returns when every handler has run.
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
    await prices.flushChanges()  // every handler and observer has run when this returns
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

  // Without flushChanges(), the batch comes one interval after the first change.
  let start = ContinuousClock.now
  prices["TSLA"] = 248.00
  if let batch = await changes.next() {
    let waited = Int((ContinuousClock.now - start) / .milliseconds(1))
    print("TSLA set, no flush: batch \(batch.sequenceNumbers) came after \(waited) ms")
  }
}

subscription.cancel()
NotificationCenter.default.removeObserver(observer)
