// What exporting a store's metrics costs its reads and writes: the same loops on one store,
// with no metrics service, then with a StoreMetricsService sampling into a Prometheus
// registry every 10 ms (a thousand times more often than its default), alternating, in one
// process. Prints the median time per operation of each and their ratio.
//
//   swift run -c release MetricsOverhead [--rounds 9] [--operations 2000000]

import Dispatch
import Foundation
import MemoryStoreKit
import MemoryStoreServer
import Prometheus

struct Settings {
  var rounds = 9
  var operations = 2_000_000
  let keys = 10_000

  init(_ arguments: [String]) {
    var remaining = arguments[...]
    while let option = remaining.popFirst() {
      switch option {
      case "--rounds": rounds = remaining.popFirst().flatMap(Int.init) ?? rounds
      case "--operations": operations = remaining.popFirst().flatMap(Int.init) ?? operations
      case "--quick": (rounds, operations) = (3, 500_000)
      default:
        FileHandle.standardError.write(Data("unknown option \(option)\n".utf8))
        exit(2)
      }
    }
  }
}

let settings = Settings(Array(CommandLine.arguments.dropFirst()))
let keys = (0..<settings.keys).map { "key-\($0)" }
// One pseudo-random order of keys, shared by every loop.
var generator = SystemRandomNumberGenerator()
let order = (0..<settings.operations).map { _ in Int.random(in: 0..<keys.count, using: &generator) }

/// Nanoseconds per operation of `body` over `order`.
func measure(_ body: (String, Int) -> Void) -> Double {
  let start = ContinuousClock.now
  for (position, index) in order.enumerated() { body(keys[index], position) }
  let elapsed = ContinuousClock.now - start
  let nanoseconds =
    Double(elapsed.components.seconds) * 1e9
    + Double(elapsed.components.attoseconds) / 1e9
  return nanoseconds / Double(order.count)
}

/// The median of `values`.
func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

let store = MemoryStore<String, Int>(name: "bench")
for (index, key) in keys.enumerated() { store[key] = index }

/// Runs `body` with a metrics service sampling `store` every 10 ms on its own task.
func withMetrics(_ body: () -> Void) {
  let registry = PrometheusCollectorRegistry()
  let service = StoreMetricsService(
    store: store, interval: .milliseconds(10),
    metricsFactory: PrometheusMetricsFactory(registry: registry))
  let sampler = Task.detached { try await service.run() }
  body()
  sampler.cancel()
  let done = DispatchSemaphore(value: 0)
  Task.detached {
    _ = try? await sampler.value
    done.signal()
  }
  done.wait()
  precondition(registry.emitToString().contains("memorystore_hits_total"), "no sample was taken")
}

var results: [String: [Double]] = [:]
var sink = 0
for _ in 0..<settings.rounds {
  for metricsOn in [false, true] {
    let run = {
      results["read \(metricsOn)", default: []].append(
        measure { key, _ in sink &+= store[key] ?? 0 })
      results["write \(metricsOn)", default: []].append(
        measure { key, position in store[key] = position })
    }
    if metricsOn { withMetrics(run) } else { run() }
  }
}

print("Metrics overhead: \(settings.keys) String keys, \(settings.operations) operations a round,")
print(
  "median of \(settings.rounds) rounds; metrics on = a StoreMetricsService sampling every 10 ms")
print("")
print("operation   off (ns)   on (ns)   on / off")
for operation in ["read", "write"] {
  let off = median(results["\(operation) false"]!)
  let on = median(results["\(operation) true"]!)
  let name = operation.padding(toLength: 10, withPad: " ", startingAt: 0)
  print(
    "\(name)  \(String(format: "%8.1f", off))  \(String(format: "%8.1f", on))  "
      + String(format: "%8.3f×", on / off))
}
if sink == 42 { print("") }  // Keeps the reads.
