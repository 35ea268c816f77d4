// `trainpoint preflight` and the checks `trainpoint run` starts with, against real causes: a git
// daemon and a file:// repository, MinIO (its own refusals: signatures, clocks, policies), a port nothing listens on, a path that cannot be written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "s3/s3_server.h"
#include "support/background_process.h"
#include "support/process.h"
#include "support/small_disk.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_checked;
using testing::shell_quote;

constexpr const char* kSpec = R"([job]
name = "preflight-test"
output = "out"
[data]
source = "data/table.csv"
format = "table_csv"
target = "y"
task = "regression"
[model]
arch = "mlp"
hidden = [8]
[train]
epochs = 1
batch_size = 4
[dist]
timeout_s = 3
)";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A repository with the spec and its data, committed on branch main; and a work directory.
class Preflight : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(repo() / "data");
    testing::write_text(repo() / "train.toml", kSpec);
    testing::write_text(repo() / "data/table.csv", "x,y\n1,2\n2,4\n3,6\n4,8\n");
    run_checked("cd " + shell_quote(repo().string()) +
                " && git init -q -b main && git add -A && git -c user.name=t -c user.email=t@t commit -q -m spec");
  }
  fs::path repo() const { return dir_ / "repo"; }
  std::string workdir() const { return (dir_ / "work").string(); }
  // `trainpoint COMMAND` on the repository's spec at `ref`, with `environment` and `arguments` added.
  testing::CommandResult trainpoint(const std::string& command, const std::string& url, const std::string& ref,
                                    const std::string& arguments = "", const std::string& environment = "") {
    return run_command("env " + environment + " " + testing::trainpoint_binary() + " " + command + " --repo " +
                       shell_quote(url) + " --ref " + ref + " --spec train.toml --workdir " + shell_quote(workdir()) +
                       " " + arguments + " 2>&1");
  }
  std::string file_url() const { return "file://" + repo().string(); }

  testing::TempDir dir_;
};

TEST_F(Preflight, PassingChecksPrintATableWithEveryCheck) {
  const auto result = trainpoint("preflight", file_url(), "main");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "CHECK")) << result.output;
  for (const char* check : {"git ref", "spec", "data", "output", "resume", "gpus", "master", "disk", "shm"}) {
    EXPECT_TRUE(contains(result.output, check)) << check << "\n" << result.output;
  }
  EXPECT_TRUE(contains(result.output, "refs/heads/main is commit")) << result.output;
  EXPECT_TRUE(contains(result.output, "valid: job 'preflight-test'")) << result.output;
  EXPECT_FALSE(contains(result.output, "FAILED")) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "work/out")) << "preflight must not create the output directory";
}

TEST_F(Preflight, UnknownRefOfAFileRepositoryIsASourceError) {
  const auto result = trainpoint("preflight", file_url(), "no-such-branch");
  EXPECT_EQ(result.exit_code, 4) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'git ref' failed: ref 'no-such-branch' not found in"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "branches: main")) << result.output;
}

TEST_F(Preflight, UnknownRefOnAGitDaemonIsASourceErrorAndAKnownOneResolves) {
  const fs::path served = dir_ / "served";
  fs::create_directories(served);
  run_checked("git clone -q --bare " + shell_quote(repo().string()) + " " + shell_quote((served / "repo.git").string()));
  const int port = testing::free_port();
  testing::BackgroundProcess daemon("git daemon --reuseaddr --export-all --listen=127.0.0.1 --port=" +
                                        std::to_string(port) + " --base-path=" + shell_quote(served.string()) + " " +
                                        shell_quote(served.string()),
                                    dir_ / "daemon.log");
  testing::wait_for_port(port);
  const std::string url = "git://127.0.0.1:" + std::to_string(port) + "/repo.git";

  const auto bad = trainpoint("preflight", url, "v9.9");
  EXPECT_EQ(bad.exit_code, 4) << bad.output;
  EXPECT_TRUE(contains(bad.output, "ref 'v9.9' not found in " + url)) << bad.output;

  const std::string sha = run_checked("git -C " + shell_quote(repo().string()) + " rev-parse HEAD");
  const auto good = trainpoint("preflight", url, "main");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_TRUE(contains(good.output, sha.substr(0, 40))) << good.output;
}

TEST_F(Preflight, OutputUnderAFileIsAnOutputErrorAndRunStopsThere) {
  testing::write_text(dir_ / "not-a-dir", "a file\n");
  const std::string output = "--set job.output=" + shell_quote("\"" + (dir_ / "not-a-dir/out").string() + "\"");
  const auto result = trainpoint("preflight", file_url(), "main", output);
  EXPECT_EQ(result.exit_code, 8) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'output' failed: job.output: " + (dir_ / "not-a-dir").string() +
                                          " is not a directory"))
      << result.output;

  // `run` runs the same checks first, on every pod.
  const auto run = trainpoint("run", file_url(), "main", output);
  EXPECT_EQ(run.exit_code, 8) << run.output;
  EXPECT_TRUE(contains(run.output, "preflight check 'output' failed")) << run.output;
}

