import Foundation
import MemoryStoreKit
import Testing

/// Marks the main queue, so that code can tell it runs there.
let mainQueueMark: DispatchSpecificKey<Bool> = {
  let key = DispatchSpecificKey<Bool>()
  DispatchQueue.main.setSpecific(key: key, value: true)
  return key
}()

/// A view model as an app writes one: main-actor state kept from a store's batches.
@MainActor final class QuotesModel {
  var rows: [String: Double] = [:]
  /// Whether every call ran on the main queue (the main actor's executor, which on Linux may
  /// be drained by a thread other than the first one).
  var handledOnMainQueue = true
  var subscription: Subscription?

  init(store: MemoryStore<String, Double>) {
    subscription = store.observeOnMainActor { [weak self] batch in
      guard let self else { return }
      handledOnMainQueue =
        handledOnMainQueue && DispatchQueue.getSpecific(key: mainQueueMark) == true
      batch.apply(to: &rows)
    }
  }

  /// Keeps `rows` from a `changes` iteration, started with the whole store.
  func follow(_ store: MemoryStore<String, Double>, until stop: String) async {
    for await batch in store.changes(includingInitialSnapshot: true) {
      batch.apply(to: &rows)
      if batch.updated[stop] != nil { return }
    }
  }
}

extension StoreContractTests {
  /// Main-actor code observes a store under Swift 6's strict concurrency, without assuming
  /// isolation itself.
  @Suite("Main actor") struct MainActorObservation {
    @MainActor @Test func aMainActorHandlerKeepsMainActorState() async {
      let store = MemoryStore<String, Double>()
      store.notificationInterval = .milliseconds(1)
      let model = QuotesModel(store: store)
      store["AAPL"] = 231.4
      store["MSFT"] = 415.2
      store["AAPL"] = nil
      await store.flush()
      #expect(model.rows == ["MSFT": 415.2])
      #expect(model.handledOnMainQueue)
      model.subscription?.cancel()
    }

    @MainActor @Test func aMainActorTaskIteratesChanges() async {
      let store = MemoryStore<String, Double>()
      store.notificationInterval = .milliseconds(1)
      store["AAPL"] = 231.4
      let model = QuotesModel(store: store)
      model.subscription?.cancel()
      model.rows = [:]
      let following = Task { await model.follow(store, until: "end") }
      store["MSFT"] = 415.2
      store["end"] = 0
      await following.value
      #expect(model.rows == store.allItems)
    }
  }
}
