/// An entry of a snapshot of format version 2: its value and its metadata, which a
/// ``SnapshotCoder`` encodes as it encodes any value (a JSON object, a keyed container of the
/// binary format), with these fields:
///
/// | Field | Present when | Holds |
/// |---|---|---|
/// | `value` | always | the value |
/// | `cost` | the cost is not 0 | the entry's cost toward the cost limit |
/// | `expires` | the entry has a time to live | when it ends, in seconds since 1970 (UTC) |
/// | `idleExpires` | the entry expires when idle | when it expires unless it is read, likewise |
///
/// Deadlines are wall-clock times, so the time a process is down counts toward them: a
/// session idle for 20 of its 30 minutes, saved, and loaded 5 minutes later has 5 left.
struct _SnapshotEntry<Value> {
  var value: Value
  var cost: Int
  /// Seconds since 1970; `nil`: no time to live.
  var expires: Double?
  /// Seconds since 1970; `nil`: no idle expiry.
  var idleExpires: Double?

  init(value: Value, cost: Int = 0, expires: Double? = nil, idleExpires: Double? = nil) {
    self.value = value
    self.cost = cost
    self.expires = expires
    self.idleExpires = idleExpires
  }

  enum CodingKeys: String, CodingKey {
    case value, cost, expires, idleExpires
  }
}

extension _SnapshotEntry: Encodable where Value: Encodable {
  func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(value, forKey: .value)
    if cost != 0 { try container.encode(cost, forKey: .cost) }
    try container.encodeIfPresent(expires, forKey: .expires)
    try container.encodeIfPresent(idleExpires, forKey: .idleExpires)
  }
}

extension _SnapshotEntry: Decodable where Value: Decodable {
  init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    value = try container.decode(Value.self, forKey: .value)
    cost = try container.decodeIfPresent(Int.self, forKey: .cost) ?? 0
    expires = try container.decodeIfPresent(Double.self, forKey: .expires)
    idleExpires = try container.decodeIfPresent(Double.self, forKey: .idleExpires)
    for deadline in [expires, idleExpires] {
      guard let deadline, !deadline.isFinite else { continue }
      throw DecodingError.dataCorrupted(
        .init(
          codingPath: container.codingPath,
          debugDescription: "a deadline is \(deadline), not a time"))
    }
  }
}

/// An entry's metadata as a snapshot takes it: its cost and its deadlines as time left, in
/// nanoseconds (`nil`: none).
struct _SavedTerms {
  var cost: Int
  var expiresIn: Int64?
  var idleExpiresIn: Int64?
}
