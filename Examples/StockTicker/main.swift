// StockTicker: a simulated market of 5 000 symbols kept in one MemoryStore.
//
// Several writer threads stream quote updates into the store while reader threads look quotes
// up, as a trading screen would. Every hundredth symbol has stopped trading: a decider evicts
// quotes not updated for 5 seconds, checked every second, so those 50 leave the store about
// 6 seconds into a run. The market is saved to a snapshot file every 2 seconds and restored
// from it at the next start: the file is `StockTicker/quotes.snapshot` in the system's
// temporary folder (`$TMPDIR`, or `/tmp` on Linux); the run prints its path, and deleting it
// starts the next run afresh. A progress line prints every second; the run ends with a summary
// of reads and writes per second, change batches, evictions, and save and load times.
//
//     swift run -c release StockTicker [--seconds N] [--writers N] [--readers N]

import Dispatch
import Foundation
import MemoryStoreKit
import Synchronization

/// One quote: the best bid and ask, and the volume traded so far.
struct Quote: Codable, Sendable, Equatable {
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
let trading = symbols.indices.filter { $0 % 100 != 99 }.map { symbols[$0] }  // 50 are halted

// A quote not updated for 5 s is stale: the decider, run every second, evicts it.
let staleAfter = Duration.seconds(5)
let quotes = MemoryStore<String, Quote>(name: "quotes") { _, _, context in
  context.age > staleAfter
}
quotes.evictionInterval = .seconds(1)

// Restore the market the previous run saved, then list the symbols it did not have.
let snapshotURL = FileManager.default.temporaryDirectory
  .appendingPathComponent("StockTicker", isDirectory: true)
  .appendingPathComponent("quotes.snapshot")
let persistence: PersistenceManager<String, Quote>
do {
  persistence = try PersistenceManager(store: quotes, fileURL: snapshotURL, coder: .binary)
} catch {
  print("cannot keep a snapshot at \(snapshotURL.path): \(error)")
  exit(1)
}
var loadMilliseconds = 0.0
do {
  let loadStart = DispatchTime.now()
  let restored = try persistence.load()
  loadMilliseconds = milliseconds(since: loadStart)
  print(
    restored > 0
      ? "restored \(restored) quotes from \(snapshotURL.path) in \(format(loadMilliseconds)) ms"
      : "no saved market at \(snapshotURL.path): opening a new one")
} catch {
  // load() moved the unusable file aside (error.movedTo) and left the store empty: start afresh.
  print("could not restore the market, opening a new one: \(error)")
}
let missing = symbols.filter { quotes[$0] == nil }
quotes.addEntries(
  Dictionary(uniqueKeysWithValues: missing.map { ($0, Quote(bid: 100, ask: 100.05, volume: 0)) }))

// Auto-save every 2 seconds, in the background, while quotes change.
persistence.saveInterval = .seconds(2)
let autoSaves = Atomic<Int>(0)
let lastSaveMicroseconds = Atomic<Int>(0)
let saveOutcomes = persistence.saveOutcomes
Task.detached {
  for await outcome in saveOutcomes {
    switch outcome.result {
    case .success(let report):
      autoSaves.wrappingAdd(1, ordering: .relaxed)
      lastSaveMicroseconds.store(
        Int(report.duration / .microseconds(1)), ordering: .relaxed)
    case .failure(let error):
      print("auto-save failed: \(error)")
    }
  }
}

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
    var random = Xorshift()
    var done = 0
    while running.load(ordering: .relaxed) {
      for _ in 0..<1_000 {
        let symbol = trading[Int(random.next() % UInt64(trading.count))]
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
    var random = Xorshift()
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
var lastSecond = quotes.statistics
for second in 1...options.seconds {
  Thread.sleep(forTimeInterval: 1)
  // This second's lookups alone, taken before the sample's own.
  let now = quotes.statistics
  let thisSecond = now.since(lastSecond)
  lastSecond = now
  let sample = ["AAPL", "S0", "S1", "S2"].compactMap { symbol in
    quotes[symbol].map { "\(symbol) \(String(format: "%.2f", $0.bid))" }
  }
  print(
    "  \(second) s  \(quotes.count) quotes  \(sample.joined(separator: "  "))  "
      + "batches \(batches.load(ordering: .relaxed)), "
      + "last \(lastBatchSize.load(ordering: .relaxed)) symbols, "
      + "\(thisSecond.hits + thisSecond.misses) lookups")
}
running.store(false, ordering: .relaxed)
finished.wait()
let flushed = DispatchSemaphore(value: 0)
Task.detached {  // detached: the main thread, which the main actor needs, is waiting below
  await quotes.flush()  // the last batch, before the summary
  flushed.signal()
}
flushed.wait()
let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
persistence.saveInterval = .zero
let finalSave: SaveReport
do {
  finalSave = try persistence.save()
} catch {
  print("could not save the market: \(error)")
  exit(1)
}

let snapshot = quotes.allItems
let statistics = quotes.statistics
let totalVolume = snapshot.values.reduce(0) { $0 + $1.volume }
print(
  """
  Summary
    reads:   \(reads.load(ordering: .relaxed)) (\(rate(reads.load(ordering: .relaxed))) per second)
    writes:  \(writes.load(ordering: .relaxed)) (\(rate(writes.load(ordering: .relaxed))) per second)
    symbols: \(snapshot.count), total volume \(totalVolume)
    batches: \(batches.load(ordering: .relaxed)), reporting \(reportedSymbols.load(ordering: .relaxed)) symbol changes in all
    evicted: \(statistics.evictions[.decider]) stale quotes (not updated for \(staleAfter.components.seconds) s); \
  hit rate \(format(statistics.hitRate * 100)) %
    saves:   \(autoSaves.load(ordering: .relaxed)) automatic, last \(format(Double(lastSaveMicroseconds.load(ordering: .relaxed)) / 1000)) ms; \
  final \(finalSave.entryCount) quotes, \(finalSave.byteCount / 1024) KiB in \(format(finalSave.duration / .milliseconds(1))) ms
    load:    \(format(loadMilliseconds)) ms at start
    file:    \(snapshotURL.path) (the next run restores it; delete it to start afresh)
  """)
subscription.cancel()

/// xorshift64*: a few instructions per number, so the simulation measures the store rather
/// than the random number generator (the system generator makes a system call per number).
struct Xorshift: RandomNumberGenerator {
  var state = UInt64.random(in: 1...UInt64.max)

  mutating func next() -> UInt64 {
    state ^= state >> 12
    state ^= state << 25
    state ^= state >> 27
    return state &* 0x2545_F491_4F6C_DD1D
  }
}

func milliseconds(since start: DispatchTime) -> Double {
  Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e6
}

func format(_ value: Double) -> String {
  String(format: "%.1f", value)
}

func rate(_ count: Int) -> String {
  String(format: "%.2f M", Double(count) / elapsed / 1e6)
}
