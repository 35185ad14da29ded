import Foundation
import Logging
import MemoryStoreKit
import MemoryStorePostgres

/// `SeveralInstances --instance NAME --channel CHANNEL [--database-url URL]`: one instance of
/// the flag service, driven one command a line on stdin, each answered with one line on
/// stdout. The tests run several as separate processes.
///
/// It answers `READY` once it listens to the channel (the channel and the table are both named
/// `CHANNEL`; the URL is `DATABASE_URL`'s if not given), then:
///
///     SET key off|on|on N%   a local write                       OK
///     REMOVE key             a local removal                     OK
///     CLEAR                  removes every key                   OK
///     PUBLISH                publishPending()                    PUBLISHED
///     GET key                sync.value(forKey:)                 VALUE key off|on N%|nil
///     LOCAL key              the store alone, no read-through    LOCAL key off|on N%|nil
///     WAIT-DROPPED key       until the store lacks key (10 s)    DROPPED key 1.2 ms
///     WAIT-EMPTY             until the store is empty (10 s)     EMPTY
///     WAIT-RECEIVED n        until n messages of the other       RECEIVED n
///                            instances arrived in all (10 s)
///     QUIT                   stops the sync                      BYE
///
/// A command that fails answers `ERROR …` (a ``MemoryStorePostgres/PostgresSyncError`` as
/// `ERROR kind detail`). The end of stdin stops the instance too, so that it does not outlive
/// its parent. Logs go to stderr.
enum InstanceCommands {
  /// Runs the instance until `QUIT` or the end of stdin; returns the exit status.
  static func main(_ arguments: [String], logger: Logger) async -> Int32 {
    var options: [String: String] = [:]
    var remaining = arguments[...]
    while let option = remaining.popFirst() {
      guard option.hasPrefix("--"), let value = remaining.popFirst() else {
        complain("SeveralInstances: \(option) without a value")
        return 2
      }
      options[option] = value
    }
    guard let name = options["--instance"], let channel = options["--channel"],
      let url = options["--database-url"] ?? ProcessInfo.processInfo.environment["DATABASE_URL"]
    else {
      complain("SeveralInstances --instance NAME --channel CHANNEL [--database-url URL]")
      return 2
    }
    var logger = logger
    logger[metadataKey: "instance"] = "\(name)"
    let instance: Instance
    do {
      instance = try Instance(
        name: name, endpoint: PostgresEndpoint(url: url),
        configuration: .init(channel: channel, table: channel), logger: logger)
      try await instance.waitUntilListening(within: .seconds(30))
    } catch {
      answer("ERROR \(error)")
      return 1
    }
    answer("READY")
    for await line in standardInputLines() {
      guard let reply = await perform(line, on: instance) else { break }
      answer(reply)
    }
    let stopped = await instance.stop(within: .seconds(10))
    answer(stopped ? "BYE" : "ERROR the sync did not stop within 10 s")
    return stopped ? 0 : 1
  }

  /// Performs one command; returns its answer, or `nil` for `QUIT`.
  static func perform(_ line: String, on instance: Instance) async -> String? {
    let words = line.split(separator: " ", maxSplits: 2).map(String.init)
    let command = words.first ?? ""
    let key = words.count > 1 ? words[1] : nil
    let argument = words.count > 2 ? words[2] : nil
    do {
      switch (command, key, argument) {
      case ("SET", let key?, let text?):
        guard let flag = FeatureFlag(text) else {
          return "ERROR \(text) is not a flag: off, on, or on N%"
        }
        instance.store[key] = flag
        return "OK"
      case ("REMOVE", let key?, nil):
        instance.store[key] = nil
        return "OK"
      case ("CLEAR", nil, nil):
        instance.store.removeAll()
        return "OK"
      case ("PUBLISH", nil, nil):
        try await instance.sync.publishPending(timeout: .seconds(10))
        return "PUBLISHED"
      case ("GET", let key?, nil):
        return "VALUE \(key) \(text(try await instance.sync.value(forKey: key)))"
      case ("LOCAL", let key?, nil):
        return "LOCAL \(key) \(text(instance.store[key]))"
      case ("WAIT-DROPPED", let key?, nil):
        let start = ContinuousClock.now
        let dropped = try await instance.waitUntilDropped(key, within: .seconds(10))
        return "DROPPED \(key) \((dropped - start).readable)"
      case ("WAIT-EMPTY", nil, nil):
        try await poll(within: .seconds(10), "\(instance.name) empty") {
          instance.store.isEmpty ? () : nil
        }
        return "EMPTY"
      case ("WAIT-RECEIVED", let text?, nil):
        guard let count = UInt64(text) else { return "ERROR \(text) is not a count" }
        try await instance.waitForMessages(count, within: .seconds(10))
        return "RECEIVED \(count)"
      case ("QUIT", nil, nil):
        return nil
      default:
        return "ERROR not a command: \(line)"
      }
    } catch let error as PostgresSyncError {
      return "ERROR \(error.kind) \(error.detail)"
    } catch {
      return "ERROR \(error)"
    }
  }

  /// Writes `line` to stdout as one line (line breaks inside it become spaces).
  private static func answer(_ line: String) {
    say(line.replacingOccurrences(of: "\n", with: " "))
  }

  private static func text(_ flag: FeatureFlag?) -> String {
    flag.map(String.init(describing:)) ?? "nil"
  }

  /// The lines of stdin, read on a thread of their own (`readLine` blocks); the stream ends
  /// with stdin.
  private static func standardInputLines() -> AsyncStream<String> {
    AsyncStream { continuation in
      Thread.detachNewThread {
        while let line = readLine() {
          continuation.yield(line)
        }
        continuation.finish()
      }
    }
  }
}
