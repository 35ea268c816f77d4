// The frameworks people launch with torchrun, launched by trainpoint's command mode instead, for real: fastai
// (examples/fastai, its images staged from S3 on MinIO), Lightning, Accelerate and plain torch.distributed, each
// from a git repository at a commit, with 2 ranks on the CPU (Gloo), its job.requirements installed from a
// loopback PEP 503 index of the wheels scripts/fetch-framework-wheels fetched once from PyPI, over the torch
// 2.11 of TRAINPOINT_TORCH_PYTHON. Registered only when the build is configured with that wheel cache
// (TRAINPOINT_FRAMEWORK_WHEELS, set by scripts/test-torch-wheel).
//
// Each test starts the job, waits until every rank holds after its first checkpoint (HOLD_FILE), sends SIGTERM
// to trainpoint, then starts it again; the script reports from inside (rank-N.json in job.output) the rank and
// world size its framework saw, the epochs it trained, where it resumed and a digest of its parameters.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <set>
#include <tuple>

#include "package_index.h"
#include "s3/s3_server.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_checked;
using testing::run_command;
using testing::shell_quote;
using Clock = std::chrono::steady_clock;

constexpr int kEpochs = 3;

struct JobRun {
  testing::CommandResult result;
  long pid = 0;         // trainpoint's
  double seconds = 0;   // from start to exit
};

class Frameworks : public ::testing::Test {
 protected:
  // A repository holding `files` (name -> source path) and a spec running `script` with `requirements`.
  void make_repository(const std::vector<std::pair<std::string, fs::path>>& files, const std::string& spec) {
    fs::create_directories(repo);
    for (const auto& [name, source] : files) fs::copy_file(source, repo / name);
    if (!spec.empty()) testing::write_text(repo / "train.toml", spec);
    run_checked("cd " + shell_quote(repo.string()) +
                " && git init -q -b main && git add -A && git -c user.name=t -c user.email=t@t commit -qm frameworks");
  }

  static std::string spec(const std::string& name, const std::string& script, const std::string& requirements) {
    return "[job]\nname = \"" + name + "\"\noutput = \"out\"\ncommand = [\"" + std::string(TP_TORCH_PYTHON) +
           "\", \"" + script + "\"]\nrequirements = \"" + requirements + "\"\n\n[job.env]\nEPOCHS = \"" +
           std::to_string(kEpochs) + "\"\n\n[dist]\nnproc_per_node = 2\n";
  }

  // trainpoint run as a pod starts it: the node's cache of environments (shared by the tests and kept in the
  // build tree, so that only the first run builds them), the loopback index, no pip settings of this machine.
  // Started in the background; with `hold`, SIGTERM once every rank wrote held-<rank> (the script holds after
  // a checkpoint).
  JobRun run(const std::string& arguments, bool hold) {
    const fs::path log = dir / ("run-" + std::to_string(runs++) + ".log");
    const std::string job =
        "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u GROUP_RANK -u PIP_FIND_LINKS "
        "-u PIP_EXTRA_INDEX_URL PIP_NO_CACHE_DIR=1 PIP_INDEX_URL=" + index.url() + " " + environment +
        " MASTER_PORT=" + std::to_string(testing::free_port()) + " HOLD_FILE=" + shell_quote(hold_file.string()) +
        " " + testing::trainpoint_binary() + " run --repo " + shell_quote(repo.string()) + " --ref main" +
        " --workdir " + shell_quote(workdir.string()) + " --git-cache " + shell_quote(TP_FRAMEWORK_NODE_CACHE) + " " +
        arguments + " > " + shell_quote(log.string()) + " 2>&1";
    if (hold) testing::write_text(hold_file, "");
    const fs::path out = workdir / "out";
    std::string script = "(" + job + ") & pid=$!; echo pid=$pid; ";
    if (hold) {
      script += "for i in $(seq 9000); do [ -e " + shell_quote((out / "held-0").string()) + " ] && [ -e " +
                shell_quote((out / "held-1").string()) + " ] && break; kill -0 $pid 2>/dev/null || break; "
                "sleep 0.1; done; kill -TERM $pid; ";
    }
    script += "wait $pid";
    const auto started = Clock::now();
    JobRun result{run_command("bash -c " + shell_quote(script)), 0, 0};
    result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    result.result.output += testing::read_text(log);
    const auto at = result.result.output.find("pid=");
    if (at != std::string::npos) result.pid = std::stol(result.result.output.substr(at + 4));
    fs::remove(hold_file);
    for (int rank = 0; rank < 2; ++rank) fs::remove(out / ("held-" + std::to_string(rank)));
    return result;
  }

