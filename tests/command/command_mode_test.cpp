// Command mode end to end: trainpoint clones a git repository and starts its Python program once
// per local rank; the ranks form a real torch.distributed (Gloo) group through the variables
// trainpoint gives them, and exit codes come back through trainpoint.
#include <gtest/gtest.h>

#include <csignal>
#include <regex>

#include "s3/s3_server.h"
#include "support/background_process.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_checked;
using testing::run_command;
using testing::shell_quote;

// Each rank all-reduces (rank + 1) and writes what it saw: the sum, its variables, its directory
// and the number of files in its data directory.
const char* kProgram = R"(import os, sys
import torch
import torch.distributed as dist

fail_rank = os.environ.get("FAIL_RANK")
if fail_rank is not None and int(os.environ["RANK"]) == int(fail_rank):
    print("rank %s gives up: shard 7 is unreadable" % fail_rank, file=sys.stderr)
    sys.exit(int(os.environ["FAIL_CODE"]))
dist.init_process_group("gloo")
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
data = os.environ["TRAINPOINT_DATA_DIR"]
with open(os.path.join(os.environ["TRAINPOINT_OUTPUT_DIR"], "rank-%d.txt" % rank), "w") as out:
    out.write("sum=%g\n" % value.item())
    for name in ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "GROUP_RANK",
                 "GROUP_WORLD_SIZE", "ROLE_NAME", "ROLE_RANK", "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID",
                 "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
                 "OMP_NUM_THREADS"]:
        out.write("%s=%s\n" % (name, os.environ[name]))
    out.write("error_file=%s\n" % os.path.basename(os.environ["TORCHELASTIC_ERROR_FILE"]))
    out.write("cwd_has_program=%s\n" % os.path.exists("ddp.py"))
    out.write("data_files=%d\n" % len(os.listdir(data)))
    out.write("args=%s\n" % " ".join(sys.argv[1:]))
dist.destroy_process_group()
)";

// Waits to be stopped: SIGTERM must reach it through trainpoint, which then exits with its code.
const char* kWaiter = R"(import os, signal, sys, time
out = os.environ["TRAINPOINT_OUTPUT_DIR"]
def stop(signum, frame):
    open(os.path.join(out, "stopped-%s" % os.environ["RANK"]), "w").close()
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
open(os.path.join(out, "ready-%s" % os.environ["RANK"]), "w").close()
time.sleep(120)
)";

// Fails on rank 1 under torch's @record, as a script launched by torchrun does: its exception goes to
// TORCHELASTIC_ERROR_FILE. Rank 0 waits to be stopped.
const char* kRecorded = R"(import os, time
from torch.distributed.elastic.multiprocessing.errors import record

def read_labels():
    raise ValueError("label 7 is not one of the 5 classes")

@record
def main():
    if os.environ["RANK"] == "1":
        read_labels()
    time.sleep(120)

if __name__ == "__main__":
    main()
)";

const char* kSpec = R"([job]
name = "command-mode"
output = "out"
command = ["/usr/bin/python3", "ddp.py", "--epochs", "5"]

[data]
source = "data"

[dist]
nproc_per_node = 2
)";

class CommandMode : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path repo = dir / "repo";
    testing::write_text(repo / "ddp.py", kProgram);
    testing::write_text(repo / "train.toml", kSpec);
    testing::write_text(repo / "wait.py", kWaiter);
    testing::write_text(repo / "recorded.py", kRecorded);
    testing::write_text(repo / "data" / "a.csv", "x,y\n1,2\n");
    testing::write_text(repo / "data" / "b.csv", "x,y\n3,4\n");
    run_checked("cd " + shell_quote(repo.string()) +
                " && git init -q && git add . && git -c user.name=t -c user.email=t@t commit -qm spec");
    commit = run_checked("git -C " + shell_quote(repo.string()) + " rev-parse HEAD");
    commit.erase(commit.find_last_not_of('\n') + 1);
  }

  testing::CommandResult run_job(const std::string& environment) {
    return run_command("cd " + shell_quote(dir.path().string()) +
                       " && env -u RANK -u WORLD_SIZE -u LOCAL_RANK " + environment +
                       " MASTER_PORT=" + std::to_string(testing::free_port()) + " " +
                       testing::trainpoint_binary() + " run --repo " + shell_quote((dir / "repo").string()) +
                       " --ref " + commit + " --spec train.toml --workdir work");
  }

  testing::TempDir dir;
  std::string commit;
};

