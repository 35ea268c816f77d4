// The local launcher's worker group and run_workers over small real processes (/bin/sh, sleep), no training.
#include "dist/worker_group.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "dist/launcher.h"
#include "support/temp_dir.h"

namespace tp::dist {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Worker `local_rank` (rank 10 + local_rank, so that the two are told apart) running `script` with /bin/sh.
Worker shell_worker(int local_rank, const std::string& script, ChildOutput output = ChildOutput::inherited) {
  Worker worker;
  worker.local_rank = local_rank;
  worker.rank = 10 + local_rank;
  worker.process.program = "/bin/sh";
  worker.process.arguments = {"-c", script};
  worker.process.output = output;
  return worker;
}

// Polls until every worker has ended; a minute at most, far more than any of these scripts needs.
void poll_until_done(WorkerGroup& group) {
  const auto give_up = Clock::now() + std::chrono::minutes(1);
  while (group.running() && Clock::now() < give_up) group.poll(std::chrono::milliseconds(50));
  ASSERT_FALSE(group.running()) << "the workers were still running after a minute";
}

void wait_for_file(const fs::path& file) {
  const auto give_up = Clock::now() + std::chrono::minutes(1);
  while (!fs::exists(file) && Clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(fs::exists(file)) << file;
}

TEST(WorkerGroup, EveryFailureIsKeptInTheOrderItWasSeenTheFirstFirstAndSuccessIsNoFailure) {
  WorkerGroup group({shell_worker(0, "sleep 2; exit 4"), shell_worker(1, "exit 3"), shell_worker(2, "exit 0")});
  group.start();
  poll_until_done(group);
  ASSERT_TRUE(group.failed());
  const std::vector<WorkerExit> failures = group.failures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0].local_rank, 1);
  EXPECT_EQ(failures[0].rank, 11);
  EXPECT_EQ(failures[0].code, 3);
  EXPECT_EQ(failures[0].signal, 0);
  EXPECT_EQ(failures[1].local_rank, 0);
  EXPECT_EQ(failures[1].code, 4);
}

TEST(WorkerGroup, PollTellsWhichWorkersEndedWithTheirCodeOrSignal) {
  WorkerGroup group({shell_worker(0, "exit 7"), shell_worker(1, "kill -KILL $$")});
  group.start();
  std::vector<WorkerExit> exits;
  const auto give_up = Clock::now() + std::chrono::minutes(1);
  while (exits.size() < 2 && Clock::now() < give_up) {
    for (auto& exit : group.poll(std::chrono::milliseconds(50))) exits.push_back(exit);
  }
  ASSERT_EQ(exits.size(), 2u);
  for (const auto& exit : exits) {
    if (exit.local_rank == 0) {
      EXPECT_EQ(exit.code, 7);
      EXPECT_EQ(exit.signal, 0);
    } else {
      EXPECT_EQ(exit.code, 128 + SIGKILL);
      EXPECT_EQ(exit.signal, SIGKILL);
    }
  }
  EXPECT_FALSE(group.running());
}

TEST(WorkerGroup, StopSendsTheSignalThenSigkillsAWorkerThatIgnoresItAfterTheGrace) {
  testing::TempDir dir;
  // The marker file says the trap is set; `exec sleep` keeps SIGTERM ignored in the worker's own process.
  WorkerGroup group({shell_worker(0, "trap '' TERM; touch " + (dir / "ignoring").string() + "; exec sleep 60"),
                     shell_worker(1, "exec sleep 60")});
  group.start();
  wait_for_file(dir / "ignoring");
  const auto stopping = Clock::now();
  const std::chrono::seconds grace(1);
  group.stop(SIGTERM, grace);
  const auto took = Clock::now() - stopping;
  EXPECT_FALSE(group.running());
  EXPECT_GE(took, grace) << "the worker that ignores SIGTERM got its grace";
  EXPECT_LT(took, std::chrono::seconds(50)) << "SIGKILL, not its sleep's end, ended it";
  const std::vector<WorkerExit> failures = group.failures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_EQ(failures[0].local_rank, 1);
  EXPECT_EQ(failures[0].signal, SIGTERM);
  EXPECT_EQ(failures[0].code, 128 + SIGTERM);
  EXPECT_EQ(failures[1].local_rank, 0);
  EXPECT_EQ(failures[1].signal, SIGKILL);
}

