// `trainpoint pack`'s words as cli::parse reads them: the request pack gets, the choices read by the spec's
// names of them, the usage errors that name the option, and the help.
#include "cli.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace tp::cli {
namespace {

Options parse_words(std::vector<std::string> words) {
  words.insert(words.begin(), "trainpoint");
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  return parse(static_cast<int>(argv.size()), argv.data());
}

// The message of the usage error that parsing `words` throws ("" when it throws none).
std::string usage_error(const std::vector<std::string>& words) {
  try {
    parse_words(words);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    return error.what();
  }
  return "";
}

TEST(PackCommandLine, SourceAndDestinationWithTheDefaultsOfADataSection) {
  const Options options = parse_words({"pack", "images", "s3://bucket/shards"});
  ASSERT_EQ(options.command, Command::pack);
  const storage::PackRequest& request = options.pack;
  EXPECT_EQ(request.data.source, "images");
  EXPECT_EQ(request.destination, "s3://bucket/shards");
  EXPECT_EQ(request.data.format, spec::DataFormat::image_folder);
  EXPECT_EQ(request.data.task, spec::Task::classification);
  EXPECT_EQ(request.data.target, "label");
  EXPECT_DOUBLE_EQ(request.data.valid, 0.2);
  EXPECT_EQ(request.shard_bytes, 256ull << 20);
  EXPECT_EQ(request.seed, 42u);
  EXPECT_GE(request.workers, 1);
  EXPECT_TRUE(request.workdir.empty()) << "pack makes a temporary folder of its own";
}

TEST(PackCommandLine, EveryOptionReachesTheRequest) {
  const Options options = parse_words(
      {"pack", "labels.csv", "out", "--format", "image_csv", "--task", "regression", "--target", "age",
       "--valid", "0.1", "--valid-source", "valid.csv", "--shard-size-mb", "0.5", "--seed", "7", "--workers",
       "3", "--endpoint", "http://minio:9000", "--credentials", "keys", "--workdir", "/tmp/work"});
  const storage::PackRequest& request = options.pack;
  EXPECT_EQ(request.data.format, spec::DataFormat::image_csv);
  EXPECT_EQ(request.data.task, spec::Task::regression);
  EXPECT_EQ(request.data.target, "age");
  EXPECT_DOUBLE_EQ(request.data.valid, 0.1);
  EXPECT_EQ(request.data.valid_source, "valid.csv");
  EXPECT_EQ(request.shard_bytes, 512u << 10);
  EXPECT_EQ(request.seed, 7u);
  EXPECT_EQ(request.workers, 3);
  EXPECT_EQ(request.data.endpoint, "http://minio:9000");
  EXPECT_EQ(request.data.credentials, "keys");
  EXPECT_EQ(request.workdir, "/tmp/work");
}

// Choices are the spec's names (spec::choice_names); a spec's choice that pack does not take is refused as
// a word that is none.
TEST(PackCommandLine, ChoicesAreTheSpecsNamesAndOthersAreUsageErrorsListingThem) {
  EXPECT_EQ(usage_error({"pack", "a", "b", "--format", "table_csv"}),
            "--format table_csv: image_folder or image_csv");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--format", "folder"}),
            "--format folder: image_folder or image_csv");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--task", "multi_label"}),
            "--task multi_label: classification or regression");
}

TEST(PackCommandLine, NumbersOutOfRangeAndUnknownWordsAreUsageErrorsNamingThem) {
  EXPECT_EQ(usage_error({"pack", "a", "b", "--valid", "0.95"}), "--valid 0.95: 0 to 0.9");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--shard-size-mb", "0.01"}),
            "--shard-size-mb 0.01: 0.0625 to 1000000");
  EXPECT_EQ(usage_error({"pack", "a", "b", "--workers", "0"}), "--workers 0: at least 1");
  EXPECT_NE(usage_error({"pack", "a", "b", "--log-format", "json"}).find("see trainpoint pack --help"),
            std::string::npos);
  EXPECT_NE(usage_error({"pack", "a", "b", "c"}).find("unexpected argument 'c'"), std::string::npos);
}

TEST(PackCommandLine, HelpOnStdoutAndWithoutBothPathsOnStderrAsAUsageError) {
  const Options help = parse_words({"pack", "--help"});
  EXPECT_EQ(help.command, Command::help);
  EXPECT_FALSE(help.usage_error);
  EXPECT_EQ(help.help_text.rfind("usage: trainpoint pack SRC DEST [options]", 0), 0u) << help.help_text;
  for (const char* option :
       {"--format", "--task", "--valid-source", "--shard-size-mb", "--workers", "--workdir"}) {
    EXPECT_NE(help.help_text.find(option), std::string::npos) << option << "\n" << help.help_text;
  }
  EXPECT_EQ(help.help_text.find("TRAINPOINT_SET"), std::string::npos)
      << "pack reads no environment variables";
  const Options without_destination = parse_words({"pack", "images"});
  EXPECT_EQ(without_destination.command, Command::help);
  EXPECT_TRUE(without_destination.usage_error);
  EXPECT_EQ(without_destination.help_text, help.help_text);
}

}  // namespace
}  // namespace tp::cli