TEST_F(CommandMode, TwoRanksOfTheUsersProgramAllReduceThroughTrainpointsVariables) {
  const auto result = run_job("");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string report = testing::read_text(dir / "work" / "out" / ("rank-" + std::to_string(rank) + ".txt"));
    EXPECT_NE(report.find("sum=3\n"), std::string::npos) << report;  // 1 + 2
    EXPECT_NE(report.find("RANK=" + std::to_string(rank) + "\n"), std::string::npos) << report;
    EXPECT_NE(report.find("LOCAL_RANK=" + std::to_string(rank) + "\n"), std::string::npos) << report;
    EXPECT_NE(report.find("WORLD_SIZE=2\n"), std::string::npos) << report;
    EXPECT_NE(report.find("LOCAL_WORLD_SIZE=2\n"), std::string::npos) << report;
    EXPECT_NE(report.find("cwd_has_program=True\n"), std::string::npos) << report;
    EXPECT_NE(report.find("data_files=2\n"), std::string::npos) << report;
    EXPECT_NE(report.find("args=--epochs 5\n"), std::string::npos) << report;
    // The rest of torchrun's variables, which Lightning and Accelerate look for.
    for (const std::string& variable :
         std::vector<std::string>{"GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "ROLE_NAME=default", "ROLE_RANK=" + std::to_string(rank),
          "ROLE_WORLD_SIZE=2", "TORCHELASTIC_RUN_ID=command-mode", "TORCHELASTIC_RESTART_COUNT=0",
          "TORCHELASTIC_MAX_RESTARTS=0", "TORCHELASTIC_USE_AGENT_STORE=False",
          "error_file=error-rank-" + std::to_string(rank) + ".json"}) {
      EXPECT_NE(report.find(variable + "\n"), std::string::npos) << variable << " in\n" << report;
    }
    EXPECT_TRUE(std::regex_search(report, std::regex("\nOMP_NUM_THREADS=[1-9][0-9]*\n"))) << report;
  }
}

