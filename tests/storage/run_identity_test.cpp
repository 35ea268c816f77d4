#include "storage/run_identity.h"

#include <gtest/gtest.h>

#include "common/error.h"
#include "support/temp_dir.h"

namespace tp::storage {
namespace {

namespace fs = std::filesystem;

// A spec with `overrides` as --set gives them.
spec::Spec spec_of(const std::vector<std::string>& overrides) {
  return spec::load_string("[data]\nsource = \"data\"\n[model]\narch = \"mlp\"\n", overrides, "train.toml").spec;
}

class RunIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_text(dir_ / "repo/data/a/1.png", "one");
    testing::write_text(dir_ / "repo/data/b/2.png", "two!");
  }
  RunIdentity identity_of(const std::vector<std::string>& overrides) {
    return run_identity(spec_of(overrides), dir_ / "repo", "abc");
  }
  testing::TempDir dir_;
};

TEST_F(RunIdentityTest, SettingsThatChangeTheRunAndTheDataMakeAnotherRunAndOthersDoNot) {
  const RunIdentity base = identity_of({});
  EXPECT_EQ(base.key().size(), 12u);
  EXPECT_EQ(identity_of({"train.epochs=50"}).key(), base.key()) << "more epochs continue the run";
  EXPECT_EQ(identity_of({"data.workers=7"}).key(), base.key()) << "data.workers is speed, not the run";
  EXPECT_EQ(identity_of({"dist.timeout_s=5"}).key(), base.key());
  EXPECT_EQ(run_identity(spec_of({}), dir_ / "repo", "def").key(), base.key()) << "the commit is not compared";
  EXPECT_NE(identity_of({"train.lr=0.5"}).key(), base.key());
  EXPECT_NE(identity_of({"train.optimizer=sgd"}).key(), base.key());

  testing::write_text(dir_ / "repo/data/b/3.png", "three");
  const RunIdentity more_data = identity_of({});
  EXPECT_NE(more_data.key(), base.key());
  const auto changes = identity_changes(base, more_data);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_NE(changes[0].find("data.source contents: 2 files"), std::string::npos) << changes[0];
  EXPECT_NE(changes[0].find("-> 3 files"), std::string::npos) << changes[0];
}

TEST_F(RunIdentityTest, AnOutputWithOnlyAnotherRunsCheckpointsIsRefusedNamingWhatChanged) {
  const fs::path root = dir_ / "out/checkpoints";
  const RunIdentity before = identity_of({"train.lr=0.01"});
  EXPECT_FALSE(require_same_run(before, root, "out")) << "nothing there: a fresh start";
  record_identity(run_checkpoints(root, before), before);
  EXPECT_FALSE(require_same_run(before, root, "out")) << "an identity without checkpoints is not a run to resume";
  testing::write_text(run_checkpoints(root, before) / "epoch-000001.ckpt", "checkpoint");
  EXPECT_EQ(require_same_run(before, root, "out"), run_checkpoints(root, before));

  const RunIdentity now = identity_of({"train.lr=0.003", "train.optimizer=sgd"});
  try {
    require_same_run(now, root, "out");
    FAIL() << "another run's checkpoints were taken";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_EQ(error.code(), ExitCode::spec);
    EXPECT_NE(message.find("train.optimizer: \"adamw\" -> \"sgd\""), std::string::npos) << message;
    EXPECT_NE(message.find("train.lr: 0.01 -> 0.003"), std::string::npos) << message;
    EXPECT_NE(message.find("commit abc"), std::string::npos) << message;
    EXPECT_NE(message.find("another job.output"), std::string::npos) << message;
    EXPECT_NE(message.find("checkpoint.resume = \"never\""), std::string::npos) << message;
  }
  EXPECT_TRUE(fs::exists(run_checkpoints(root, before) / "epoch-000001.ckpt")) << "nothing is deleted";
}

}  // namespace
}  // namespace tp::storage
