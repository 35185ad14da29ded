// Three instances of a feature-flag service, each with a MemoryStore of its own that a
// PostgresSync keeps coherent with the others' through PostgreSQL: a flag set on one instance
// is read through the shared table on the others; a change on one is dropped by the others
// within milliseconds; when the server crashes every instance flushes, local writes stay
// readable locally and a read that misses fails with a typed error; once the server is back,
// the pending writes are committed and every instance reads the same flags.
//
//     swift run -c release SeveralInstances
//
// It uses the server DATABASE_URL names, if set (and MEMORYSTORE_PG_DIR, the directory
// Scripts/postgres-test-server started that server in, to crash and restart it); otherwise it
// starts a throw-away server with Scripts/postgres-test-server and stops it at the end. It exits
// with 0 when everything it checks holds, 1 otherwise. LOG_LEVEL=notice (or info, debug, …)
// shows the syncs' logs on stderr.
//
//     SeveralInstances --instance NAME --channel CHANNEL [--database-url URL]
//
// runs a single instance driven through stdin and stdout, one command a line (see
// InstanceCommands.swift): the tests run several of them as separate processes.

import Foundation
import Logging

let logLevel =
  ProcessInfo.processInfo.environment["LOG_LEVEL"].flatMap { Logger.Level($0) } ?? .error
// Logs go to stderr: stdout is the narration, or the answers to the commands.
LoggingSystem.bootstrap { label in
  var handler = StreamLogHandler.standardError(label: label)
  handler.logLevel = logLevel
  return handler
}
let logger = Logger(label: "SeveralInstances")

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
if arguments.first == "--instance" {
  status = await InstanceCommands.main(arguments, logger: logger)
} else if arguments.isEmpty {
  status = await Walkthrough.main(logger: logger)
} else {
  complain(
    """
    usage: SeveralInstances
           SeveralInstances --instance NAME --channel CHANNEL [--database-url URL]
    """)
  status = 2
}
exit(status)
