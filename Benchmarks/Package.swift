// swift-tools-version: 6.2
import PackageDescription

// The benchmark, a package of its own beside the library's, so that building and testing the
// library never builds it. Run it from the repository's root:
//
//     swift run -c release --package-path Benchmarks MemoryStoreBenchmark
let package = Package(
  name: "MemoryStoreBenchmarks",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  dependencies: [.package(name: "MemoryStore", path: "..")],
  targets: [
    .executableTarget(
      name: "MemoryStoreBenchmark",
      dependencies: [.product(name: "MemoryStoreKit", package: "MemoryStore")],
      path: "MemoryStoreBenchmark"
    )
  ],
  swiftLanguageModes: [.v6]
)

for target in package.targets {
  var settings = target.swiftSettings ?? []
  settings.append(.enableUpcomingFeature("ExistentialAny"))
  settings.append(.enableUpcomingFeature("MemberImportVisibility"))
  target.swiftSettings = settings
}
