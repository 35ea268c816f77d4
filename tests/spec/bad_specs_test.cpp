// Malformed specs at scale: every file in tests/spec/bad_specs is loaded through load_file and must fail
// with the spec exit class and the message MANIFEST gives (what follows the file name: its line:col
// where the problem has a position, and the key). Files too big or too odd to keep in the repository
// (50 MB, a million lines) are generated. No case may crash or throw anything but tp::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/error.h"
#include "spec/spec.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::spec {
namespace {

namespace fs = std::filesystem;

const fs::path kCases = fs::path(testing::source_dir()) / "tests" / "spec" / "bad_specs";

// MANIFEST: "NAME<TAB>EXPECTED" lines; the error for NAME.toml must start with "NAME.toml" + EXPECTED.
std::map<std::string, std::string> manifest() {
  std::ifstream in(kCases / "MANIFEST");
  std::map<std::string, std::string> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line.front() == '#') continue;
    const auto tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << "MANIFEST line without a tab: " << line;
    if (tab == std::string::npos) continue;
    EXPECT_TRUE(cases.emplace(line.substr(0, tab), line.substr(tab + 1)).second) << "listed twice: " << line;
  }
  return cases;
}

// The error loading `file` (named `name` in messages); fails the test if it loads or throws anything else.
std::string load_error(const fs::path& file, const std::string& name) {
  try {
    load_file(file, {}, name);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::spec) << name << ": " << error.what();
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << name << ": not a tp::Error: " << error.what();
    return "";
  }
  ADD_FAILURE() << name << " loaded without an error";
  return "";
}

TEST(BadSpecs, ManifestListsEveryFile) {
  const auto cases = manifest();
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(kCases)) {
    if (entry.path().extension() == ".toml") files.insert(entry.path().stem().string());
  }
  EXPECT_GE(files.size(), 50u);
  for (const auto& name : files) EXPECT_TRUE(cases.count(name)) << name << ".toml is not in MANIFEST";
  for (const auto& [name, expected] : cases) EXPECT_TRUE(files.count(name)) << name << " is in MANIFEST but has no file";
}

TEST(BadSpecs, EachFailsWithTheSpecClassItsPositionAndKey) {
  int checked = 0;
  for (const auto& [name, expected] : manifest()) {
    SCOPED_TRACE(name);
    const std::string file_name = name + ".toml";
    const std::string message = load_error(kCases / file_name, file_name);
    EXPECT_EQ(message.rfind(file_name + expected, 0), 0u)
        << "expected: " << file_name << expected << "...\n     got: " << message;
    ++checked;
  }
  EXPECT_GE(checked, 50);
}

TEST(BadSpecs, FiftyMegabytesWithTheErrorOnTheLastLine) {
  testing::TempDir dir;
  const fs::path file = dir / "huge.toml";
  std::size_t lines = 0;
  {
    std::ofstream out(file, std::ios::binary);
    out << "[data]\nsource = \"data\"\n\n[model]\narch = \"mlp\"\n\n[train]\n";
    lines = 7;
    const std::string comment = "# " + std::string(97, 'x') + "\n";  // 100 bytes
    for (std::size_t written = 0; written < (50u << 20); written += comment.size(), ++lines) out << comment;
    out << "lr = \"fast\"\n";
    ++lines;
  }
  ASSERT_GE(fs::file_size(file), 50u << 20);
  const std::string message = load_error(file, "huge.toml");
  EXPECT_EQ(message, "huge.toml:" + std::to_string(lines) + ":6: train.lr: expected number, got a string");
}

TEST(BadSpecs, FiftyMegabyteValueOfAnUnknownKey) {
  testing::TempDir dir;
  const fs::path file = dir / "long-line.toml";
  {
    std::ofstream out(file, std::ios::binary);
    out << "[data]\nsource = \"data\"\n\n[model]\narch = \"mlp\"\n\n[train]\nnotes = \"" << std::string(50u << 20, 'y')
        << "\"\n";
  }
  EXPECT_EQ(load_error(file, "long-line.toml"), "long-line.toml:8:1: unknown key 'train.notes'");
}

TEST(BadSpecs, AMillionUnknownSections) {
  testing::TempDir dir;
  const fs::path file = dir / "many.toml";
  {
    std::ofstream out(file, std::ios::binary);
    for (int i = 0; i < 1000000; ++i) out << "[s" << i << "]\n";
  }
  // The document parses (14 MB, a million tables); the first sections in key order are reported, and that
  // there are more.
  const std::string message = load_error(file, "many.toml");
  EXPECT_EQ(message.rfind("many.toml:1:2: unknown key 's0'\n", 0), 0u) << message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 20) << message;
  EXPECT_NE(message.find("\n(the first 20 errors; there are more)"), std::string::npos) << message;
}

TEST(BadSpecs, DeepNestingIsRefusedNotOverflowingTheStack) {
  for (const int depth : {100, 10000, 200000}) {
    SCOPED_TRACE(depth);
    testing::TempDir dir;
    const fs::path arrays = dir / "arrays.toml";
    testing::write_text(arrays, "[job]\ncommand = " + std::string(depth, '[') + std::string(depth, ']') + "\n");
    const std::string message = load_error(arrays, "arrays.toml");
    EXPECT_EQ(message.rfind("arrays.toml:2:", 0), 0u) << message;
    const fs::path tables = dir / "tables.toml";
    std::string nested;
    for (int i = 0; i < depth; ++i) nested += "{a = ";
    nested += "1" + std::string(depth, '}');
    testing::write_text(tables, "[job]\ncommand = " + nested + "\n");
    EXPECT_EQ(load_error(tables, "tables.toml").rfind("tables.toml:2:", 0), 0u);
  }
}

TEST(BadSpecs, RandomBytesNeverCrash) {
  // A fixed-seed sweep of short random documents (the fuzzer in tests/fuzz goes much further).
  std::uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::string alphabet = "[]=\"'.,{}#\n \tabcdefghijklmnopqrstuvwxyz_0123456789+-\\\x01\xc3\xa9\xff";
  for (int round = 0; round < 3000; ++round) {
    std::string document;
    const std::size_t length = next() % 200;
    for (std::size_t i = 0; i < length; ++i) document += alphabet[next() % alphabet.size()];
    try {
      load_string(document, {}, "random.toml");
    } catch (const Error& error) {
      ASSERT_EQ(error.code(), ExitCode::spec) << error.what();
      ASSERT_EQ(std::string(error.what()).rfind("random.toml", 0), 0u) << error.what();
    }
  }
}

}  // namespace
}  // namespace tp::spec
