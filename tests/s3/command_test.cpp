// `trainpoint s3 ls|cp|sync` through run_s3_command, against MinIO (what its words become:
// tests/entrypoint/cli_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "common/error.h"
#include "s3/command.h"
#include "s3_server.h"
#include "support/process.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every file under `directory`, relative, sorted.
std::vector<std::string> files_under(const fs::path& directory) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (!entry.is_directory()) files.push_back(fs::relative(entry.path(), directory).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// `trainpoint s3 VERB SOURCE [DESTINATION]`, without options.
S3Command s3_command(Verb verb, const std::string& source, const std::string& destination = "") {
  S3Command command;
  command.verb = verb;
  command.source = source;
  command.destination = destination;
  return command;
}

// `command` with --recursive, with --verbose.
S3Command recursive(S3Command command) {
  command.recursive = true;
  return command;
}
S3Command verbose(S3Command command) {
  command.verbose = true;
  return command;
}

class CommandTest : public ::testing::Test {
 protected:
  // Runs the command with the server's endpoint and keys; returns what it printed.
  std::string run(S3Command command) {
    testing::write_text(scratch_ / "keys", std::string("AWS_ACCESS_KEY_ID=") + testing::S3Server::kAccessKey +
                                                "\nAWS_SECRET_ACCESS_KEY=" + testing::S3Server::kSecretKey + "\n");
    command.connection.endpoint = server_.endpoint();
    command.connection.credentials_file = (scratch_ / "keys").string();
    ::testing::internal::CaptureStdout();
    try {
      EXPECT_EQ(run_s3_command(command), 0);
    } catch (...) {
      ::testing::internal::GetCapturedStdout();
      throw;
    }
    return ::testing::internal::GetCapturedStdout();
  }

  testing::S3Server server_;
  testing::TempDir scratch_;
};

TEST_F(CommandTest, CopyListAndSyncBothWays) {
  testing::write_text(scratch_ / "up/a.txt", "alpha");
  testing::write_text(scratch_ / "up/sub/b.txt", "beta");
  const std::string uploaded =
      run(recursive(verbose(s3_command(Verb::cp, (scratch_ / "up").string(), "s3://test-bucket/tree/"))));
  // With --verbose, each line names the file it sent, not the directory.
  EXPECT_NE(uploaded.find("upload: " + (scratch_ / "up/sub/b.txt").string() + " -> s3://test-bucket/tree/sub/b.txt"),
            std::string::npos)
      << uploaded;
  const std::string top = run(s3_command(Verb::ls, "s3://test-bucket/tree/"));
  EXPECT_NE(top.find("tree/a.txt"), std::string::npos) << top;
  EXPECT_NE(top.find("PRE tree/sub/"), std::string::npos) << top;
  EXPECT_NE(run(recursive(s3_command(Verb::ls, "s3://test-bucket/tree/"))).find("tree/sub/b.txt"),
            std::string::npos);

  run(s3_command(Verb::cp, "s3://test-bucket/tree/sub/b.txt", (scratch_ / "single.txt").string()));
  EXPECT_EQ(read_all(scratch_ / "single.txt"), "beta");

  const S3Command download = s3_command(Verb::sync, "s3://test-bucket/tree", (scratch_ / "down").string());
  EXPECT_NE(run(download).find("downloaded 2 objects"), std::string::npos);
  EXPECT_EQ(read_all(scratch_ / "down/sub/b.txt"), "beta");
  EXPECT_NE(run(download).find("downloaded 0 objects"), std::string::npos);
  // A copy holds what the bucket holds and nothing of trainpoint's own (no cache journal, no lock), so a
  // later upload of it sends nothing extra.
  const std::vector<std::string> bucket_files{"a.txt", "sub/b.txt"};
  EXPECT_EQ(files_under(scratch_ / "down"), bucket_files);
  run(recursive(s3_command(Verb::cp, "s3://test-bucket/tree", (scratch_ / "copy").string())));
  EXPECT_EQ(files_under(scratch_ / "copy"), bucket_files);
  // Without a journal a changed file is still found: by its MD5 against the object's ETag.
  testing::write_text(scratch_ / "down/a.txt", "ALPHA");
  EXPECT_NE(run(download).find("downloaded 1 objects"), std::string::npos);
  EXPECT_EQ(read_all(scratch_ / "down/a.txt"), "alpha");

  testing::write_text(scratch_ / "up/a.txt", "ALPHA");  // same size, other content: found by MD5
  const std::string synced =
      run(verbose(s3_command(Verb::sync, (scratch_ / "up").string(), "s3://test-bucket/tree")));
  EXPECT_NE(synced.find("uploaded 1 files"), std::string::npos) << synced;
  EXPECT_NE(synced.find("1 files unchanged"), std::string::npos) << synced;
  EXPECT_NE(synced.find("upload: " + (scratch_ / "up/a.txt").string() + " -> s3://test-bucket/tree/a.txt"),
            std::string::npos)
      << synced;
  run(s3_command(Verb::cp, "s3://test-bucket/tree/a.txt", (scratch_ / "a-again.txt").string()));
  EXPECT_EQ(read_all(scratch_ / "a-again.txt"), "ALPHA");
}

// Without --verbose a copy prints one summary (files, bytes, seconds), not a line per file; on a terminal, a
// progress line rewritten in place comes before it.
TEST_F(CommandTest, CopyPrintsASummaryAndAProgressLineOnATerminal) {
  for (int i = 0; i < 30; ++i) testing::write_text(scratch_ / "up" / fmt::format("{:02}.txt", i), "0123456789");
  const std::string summary =
      run(recursive(s3_command(Verb::cp, (scratch_ / "up").string(), "s3://test-bucket/quiet/")));
  EXPECT_EQ(summary.find("upload:"), std::string::npos) << summary;
  EXPECT_TRUE(std::regex_search(summary, std::regex(R"((^|\n)uploaded 30 files, 0\.0 MiB, in [0-9.]+ s to s3://test-bucket\n$)")))
      << summary;

  // script(1) gives the command a pseudo-terminal, as a user's shell would.
  const std::string copy = testing::S3Server::key_environment() + " " + testing::trainpoint_binary() +
                           " s3 cp --recursive --endpoint " + server_.endpoint() + " " + (scratch_ / "up").string() +
                           " s3://test-bucket/shown/";
  const auto on_terminal = testing::run_command("script -qec " + testing::shell_quote(copy) + " /dev/null");
  ASSERT_EQ(on_terminal.exit_code, 0) << on_terminal.output;
  EXPECT_NE(on_terminal.output.find("\rupload: 30/30 files, 0.0 MiB of 0.0 MiB"), std::string::npos)
      << on_terminal.output;
  EXPECT_NE(on_terminal.output.find("uploaded 30 files"), std::string::npos) << on_terminal.output;
  EXPECT_EQ(on_terminal.output.find("upload: /"), std::string::npos) << on_terminal.output;
}

// A copy between two local paths, or between two S3 ones, is a usage error (the rest: cli_test).
TEST_F(CommandTest, ACopyNotBetweenS3AndLocalDiskIsAUsageError) {
  for (const S3Command& command :
       {s3_command(Verb::cp, "a", "b"), s3_command(Verb::sync, "s3://b/k", "s3://b/l")}) {
    try {
      run_s3_command(command);
      ADD_FAILURE() << "accepted " << command.source << " -> " << command.destination;
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    }
  }
}

}  // namespace
}  // namespace tp::s3
