import Foundation
import Logging

/// The command line of `KeyValueServer`.
struct Options {
  var host = "127.0.0.1"
  var port = 8080
  var directory = URL(fileURLWithPath: "kv-data", isDirectory: true)
  var saveInterval = Duration.seconds(30)
  var metricsInterval = Duration.seconds(10)
  var gracePeriod = Duration.seconds(10)
  var logLevel = Logger.Level.info

  struct InvalidOption: Error, CustomStringConvertible {
    let description: String
  }

  init(_ arguments: some Sequence<String>) throws {
    var remaining = Array(arguments)[...]
    func value(_ name: String) throws -> String {
      guard let value = remaining.popFirst() else {
        throw InvalidOption(description: "\(name) needs a value")
      }
      return value
    }
    func seconds(_ name: String) throws -> Duration {
      let text = try value(name)
      guard let seconds = Double(text), seconds >= 0 else {
        throw InvalidOption(description: "\(name) takes seconds, not \(text)")
      }
      return .milliseconds(Int64((seconds * 1000).rounded()))
    }
    while let option = remaining.popFirst() {
      switch option {
      case "--host": host = try value(option)
      case "--port":
        let text = try value(option)
        guard let port = Int(text), (0...65535).contains(port) else {
          throw InvalidOption(description: "--port takes 0 to 65535, not \(text)")
        }
        self.port = port
      case "--directory": directory = URL(fileURLWithPath: try value(option), isDirectory: true)
      case "--save-interval": saveInterval = try seconds(option)
      case "--metrics-interval": metricsInterval = max(try seconds(option), .milliseconds(1))
      case "--grace-period": gracePeriod = try seconds(option)
      case "--log-level":
        let text = try value(option)
        guard let level = Logger.Level(rawValue: text) else {
          throw InvalidOption(description: "--log-level takes trace … critical, not \(text)")
        }
        logLevel = level
      default:
        throw InvalidOption(
          description: "unknown option \(option); options: --host --port --directory "
            + "--save-interval --metrics-interval --grace-period --log-level")
      }
    }
  }
}
