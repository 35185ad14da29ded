import Foundation

// The encoding half of `BinarySnapshotCoder`; the format is described in BinaryFormat.swift.
//
// Every value is written straight into one growing byte buffer. That needs the containers to
// be used in stack order, which is what synthesized and hand-written `encode(to:)` methods do:
// a nested container or a nested value is finished before its parent writes again. The state
// keeps a stack of the open places (containers, and slots awaiting one value); a write to a
// container closes everything above it on the stack (patching the closed containers' byte
// counts), and a write to a container that is no longer open throws an `EncodingError`.

/// Writes the entries of a dictionary as a binary payload.
enum _BinaryEncoding {
  static func encode<Key: Encodable & Hashable, Value: Encodable>(
    _ entries: [Key: Value]
  ) throws -> Data {
    let state = _BinaryEncodingState(expectedEntries: entries.count)
    if Key.self == String.self {
      // The common case: a key is written as a string value, without the generic path. Key is
      // String, so the bit cast is the identity; `as?` would copy the dictionary.
      let stringKeyed = unsafeBitCast(entries, to: [String: Value].self)
      for (key, value) in stringKeyed {
        state.writeString(key)
        try state.encodeValue(value, path: .string(key), mark: state.mark())
        try state.throwDeferredError()
      }
    } else {
      // Paths as JSONEncoder's: the entries form one array alternating keys and values.
      var index = 0
      for (key, value) in entries {
        try state.encodeValue(key, path: .index(index), mark: state.mark())
        try state.encodeValue(value, path: .index(index + 1), mark: state.mark())
        try state.throwDeferredError()
        index += 2
      }
    }
    return state.payload(entryCount: entries.count)
  }
}

/// Where a container or a slot sits on the open stack, and which one it is.
private struct _BinaryEntryRef {
  /// The index in the open stack; -1 for a container that could not be made.
  let index: Int
  /// The entry's unique id, checked against the stack before every write.
  let id: Int

  static let invalid = _BinaryEntryRef(index: -1, id: 0)
}

/// A container that may still grow, or a slot that awaits one value.
private struct _OpenEntry {
  enum Kind {
    case keyed, unkeyed, slot
  }

  /// What a slot received.
  enum Fill: Equatable {
    case empty
    case keyed(id: Int)
    case unkeyed(id: Int)
    case single
  }

  let id: Int
  let kind: Kind
  /// Containers: the offset of the byte reserved for the byte count.
  let lengthOffset: Int
  /// The number of containers around the values written here, this one included.
  let depth: Int
  let path: _BinaryPathComponent
  var fill = Fill.empty
  /// Unkeyed containers: the number of elements written.
  var count = 0
}

/// The state of one `encode` call, shared by the encoders and containers it creates.
private final class _BinaryEncodingState {
  // The state serves one `encode` call on one thread, and no access to these properties spans
  // a call that could reach another (no user code runs inside one), so the runtime's
  // exclusivity checks, a large part of the time, would find nothing.

  /// The entries, in order; `payload(entryCount:)` adds the header and the string table.
  @exclusivity(unchecked) private var bytes: [UInt8] = []
  @exclusivity(unchecked) private var nameIndices: [String: Int] = [:]
  /// The string table's strings, by index.
  @exclusivity(unchecked) private var nameList: [String] = []
  /// Per name index, the index of the name written after it last time, or -1: types write
  /// their fields in the same order every time, so this usually saves hashing the name.
  @exclusivity(unchecked) private var successors: [Int] = []
  @exclusivity(unchecked) private var lastNameIndex = -1
  /// The string table's strings, each a varint byte count and the UTF-8 bytes.
  @exclusivity(unchecked) private var names: [UInt8] = []
  @exclusivity(unchecked) private var open: [_OpenEntry] = []
  @exclusivity(unchecked) private var lastID = 0
  /// A misuse detected where the `Encoder` API cannot throw, reported at the next chance.
  private var deferredError: (any Error)?

  init(expectedEntries: Int) {
    // A guess that avoids most reallocations of small values; the buffer grows as needed.
    bytes.reserveCapacity(min(expectedEntries, 1 << 24) &* 32 &+ 64)
    open.reserveCapacity(16)
  }