  nlohmann::json report(int rank) {
    const std::string text = testing::read_text(workdir / "out" / ("rank-" + std::to_string(rank) + ".json"));
    return text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
  }

  // The whole story: stopped by SIGTERM after the first epoch's checkpoint, started again, resumed there, trained
  // the other epochs with 2 ranks whose parameters end identical (and not where they started).
  std::vector<nlohmann::json> interrupted_then_resumed(const std::string& arguments, const std::string& checkpoint) {
    const JobRun stopped = run(arguments, true);
    std::cout << "first start, until SIGTERM: " << stopped.seconds << " s\n";
    if (std::getenv("FRAMEWORK_TEST_LOGS")) std::cout << stopped.result.output << "\n";
    EXPECT_EQ(stopped.result.exit_code, 143) << stopped.result.output;
    EXPECT_EQ(stopped.result.output.find("exited with code 137"), std::string::npos)
        << "a rank did not stop on SIGTERM and was killed after k8s.grace_s\n" << stopped.result.output;
    EXPECT_TRUE(fs::exists(workdir / "out" / checkpoint)) << "the script's checkpoint in job.output\n"
                                                          << stopped.result.output;
    EXPECT_TRUE(report(0).is_null()) << "the stopped run finished: " << report(0).dump();
    const JobRun resumed = run(arguments, false);
    std::cout << "second start, to the end: " << resumed.seconds << " s\n";
    EXPECT_EQ(resumed.result.exit_code, 0) << resumed.result.output;
    EXPECT_NE(resumed.result.output.find("reusing the environment"), std::string::npos) << resumed.result.output;
    std::vector<nlohmann::json> reports{report(0), report(1)};
    for (int rank = 0; rank < 2; ++rank) {
      const auto& r = reports[rank];
      if (r.is_null()) {
        ADD_FAILURE() << "rank " << rank << " wrote no report\n" << resumed.result.output;
        continue;
      }
      SCOPED_TRACE(r.dump());
      EXPECT_EQ(r["rank"], rank);
      EXPECT_EQ(r["world_size"], 2);
      EXPECT_EQ(r["env"]["RANK"], std::to_string(rank));
      EXPECT_EQ(r["env"]["LOCAL_WORLD_SIZE"], "2");
      EXPECT_EQ(r["resumed_from"], 0) << "the script's own checkpoint of the first epoch";
      EXPECT_EQ(r["epochs_trained"], nlohmann::json({1, 2})) << "only the epochs after the checkpoint";
      EXPECT_EQ(r["ppid"], resumed.pid) << "a rank started by trainpoint itself";
      EXPECT_NE(r["final"], r["initial"]) << "training changed nothing";
    }
    if (!reports[0].is_null() && !reports[1].is_null()) {
      EXPECT_EQ(reports[0]["final"], reports[1]["final"]) << "the ranks' parameters differ after training";
      EXPECT_EQ(reports[0]["initial"], reports[1]["initial"]) << "the ranks started from different parameters";
      EXPECT_NE(reports[0]["pid"], reports[1]["pid"]);
    }
    return reports;
  }

  testing::TempDir dir;
  fs::path repo = dir / "repo";
  fs::path workdir = dir / "work";
  fs::path hold_file = dir / "hold";
  int runs = 0;
  std::string environment;  // more variables for trainpoint
  testing::PackageIndex index{dir / "index.log"};
};

fs::path framework_file(const std::string& name) {
  return fs::path(testing::source_dir()) / "tests" / "command" / "frameworks" / name;
}

