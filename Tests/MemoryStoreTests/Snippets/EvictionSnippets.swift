import Foundation
import MemoryStoreKit
import Synchronization
import Testing

// The Eviction article's Swift code, as written (see `SnippetCheck`), run and checked against
// its comments.

private let output = SnippetOutput()

/// The snippets' `print`, recorded for the checks.
private func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
  output.record(items, separator: separator)
}

@Suite("Snippets: Eviction", .serialized) struct EvictionSnippets {
  struct Quote: Codable, Sendable, Equatable {
    var bid: Double
    var ask: Double
  }

  @Test func limitsAndEvictionsInBatches() async {
    output.clear()
    struct Image: Sendable {
      var byteCount: Int
    }
    let url = URL(filePath: "/images/logo.png")
    let image = Image(byteCount: 1_024)

    // "Overview"
    let images = MemoryStore<URL, Image>(name: "images")
    images.countLimit = 10_000
    images.costLimit = 200 << 20  // 200 MiB in all
    images.setValue(image, forKey: url, cost: image.byteCount)

    images.notificationInterval = .milliseconds(250)
    let subscription = images.observe { batch in
      for url in batch.removed {
        if let reason = batch.reason(forKey: url)?.evictionReason { print(url, reason) }
      }
    }

    #expect(images.costLimit == 200 * 1_024 * 1_024)
    #expect(images.statistics.totalCost == 1_024)
    images.costLimit = 512  // evicts the image, reported with its reason
    await images.flush()
    #expect(output.printed == ["\(url) cost limit"])
    subscription.cancel()
  }

  @Test func aCostFunction() async throws {
    let url = URL(filePath: "/thumbnails/logo.png")
    let placeholder = Data([0])
    @Sendable func download(_ url: URL) async throws -> Data { Data(count: 150 << 10) }

    // "Choose a cost and a cost limit"
    let thumbnails = MemoryStore<URL, Data>(name: "thumbnails")
    thumbnails.entryCost = { _, data in data.count }
    thumbnails.costLimit = 4 << 20  // 4 MiB
    let data = try await thumbnails.value(forKey: url) {  // weighed when it is stored
      try await download(url)
    }
    thumbnails.setValue(placeholder, forKey: url, cost: 1)  // a cost given wins

    #expect(data.count == 150 << 10)
    #expect(thumbnails[url] == placeholder)
    #expect(thumbnails.statistics.totalCost == 1)
  }

  @Test func aDecider() {
    // "Write a decider"
    let quotes = MemoryStore<String, Quote>(name: "quotes") { symbol, quote, context in
      context.age > .seconds(60)  // not updated for a minute
    }
    quotes.evictionInterval = .seconds(10)  // judge every entry every 10 s

    #expect(quotes.evictionDecider != nil)
    #expect(quotes.evictionInterval == .seconds(10))
    quotes["AAPL"] = Quote(bid: 1, ask: 2)
    #expect(quotes.purgeEvictableItems().isEmpty, "written less than a minute ago")
  }

  @Test func aCountLimitAndWhatItBuys() {
    output.clear()
    // 12 000 keys written under a limit of 10 000, then each read once.
    func serveTraffic(from store: MemoryStore<String, Quote>) {
      for index in 0..<12_000 { store["S\(index)"] = Quote(bid: 1, ask: 2) }
      for index in 0..<12_000 { _ = store["S\(index)"] }
    }

    // "Choose a count limit"
    let recent = MemoryStore<String, Quote>(name: "recent")
    recent.countLimit = 10_000
    let before = recent.statistics
    serveTraffic(from: recent)
    let period = recent.statistics.since(before)
    print(period.hitRate)  // the share of lookups that found their key
    print(period.evictions[.countLimit])  // the entries the limit evicted

    #expect(recent.count == 10_000)
    #expect(output.printed == ["\(10_000.0 / 12_000.0)", "2000"])
    // A later lookup counts in a later period.
    _ = recent["missing"]
    #expect(recent.statistics.since(before).misses == period.misses + 1)
  }

  @Test func choosingLeastRecentlyUsed() {
    // "Choose the eviction policy"
    let history = MemoryStore<String, Quote>(name: "history")
    history.evictionPolicy = .lru  // least recently used
    history.countLimit = 500

    for index in 0..<600 { history["page\(index)"] = Quote(bid: 1, ask: 2) }
    #expect(history.count == 500)
    #expect(history["page599"] != nil && history["page0"] == nil)
  }

  @Test func timeToLiveAndTouch() {
    struct Session: Sendable, Equatable {
      var user: String
    }
    let id = "session-1"
    let session = Session(user: "ada")
    let guestID = "guest-1"
    let guest = Session(user: "guest")
    var redirected = false
    func redirectToLogin() { redirected = true }

    // "Time to live"
    let sessions = MemoryStore<String, Session>(name: "sessions")
    sessions.defaultTimeToLive = .seconds(1_800)
    sessions[id] = session  // lives 30 minutes
    sessions.setValue(guest, forKey: guestID, timeToLive: .seconds(60))  // this one, 1 minute

    if !sessions.touch(id, timeToLive: .seconds(1_800)) { redirectToLogin() }

    #expect(sessions.allItems == [id: session, guestID: guest])
    #expect(!redirected)
    sessions[id] = nil
    if !sessions.touch(id, timeToLive: .seconds(1_800)) { redirectToLogin() }
    #expect(redirected, "a removed session is not brought back")
  }

