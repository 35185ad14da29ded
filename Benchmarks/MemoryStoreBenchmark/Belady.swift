// Belady's MIN, the best hit rate any cache of the same capacity could reach on a trace: on a
// miss in a full cache, evict the key whose next use is farthest in the future (or never). The
// missed key is always inserted (demand caching, as in libCacheSim's Belady), so a policy that
// could refuse to cache a key is not what this bounds.

/// The hit rate of Belady's MIN on `trace` with room for `capacity` keys.
///
/// One backward pass finds, for every access, the index of the same key's next access; the
/// replay keeps the cached keys in a max-heap ordered by that index. An entry is stale when its
/// key has been used since (a later next use) or evicted; stale entries are skipped when popped.
///
/// - Complexity: O(n log n) time and O(n + k) memory for n accesses over keys below k.
func beladyHitRate(_ trace: [Int], capacity: Int) -> Double {
  precondition(capacity > 0)
  let count = trace.count
  let keyBound = (trace.max() ?? -1) + 1
  // `count` stands for "never used again".
  var nextUse = [Int](repeating: count, count: count)
  var upcoming = [Int](repeating: count, count: keyBound)
  for index in stride(from: count - 1, through: 0, by: -1) {
    let key = trace[index]
    nextUse[index] = upcoming[key]
    upcoming[key] = index
  }
  // The next use of every cached key, -1 for a key that is not cached.
  var cachedNextUse = [Int](repeating: -1, count: keyBound)
  var heap = MaxHeap()
  var cached = 0
  var hits = 0
  for index in 0..<count {
    let key = trace[index]
    if cachedNextUse[key] >= 0 {
      hits += 1
    } else if cached == capacity {
      while let top = heap.popMax() {
        // A key's next uses only grow, so an entry matches the key's current one exactly
        // when it is the key's newest entry and the key is still cached.
        if cachedNextUse[top.key] == top.nextUse {
          cachedNextUse[top.key] = -1
          break
        }
      }
    } else {
      cached += 1
    }
    cachedNextUse[key] = nextUse[index]
    heap.push(nextUse: nextUse[index], key: key)
  }
  return count == 0 ? 0 : Double(hits) / Double(count)
}

/// A binary max-heap of (next use, key) pairs, ordered by next use.
private struct MaxHeap {
  private var nextUses: [Int] = []
  private var keys: [Int] = []

  mutating func push(nextUse: Int, key: Int) {
    nextUses.append(nextUse)
    keys.append(key)
    var child = nextUses.count - 1
    while child > 0 {
      let parent = (child - 1) / 2
      guard nextUses[parent] < nextUses[child] else { break }
      swap(child, parent)
      child = parent
    }
  }

  mutating func popMax() -> (nextUse: Int, key: Int)? {
    guard let lastUse = nextUses.popLast(), let lastKey = keys.popLast() else { return nil }
    guard !nextUses.isEmpty else { return (lastUse, lastKey) }
    let top = (nextUse: nextUses[0], key: keys[0])
    nextUses[0] = lastUse
    keys[0] = lastKey
    var parent = 0
    while true {
      let left = 2 * parent + 1
      guard left < nextUses.count else { break }
      let right = left + 1
      let larger = right < nextUses.count && nextUses[right] > nextUses[left] ? right : left
      guard nextUses[parent] < nextUses[larger] else { break }
      swap(parent, larger)
      parent = larger
    }
    return top
  }

  private mutating func swap(_ first: Int, _ second: Int) {
    nextUses.swapAt(first, second)
    keys.swapAt(first, second)
  }
}
