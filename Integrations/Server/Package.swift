// swift-tools-version: 6.2
import PackageDescription

let package = Package(
  name: "MemoryStoreServer",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "MemoryStoreServer", targets: ["MemoryStoreServer"])
  ],
  dependencies: [
    .package(name: "MemoryStore", path: "../.."),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    // The example server's only.
    .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
  ],
  targets: [
    .target(
      name: "MemoryStoreServer",
      dependencies: [
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    .executableTarget(
      name: "KeyValueServer",
      dependencies: [
        "MemoryStoreServer",
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "Prometheus", package: "swift-prometheus"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Examples/KeyValueServer"
    ),
    .executableTarget(
      name: "MetricsOverhead",
      dependencies: [
        "MemoryStoreServer",
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "Prometheus", package: "swift-prometheus"),
      ],
      path: "Benchmarks/MetricsOverhead"
    ),
    .testTarget(
      name: "MemoryStoreServerTests",
      dependencies: [
        "MemoryStoreServer",
        "KeyValueServer",
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
        .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        .product(name: "CoreMetrics", package: "swift-metrics"),
        .product(name: "MetricsTestKit", package: "swift-metrics"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "InMemoryLogging", package: "swift-log"),
      ]
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