  @Test func timeToLivePerEntry() {
    struct Token: Sendable, Equatable {
      var expiresAt: ContinuousClock.Instant
    }
    let userID = "ada"
    let token = Token(expiresAt: .now + .seconds(60))
    let tokens = MemoryStore<String, Token>(name: "tokens")

    // "A time to live per entry"
    tokens.entryTimeToLive = { _, token in token.expiresAt - .now }
    tokens[userID] = token  // lives until the token's own expiry

    #expect(tokens[userID] == token && tokens.entryTimeToLive != nil)
    tokens[userID] = Token(expiresAt: .now - .seconds(1))  // already expired: gone at once
    #expect(tokens[userID] == nil)
  }

  @Test func timeToIdle() {
    struct Session: Sendable, Equatable {
      var user: String
    }
    let id = "session-1"
    let session = Session(user: "ada")
    var served: [Session] = []
    func serve(_ session: Session) { served.append(session) }

    // "Time to idle"
    let active = MemoryStore<String, Session>(name: "active sessions")
    active.timeToIdle = .seconds(1_800)
    active[id] = session
    if let session = active[id] { serve(session) }  // renewed: 30 minutes from now

    #expect(served == [session] && active.timeToIdle == .seconds(1_800))
  }

  @Test func refreshAfterWrite() async throws {
    struct Feed: Sendable {
      func quote(_ symbol: String) async throws -> Double { 101.5 }
    }
    let feed = Feed()
    let symbol = "AAPL"
    let logged = Mutex<[String]>([])
    @Sendable func log(_ line: String) { logged.withLock { $0.append(line) } }

    // "Refresh before expiry"
    let quotes = MemoryStore<String, Double>(name: "quotes")
    quotes.timeToRefresh = .seconds(5)  // reload quotes older than 5 s …
    quotes.defaultTimeToLive = .seconds(60)  // … and never serve one older than a minute
    quotes.onRefreshFailure = { symbol, error in log("\(symbol): \(error)") }
    let quote = try await quotes.value(forKey: symbol) { try await feed.quote(symbol) }

    #expect(quote == 101.5 && quotes.timeToRefresh == .seconds(5))
    #expect(quotes.onRefreshFailure != nil && logged.withLock { $0.isEmpty })
  }

  @Test func timeToLiveExpiresOnTheStoresClock() {
    // The same lines on a manual clock, where the times in the comments can be checked.
    let clock = ManualScheduler()
    let sessions = MemoryStore<String, Int>(scheduler: clock)
    sessions.defaultTimeToLive = .seconds(1_800)
    sessions["id"] = 1
    sessions.setValue(2, forKey: "guest", timeToLive: .seconds(60))
    clock.advance(by: .seconds(60))
    #expect(sessions.allItems == ["id": 1])
    clock.advance(by: .seconds(1_740))
    #expect(sessions.isEmpty)
  }

  @Test func memoryPressure() {
    let store = MemoryStore<String, Int>()
    let quotes = MemoryStore<String, Int>()
    quotes.countLimit = 100
    quotes.addEntries(Dictionary(uniqueKeysWithValues: (0..<100).map { ("\($0)", $0) }))

    // "Memory pressure"
    store.memoryPressurePolicy = MemoryPressurePolicy(warningFraction: 0.75)

    #expect(store.memoryPressurePolicy.warningFraction == 0.75)

    #if canImport(Darwin)
      // "On Apple platforms"
      let monitor = store.monitorSystemMemoryPressure()

      monitor.cancel()
    #endif

    // "On Linux"
    func residentBytes() -> Int? {
      guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
        let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
      else { return nil }
      return pages * sysconf(Int32(_SC_PAGESIZE))
    }

    if let resident = residentBytes(), resident > 2 << 30 {  // a 2 GiB budget
      quotes.handleMemoryPressure(.warning)
    }

    #if os(Linux)
      #expect((residentBytes() ?? 0) > 1 << 20, "the test process uses more than 1 MiB")
    #endif
    quotes.handleMemoryPressure(.warning)
    #expect(quotes.count == 50, "a warning trims to half of the limit")
  }

  @Test func statistics() {
    output.clear()
    // A store whose numbers are those of the comment.
    let quotes = MemoryStore<String, Quote>(scheduler: ManualScheduler()) { symbol, _, _ in
      symbol.hasPrefix("old-")
    }
    quotes.addEntries(
      Dictionary(
        uniqueKeysWithValues: (0..<5_000).map {
          ($0 < 50 ? "old-\($0)" : "S\($0)", Quote(bid: 1, ask: 1))
        }))
    quotes.purgeEvictableItems()
    for _ in 0..<1_204_112 { _ = quotes["S100"] }
    for _ in 0..<5_150 { _ = quotes["missing"] }

    // "Watch what the store removes"
    let stats = quotes.statistics
    print(stats)  // 4950 entries, cost 0, 1204112 hits, 5150 misses (99.6 %), 50 evicted
    print(stats.evictions[.decider], stats.evictions[.countLimit])

    #expect(
      output.printed == [
        "4950 entries, cost 0, 1204112 hits, 5150 misses (99.6 %), 50 evicted", "50 0",
      ])
  }
}
