// StockTicker: a simulated market of 5 000 symbols kept in one MemoryStore.
//
// Several writer threads stream quote updates into the store while reader threads look quotes
// up, as a trading screen would. A progress line prints every second; the run ends with a
// summary of reads and writes per second.
//
//     swift run -c release StockTicker [--seconds N] [--writers N] [--readers N]

import Dispatch
import Foundation
import MemoryStore
import Synchronization

/// One quote: the best bid and ask, and the volume traded so far.
struct Quote: Sendable, Equatable {
  var bid: Double
  var ask: Double
  var volume: Int
}

struct Options {
  var seconds = 10
  var writers = 2
  var readers = 2

  init(arguments: [String]) {
    var iterator = arguments.dropFirst().makeIterator()
    while let argument = iterator.next() {
      let value = iterator.next().flatMap { Int($0) }
      switch (argument, value) {
      case ("--seconds", let value?) where value > 0: seconds = value
      case ("--writers", let value?) where value > 0: writers = value
      case ("--readers", let value?) where value > 0: readers = value
      default:
        print("usage: StockTicker [--seconds N] [--writers N] [--readers N]")
        exit(2)
      }
    }
  }
}

let options = Options(arguments: CommandLine.arguments)
let symbols = (0..<5_000).map { "S" + String($0, radix: 36).uppercased() }
let quotes = MemoryStore<String, Quote>(name: "quotes")
quotes.addEntries(
  Dictionary(uniqueKeysWithValues: symbols.map { ($0, Quote(bid: 100, ask: 100.05, volume: 0)) }))

// Subscribers get what changed as one batch per 250 ms, however many writes there were.
quotes.notificationInterval = .milliseconds(250)
let batches = Atomic<Int>(0)
let reportedSymbols = Atomic<Int>(0)
let lastBatchSize = Atomic<Int>(0)
let subscription = quotes.observe { batch in
  batches.wrappingAdd(1, ordering: .relaxed)
  reportedSymbols.wrappingAdd(batch.count, ordering: .relaxed)
  lastBatchSize.store(batch.count, ordering: .relaxed)
}

let writes = Atomic<Int>(0)
let reads = Atomic<Int>(0)
let running = Atomic<Bool>(true)
let finished = DispatchGroup()

/// Runs `body` on a new thread of its own (a dispatch pool would cap the threads at the core
/// count, and writers would starve the readers).
func spawn(_ body: @escaping @Sendable () -> Void) {
  finished.enter()
  Thread {
    body()
    finished.leave()
  }.start()
}

for _ in 0..<options.writers {
  spawn {
    var random = SystemRandomNumberGenerator()
    var done = 0
    while running.load(ordering: .relaxed) {
      for _ in 0..<1_000 {
        let symbol = symbols[Int(random.next() % UInt64(symbols.count))]
        let move = Double(Int(random.next() % 21) - 10) / 100
        var quote = quotes[symbol] ?? Quote(bid: 100, ask: 100.05, volume: 0)
        quote.bid = max(0.01, quote.bid + move)
        quote.ask = quote.bid + 0.05
        quote.volume += Int(random.next() % 500)
        quotes[symbol] = quote
      }
      done += 1_000
    }
    writes.wrappingAdd(done, ordering: .relaxed)
  }
}

for _ in 0..<options.readers {
  spawn {
    var random = SystemRandomNumberGenerator()
    var done = 0
    var volume = 0
    while running.load(ordering: .relaxed) {
      for _ in 0..<1_000 {
        volume &+= quotes[symbols[Int(random.next() % UInt64(symbols.count))]]?.volume ?? 0
      }
      done += 1_000
    }
    reads.wrappingAdd(done, ordering: .relaxed)
    if volume == -1 { print("impossible") }  // Keeps the reads from being optimised away.
  }
}

print(
  "StockTicker: \(symbols.count) symbols, \(options.writers) writer and "
    + "\(options.readers) reader threads, \(options.seconds) s")
let start = DispatchTime.now()
for second in 1...options.seconds {
  Thread.sleep(forTimeInterval: 1)
  let sample = ["AAPL", "S0", "S1", "S2"].compactMap { symbol in
    quotes[symbol].map { "\(symbol) \(String(format: "%.2f", $0.bid))" }
  }
  print(
    "  \(second) s  \(quotes.count) quotes  \(sample.joined(separator: "  "))  "
      + "batches \(batches.load(ordering: .relaxed)), last \(lastBatchSize.load(ordering: .relaxed)) symbols")
}
running.store(false, ordering: .relaxed)
finished.wait()
let flushed = DispatchSemaphore(value: 0)
Task.detached {  // detached: the main thread, which the main actor needs, is waiting below
  await quotes.flushChanges()  // the last batch, before the summary
  flushed.signal()
}
flushed.wait()
let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9

let snapshot = quotes.allItems
let totalVolume = snapshot.values.reduce(0) { $0 + $1.volume }
print(
  """
  Summary
    reads:   \(reads.load(ordering: .relaxed)) (\(rate(reads.load(ordering: .relaxed))) per second)
    writes:  \(writes.load(ordering: .relaxed)) (\(rate(writes.load(ordering: .relaxed))) per second)
    symbols: \(snapshot.count), total volume \(totalVolume)
    batches: \(batches.load(ordering: .relaxed)), reporting \(reportedSymbols.load(ordering: .relaxed)) symbol changes in all
  """)
subscription.cancel()

func rate(_ count: Int) -> String {
  String(format: "%.2f M", Double(count) / elapsed / 1e6)
}
