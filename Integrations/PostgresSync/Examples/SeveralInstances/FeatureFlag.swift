/// A feature flag: the share of the users who get a feature, from none (off) to all.
///
/// Its text form, in the narration and in the commands of `--instance`, is `off` or `on N%`.
///
/// ```swift
/// flags["checkout.new-flow"] = .on(10)
/// flags["checkout.new-flow"]?.description  // "on 10%"
/// ```
struct FeatureFlag: Codable, Sendable, Hashable, LosslessStringConvertible {
  /// The percentage of the users who get the feature: 0 (off) to 100.
  var rollout: Int

  /// Off for everyone.
  static let off = FeatureFlag(rollout: 0)

  /// On for `percent` of the users (clamped to 0...100).
  static func on(_ percent: Int = 100) -> FeatureFlag {
    FeatureFlag(rollout: percent)
  }

  /// A flag on for `rollout` percent of the users, clamped to 0...100.
  init(rollout: Int) {
    self.rollout = min(max(rollout, 0), 100)
  }

  /// A flag from its text form: `off`, `on` (for everyone) or `on N%` (N from 1 to 100).
  init?(_ description: String) {
    let words = description.split(separator: " ")
    switch words.count {
    case 1 where words[0] == "off":
      rollout = 0
    case 1 where words[0] == "on":
      rollout = 100
    case 2 where words[0] == "on" && words[1].hasSuffix("%"):
      guard let percent = Int(words[1].dropLast()), (1...100).contains(percent) else {
        return nil
      }
      rollout = percent
    default:
      return nil
    }
  }

  /// `off`, or `on N%`.
  var description: String {
    rollout == 0 ? "off" : "on \(rollout)%"
  }
}