  /// The complete payload: version, string table, entry count and entries.
  func payload(entryCount: Int) -> Data {
    var header: [UInt8] = [_BinaryFormat.version]
    Self.appendVarint(UInt64(nameIndices.count), to: &header)
    var count: [UInt8] = []
    Self.appendVarint(UInt64(entryCount), to: &count)
    var data = Data(capacity: header.count + names.count + count.count + bytes.count)
    data.append(contentsOf: header)
    data.append(contentsOf: names)
    data.append(contentsOf: count)
    data.append(contentsOf: bytes)
    return data
  }

  func throwDeferredError() throws {
    if let deferredError { throw deferredError }
  }

  // MARK: Writing bytes

  @inline(__always)
  private static func appendVarint(_ value: UInt64, to buffer: inout [UInt8]) {
    var value = value
    while value >= 0x80 {
      buffer.append(UInt8(truncatingIfNeeded: value) | 0x80)
      value >>= 7
    }
    buffer.append(UInt8(truncatingIfNeeded: value))
  }

  @inline(__always)
  private func writeVarint(_ value: UInt64) {
    if value < 0x80 {
      bytes.append(UInt8(truncatingIfNeeded: value))
    } else {
      Self.appendVarint(value, to: &bytes)
    }
  }

  @inline(__always)
  func writeNil() {
    bytes.append(_BinaryFormat.nilTag)
  }

  @inline(__always)
  func writeBool(_ value: Bool) {
    bytes.append(value ? _BinaryFormat.trueTag : _BinaryFormat.falseTag)
  }

  @inline(__always)
  func writeInt(_ value: Int64) {
    bytes.append(_BinaryFormat.intTag)
    // Zigzag: 0, -1, 1, -2 ... become 0, 1, 2, 3 ...
    writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
  }

  @inline(__always)
  func writeUInt(_ value: UInt64) {
    bytes.append(_BinaryFormat.uintTag)
    writeVarint(value)
  }

  func writeInt128(_ value: Int128) {
    if let small = Int64(exactly: value) {
      writeInt(small)
    } else {
      bytes.append(_BinaryFormat.int128Tag)
      write128(UInt128(truncatingIfNeeded: value))
    }
  }

  func writeUInt128(_ value: UInt128) {
    if let small = UInt64(exactly: value) {
      writeUInt(small)
    } else {
      bytes.append(_BinaryFormat.uint128Tag)
      write128(value)
    }
  }

  private func write128(_ value: UInt128) {
    writeFixed(UInt64(truncatingIfNeeded: value))
    writeFixed(UInt64(truncatingIfNeeded: value >> 64))
  }

