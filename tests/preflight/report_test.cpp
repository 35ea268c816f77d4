// preflight::run in process: which checks run, are skipped or fail, the table, and the error thrown.
#include <gtest/gtest.h>

#include <map>

#include "preflight/preflight.h"
#include "spec/spec.h"
#include "storage/run_identity.h"
#include "support/background_process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSpec = R"([data]
source = "table.csv"
[model]
arch = "mlp"
[dist]
timeout_s = 2
)";

preflight::Request local_request(const testing::TempDir& dir, std::map<std::string, std::string> environment = {}) {
  testing::write_text(dir / "table.csv", "x,y\n1,2\n");
  preflight::Request request;
  request.workdir = dir.path();
  request.load_spec = [&dir] {
    return preflight::SpecInRepo{spec::load_string(kSpec, {}, "train.toml").spec, dir.path(), ""};
  };
  request.environment = [environment](const std::string& name) -> std::optional<std::string> {
    const auto found = environment.find(name);
    return found == environment.end() ? std::nullopt : std::optional<std::string>(found->second);
  };
  return request;
}

const preflight::CheckResult& check(const preflight::Report& report, const std::string& name) {
  for (const auto& result : report.checks) {
    if (result.name == name) return result;
  }
  throw std::runtime_error("no check named " + name);
}

TEST(PreflightReport, LocalSpecSkipsTheRefAndPassesTheRest) {
  testing::TempDir dir;
  const preflight::Report report = preflight::run(local_request(dir));
  EXPECT_EQ(report.first_failure(), nullptr);
  EXPECT_EQ(check(report, "git ref").status, preflight::Status::skipped);
  for (const char* name : {"spec", "data", "output", "resume", "gpus", "master", "disk", "shm"}) {
    EXPECT_EQ(check(report, name).status, preflight::Status::passed) << name << ": " << check(report, name).detail;
  }
  EXPECT_EQ(check(report, "master").detail, "single process: no rendezvous");
  const std::string table = preflight::format_table(report);
  EXPECT_EQ(table.rfind("CHECK    STATUS   SECONDS  DETAIL\n", 0), 0u) << table;
  EXPECT_NE(table.find("git ref  skipped        -  local spec, no repository\n"), std::string::npos) << table;
  EXPECT_NO_THROW(preflight::throw_first_failure(report));
}

// The output holds another run's checkpoints (written with train.lr 0.5): the resume check fails as rank 0
// would before its rendezvous, naming the change, and deletes nothing.
TEST(PreflightReport, AnOutputWithAnotherRunsCheckpointsFailsTheResumeCheck) {
  testing::TempDir dir;
  preflight::Request request = local_request(dir);
  const spec::Spec other = spec::load_string(kSpec, {"train.lr=0.5"}, "train.toml").spec;
  const storage::RunIdentity before = storage::run_identity(other, dir.path(), "abc");
  const fs::path checkpoint = storage::run_checkpoints(dir / "output/checkpoints", before) / "epoch-000001.ckpt";
  storage::record_identity(checkpoint.parent_path(), before);
  testing::write_text(checkpoint, "a checkpoint");
  const preflight::Report report = preflight::run(request);
  const auto& resume = check(report, "resume");
  EXPECT_EQ(resume.status, preflight::Status::failed);
  EXPECT_EQ(resume.code, ExitCode::spec);
  EXPECT_NE(resume.detail.find("train.lr: 0.5 -> 0.001"), std::string::npos) << resume.detail;
  EXPECT_TRUE(fs::exists(checkpoint));

  request.load_spec = [&dir] {
    return preflight::SpecInRepo{spec::load_string(kSpec, {"train.lr=0.5"}, "train.toml").spec, dir.path(), ""};
  };
  EXPECT_EQ(check(preflight::run(request), "resume").status, preflight::Status::passed) << "its own run resumes";
}

TEST(PreflightReport, AnInvalidSpecSkipsEverythingThatNeedsIt) {
  testing::TempDir dir;
  preflight::Request request = local_request(dir);
  request.load_spec = []() -> preflight::SpecInRepo {
    return {spec::load_string("[train]\nlr = -1\n", {}, "train.toml").spec, {}, ""};
  };
  const preflight::Report report = preflight::run(request);
  ASSERT_NE(report.first_failure(), nullptr);
  EXPECT_EQ(report.first_failure()->name, "spec");
  EXPECT_EQ(report.first_failure()->code, ExitCode::spec);
  for (const char* name : {"data", "output", "resume", "gpus", "master", "disk", "shm"}) {
    EXPECT_EQ(check(report, name).status, preflight::Status::skipped) << name;
    EXPECT_EQ(check(report, name).detail, "the spec is not valid") << name;
  }
}

// The launcher's own count of ranks on the node, not only the spec's, against the GPUs visible.
TEST(PreflightReport, MoreRanksOnTheNodeThanGpusFailsTheGpusCheck) {
  testing::TempDir dir;
  preflight::Request request = local_request(
      dir, {{"LOCAL_RANK", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "3"}, {"LOCAL_WORLD_SIZE", "3"}});
  request.visible_gpus = 2;
  const preflight::Report report = preflight::run(request);
  ASSERT_NE(report.first_failure(), nullptr);
  EXPECT_EQ(report.first_failure()->name, "gpus");
  EXPECT_EQ(report.first_failure()->code, ExitCode::usage);
  EXPECT_NE(report.first_failure()->detail.find("LOCAL_WORLD_SIZE=3 starts 3 ranks on this node but only 2 GPU(s)"),
            std::string::npos)
      << report.first_failure()->detail;
  EXPECT_EQ(check(report, "master").status, preflight::Status::passed) << check(report, "master").detail;

  request.environment = [](const std::string& name) -> std::optional<std::string> {
    return name == "PET_NPROC_PER_NODE" ? std::optional<std::string>("2") : std::nullopt;
  };
  EXPECT_EQ(preflight::run(request).first_failure(), nullptr);
}

// Two checks fail: the data first, then the master; the data's class is the exit code.
TEST(PreflightReport, TheFirstFailureDecidesTheExitClass) {
  testing::TempDir dir;
  const int port = testing::free_port();
  preflight::Request request = local_request(
      dir, {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", std::to_string(port)}});
  fs::remove(dir / "table.csv");
  const preflight::Report report = preflight::run(request);
  EXPECT_EQ(check(report, "data").status, preflight::Status::failed);
  EXPECT_EQ(check(report, "master").status, preflight::Status::failed);
  EXPECT_EQ(check(report, "master").code, ExitCode::peer_lost);
  EXPECT_EQ(check(report, "output").status, preflight::Status::passed);
  try {
    preflight::throw_first_failure(report);
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::data);
    EXPECT_NE(std::string(error.what()).find("preflight check 'data' failed: data.source: " + (dir / "table.csv").string() +
                                             " does not exist"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace tp
