import Foundation
import MemoryStoreKit

// A caller's mistake that the store stops the program for, for Scripts/reliability: in this
// release build, the message must still reach standard error, not just "precondition failure".

/// The `reentrant-create` sub-command: calls `valueOrInsert(forKey:_:)` for a key from inside
/// its own `makeValue`, which stops the program with a message naming the mistake. Exits 1 if
/// the program goes on.
func runReentrantCreate() -> Never {
  let store = MemoryStore<String, Int>(name: "reentrant-create")
  let value = store.valueOrInsert(forKey: "key") { store.valueOrInsert(forKey: "key") { 1 } }
  printError("reentrant-create: the re-entrant call returned \(value) instead of stopping")
  exit(1)
}