TEST_F(Frameworks, PlainTorchDistributedOnTorch2) {
  testing::write_text(dir / "requirements.txt", "# torch.distributed only: the image's torch\n");
  make_repository({{"ddp.py", framework_file("ddp.py")}, {"common.py", framework_file("common.py")},
                   {"requirements.txt", dir / "requirements.txt"}},
                  spec("ddp", "ddp.py", "requirements.txt"));
  const auto reports = interrupted_then_resumed("--spec train.toml", "checkpoint.pt");
  EXPECT_EQ(reports[0]["torch"].get<std::string>().rfind("2.", 0), 0u) << reports[0].dump();
}

TEST_F(Frameworks, AccelerateSeesTheRanksTrainpointPlanned) {
  testing::write_text(dir / "requirements.txt", "accelerate==1.16.0\n");
  make_repository({{"accelerate_train.py", framework_file("accelerate_train.py")},
                   {"common.py", framework_file("common.py")}, {"requirements.txt", dir / "requirements.txt"}},
                  spec("accelerate", "accelerate_train.py", "requirements.txt"));
  const auto reports = interrupted_then_resumed("--spec train.toml", "checkpoints/accelerate/epoch.json");
  EXPECT_EQ(reports[0]["distributed_type"], "DistributedType.MULTI_CPU") << reports[0].dump();
}

TEST_F(Frameworks, LightningDetectsTrainpointAsTorchElasticAndSpawnsNothing) {
  testing::write_text(dir / "requirements.txt", "lightning==2.6.6\n");
  make_repository({{"lightning_train.py", framework_file("lightning_train.py")},
                   {"common.py", framework_file("common.py")}, {"requirements.txt", dir / "requirements.txt"}},
                  spec("lightning", "lightning_train.py", "requirements.txt"));
  const auto reports = interrupted_then_resumed("--spec train.toml", "checkpoints/last.ckpt");
  for (const auto& report : reports) {
    // Not LightningEnvironment, with which Lightning would start rank 1 itself (its parent: rank 0).
    EXPECT_EQ(report["cluster_environment"], "TorchElasticEnvironment") << report.dump();
  }
}

// examples/fastai as the guide shows it, its images uploaded to MinIO and staged by trainpoint.
TEST_F(Frameworks, FastaiExampleTrainsFromS3WithDistribCtx) {
  const fs::path example = fs::path(testing::source_dir()) / "examples" / "fastai";
  std::vector<std::pair<std::string, fs::path>> files;
  for (const auto& entry : fs::directory_iterator(example)) {
    if (entry.is_regular_file()) files.emplace_back(entry.path().filename().string(), entry.path());
  }
  make_repository(files, "");
  const auto made = run_command(testing::trainpoint_binary() + " make-dataset images --out " +
                                shell_quote((dir / "shapes").string()) +
                                " --classes 2 --per-class 24 --size 32 --seed 3");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  testing::S3Server server;
  const std::string s3_env = "AWS_ENDPOINT_URL=" + server.endpoint() + " " + testing::S3Server::key_environment();
  const auto upload = run_command("env " + s3_env + " " + testing::trainpoint_binary() + " s3 cp --recursive " +
                                  shell_quote((dir / "shapes").string()) + " s3://test-bucket/shapes");
  ASSERT_EQ(upload.exit_code, 0) << upload.output;
  const std::string arguments =
      "--spec train.toml --set data.source=s3://test-bucket/shapes --set data.endpoint=" + server.endpoint() +
      " --set job.output=out --set 'job.command=[\"" + std::string(TP_TORCH_PYTHON) +
      "\", \"train.py\", \"--epochs\", \"" + std::to_string(kEpochs) +
      "\", \"--arch\", \"tiny\", \"--size\", \"32\", \"--batch-size\", \"8\"]'";
  environment = s3_env;
  const auto reports = interrupted_then_resumed(arguments, "checkpoints/model_0.pth");
  EXPECT_NE(reports[0]["valid_loss"], nullptr) << reports[0].dump();
  EXPECT_TRUE(fs::exists(workdir / "out" / "model.pkl")) << "the exported Learner in job.output";
}

