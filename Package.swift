// swift-tools-version: 6.2
import PackageDescription

let package = Package(
  name: "MemoryStore",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "MemoryStoreKit", targets: ["MemoryStoreKit"]),
    // The same library under the name it had first, for the packages that depend on it so.
    .library(name: "MemoryStore", targets: ["MemoryStoreKit"]),
  ],
  targets: [
    .target(name: "MemoryStoreKit", dependencies: ["_MemoryStoreShims"]),
    // What Swift cannot call: `membarrier`, a variadic system call (see `_Lock`).
    .target(name: "_MemoryStoreShims"),
    .testTarget(
      name: "MemoryStoreTests",
      dependencies: ["MemoryStoreKit"],
      resources: [.copy("Fixtures")]
    ),
    .executableTarget(
      name: "StockTicker",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/StockTicker"
    ),
    .executableTarget(
      name: "BasicUsage",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/BasicUsage"
    ),
    .executableTarget(
      name: "ObservingChanges",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/ObservingChanges"
    ),
    .executableTarget(
      name: "Persistence",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/Persistence"
    ),
    .executableTarget(
      name: "Eviction",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/Eviction"
    ),
    .executableTarget(
      name: "SessionStore",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/SessionStore"
    ),
    .executableTarget(
      name: "MarketWatch",
      dependencies: ["MemoryStoreKit"],
      path: "Examples/MarketWatch"
    ),
  ],
  swiftLanguageModes: [.v6]
)

for target in package.targets where target.name != "_MemoryStoreShims" {
  var settings = target.swiftSettings ?? []
  settings.append(.enableUpcomingFeature("ExistentialAny"))
  settings.append(.enableUpcomingFeature("MemberImportVisibility"))
  target.swiftSettings = settings
}
