// A session store: sessions end after 30 minutes without a request (a time to idle) or at the
// end of their own 8-hour login (a time to live per entry, from the session itself), at most
// 3 are kept (a count limit), logging out removes one, each request's user profile comes
// through a bulk get-or-load, and a restart restores the sessions from a snapshot with the idle
// time each had left. Time comes
// from a ManualScheduler, so the hours pass at once.
//
//     swift run -c release SessionStore

import Foundation
import MemoryStoreKit

struct Session: Codable, Sendable, Equatable {
  var user: String
  /// When the login ends, whatever the activity (8 hours after it started), in seconds of the
  /// app's clock.
  var loginEndsAt: Int
}

struct Profile: Sendable {
  var name: String
}

let clock = ManualScheduler()
let start = clock.now
/// The seconds since the app started, on the manual clock.
@Sendable func seconds() -> Int { Int((clock.now - start) / .seconds(1)) }

func makeSessions() -> MemoryStore<String, Session> {
  let sessions = MemoryStore<String, Session>(name: "sessions", scheduler: clock)
  sessions.timeToIdle = .seconds(30 * 60)
  sessions.entryTimeToLive = { _, session in .seconds(session.loginEndsAt - seconds()) }
  sessions.countLimit = 3
  return sessions
}

let sessions = makeSessions()
let ended = Task {
  var ended: [String] = []
  for await removal in sessions.removals {
    ended.append("\(removal.key) (\(removal.cause))")
    if ended.count == 5 { break }
  }
  return ended
}
await sessions.flush()

func login(_ token: String, _ user: String) {
  sessions[token] = Session(user: user, loginEndsAt: seconds() + 8 * 3_600)
}

/// A request: its session if it is still valid (the read renews it), or `nil`: log in again.
func request(_ token: String) -> Session? { sessions[token] }

func advance(minutes: Int) {
  clock.advance(by: .seconds(minutes * 60))
}

print("Log in ada, bob and cy; dee's login makes a fourth session, over the cap of 3")
login("t-ada", "ada")
login("t-bob", "bob")
login("t-cy", "cy")
_ = request("t-ada")
_ = request("t-cy")
login("t-dee", "dee")
print("  sessions: \(sessions.keys.sorted())")

print("Profiles of a page of users: one request for the ones not cached")
let profiles = MemoryStore<String, Profile>(name: "profiles", scheduler: clock)
let users = sessions.values.map(\.user).sorted()
let page = try await profiles.values(forKeys: users) { missing in
  print("  fetching \(missing.sorted())")
  return Dictionary(uniqueKeysWithValues: missing.map { ($0, Profile(name: $0.capitalized)) })
}
print("  names: \(page.values.map(\.name).sorted())")

print("20 minutes pass; ada makes a request, then 20 more")
advance(minutes: 20)
_ = request("t-ada")
advance(minutes: 20)
print("  sessions: \(sessions.keys.sorted())  (cy and dee were idle for 40 minutes)")

print("dee logs in again, then logs out")
login("t-dee", "dee")
sessions["t-dee"] = nil
print("  sessions: \(sessions.keys.sorted())")

print("ada stays busy, a request every 25 minutes, until her 8-hour login ends")
var requests = 0
while request("t-ada") != nil {
  requests += 1
  advance(minutes: 25)
}
print("  \(requests) requests; at \(seconds() / 60) minutes the next one finds her logged out")

print("How each session ended:")
for line in await ended.value { print("  \(line)") }

print("Restart: save, then load into the store of the next launch")
login("t-eve", "eve")
advance(minutes: 20)
print("  eve's last request was 20 minutes ago: 10 idle minutes left, which the snapshot keeps")
let directory = FileManager.default.temporaryDirectory
  .appending(path: "MemoryStore-Sessions-\(UUID().uuidString)", directoryHint: .isDirectory)
let file = directory.appending(path: "sessions.snapshot")
try PersistenceManager(store: sessions, fileURL: file).save()
let relaunched = makeSessions()
try PersistenceManager(store: relaunched, fileURL: file).load()
// `allItems` does not renew the session, as a request (the subscript) would.
print(
  "  restored: \(relaunched.keys.sorted()); eve is still \(relaunched.allItems["t-eve"]?.user ?? "?")"
)
advance(minutes: 9)
print("  9 idle minutes later: \(relaunched.keys.sorted())")
advance(minutes: 2)
print("  2 more: \(relaunched.keys.sorted())")
try? FileManager.default.removeItem(at: directory)
