// job.requirements end to end: trainpoint clones a repository whose requirements.txt names a package
// on a real PEP 503 index on loopback (PackageIndex), installs it once per node into an environment
// over Debian's Python and PyTorch, and starts the program with that environment's python3, whose
// ranks form a real Gloo group. Restarted and concurrent pods reuse the environment without pip.
#include <gtest/gtest.h>

#include <regex>

#include "package_index.h"
#include "support/background_process.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_checked;
using testing::run_command;
using testing::shell_quote;

// Each rank all-reduces the installed package's value and writes what it saw.
const char* kProgram = R"(import os, sys
import tinypkg
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.tensor([float(tinypkg.VALUE)])
dist.all_reduce(value)
with open(os.path.join(os.environ["TRAINPOINT_OUTPUT_DIR"], "rank-%d.txt" % dist.get_rank()), "w") as out:
    out.write("sum=%g\n" % value.item())
    out.write("tinypkg=%s\n" % tinypkg.__file__)
    out.write("prefix=%s\n" % sys.prefix)
    out.write("greeting=%s\n" % os.environ.get("TINY_GREETING"))
dist.destroy_process_group()
)";

// Debian's python3-torch is for /usr/bin/python3, not for a python3 that may come first in PATH.
const char* kSpec = R"([job]
name = "requirements"
output = "out"
command = ["/usr/bin/python3", "ddp.py"]
requirements = "requirements.txt"

[job.env]
TINY_GREETING = "hello"

[dist]
nproc_per_node = 2
)";

int occurrences(const std::string& text, const std::string& part) {
  int count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

class Requirements : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path repo = dir / "repo";
    testing::write_text(repo / "ddp.py", kProgram);
    testing::write_text(repo / "train.toml", kSpec);
    testing::write_text(repo / "requirements.txt", "tinypkg==1.0\n");
    testing::write_text(repo / "missing.txt", "tinypkg==1.0\nnosuchpkg\n");
    testing::write_text(repo / "torch-pin.txt", "tinypkg==1.0\ntorch==9.9.9\n");
    testing::write_text(repo / "slow.txt", "slowpkg\n");
    run_checked("cd " + shell_quote(repo.string()) +
                " && git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm requirements");
    commit = run_checked("git -C " + shell_quote(repo.string()) + " rev-parse HEAD");
    commit.erase(commit.find_last_not_of('\n') + 1);
  }

  // A trainpoint run as a pod would start it: its own work directory, the node's git cache (where
  // the Python environments are kept), the index in PIP_INDEX_URL and nothing else of this machine's pip settings.
  std::string job(const std::string& environment, const std::string& workdir, const std::string& arguments = "") {
    return "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL "
           "PIP_NO_CACHE_DIR=1 PIP_INDEX_URL=" + index.url() + " " + environment + " " +
           testing::trainpoint_binary() + " run --repo " + shell_quote((dir / "repo").string()) + " --ref " + commit +
           " --spec train.toml --workdir " + shell_quote((dir / workdir).string()) + " --git-cache " +
           shell_quote((dir / "node-cache").string()) + " " + arguments;
  }

  testing::CommandResult run_job(const std::string& environment, const std::string& workdir = "work",
                                 const std::string& arguments = "") {
    return run_command(job("MASTER_PORT=" + std::to_string(testing::free_port()) + " " + environment, workdir,
                           arguments));
  }

  testing::TempDir dir;
  testing::PackageIndex index{dir / "index.log"};
  std::string commit;
};

TEST_F(Requirements, TwoRanksImportTheInstalledPackageAndARestartedPodReusesTheEnvironment) {
  const auto first = run_job("");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("requirements.txt: installed 1 package(s): tinypkg 1.0"), std::string::npos)
      << first.output;
  const fs::path environments = dir / "node-cache" / "python";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string report = testing::read_text(dir / "work" / "out" / ("rank-" + std::to_string(rank) + ".txt"));
    EXPECT_NE(report.find("sum=14\n"), std::string::npos) << report;  // 7 + 7
    EXPECT_NE(report.find("tinypkg=" + environments.string() + "/"), std::string::npos) << report;
    EXPECT_NE(report.find("prefix=" + environments.string() + "/"), std::string::npos) << report;
    EXPECT_NE(report.find("greeting=hello\n"), std::string::npos) << report;
  }

  // The index is gone: a restarted pod (another work directory on the same node) must not need it.
  index.stop();
  const auto again = run_job("", "work-restarted");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("reusing the environment"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("pip not run"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("installed 1 package"), std::string::npos) << again.output;
  EXPECT_NE(testing::read_text(dir / "work-restarted" / "out" / "rank-1.txt").find("sum=14\n"), std::string::npos);
}

