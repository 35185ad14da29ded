// swift-tools-version: 6.2
import PackageDescription

// The harnesses that `crash-test` and `reliability` run, a package of their own beside the
// library's, so that building and testing the library never builds them.
let package = Package(
  name: "MemoryStoreHarnesses",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  dependencies: [.package(name: "MemoryStore", path: "..")],
  targets: [
    .executableTarget(
      name: "CrashHarness",
      dependencies: [.product(name: "MemoryStoreKit", package: "MemoryStore")],
      path: "CrashHarness"
    ),
    .executableTarget(
      name: "ReliabilityStress",
      dependencies: [.product(name: "MemoryStoreKit", package: "MemoryStore")],
      path: "ReliabilityStress"
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
