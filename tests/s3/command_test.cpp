// `trainpoint s3 ls|cp|sync` through run_s3_command, against s3rver.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "s3/command.h"
#include "s3_server.h"

namespace tp::s3 {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CommandTest : public ::testing::Test {
 protected:
  // Runs the command with the server's endpoint and keys; returns what it printed.
  std::string run(std::vector<std::string> args) {
    testing::write_text(scratch_ / "keys", "AWS_ACCESS_KEY_ID=S3RVER\nAWS_SECRET_ACCESS_KEY=S3RVER\n");
    const std::vector<std::string> options = {"--endpoint", server_.endpoint(), "--credentials",
                                              (scratch_ / "keys").string()};
    args.insert(args.end(), options.begin(), options.end());
    ::testing::internal::CaptureStdout();
    try {
      EXPECT_EQ(run_s3_command(args), 0);
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
  run({"cp", "--recursive", (scratch_ / "up").string(), "s3://test-bucket/tree/"});
  const std::string top = run({"ls", "s3://test-bucket/tree/"});
  EXPECT_NE(top.find("tree/a.txt"), std::string::npos) << top;
  EXPECT_NE(top.find("PRE tree/sub/"), std::string::npos) << top;
  EXPECT_NE(run({"ls", "--recursive", "s3://test-bucket/tree/"}).find("tree/sub/b.txt"), std::string::npos);

  run({"cp", "s3://test-bucket/tree/sub/b.txt", (scratch_ / "single.txt").string()});
  EXPECT_EQ(read_all(scratch_ / "single.txt"), "beta");

  EXPECT_NE(run({"sync", "s3://test-bucket/tree", (scratch_ / "down").string()}).find("downloaded 2 objects"),
            std::string::npos);
  EXPECT_EQ(read_all(scratch_ / "down/sub/b.txt"), "beta");
  EXPECT_NE(run({"sync", "s3://test-bucket/tree", (scratch_ / "down").string()}).find("downloaded 0 objects"),
            std::string::npos);

  testing::write_text(scratch_ / "up/a.txt", "ALPHA");  // same size, other content: found by MD5
  EXPECT_NE(run({"sync", (scratch_ / "up").string(), "s3://test-bucket/tree"}).find("uploaded 1 files"),
            std::string::npos);
  run({"cp", "s3://test-bucket/tree/a.txt", (scratch_ / "a-again.txt").string()});
  EXPECT_EQ(read_all(scratch_ / "a-again.txt"), "ALPHA");
}

TEST_F(CommandTest, BadArgumentsAreUsageErrors) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"mv", "a", "b"}, {"cp", "a", "b"}, {"ls"}, {"cp", "s3://b/k", "x", "--parallelism", "zero"}}) {
    try {
      run_s3_command(args);
      ADD_FAILURE() << "accepted " << args[0];
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::usage);
    }
  }
}

}  // namespace
}  // namespace tp::s3