TEST(WorkerGroup, AProgramThatCannotBeExecutedIsOneSpecErrorNamingItAndTheWorkersStartedAreStopped) {
  Worker missing = shell_worker(1, "");
  missing.process.program = "no-such-program-xyz";
  missing.process.arguments.clear();
  WorkerGroup group({shell_worker(0, "exec sleep 60"), missing});
  try {
    group.start();
    FAIL() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::spec);
    EXPECT_EQ(std::string(error.what()),
              "cannot start worker 1: cannot execute 'no-such-program-xyz': No such file or directory");
  }
  EXPECT_FALSE(group.running());
  const std::vector<WorkerExit> failures = group.failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].local_rank, 0);
  EXPECT_EQ(failures[0].signal, SIGKILL);
}

TEST(WorkerGroup, AFailedWorkersLastTwentyLinesOfStderrAreKept) {
  WorkerGroup group({shell_worker(0, "for i in $(seq 30); do echo line $i >&2; done; echo on stdout; exit 5",
                                  ChildOutput::stderr_piped),
                     shell_worker(1, "echo other >&2; exit 6", ChildOutput::stderr_piped)});
  group.start();
  poll_until_done(group);
  const std::vector<WorkerExit> failures = group.failures();
  ASSERT_EQ(failures.size(), 2u);
  for (const auto& failure : failures) {
    if (failure.local_rank == 0) {
      ASSERT_EQ(failure.stderr_tail.size(), 20u);
      EXPECT_EQ(failure.stderr_tail.front(), "line 11");
      EXPECT_EQ(failure.stderr_tail.back(), "line 30");
    } else {
      EXPECT_EQ(failure.stderr_tail, std::vector<std::string>{"other"});
    }
  }
}

// run_workers' policy over the group: the first failure stops the others, and every failure is in the result.
TEST(LocalLauncher, AFailedWorkerStopsTheOthersAndTheResultKeepsEveryFailureWithTheFirstMarked) {
  testing::TempDir dir;
  WorkerLaunch launch;
  launch.program = "/bin/sh";
  launch.arguments = {"-c", "echo \"rank $RANK\" > \"$TORCHELASTIC_ERROR_FILE\"; "
                            "if [ \"$LOCAL_RANK\" = 1 ]; then echo 'it went wrong' >&2; exit 4; fi; exec sleep 60"};
  launch.topology.nproc_per_node = 2;
  launch.stop_grace_seconds = 30;
  launch.error_file_dir = (dir / "errors").string();
  launch.keep_stderr_tail = true;
  const WorkersResult result = run_workers(launch);
  EXPECT_EQ(result.code, 4);
  EXPECT_EQ(result.exit_code(), 4);
  EXPECT_EQ(result.local_rank, 1);
  EXPECT_EQ(result.rank, 1);
  EXPECT_EQ(result.signal, 0);
  EXPECT_FALSE(result.interrupted);
  EXPECT_EQ(result.stderr_tail, std::vector<std::string>{"it went wrong"});
  EXPECT_EQ(result.error_file, error_file_path(launch.error_file_dir, 1));
  EXPECT_EQ(testing::read_text(result.error_file), "rank 1\n");
  ASSERT_EQ(result.failures.size(), 2u);
  EXPECT_EQ(result.failures[0].local_rank, 1);
  EXPECT_EQ(result.failures[1].local_rank, 0);
  EXPECT_EQ(result.failures[1].signal, SIGTERM) << "stopped by the launcher, not after its sleep";
}

}  // namespace
}  // namespace tp::dist