TEST_F(Requirements, TwoPodsAndTheirLocalRanksShareOneInstall) {
  // Pod A launches its two ranks (Trainer v2's variables); pod B's ranks are two trainpoint processes
  // (torchrun's variables), as when each rank is its own process. All start together on one node cache.
  const std::string port = std::to_string(testing::free_port());
  const std::string pod_a = job("PET_NNODES=2 PET_NODE_RANK=0 PET_NPROC_PER_NODE=2 PET_MASTER_ADDR=127.0.0.1 "
                                "PET_MASTER_PORT=" + port, "pod-a");
  auto rank = [&](int global) {
    return job("RANK=" + std::to_string(global) + " LOCAL_RANK=" + std::to_string(global - 2) +
                   " WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port,
               "pod-b-" + std::to_string(global));
  };
  const fs::path logs = dir.path();
  const auto result = run_command(
      "cd " + shell_quote(logs.string()) + " && (" + pod_a + " > a.log 2>&1 & a=$!; " + rank(2) +
      " > b2.log 2>&1 & b2=$!; " + rank(3) + " > b3.log 2>&1 & b3=$!; "
      "wait $a; ea=$?; wait $b2; eb2=$?; wait $b3; eb3=$?; echo \"exits $ea $eb2 $eb3\")");
  const std::string output =
      testing::read_text(logs / "a.log") + testing::read_text(logs / "b2.log") + testing::read_text(logs / "b3.log");
  ASSERT_NE(result.output.find("exits 0 0 0"), std::string::npos) << result.output << output;
  EXPECT_EQ(occurrences(output, "installed 1 package(s): tinypkg 1.0"), 1) << output;
  EXPECT_EQ(occurrences(output, "reusing the environment"), 2) << output;
  EXPECT_EQ(index.requests("tinypkg-1.0-py3-none-any.whl"), 1) << "downloaded more than once";
  for (const auto& [pod, global] : std::vector<std::pair<std::string, int>>{{"pod-a", 0}, {"pod-a", 1},
                                                                            {"pod-b-2", 2}, {"pod-b-3", 3}}) {
    const std::string report = testing::read_text(dir / pod / "out" / ("rank-" + std::to_string(global) + ".txt"));
    EXPECT_NE(report.find("sum=28\n"), std::string::npos) << pod << " rank " << global << ": " << report;
  }
}

TEST_F(Requirements, AnIndexThatDoesNotAnswerIsRetryable) {
  index.stop();
  const auto checked = run_job("");
  EXPECT_EQ(checked.exit_code, 200) << checked.output;
  EXPECT_NE(checked.output.find("preflight check 'command' failed: package index " + index.url() +
                                " does not answer"), std::string::npos) << checked.output;
  // Without the preflight, pip's own failure is classified (one retry, so that pip says why).
  const auto installed = run_job("PIP_RETRIES=1", "work", "--no-preflight");
  EXPECT_EQ(installed.exit_code, 200) << installed.output;
  EXPECT_NE(installed.output.find("the package index did not answer"), std::string::npos) << installed.output;
}

TEST_F(Requirements, AMissingPackageIsAPermanentErrorNamingIt) {
  const auto result = run_job("", "work", "--set job.requirements=missing.txt");
  EXPECT_EQ(result.exit_code, 9) << result.output;
  EXPECT_NE(result.output.find("job.requirements missing.txt: no package 'nosuchpkg' on the package index"),
            std::string::npos) << result.output;
  EXPECT_NE(result.output.find("(exit 9, requirements error)"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("started 2 workers"), std::string::npos) << result.output;
}

TEST_F(Requirements, ATorchPinOfAnotherVersionIsRefusedBeforeAnyInstall) {
  const auto result = run_job("", "work", "--set job.requirements=torch-pin.txt");
  EXPECT_EQ(result.exit_code, 9) << result.output;
  EXPECT_NE(result.output.find("refused before installing anything: it would replace the image's torch"),
            std::string::npos) << result.output;
  EXPECT_EQ(index.requests("torch-9.9.9"), 0) << index.requests("");
  EXPECT_EQ(result.output.find("started 2 workers"), std::string::npos) << result.output;
}

TEST_F(Requirements, AnInterruptedInstallIsNotTakenAsCompleteByTheNextRun) {
  // slowpkg's build waits while `hold` exists: trainpoint is killed (SIGKILL, as an evicted pod) then.
  const fs::path hold = dir / "hold";
  testing::write_text(hold, "");
  const std::string slow = "'TRAINPOINT_SET=job.requirements=slow.txt;dist.nproc_per_node=1;"
                           "job.command=[\"/usr/bin/python3\", \"-c\", \"print(__import__(\\\"slowpkg\\\").VALUE)\"]' "
                           "SLOWPKG_HOLD=" + shell_quote(hold.string());
  const auto killed = run_command(
      job(slow, "work") + " > " + shell_quote((dir / "killed.log").string()) + " 2>&1 & pid=$!; "
      "for i in $(seq 600); do [ -e " + shell_quote(hold.string() + ".started") + " ] && break; "
      "kill -0 $pid || break; sleep 0.1; done; "
      "kill -KILL $pid; wait $pid");
  ASSERT_EQ(killed.exit_code, 137) << killed.output << testing::read_text(dir / "killed.log");
  ASSERT_TRUE(fs::exists(hold.string() + ".started")) << testing::read_text(dir / "killed.log");

  fs::remove(hold);
  const auto next = run_command(job(slow, "work"));
  ASSERT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("is incomplete (an earlier build was interrupted or failed): building it again"),
            std::string::npos) << next.output;
  EXPECT_NE(next.output.find("slow.txt: installed 1 package(s): slowpkg 1.0"), std::string::npos) << next.output;
  EXPECT_NE(next.output.find("\nslow\n"), std::string::npos) << next.output;
}

}  // namespace
}  // namespace tp