// Root writes into any directory whatever its permissions, so as root the directory is a read-only bind
// mount instead.
TEST_F(Preflight, UnwritableOutputDirectoryIsAnOutputError) {
  const fs::path locked = dir_ / "locked";
  fs::create_directories(locked);
  const bool root = ::geteuid() == 0;
  if (root) {
    const std::string path = shell_quote(locked.string());
    testing::run_checked("mount --bind " + path + " " + path + " && mount -o remount,bind,ro " + path);
  } else {
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  }
  const auto result = trainpoint("preflight", file_url(), "main",
                                 "--set job.output=" + shell_quote("\"" + (locked / "out").string() + "\""));
  if (root) {
    testing::run_checked("umount " + shell_quote(locked.string()));
  } else {
    fs::permissions(locked, fs::perms::owner_all);
  }
  EXPECT_EQ(result.exit_code, 8) << result.output;
  EXPECT_TRUE(contains(result.output, "cannot write in " + (dir_ / "locked").string())) << result.output;
}

TEST_F(Preflight, MissingLocalDataIsADataError) {
  const auto result = trainpoint("preflight", file_url(), "main", "--set data.source='\"data/missing.csv\"'");
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_TRUE(contains(result.output, "data.source: " + (dir_ / "work/checkouts").string())) << result.output;
  EXPECT_TRUE(contains(result.output, "data/missing.csv does not exist")) << result.output;
}

// A 16 MiB tmpfs as the work directory: less than the 1 GiB of headroom the disk check asks for.
TEST_F(Preflight, SmallWorkdirDiskIsAStorageError) {
  testing::SmallDisk disk(workdir(), "16m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)";
  const auto result = trainpoint("preflight", file_url(), "main");
  EXPECT_EQ(result.exit_code, 201) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'disk' failed: the work directory " + workdir() + " has ")) << result.output;
  EXPECT_TRUE(contains(result.output, "but needs 1.0 GiB")) << result.output;
}

TEST_F(Preflight, NcclWithoutAGpuIsAUsageError) {
  const auto result = trainpoint("preflight", file_url(), "main", "--set dist.backend='\"nccl\"'");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'gpus' failed: dist.backend = \"nccl\" needs GPUs")) << result.output;
}

TEST_F(Preflight, MasterThatDoesNotListenIsPeerLost) {
  const int port = testing::free_port();
  // Pod 1 of 2 (PyTorchJob's variables): it waits dist.timeout_s (3 s) for the master, then fails retryable.
  const auto result = trainpoint("preflight", file_url(), "main", "",
                                 "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port));
  EXPECT_EQ(result.exit_code, 202) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'master' failed: the master 127.0.0.1:" + std::to_string(port) +
                                          " did not answer within dist.timeout_s = 3s"))
      << result.output;
  EXPECT_TRUE(contains(result.output, "refuses connections")) << result.output;
}

TEST_F(Preflight, MasterThatListensAnswers) {
  const int port = testing::free_port();
  testing::BackgroundProcess listener("python3 -c " +
                                          shell_quote("import socket, time; s = socket.socket(); s.bind(('127.0.0.1', " +
                                                      std::to_string(port) + ")); s.listen(8); time.sleep(600)"),
                                      dir_ / "listener.log");
  testing::wait_for_port(port);
  const auto result = trainpoint("preflight", file_url(), "main", "",
                                 "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "master 127.0.0.1:" + std::to_string(port) + " answers")) << result.output;
}

class PreflightS3 : public Preflight {
 protected:
  void SetUp() override {
    Preflight::SetUp();
    const auto uploaded = run_command(s3_environment() + " " + testing::trainpoint_binary() + " s3 cp " +
                                      shell_quote((repo() / "data/table.csv").string()) +
                                      " s3://test-bucket/tables/table.csv 2>&1");
    ASSERT_EQ(uploaded.exit_code, 0) << uploaded.output;
  }
  std::string s3_environment(const std::string& access_key = testing::S3Server::kAccessKey,
                             const std::string& secret_key = testing::S3Server::kSecretKey) const {
    return "AWS_ENDPOINT_URL=" + server_.endpoint() + " AWS_ACCESS_KEY_ID=" + access_key +
           " AWS_SECRET_ACCESS_KEY=" + shell_quote(secret_key);
  }
  std::string source(const std::string& url) const { return "--set data.source=" + shell_quote("\"" + url + "\""); }

  testing::S3Server server_;
};

TEST_F(PreflightS3, ListsTheDataPrefix) {
  const auto result =
      trainpoint("preflight", file_url(), "main", source("s3://test-bucket/tables"), s3_environment());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "data.source s3://test-bucket/tables: 1 objects")) << result.output;
}