TEST_F(CommandMode, AFailingRanksExitStopsTheOtherRankAndIsAProgramErrorWithItsOwnCode) {
  // Rank 0 waits in init_process_group for rank 1, which exits 17: trainpoint must stop rank 0 and
  // fail in its documented program class (17 would read as one of trainpoint's), naming the code and
  // the interpreter that ran.
  const auto result = run_job("FAIL_RANK=1 FAIL_CODE=17");
  EXPECT_EQ(result.exit_code, 10) << result.output;
  EXPECT_NE(result.output.find("worker 1 (rank 1) exited with code 17"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 1 (worker 1 of this node): '/usr/bin/python3 ddp.py --epochs 5' "
                               "(/usr/bin/python3 (Python 3.1"), std::string::npos) << result.output;
  // Without torch's @record, the cause is the failed rank's last lines of stderr, in the last line's message.
  EXPECT_NE(result.output.find("exited with code 17 (the program's own code): its last lines of stderr:\n  "
                               "rank 1 gives up: shard 7 is unreadable"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("(exit 10, program error)"), std::string::npos) << result.output;
}

TEST_F(CommandMode, TheExceptionTorchsRecordWroteIsTheFailuresCauseWithItsFileAndLine) {
  const auto result = run_job("'TRAINPOINT_SET=job.command=[\"/usr/bin/python3\", \"recorded.py\"]'");
  EXPECT_EQ(result.exit_code, 10) << result.output;
  EXPECT_NE(result.output.find("rank 1 (worker 1 of this node): '/usr/bin/python3 recorded.py'"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("exited with code 1 (the program's own code): ValueError: label 7 is not one of the "
                               "5 classes (recorded.py:5) (exit 10, program error)"), std::string::npos)
      << result.output;
}

TEST_F(CommandMode, AMissingModuleNamesTheInterpreterThatRan) {
  const auto result = run_job("'TRAINPOINT_SET=dist.nproc_per_node=1;"
                              "job.command=[\"python3\", \"-c\", \"import no_such_module_xyz\"]'");
  EXPECT_EQ(result.exit_code, 10) << result.output;
  EXPECT_NE(result.output.find("ModuleNotFoundError"), std::string::npos) << result.output;
  // python3 from PATH, whichever it is here: the message says which one and whether it has torch.
  EXPECT_TRUE(std::regex_search(result.output, std::regex(R"('python3 -c import no_such_module_xyz' \(python3 = /[^ ]+ \(Python 3\.[0-9.]+, (torch [^)]+|no torch)\)\) exited with code 1)")))
      << result.output;
}

TEST_F(CommandMode, AProgramKilledByASignalOrAskingForARetryIsRetryable) {
  const auto killed = run_job("'TRAINPOINT_SET=dist.nproc_per_node=1;"
                              "job.command=[\"/bin/sh\", \"-c\", \"kill -KILL $$\"]'");
  EXPECT_EQ(killed.exit_code, 203) << killed.output;
  EXPECT_NE(killed.output.find("was ended by signal 9 (SIGKILL: out of memory, or killed from outside)"),
            std::string::npos) << killed.output;
  const auto retry = run_job("'TRAINPOINT_SET=dist.nproc_per_node=1;job.command=[\"/bin/sh\", \"-c\", \"exit 200\"]'");
  EXPECT_EQ(retry.exit_code, 203) << retry.output;
  EXPECT_NE(retry.output.find("exited with code 200, which asks for a retry"), std::string::npos) << retry.output;
}

TEST_F(CommandMode, AScriptMissingFromTheCheckoutFailsThePreflightBeforeAnyRankStarts) {
  const auto result = run_job("'TRAINPOINT_SET=job.command=[\"/usr/bin/python3\", \"-u\", \"trian.py\"]'");
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("preflight check 'command' failed: job.command: '/usr/bin/python3 -u trian.py' runs "
                               "trian.py, which is not in the checkout"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("started 2 workers"), std::string::npos) << result.output;
  // The pod holds the whole world (its 2 launched ranks): nobody else waits to be told.
  EXPECT_EQ(result.output.find("telling the other ranks why"), std::string::npos) << result.output;
}

TEST_F(CommandMode, CheckShowsOnlyWhatCommandModeUses) {
  const auto result = run_command(testing::trainpoint_binary() + " check --spec " +
                                  shell_quote((dir / "repo" / "train.toml").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* shown : {"[job]", "command = [\"/usr/bin/python3\"", "requirements is unset", "[data]",
                            "source = \"data\"", "nproc_per_node = 2", "[k8s]"}) {
    EXPECT_NE(result.output.find(shown), std::string::npos) << shown << " in\n" << result.output;
  }
  EXPECT_NE(result.output.find("# command mode: the settings your program's run uses"), std::string::npos);
  for (const char* hidden : {"\n[train]", "\n[model]", "\n[checkpoint]", "staging =", "image_size", "backend =",
                             "seed ="}) {
    EXPECT_EQ(result.output.find(hidden), std::string::npos) << hidden << " in\n" << result.output;
  }
  // trainpoint serves /metrics for its own training only (render-job's k8s.metrics_port stays).
  const auto job = result.output.find("[job]");
  EXPECT_EQ(result.output.substr(job, result.output.find("\n[data]") - job).find("metrics_port"), std::string::npos)
      << result.output;
}

TEST_F(CommandMode, SigtermReachesEveryRankAndTheirExitCodeIsTheJobs) {
  const fs::path out = dir / "work" / "out";
  const auto result = run_command(
      "cd " + shell_quote(dir.path().string()) +
      " && (env -u RANK -u WORLD_SIZE -u LOCAL_RANK MASTER_PORT=" + std::to_string(testing::free_port()) +
      " 'TRAINPOINT_SET=job.command=[\"/usr/bin/python3\", \"wait.py\"]' " + testing::trainpoint_binary() +
      " run --repo " + shell_quote((dir / "repo").string()) + " --ref " + commit +
      " --spec train.toml --workdir work & pid=$!; "
      "for i in $(seq 300); do [ -e " +
      shell_quote((out / "ready-0").string()) + " ] && [ -e " + shell_quote((out / "ready-1").string()) +
      " ] && break; sleep 0.1; done; kill -TERM $pid; wait $pid)");
  EXPECT_EQ(result.exit_code, 143) << result.output;
  EXPECT_TRUE(fs::exists(out / "stopped-0")) << result.output;
  EXPECT_TRUE(fs::exists(out / "stopped-1")) << result.output;
}

// SigIgn of /proc/PID/status: the signals a process ignores, as a hexadecimal mask (bit n-1 for signal n).
bool ignores_sigpipe(const std::string& status_line) {
  const std::string mask = status_line.substr(status_line.find_first_of("0123456789abcdef"));
  return (std::stoull(mask, nullptr, 16) >> (SIGPIPE - 1)) & 1;
}

TEST_F(CommandMode, TrainpointIgnoresBrokenPipesAndTheProgramGetsTheDefault) {
  // trainpoint itself survives writing to a vanished peer (the error reports it); the user's program, a
  // shell pipeline say, gets SIGPIPE as usual.
  const std::string command =
      "job.command=[\"/bin/sh\", \"-c\", \"grep SigIgn /proc/$PPID/status > "
      "$TRAINPOINT_OUTPUT_DIR/parent-$RANK && "
      "grep SigIgn /proc/self/status > $TRAINPOINT_OUTPUT_DIR/self-$RANK\"]";
  const auto result = run_job("'TRAINPOINT_SET=" + command + "'");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const fs::path out = dir / "work" / "out";
  EXPECT_TRUE(ignores_sigpipe(testing::read_text(out / "parent-0"))) << testing::read_text(out / "parent-0");
  EXPECT_FALSE(ignores_sigpipe(testing::read_text(out / "self-0"))) << testing::read_text(out / "self-0");
}

TEST_F(CommandMode, AProgramThatCannotBeStartedIsASpecError) {
  const auto result = run_command(testing::trainpoint_binary() + " check --spec " +
                                  shell_quote((dir / "repo" / "train.toml").string()));
  ASSERT_EQ(result.exit_code, 0) << "without [model], a command-mode spec is valid: " << result.output;
  const auto missing =
      run_command("cd " + shell_quote(dir.path().string()) + " && " + testing::trainpoint_binary() +
                  " run --spec " + shell_quote((dir / "repo" / "train.toml").string()) +
                  " --set 'job.command=[\"no-such-program-xyz\"]' --set dist.nproc_per_node=1");
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  EXPECT_NE(missing.output.find("preflight check 'command' failed: job.command: 'no-such-program-xyz' is not in "
                                "PATH"), std::string::npos) << missing.output;
  // A file that resolves but cannot be executed (its interpreter is missing) is told apart from a
  // program that ran and failed.
  testing::write_text(dir / "repo" / "broken.sh", "#!/no/such/interpreter\n");
  fs::permissions(dir / "repo" / "broken.sh", fs::perms::owner_all);
  const auto unstartable =
      run_command("cd " + shell_quote(dir.path().string()) + " && " + testing::trainpoint_binary() +
                  " run --spec " + shell_quote((dir / "repo" / "train.toml").string()) +
                  " --set 'job.command=[\"./broken.sh\"]' --set dist.nproc_per_node=1");
  EXPECT_EQ(unstartable.exit_code, 3) << unstartable.output;
  EXPECT_NE(unstartable.output.find("cannot start worker 0: cannot execute '" + (dir / "repo" / "broken.sh").string() +
                                    "': No such file or directory"), std::string::npos) << unstartable.output;
}

// The program reads data staged from S3 (MinIO) and what it writes lands in an s3:// output.
TEST_F(CommandMode, StagesAnS3SourceForTheProgramAndUploadsWhatItWrites) {
  testing::S3Server server;
  const std::string s3_env = "AWS_ENDPOINT_URL=" + server.endpoint() +
                             " " + testing::S3Server::key_environment() + " ";
  const auto upload = run_command("env " + s3_env + testing::trainpoint_binary() + " s3 cp --recursive " +
                                  shell_quote((dir / "repo" / "data").string()) + " s3://test-bucket/tables");
  ASSERT_EQ(upload.exit_code, 0) << upload.output;
  const auto result = run_job(s3_env + "'TRAINPOINT_SET=data.source=s3://test-bucket/tables;job.output=s3://test-bucket/runs/cmd'");
  ASSERT_EQ(result.exit_code, 0) << result.output;

  s3::Client client(testing::test_connection(server.endpoint()));
  const auto listing = client.list("test-bucket", "runs/cmd/");
  std::vector<std::string> keys;
  for (const auto& object : listing.objects) keys.push_back(object.key);
  ASSERT_EQ(keys, (std::vector<std::string>{"runs/cmd/rank-0.txt", "runs/cmd/rank-1.txt"})) << result.output;
  const fs::path fetched = dir / "rank-1.txt";
  client.download("test-bucket", {{listing.objects[1], fetched}});
  const std::string report = testing::read_text(fetched);
  EXPECT_NE(report.find("sum=3\n"), std::string::npos) << report;
  EXPECT_NE(report.find("data_files=2\n"), std::string::npos) << report;  // a.csv and b.csv from the bucket
}

}  // namespace
}  // namespace tp