  @inline(__always)
  private func writeFixed(_ value: UInt64) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
  }

  @inline(__always)
  func writeFloat(_ value: Float) {
    bytes.append(_BinaryFormat.float32Tag)
    withUnsafeBytes(of: value.bitPattern.littleEndian) { bytes.append(contentsOf: $0) }
  }

  @inline(__always)
  func writeDouble(_ value: Double) {
    bytes.append(_BinaryFormat.float64Tag)
    writeFixed(value.bitPattern)
  }

  @inline(__always)
  func writeString(_ value: String) {
    bytes.append(_BinaryFormat.stringTag)
    let utf8 = value.utf8
    writeVarint(UInt64(utf8.count))
    bytes.append(contentsOf: utf8)
  }

  func writeData(_ value: Data) {
    bytes.append(_BinaryFormat.bytesTag)
    writeVarint(UInt64(value.count))
    bytes.append(contentsOf: value)
  }

  /// Writes a keyed container's field name: its index in the string table, which gains the
  /// name on first use.
  @inline(__always)
  func writeName(_ name: String) {
    let previous = lastNameIndex
    if previous >= 0 {
      let guess = successors[previous]
      if guess >= 0, nameList[guess] == name {
        lastNameIndex = guess
        writeVarint(UInt64(guess))
        return
      }
    }
    let index = lookUpName(name)
    if previous >= 0 { successors[previous] = index }
    lastNameIndex = index
    writeVarint(UInt64(index))
  }

  /// The index of `name` in the string table, which gains it if it is new.
  private func lookUpName(_ name: String) -> Int {
    if let index = nameIndices[name] { return index }
    let index = nameList.count
    nameIndices[name] = index
    nameList.append(name)
    successors.append(-1)
    Self.appendVarint(UInt64(name.utf8.count), to: &names)
    names.append(contentsOf: name.utf8)
    return index
  }

  /// Writes a value of a type with a binary form of its own; false for any other type.
  @inline(__always)
  private func writePrimitive<T>(_ value: T) -> Bool {
    // Each cast follows a check that T is the very type cast to, so it always succeeds.
    if T.self == String.self, let value = value as? String {
      writeString(value)
    } else if T.self == Double.self, let value = value as? Double {
      writeDouble(value)
    } else if T.self == Int.self, let value = value as? Int {
      writeInt(Int64(value))
    } else if T.self == Bool.self, let value = value as? Bool {
      writeBool(value)
    } else if T.self == Data.self, let value = value as? Data {
      writeData(value)
    } else if T.self == Float.self, let value = value as? Float {
      writeFloat(value)
    } else if T.self == Int64.self, let value = value as? Int64 {
      writeInt(value)
    } else if T.self == UInt64.self, let value = value as? UInt64 {
      writeUInt(value)
    } else if T.self == UInt8.self, let value = value as? UInt8 {
      writeUInt(UInt64(value))
    } else {
      return false
    }
    return true
  }

  // MARK: Values

  /// The state to restore when a value's `encode(to:)` throws: the byte count and the stack.
  struct Mark {
    let byteCount: Int
    let openCount: Int
    let topID: Int
  }

  func mark() -> Mark {
    Mark(byteCount: bytes.count, openCount: open.count, topID: open.last?.id ?? 0)
  }

  /// Writes one value in a new slot (the caller wrote the field name, if any). When the value's
  /// `encode(to:)` throws, everything written since `mark` is removed and the error rethrown
  /// unchanged, so a caller that catches it may go on encoding.
  func encodeValue<T: Encodable>(
    _ value: T, path: _BinaryPathComponent, mark: Mark
  ) throws {
    if writePrimitive(value) { return }
    let slot = pushSlot(path: path)
    do {
      try value.encode(to: _BinaryEncoder(state: self, slot: slot))
      try endSlot(slot)
    } catch {
      rollBack(to: mark)
      throw error
    }
  }

  /// Writes one value into an existing, empty slot: a single value container's generic encode.
  func encodeValue<T: Encodable>(_ value: T, intoSlot slot: _BinaryEntryRef) throws {
    try checkEmptySlot(slot, value: value)
    if writePrimitive(value) {
      open[slot.index].fill = .single
      return
    }
    // The value's encoder fills this slot; if it writes nothing, closing the slot writes the
    // empty keyed container.
    try value.encode(to: _BinaryEncoder(state: self, slot: slot))
  }

  private func rollBack(to mark: Mark) {
    // Only when the stack below the mark is intact (it is unless a container was misused).
    guard open.count >= mark.openCount, bytes.count >= mark.byteCount else { return }
    guard mark.openCount == 0 || open[mark.openCount - 1].id == mark.topID else { return }
    open.removeSubrange(mark.openCount...)
    bytes.removeSubrange(mark.byteCount...)
  }

  // MARK: The open stack

  private func isOpen(_ ref: _BinaryEntryRef) -> Bool {
    ref.index >= 0 && ref.index < open.count && open[ref.index].id == ref.id
  }

  /// Makes `ref` the innermost open entry before it writes: closes the entries above it, or
  /// throws when it was closed already.
  @inline(__always)
  func willWrite(_ ref: _BinaryEntryRef) throws {
    if ref.index >= 0, ref.index == open.count &- 1, open[ref.index].id == ref.id { return }
    try closeAbove(ref)
  }

  private func closeAbove(_ ref: _BinaryEntryRef) throws {
    guard isOpen(ref) else {
      if let deferredError { throw deferredError }
      throw misuse(
        "A container was written to after its parent or a later sibling had written",
        path: codingPath(through: min(ref.index, open.count - 1)))
    }
    while open.count > ref.index + 1 {
      close(open.removeLast())
    }
  }

  private func close(_ entry: _OpenEntry) {
    switch entry.kind {
    case .slot:
      if entry.fill == .empty {
        // A value that encoded nothing reads back as an empty keyed container.
        bytes.append(_BinaryFormat.keyedTag)
        bytes.append(0)
      }
    case .keyed, .unkeyed:
      patchLength(at: entry.lengthOffset)
    }
  }

  /// Writes a closed container's byte count into the byte reserved for it, moving the
  /// contents when the count needs more than one byte.
  private func patchLength(at offset: Int) {
    let length = bytes.count - (offset + 1)
    if length < 0x80 {
      bytes[offset] = UInt8(truncatingIfNeeded: length)
      return
    }
    var varint: [UInt8] = []
    Self.appendVarint(UInt64(length), to: &varint)
    bytes.replaceSubrange(offset..<(offset + 1), with: varint)
  }

  private func pushSlot(path: _BinaryPathComponent) -> _BinaryEntryRef {
    lastID += 1
    let depth = open.last?.depth ?? 0
    open.append(
      _OpenEntry(id: lastID, kind: .slot, lengthOffset: -1, depth: depth, path: path))
    return _BinaryEntryRef(index: open.count - 1, id: lastID)
  }

  /// Closes a slot after its value's `encode(to:)` returned, with everything above it.
  private func endSlot(_ slot: _BinaryEntryRef) throws {
    guard isOpen(slot) else {
      throw misuse(
        "A value's encoder was used after its parent container had written",
        path: codingPath(through: open.count - 1))
    }
    while open.count > slot.index {
      close(open.removeLast())
    }
  }

  /// Writes a container's tag and reserves its byte count; the caller made the place the top.
  private func pushContainer(
    _ kind: _OpenEntry.Kind, path: _BinaryPathComponent
  ) -> _BinaryEntryRef {
    let depth = (open.last?.depth ?? 0) + 1
    guard depth <= _BinaryFormat.maximumDepth else {
      record(
        misuse(
          "Containers nest deeper than \(_BinaryFormat.maximumDepth) levels",
          path: codingPath(through: open.count - 1)))
      return .invalid
    }
    bytes.append(kind == .keyed ? _BinaryFormat.keyedTag : _BinaryFormat.unkeyedTag)
    bytes.append(0)
    lastID += 1
    open.append(
      _OpenEntry(id: lastID, kind: kind, lengthOffset: bytes.count - 1, depth: depth, path: path))
    return _BinaryEntryRef(index: open.count - 1, id: lastID)
  }

  private func record(_ error: any Error) {
    if deferredError == nil { deferredError = error }
  }

  private func misuse(_ message: String, path: [any CodingKey]) -> EncodingError {
    EncodingError.invalidValue(
      message, EncodingError.Context(codingPath: path, debugDescription: message))
  }

  /// A slot's keyed container: opened on the first request, the same one on later requests.
  func keyedContainer(for slot: _BinaryEntryRef) -> _BinaryEntryRef {
    container(.keyed, for: slot)
  }

  /// A slot's unkeyed container: opened on the first request, the same one on later requests.
  func unkeyedContainer(for slot: _BinaryEntryRef) -> _BinaryEntryRef {
    container(.unkeyed, for: slot)
  }

  private func container(_ kind: _OpenEntry.Kind, for slot: _BinaryEntryRef) -> _BinaryEntryRef {
    guard isOpen(slot) else {
      record(
        misuse(
          "An encoder was asked for a container after its value was finished",
          path: codingPath(through: open.count - 1)))
      return .invalid
    }
    let fill = open[slot.index].fill
    switch (kind, fill) {
    case (.keyed, .empty) where slot.index == open.count - 1,
      (.unkeyed, .empty) where slot.index == open.count - 1:
      // The container goes right here (an empty slot has nothing above it).
      let ref = pushContainer(kind, path: .none)
      if ref.index >= 0 {
        open[slot.index].fill = kind == .keyed ? .keyed(id: ref.id) : .unkeyed(id: ref.id)
      }
      return ref
    case (.keyed, .keyed(let id)), (.unkeyed, .unkeyed(let id)):
      let ref = _BinaryEntryRef(index: slot.index + 1, id: id)
      if isOpen(ref) { return ref }
    default:
      break
    }
    record(
      misuse(
        "An encoder was asked for a \(kind) container after it had encoded another value",
        path: codingPath(through: slot.index)))
    return .invalid
  }

  /// Checks that a single value container's slot has no value yet, and marks it filled.
  func beginSingleValue(_ slot: _BinaryEntryRef, value: Any) throws {
    try checkEmptySlot(slot, value: value)
    open[slot.index].fill = .single
  }

  private func checkEmptySlot(_ slot: _BinaryEntryRef, value: Any) throws {
    guard isOpen(slot), open[slot.index].fill == .empty else {
      if let deferredError { throw deferredError }
      let message =
        isOpen(slot)
        ? "A single value container was asked to encode a second value"
        : "A single value container was used after its value was finished"
      throw EncodingError.invalidValue(
        value,
        EncodingError.Context(
          codingPath: codingPath(through: min(slot.index, open.count - 1)),
          debugDescription: message))
    }
  }

  /// Opens a container nested in `parent`, as the field `name` of a keyed parent or as the
  /// next element of an unkeyed one.
  func nestedContainer(
    _ kind: _OpenEntry.Kind, in parent: _BinaryEntryRef, name: String?,
    path: _BinaryPathComponent
  ) -> _BinaryEntryRef {
    do {
      try willWrite(parent)
    } catch {
      record(error)
      return .invalid
    }
    guard open[parent.index].depth < _BinaryFormat.maximumDepth else {
      return pushContainer(kind, path: path)  // Records the error, returns .invalid.
    }
    if let name { writeName(name) } else { open[parent.index].count += 1 }
    return pushContainer(kind, path: path)
  }

  /// Opens a slot in `parent` for a super encoder, as the field `name` of a keyed parent or
  /// as the next element of an unkeyed one.
  func superSlot(
    in parent: _BinaryEntryRef, name: String?, path: _BinaryPathComponent
  ) -> _BinaryEntryRef {
    do {
      try willWrite(parent)
    } catch {
      record(error)
      return .invalid
    }
    if let name { writeName(name) } else { open[parent.index].count += 1 }
    return pushSlot(path: path)
  }

  /// Counts an element written to an unkeyed container.
  @inline(__always)
  func didAppendElement(to ref: _BinaryEntryRef) {
    // `willWrite(ref)` preceded, so `ref` is open unless a value's `encode(to:)` misused the
    // containers, which `endSlot` reports.
    if isOpen(ref) { open[ref.index].count += 1 }
  }

  /// The element count of an unkeyed container, or nil once it is closed.
  func elementCount(_ ref: _BinaryEntryRef) -> Int? {
    isOpen(ref) ? open[ref.index].count : nil
  }

  /// The coding path of the entry at `index` of the open stack (empty for -1).
  func codingPath(through index: Int) -> [any CodingKey] {
    guard index >= 0 else { return [] }
    return open.prefix(index + 1).compactMap { $0.path.key }
  }
}