TEST_F(PreflightS3, WrongCredentialsAreAUsageError) {
  const auto result =
      trainpoint("preflight", file_url(), "main", source("s3://test-bucket/tables"), s3_environment("WRONG", "WRONG"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'data' failed")) << result.output;
  EXPECT_TRUE(contains(result.output, "InvalidAccessKeyId")) << result.output;
}

TEST_F(PreflightS3, MissingBucketIsADataError) {
  const auto result =
      trainpoint("preflight", file_url(), "main", source("s3://no-such-bucket/tables"), s3_environment());
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'data' failed")) << result.output;
  EXPECT_TRUE(contains(result.output, "NoSuchBucket")) << result.output;
  EXPECT_TRUE(contains(result.output, "no-such-bucket")) << result.output;
}

TEST_F(PreflightS3, AnS3OutputGetsAProbeObjectWrittenAndDeleted) {
  const auto result = trainpoint("preflight", file_url(), "main",
                                 source("s3://test-bucket/tables") + " --set job.output=s3://test-bucket/runs/x",
                                 s3_environment());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(contains(result.output, "job.output s3://test-bucket/runs/x: wrote and deleted a probe object"))
      << result.output;
  const auto listing = run_command(s3_environment() + " " + testing::trainpoint_binary() +
                                   " s3 ls s3://test-bucket/runs/ --recursive 2>&1");
  EXPECT_FALSE(contains(listing.output, "preflight")) << "the probe is gone: " << listing.output;
}

TEST_F(PreflightS3, AnS3OutputInAMissingBucketIsAnOutputError) {
  const auto result = trainpoint("preflight", file_url(), "main",
                                 source("s3://test-bucket/tables") + " --set job.output=s3://no-such-bucket/runs",
                                 s3_environment());
  EXPECT_EQ(result.exit_code, 8) << result.output;
  EXPECT_TRUE(contains(result.output, "preflight check 'output' failed")) << result.output;
  EXPECT_TRUE(contains(result.output, "NoSuchBucket")) << result.output;
}

// The server itself refuses a wrong secret: the message names S3's code and what to check.
TEST_F(PreflightS3, AWrongSecretIsRefusedByTheServerAsAUsageError) {
  const auto result = trainpoint("preflight", file_url(), "main", source("s3://test-bucket/tables"),
                                 s3_environment(testing::S3Server::kAccessKey, "not-the-secret-key"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "SignatureDoesNotMatch")) << result.output;
  EXPECT_TRUE(contains(result.output, "check the secret access key")) << result.output;
  EXPECT_FALSE(contains(result.output, "not-the-secret-key")) << "the secret must not appear";
}

// A clock 20 minutes ahead (LD_PRELOAD shifts time(), which requests are signed with): the server refuses
// the request's date, and trainpoint says the clock is the cause.
TEST_F(PreflightS3, ASkewedClockIsRefusedByTheServerAndNamed) {
  const std::string skew = std::string("LD_PRELOAD=") + TP_CLOCK_SKEW_LIBRARY + " TP_CLOCK_SKEW_SECONDS=1200 ";
  const auto result = trainpoint("preflight", file_url(), "main", source("s3://test-bucket/tables"),
                                 skew + s3_environment());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_TRUE(contains(result.output, "RequestTimeTooSkewed")) << result.output;
  EXPECT_TRUE(contains(result.output, "clock")) << result.output;
}

// A user whose policy (made with `mc admin`) allows one bucket gets AccessDenied on another, caught by
// preflight with the bucket named; the allowed bucket still passes.
TEST_F(PreflightS3, ABucketPolicyRefusalNamesTheBucket) {
  run_checked(server_.mc("mb tp/team-a"));
  testing::TempDir scratch;
  testing::write_text(scratch / "policy.json", R"({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
    "Action": ["s3:ListBucket", "s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
    "Resource": ["arn:aws:s3:::team-a", "arn:aws:s3:::team-a/*"]}]})");
  run_checked(server_.mc("admin policy create tp team-a-only " + shell_quote((scratch / "policy.json").string())));
  run_checked(server_.mc("admin user add tp analyst analyst-secret-key"));
  run_checked(server_.mc("admin policy attach tp team-a-only --user analyst"));
  run_checked(server_.mc("cp " + shell_quote((repo() / "data/table.csv").string()) + " tp/team-a/tables/table.csv"));

  const auto refused = trainpoint("preflight", file_url(), "main", source("s3://test-bucket/tables"),
                                  s3_environment("analyst", "analyst-secret-key"));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_TRUE(contains(refused.output, "preflight check 'data' failed")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "AccessDenied")) << refused.output;
  EXPECT_TRUE(contains(refused.output, "test-bucket")) << refused.output;
  EXPECT_FALSE(contains(refused.output, "analyst-secret-key")) << "the secret must not appear";

  const auto allowed = trainpoint("preflight", file_url(), "main",
                                  source("s3://team-a/tables") + " --set job.output=s3://team-a/runs/x",
                                  s3_environment("analyst", "analyst-secret-key"));
  EXPECT_EQ(allowed.exit_code, 0) << allowed.output;
}

}  // namespace
}  // namespace tp
