// swift-tools-version: 6.2
import PackageDescription

let package = Package(
  name: "MemoryStorePostgres",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "MemoryStorePostgres", targets: ["MemoryStorePostgres"])
  ],
  dependencies: [
    .package(name: "MemoryStore", path: "../.."),
    .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.0"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.0"),
    .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.0"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
  ],
  targets: [
    .target(
      name: "MemoryStorePostgres",
      dependencies: [
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOSSL", package: "swift-nio-ssl"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
      ]
    ),
    .executableTarget(
      name: "SeveralInstances",
      dependencies: [
        "MemoryStorePostgres",
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Examples/SeveralInstances"
    ),
    .executableTarget(
      name: "SyncBenchmark",
      dependencies: [
        "MemoryStorePostgres",
        .product(name: "MemoryStoreKit", package: "MemoryStore"),
        .product(name: "Logging", package: "swift-log"),
      ],
      path: "Benchmarks/SyncBenchmark"
    ),
    .testTarget(
      name: "MemoryStorePostgresTests",
      dependencies: [
        "MemoryStorePostgres",
        "SeveralInstances",
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
        .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
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