// A rank that raises in its framework's training ends the job, and trainpoint's last line quotes its exception:
// the last lines of that rank's stderr (these scripts do not use torch's @record), with the rank named, in the
// class of a program's own failure (exit 10). fastai's case is the example's own: an architecture it does not
// have, which both ranks raise.
TEST_F(Frameworks, AFailingRanksExceptionIsTrainpointsLastLineInEveryFramework) {
  // The same requirements as the tests above: their environments are reused.
  testing::write_text(dir / "none.txt", "# torch.distributed only: the image's torch\n");
  testing::write_text(dir / "accelerate.txt", "accelerate==1.16.0\n");
  testing::write_text(dir / "lightning.txt", "lightning==2.6.6\n");
  const fs::path example = fs::path(testing::source_dir()) / "examples" / "fastai";
  make_repository({{"ddp.py", framework_file("ddp.py")},
                   {"accelerate_train.py", framework_file("accelerate_train.py")},
                   {"lightning_train.py", framework_file("lightning_train.py")},
                   {"common.py", framework_file("common.py")},
                   {"none.txt", dir / "none.txt"}, {"accelerate.txt", dir / "accelerate.txt"},
                   {"lightning.txt", dir / "lightning.txt"}, {"train.py", example / "train.py"},
                   {"requirements.txt", example / "requirements.txt"}},
                  spec("failing", "ddp.py", "none.txt"));
  const auto made = run_command(testing::trainpoint_binary() + " make-dataset images --out " +
                                shell_quote((repo / "shapes").string()) + " --classes 2 --per-class 8 --size 32 --seed 3");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  run_checked("cd " + shell_quote(repo.string()) + " && git add -A && git -c user.name=t -c user.email=t@t commit -qm data");
  const std::string python = TP_TORCH_PYTHON;
  const std::string raised = "ValueError: rank 1: label 7 is not one of the 2 classes";
  for (const auto& [script, requirements, expected] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"ddp.py", "none.txt", raised},
           {"accelerate_train.py", "accelerate.txt", raised},
           {"lightning_train.py", "lightning.txt", raised},
           {"train.py\", \"--arch\", \"resnet1000", "requirements.txt",
            "AttributeError: module 'fastai.vision.models' has no attribute 'resnet1000'"}}) {
    SCOPED_TRACE(script);
    environment = "FAIL_RANK=1";
    const JobRun failed = run("--spec train.toml --set data.source=shapes --set job.requirements=" + requirements +
                                  " --set 'job.command=[\"" + python + "\", \"" + script + "\"]'",
                              false);
    // The program's own failure (exit 1: 10); a rank that aborts on its way out after the exception (torch 2.11
    // under Lightning sometimes ends with SIGABRT) is a signal's class (203). Either way the exception is quoted.
    const int code = failed.result.exit_code;
    EXPECT_TRUE(code == 10 || code == 203) << failed.result.output;
    // The final message, from the failed rank to the end of the output.
    std::string output = failed.result.output;
    while (!output.empty() && output.back() == '\n') output.pop_back();
    const auto at = output.rfind(" of this node): '" + python);
    ASSERT_NE(at, std::string::npos) << output;
    const std::string last = output.substr(output.rfind("rank ", at));
    // FAIL_RANK=1 fails rank 1 alone; the fastai example fails on both ranks, and the first to exit is named.
    if (expected == raised) EXPECT_EQ(last.rfind("rank 1 (worker 1", 0), 0u) << last;
    EXPECT_NE(last.find(": its last lines of stderr:"), std::string::npos) << last;
    EXPECT_NE(last.find(expected), std::string::npos) << last;
    const std::string end = code == 10 ? "(exit 10, program error)" : "(exit 203, program stopped)";
    EXPECT_EQ(last.size() - last.rfind(end), end.size()) << "the message is the output's end: " << last;
  }
}

}  // namespace
}  // namespace tp