/// The `Encoder` handed to a value's `encode(to:)`: a slot that awaits one value.
private struct _BinaryEncoder: Encoder {
  let state: _BinaryEncodingState
  let slot: _BinaryEntryRef

  var codingPath: [any CodingKey] { state.codingPath(through: slot.index) }
  var userInfo: [CodingUserInfoKey: Any] { [:] }

  func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
    KeyedEncodingContainer(
      _BinaryKeyedEncoder<Key>(state: state, ref: state.keyedContainer(for: slot)))
  }

  func unkeyedContainer() -> any UnkeyedEncodingContainer {
    _BinaryUnkeyedEncoder(state: state, ref: state.unkeyedContainer(for: slot))
  }

  func singleValueContainer() -> any SingleValueEncodingContainer {
    _BinarySingleValueEncoder(state: state, slot: slot)
  }
}

private struct _BinaryKeyedEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
  let state: _BinaryEncodingState
  let ref: _BinaryEntryRef

  var codingPath: [any CodingKey] { state.codingPath(through: ref.index) }

  @inline(__always)
  private func field(_ key: Key) throws {
    try state.willWrite(ref)
    state.writeName(key.stringValue)
  }

  mutating func encodeNil(forKey key: Key) throws {
    try field(key)
    state.writeNil()
  }

  mutating func encode(_ value: Bool, forKey key: Key) throws {
    try field(key)
    state.writeBool(value)
  }

  mutating func encode(_ value: String, forKey key: Key) throws {
    try field(key)
    state.writeString(value)
  }

  mutating func encode(_ value: Double, forKey key: Key) throws {
    try field(key)
    state.writeDouble(value)
  }

  mutating func encode(_ value: Float, forKey key: Key) throws {
    try field(key)
    state.writeFloat(value)
  }

  mutating func encode(_ value: Int, forKey key: Key) throws {
    try field(key)
    state.writeInt(Int64(value))
  }

  mutating func encode(_ value: Int8, forKey key: Key) throws {
    try field(key)
    state.writeInt(Int64(value))
  }

  mutating func encode(_ value: Int16, forKey key: Key) throws {
    try field(key)
    state.writeInt(Int64(value))
  }

  mutating func encode(_ value: Int32, forKey key: Key) throws {
    try field(key)
    state.writeInt(Int64(value))
  }

  mutating func encode(_ value: Int64, forKey key: Key) throws {
    try field(key)
    state.writeInt(value)
  }

  mutating func encode(_ value: Int128, forKey key: Key) throws {
    try field(key)
    state.writeInt128(value)
  }

  mutating func encode(_ value: UInt, forKey key: Key) throws {
    try field(key)
    state.writeUInt(UInt64(value))
  }

  mutating func encode(_ value: UInt8, forKey key: Key) throws {
    try field(key)
    state.writeUInt(UInt64(value))
  }

  mutating func encode(_ value: UInt16, forKey key: Key) throws {
    try field(key)
    state.writeUInt(UInt64(value))
  }

  mutating func encode(_ value: UInt32, forKey key: Key) throws {
    try field(key)
    state.writeUInt(UInt64(value))
  }

  mutating func encode(_ value: UInt64, forKey key: Key) throws {
    try field(key)
    state.writeUInt(value)
  }

  mutating func encode(_ value: UInt128, forKey key: Key) throws {
    try field(key)
    state.writeUInt128(value)
  }

  mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
    try state.willWrite(ref)
    let mark = state.mark()
    state.writeName(key.stringValue)
    try state.encodeValue(value, path: .key(key), mark: mark)
  }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy keyType: NestedKey.Type, forKey key: Key
  ) -> KeyedEncodingContainer<NestedKey> {
    let nested = state.nestedContainer(.keyed, in: ref, name: key.stringValue, path: .key(key))
    return KeyedEncodingContainer(_BinaryKeyedEncoder<NestedKey>(state: state, ref: nested))
  }

  mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
    let nested = state.nestedContainer(.unkeyed, in: ref, name: key.stringValue, path: .key(key))
    return _BinaryUnkeyedEncoder(state: state, ref: nested)
  }

  mutating func superEncoder() -> any Encoder {
    let slot = state.superSlot(
      in: ref, name: _BinaryKey.super.stringValue, path: .key(_BinaryKey.super))
    return _BinaryEncoder(state: state, slot: slot)
  }

  mutating func superEncoder(forKey key: Key) -> any Encoder {
    let slot = state.superSlot(in: ref, name: key.stringValue, path: .key(key))
    return _BinaryEncoder(state: state, slot: slot)
  }
}

