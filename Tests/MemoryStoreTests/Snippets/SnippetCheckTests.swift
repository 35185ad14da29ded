import Foundation
import Testing

/// Every ```` ```swift ```` block of `README.md` and of the DocC articles appears, as written,
/// in a snippet file of this folder, where a test runs it and checks what its comments say.
///
/// The comparison ignores indentation, runs of spaces and blank lines, so that the formatter
/// may realign the code. An `import` line of a block must be among the snippet file's lines,
/// anywhere (imports go at the top of a file); the other lines must appear together, in order.
///
/// A block that cannot run in a test (a line of `Package.swift`, or code for a platform the
/// tests do not run on) is preceded, on the line right before its fence, by
/// `<!-- snippet: not compiled (the reason) -->`; keep those few.
@Suite("Snippets: every block of the documents runs") struct SnippetCheck {
  /// The repository's root: this file is `Tests/MemoryStoreTests/Snippets/…`.
  static let root = URL(filePath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
  static let snippetsFolder = URL(filePath: #filePath).deletingLastPathComponent()
  static let notCompiledMarker = "<!-- snippet: not compiled ("

  struct Block {
    var document: String
    var line: Int
    var lines: [String]
    var notCompiledReason: String?
  }

  /// `README.md` and every article of the DocC catalog, relative to the root.
  static func documents() throws -> [String] {
    let catalog = "Sources/MemoryStoreKit/Documentation.docc"
    let articles = try FileManager.default
      .contentsOfDirectory(atPath: root.appending(path: catalog).path)
      .filter { $0.hasSuffix(".md") }.sorted()
    return ["README.md"] + articles.map { "\(catalog)/\($0)" }
  }

  /// The ```` ```swift ```` blocks of `document`.
  static func blocks(of document: String) throws -> [Block] {
    let text = try String(contentsOf: root.appending(path: document), encoding: .utf8)
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var blocks: [Block] = []
    var index = 0
    while index < lines.count {
      guard lines[index].trimmingCharacters(in: .whitespaces) == "```swift" else {
        index += 1
        continue
      }
      let previous = index > 0 ? lines[index - 1].trimmingCharacters(in: .whitespaces) : ""
      var reason: String?
      if previous.hasPrefix(notCompiledMarker), previous.hasSuffix(") -->") {
        reason = String(previous.dropFirst(notCompiledMarker.count).dropLast(") -->".count))
      }
      var end = index + 1
      while end < lines.count && lines[end].trimmingCharacters(in: .whitespaces) != "```" {
        end += 1
      }
      blocks.append(
        Block(
          document: document, line: index + 1, lines: Array(lines[(index + 1)..<end]),
          notCompiledReason: reason))
      index = end + 1
    }
    return blocks
  }

  /// A line without its indentation and with each run of spaces made one; `nil` if blank.
  static func normalized(_ line: String) -> String? {
    let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
    return words.isEmpty ? nil : words.joined(separator: " ")
  }

  /// The normalized lines of every snippet file.
  static func snippetFiles() throws -> [String: [String]] {
    let names = try FileManager.default.contentsOfDirectory(atPath: snippetsFolder.path)
      .filter { $0.hasSuffix("Snippets.swift") }
    var files: [String: [String]] = [:]
    for name in names {
      let text = try String(contentsOf: snippetsFolder.appending(path: name), encoding: .utf8)
      files[name] = text.split(separator: "\n").compactMap { normalized(String($0)) }
    }
    return files
  }

  /// Whether `block` appears in `file`.
  static func appears(_ block: Block, in file: [String]) -> Bool {
    let lines = block.lines.compactMap(normalized)
    let imports = lines.filter { $0.hasPrefix("import ") }
    let code = lines.filter { !$0.hasPrefix("import ") }
    guard imports.allSatisfy(file.contains) else { return false }
    guard !code.isEmpty else { return true }
    guard file.count >= code.count else { return false }
    return (0...(file.count - code.count)).contains { start in
      file[start..<(start + code.count)].elementsEqual(code)
    }
  }

  @Test func everySwiftBlockIsInASnippetFileOrMarkedNotCompiled() throws {
    let files = try Self.snippetFiles()
    #expect(files.count >= 4, "snippet files found: \(files.keys.sorted())")
    var checked = 0
    var notCompiled: [String] = []
    for document in try Self.documents() {
      for block in try Self.blocks(of: document) {
        let first = block.lines.lazy.compactMap(Self.normalized).first ?? "(empty)"
        if let reason = block.notCompiledReason {
          #expect(!reason.isEmpty, "\(document):\(block.line): a marker without a reason")
          notCompiled.append("\(document):\(block.line) (\(reason))")
          continue
        }
        checked += 1
        #expect(
          files.values.contains { Self.appears(block, in: $0) },
          """
          \(document):\(block.line): the block starting `\(first)` is in no snippet file of \
          Tests/MemoryStoreTests/Snippets (add it there, as written, to a test that runs it)
          """)
      }
    }
    // The extraction found the documents' blocks, and the exceptions stay few.
    #expect(checked >= 25, "only \(checked) blocks found")
    #expect(notCompiled.count <= 4, "blocks not compiled: \(notCompiled)")
  }

  @Test func theCheckFindsABlockThatIsInNoFileAndToleratesLayout() {
    let file = ["import Foundation", "import MemoryStoreKit", "let a = 1 // one", "print(a)"]
    func block(_ lines: [String]) -> Block {
      Block(document: "test", line: 1, lines: lines, notCompiledReason: nil)
    }
    #expect(Self.appears(block(["import MemoryStoreKit", "", "  let a = 1     // one"]), in: file))
    #expect(Self.appears(block(["let a = 1 // one", "print(a)"]), in: file))
    #expect(!Self.appears(block(["let a = 2"]), in: file))
    #expect(!Self.appears(block(["print(a)", "let a = 1 // one"]), in: file))
    #expect(!Self.appears(block(["import Dispatch", "print(a)"]), in: file))
  }
}
