// swift-tools-version: 6.2
import PackageDescription

let package = Package(
  name: "MemoryStore",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "MemoryStore", targets: ["MemoryStore"])
  ],
  targets: [
    .target(name: "MemoryStore"),
    .testTarget(
      name: "MemoryStoreTests",
      dependencies: ["MemoryStore"],
      resources: [.copy("Fixtures")]
    ),
    .executableTarget(
      name: "StockTicker",
      dependencies: ["MemoryStore"],
      path: "Examples/StockTicker"
    ),
    .executableTarget(
      name: "BasicUsage",
      dependencies: ["MemoryStore"],
      path: "Examples/BasicUsage"
    ),
    .executableTarget(
      name: "ObservingChanges",
      dependencies: ["MemoryStore"],
      path: "Examples/ObservingChanges"
    ),
    .executableTarget(
      name: "Persistence",
      dependencies: ["MemoryStore"],
      path: "Examples/Persistence"
    ),
    .executableTarget(
      name: "Eviction",
      dependencies: ["MemoryStore"],
      path: "Examples/Eviction"
    ),
    .executableTarget(
      name: "MemoryStoreBenchmark",
      dependencies: ["MemoryStore"],
      path: "Benchmarks/MemoryStoreBenchmark"
    ),
    .executableTarget(
      name: "CrashHarness",
      dependencies: ["MemoryStore"],
      path: "Scripts/CrashHarness"
    ),
    .executableTarget(
      name: "ReliabilityStress",
      dependencies: ["MemoryStore"],
      path: "Scripts/ReliabilityStress"
    ),
  ],
  swiftLanguageModes: [.v6]
)

for target in package.targets {
  var settings = target.swiftSettings ?? []
  settings.append(.enableUpcomingFeature("ExistentialAny"))
  settings.append(.enableUpcomingFeature("MemberImportVisibility"))
  target.swiftSettings = settings
}