private struct _BinaryUnkeyedEncoder: UnkeyedEncodingContainer {
  let state: _BinaryEncodingState
  let ref: _BinaryEntryRef
  /// The count this copy of the container has seen, for after the container is closed.
  private var localCount = 0

  init(state: _BinaryEncodingState, ref: _BinaryEntryRef) {
    self.state = state
    self.ref = ref
    self.localCount = state.elementCount(ref) ?? 0
  }

  var codingPath: [any CodingKey] { state.codingPath(through: ref.index) }
  var count: Int { state.elementCount(ref) ?? localCount }

  @inline(__always)
  private mutating func element(_ write: (_BinaryEncodingState) -> Void) throws {
    try state.willWrite(ref)
    write(state)
    state.didAppendElement(to: ref)
    localCount += 1
  }

  mutating func encodeNil() throws { try element { $0.writeNil() } }
  mutating func encode(_ value: Bool) throws { try element { $0.writeBool(value) } }
  mutating func encode(_ value: String) throws { try element { $0.writeString(value) } }
  mutating func encode(_ value: Double) throws { try element { $0.writeDouble(value) } }
  mutating func encode(_ value: Float) throws { try element { $0.writeFloat(value) } }
  mutating func encode(_ value: Int) throws { try element { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int8) throws { try element { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int16) throws { try element { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int32) throws { try element { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int64) throws { try element { $0.writeInt(value) } }
  mutating func encode(_ value: Int128) throws { try element { $0.writeInt128(value) } }
  mutating func encode(_ value: UInt) throws { try element { $0.writeUInt(UInt64(value)) } }
  mutating func encode(_ value: UInt8) throws { try element { $0.writeUInt(UInt64(value)) } }
  mutating func encode(_ value: UInt16) throws { try element { $0.writeUInt(UInt64(value)) } }
  mutating func encode(_ value: UInt32) throws { try element { $0.writeUInt(UInt64(value)) } }
  mutating func encode(_ value: UInt64) throws { try element { $0.writeUInt(value) } }
  mutating func encode(_ value: UInt128) throws { try element { $0.writeUInt128(value) } }

  mutating func encode<T: Encodable>(_ value: T) throws {
    try state.willWrite(ref)
    try state.encodeValue(value, path: .index(count), mark: state.mark())
    state.didAppendElement(to: ref)
    localCount += 1
  }

  mutating func nestedContainer<NestedKey: CodingKey>(
    keyedBy keyType: NestedKey.Type
  ) -> KeyedEncodingContainer<NestedKey> {
    let nested = state.nestedContainer(.keyed, in: ref, name: nil, path: .index(count))
    if nested.index >= 0 { localCount += 1 }
    return KeyedEncodingContainer(_BinaryKeyedEncoder<NestedKey>(state: state, ref: nested))
  }

  mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
    let nested = state.nestedContainer(.unkeyed, in: ref, name: nil, path: .index(count))
    if nested.index >= 0 { localCount += 1 }
    return _BinaryUnkeyedEncoder(state: state, ref: nested)
  }

  mutating func superEncoder() -> any Encoder {
    let slot = state.superSlot(in: ref, name: nil, path: .index(count))
    if slot.index >= 0 { localCount += 1 }
    return _BinaryEncoder(state: state, slot: slot)
  }
}

private struct _BinarySingleValueEncoder: SingleValueEncodingContainer {
  let state: _BinaryEncodingState
  let slot: _BinaryEntryRef

  var codingPath: [any CodingKey] { state.codingPath(through: slot.index) }

  @inline(__always)
  private func single(_ value: Any, _ write: (_BinaryEncodingState) -> Void) throws {
    try state.beginSingleValue(slot, value: value)
    write(state)
  }

  mutating func encodeNil() throws { try single(Never?.none as Any) { $0.writeNil() } }
  mutating func encode(_ value: Bool) throws { try single(value) { $0.writeBool(value) } }
  mutating func encode(_ value: String) throws { try single(value) { $0.writeString(value) } }
  mutating func encode(_ value: Double) throws { try single(value) { $0.writeDouble(value) } }
  mutating func encode(_ value: Float) throws { try single(value) { $0.writeFloat(value) } }
  mutating func encode(_ value: Int) throws { try single(value) { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int8) throws { try single(value) { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int16) throws { try single(value) { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int32) throws { try single(value) { $0.writeInt(Int64(value)) } }
  mutating func encode(_ value: Int64) throws { try single(value) { $0.writeInt(value) } }
  mutating func encode(_ value: Int128) throws { try single(value) { $0.writeInt128(value) } }
  mutating func encode(_ value: UInt) throws { try single(value) { $0.writeUInt(UInt64(value)) } }
  mutating func encode(_ value: UInt8) throws {
    try single(value) { $0.writeUInt(UInt64(value)) }
  }
  mutating func encode(_ value: UInt16) throws {
    try single(value) { $0.writeUInt(UInt64(value)) }
  }
  mutating func encode(_ value: UInt32) throws {
    try single(value) { $0.writeUInt(UInt64(value)) }
  }
  mutating func encode(_ value: UInt64) throws { try single(value) { $0.writeUInt(value) } }
  mutating func encode(_ value: UInt128) throws { try single(value) { $0.writeUInt128(value) } }

  mutating func encode<T: Encodable>(_ value: T) throws {
    try state.encodeValue(value, intoSlot: slot)
  }
}
