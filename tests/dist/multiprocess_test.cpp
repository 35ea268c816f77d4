// Real processes on loopback with Gloo: trainpoint's gradient engine against a single process,
// lost ranks, and the local launcher.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/background_process.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "telemetry/webhook_receiver.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::shell_quote;

std::vector<double> read_numbers(const fs::path& file) {
  std::vector<double> numbers;
  std::ifstream in(file);
  for (double value; in >> value;) numbers.push_back(value);
  return numbers;
}

std::string torchrun_env(int rank, int world, int port) {
  return "RANK=" + std::to_string(rank) + " LOCAL_RANK=" + std::to_string(rank) + " WORLD_SIZE=" +
         std::to_string(world) + " LOCAL_WORLD_SIZE=" + std::to_string(world) +
         " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ";
}

// A regression job in `dir` (table.csv, train.toml) that trains until it is stopped: epochs of 3000 rows,
// no checkpoints; `more` is added to the spec.
void write_endless_job(const testing::TempDir& dir, const std::string& more) {
  std::string csv = "x1,x2,y\n";
  for (int i = 0; i < 3000; ++i) csv += std::to_string(i % 17) + "," + std::to_string(i % 5) + "," + std::to_string(i % 7) + "\n";
  testing::write_text(dir / "table.csv", csv);
  testing::write_text(dir / "train.toml", R"([job]
output = "out"
[data]
source = "table.csv"
format = "table_csv"
target = "y"
task = "regression"
[model]
arch = "mlp"
hidden = [16]
[train]
epochs = 100000
batch_size = 16
[checkpoint]
every_epochs = 0
)" + more);
}

TEST(Distributed, TwoRanksEqualOneRankWithTheGlobalBatchAndEndIdentical) {
  testing::TempDir dir;
  const std::string worker = std::string(TP_DIST_WORKER_BIN) + " equivalence --global-batch 32 --steps 6 --bucket-kb 4";
  const auto single = run_command(worker + " --out " + (dir / "single.txt").string());
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const int port = testing::free_port();
  const auto pair = run_command("(" + torchrun_env(0, 2, port) + worker + " --out " + (dir / "rank0.txt").string() +
                                " & " + torchrun_env(1, 2, port) + worker + " --out " + (dir / "rank1.txt").string() +
                                " & wait %1 && wait %2)");
  ASSERT_EQ(pair.exit_code, 0) << pair.output;

  const auto reference = read_numbers(dir / "single.txt");
  const auto rank0 = read_numbers(dir / "rank0.txt");
  const auto rank1 = read_numbers(dir / "rank1.txt");
  ASSERT_EQ(reference.size(), 16u * 64 + 64 + 64 * 64 + 64 + 64 * 4 + 4);
  ASSERT_EQ(rank0.size(), reference.size());
  double worst = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) worst = std::max(worst, std::abs(rank0[i] - reference[i]));
  EXPECT_LT(worst, 1e-5) << "2 ranks x 16 must train like 1 rank x 32";
  std::ifstream a(dir / "rank0.txt"), b(dir / "rank1.txt");
  const std::string text0((std::istreambuf_iterator<char>(a)), {}), text1((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(text0, text1) << "parameters must be bit-identical on all ranks";
}

TEST(Distributed, FirstBucketAllReduceStartsBeforeBackwardEnds) {
  testing::TempDir dir;
  const std::string worker = std::string(TP_DIST_WORKER_BIN) + " equivalence --global-batch 32 --steps 2 --bucket-kb 4";
  const int port = testing::free_port();
  const auto pair = run_command("(" + torchrun_env(0, 2, port) + worker + " --out " + (dir / "r0.txt").string() +
                                " & " + torchrun_env(1, 2, port) + worker + " --out " + (dir / "r1.txt").string() +
                                " & wait %1 && wait %2)");
  ASSERT_EQ(pair.exit_code, 0) << pair.output;
  std::ifstream timing(dir / "r0.txt.timing");
  std::string label;
  long buckets = 0, lead_us = 0;
  timing >> label >> buckets >> label >> lead_us;
  EXPECT_GT(buckets, 2) << "4 KiB buckets split the 22 KiB of gradients";
  EXPECT_GT(lead_us, 0) << "the first bucket was launched from a hook, before backward returned";
  std::printf("first bucket launched %ld us before backward returned (%ld buckets)\n", lead_us, buckets);
}

// Starts two hanging ranks, kills one with SIGKILL, and returns the survivor's result.
testing::CommandResult kill_one_rank(int victim) {
  testing::TempDir dir;
  const int port = testing::free_port();
  const std::string worker = std::string(TP_DIST_WORKER_BIN) + " hang --timeout 8";
  const int survivor = 1 - victim;
  const std::string script =
      torchrun_env(0, 2, port) + worker + " > " + (dir / "r0.log").string() + " 2>&1 & pid0=$!\n" +
      torchrun_env(1, 2, port) + worker + " > " + (dir / "r1.log").string() + " 2>&1 & pid1=$!\n" +
      "for i in $(seq 200); do grep -q step " + (dir / "r0.log").string() + " && grep -q step " +
      (dir / "r1.log").string() + " && break; sleep 0.1; done\n" + "start=$(date +%s%N)\n" + "kill -9 $pid" +
      std::to_string(victim) + "\n" + "wait $pid" + std::to_string(survivor) + "; code=$?\n" +
      "echo \"survivor exit $code after $(( ($(date +%s%N) - start) / 1000000 )) ms\"\n" + "cat " +
      (dir / ("r" + std::to_string(survivor) + ".log")).string() + " | grep -v '^step'\n" + "exit $code\n";
  testing::write_text(dir / "kill.sh", script);
  return run_command("timeout 120 bash " + (dir / "kill.sh").string());
}

TEST(Distributed, KilledRankIsNamedAndTheSurvivorExitsRetryable) {
  const auto result = kill_one_rank(1);
  std::printf("%s", result.output.c_str());
  EXPECT_EQ(result.exit_code, 202) << result.output;
  EXPECT_NE(result.output.find("rank 0: all-reduce failed: lost rank 1"), std::string::npos) << result.output;
}

TEST(Distributed, KilledMasterIsNamed) {
  const auto result = kill_one_rank(0);
  std::printf("%s", result.output.c_str());
  EXPECT_EQ(result.exit_code, 202) << result.output;
  EXPECT_NE(result.output.find("lost rank 0"), std::string::npos) << result.output;
}

// A rank whose pod was restarted while the master of the group it left is still up (the master has not noticed
// yet: here the old rank is stopped, not dead, so the master waits in its all-reduce until its timeout). The new
// rank finds a store whose rendezvous said "go on" without it: it must wait for the master's next start, not
// join a group that is going away (a Kubernetes restart of a worker pod does this; seen in tests/k8s).
TEST(Distributed, ARestartedRankWaitsForTheMastersNextStartInsteadOfJoiningTheEarlierGroup) {
  testing::TempDir dir;
  const int port = testing::free_port();
  const std::string hang = std::string(TP_DIST_WORKER_BIN) + " hang --timeout 6";
  const std::string join = std::string(TP_DIST_WORKER_BIN) + " fail-before-rendezvous --timeout 60 --failing-rank 99";
  const auto log = [&](const std::string& name) { return (dir / name).string(); };
  const std::string script =
      torchrun_env(0, 2, port) + hang + " > " + log("old0") + " 2>&1 & old0=$!\n" +
      torchrun_env(1, 2, port) + hang + " > " + log("old1") + " 2>&1 & old1=$!\n" +
      "for i in $(seq 200); do grep -q step " + log("old0") + " && grep -q step " + log("old1") +
      " && break; sleep 0.1; done\n"
      "kill -STOP $old1\n" +
      torchrun_env(1, 2, port) + join + " > " + log("new1") + " 2>&1 & new1=$!\n"
      "wait $old0; echo \"old master exit $?\"\n" +
      torchrun_env(0, 2, port) + join + " > " + log("new0") + " 2>&1 & new0=$!\n"
      "wait $new0; echo \"new master exit $?\"; wait $new1; echo \"new worker exit $?\"\n"
      "kill -9 $old1\n";
  testing::write_text(dir / "restart.sh", script);
  const auto result = run_command("timeout 120 bash " + (dir / "restart.sh").string());
  const std::string worker = testing::read_text(dir / "new1");
  EXPECT_NE(result.output.find("old master exit 202"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("new master exit 0"), std::string::npos) << result.output << testing::read_text(dir / "new0");
  EXPECT_NE(result.output.find("new worker exit 0"), std::string::npos) << result.output << worker;
  EXPECT_NE(worker.find("is an earlier start's of the master, whose rendezvous ended without this rank"),
            std::string::npos) << worker;
  EXPECT_NE(worker.find("joined"), std::string::npos) << worker;
}

// Three ranks where one fails before the rendezvous (a data error, exit 5), the master or another: every
// rank exits in that class, naming the rank and its message, instead of waiting dist.timeout_s (60 s,
// after which they would exit 202) for it. Each rank's output goes to its own file.
void EveryRankStopsWithTheFailureOf(int failing_rank) {
  testing::TempDir dir;
  const int port = testing::free_port();
  const std::string worker =
      std::string(TP_DIST_WORKER_BIN) + " fail-before-rendezvous --timeout 60 --failing-rank " +
      std::to_string(failing_rank);
  std::string script = "(";
  for (int rank = 0; rank < 3; ++rank) {
    script += torchrun_env(rank, 3, port) + worker + " > " + (dir / ("rank" + std::to_string(rank))).string() +
              " 2>&1 & ";
  }
  script += "wait %1; echo \"rank0 $?\"; wait %2; echo \"rank1 $?\"; wait %3; echo \"rank2 $?\")";
  const auto result = run_command(script);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string log = testing::read_text(dir / ("rank" + std::to_string(rank)));
    EXPECT_NE(result.output.find("rank" + std::to_string(rank) + " 5\n"), std::string::npos)
        << result.output << "rank " << rank << ":\n" << log;
    const std::string expected = rank == failing_rank ? "error: data.source: table.csv has no rows"
                                                      : "error: rank " + std::to_string(failing_rank) +
                                                            " failed before the rendezvous: data.source: table.csv has no rows";
    EXPECT_NE(log.find(expected), std::string::npos) << "rank " << rank << ":\n" << log;
    EXPECT_EQ(log.find("joined"), std::string::npos) << log;
  }
}

TEST(Distributed, TheMastersFailureBeforeTheRendezvousStopsEveryRankWithItsClassAndMessage) {
  EveryRankStopsWithTheFailureOf(0);
}

TEST(Distributed, AWorkersFailureBeforeTheRendezvousStopsEveryRankWithItsClassAndMessage) {
  EveryRankStopsWithTheFailureOf(1);
}

// Two `trainpoint run` ranks where only the master's preflight fails (its data.source names a file that is not
// there; a bucket only it may not write is the usual case): the other rank stops with the master's class and
// message as soon as it reaches the rendezvous, instead of waiting dist.timeout_s for it (then exit 202).
TEST(Distributed, TheMastersPreflightFailureStopsTheOtherRankWithItsClassAndMessage) {
  testing::TempDir dir;
  write_endless_job(dir, "[dist]\ntimeout_s = 60\n");  // neither rank gets to train
  const int port = testing::free_port();
  const std::string run = testing::trainpoint_binary() + " run --spec " + (dir / "train.toml").string() +
                          " --workdir " + dir.path().string();
  const auto result = run_command("(" + torchrun_env(0, 2, port) + run + " --set data.source=missing.csv > " +
                                  (dir / "r0.log").string() + " 2>&1 & " + torchrun_env(1, 2, port) + run + " > " +
                                  (dir / "r1.log").string() + " 2>&1 & wait %1; echo \"rank0 $?\"; wait %2; " +
                                  "echo \"rank1 $?\")");
  const std::string master = testing::read_text(dir / "r0.log"), other = testing::read_text(dir / "r1.log");
  EXPECT_NE(result.output.find("rank0 5\n"), std::string::npos) << result.output << master;
  EXPECT_NE(master.find("preflight check 'data' failed: data.source:"), std::string::npos) << master;
  EXPECT_NE(result.output.find("rank1 5\n"), std::string::npos) << result.output << other;
  EXPECT_NE(other.find("rank 0 failed before the rendezvous: preflight check 'data' failed: data.source:"),
            std::string::npos)
      << other;
}

// A pod's trainpoint starting two workers itself (--nproc-per-node 2) is killed with SIGKILL mid-training, as the
// OOM killer or a deleted pod does: its workers die with it (PR_SET_PDEATHSIG) instead of training on alone.
TEST(Distributed, WorkersDieWithTheirKilledLauncher) {
  testing::TempDir dir;
  write_endless_job(dir, "");
  const std::string log = (dir / "launcher.log").string();
  // A worker is alive while its process exists and is not a zombie waiting for a reaper.
  const std::string alive = "alive() { s=$(awk '{print $3}' /proc/$1/stat 2>/dev/null); [ -n \"$s\" ] && [ \"$s\" != Z ]; }\n";
  const auto result = run_command(
      alive + "MASTER_PORT=" + std::to_string(testing::free_port()) + " " + testing::trainpoint_binary() +
      " run --spec " + (dir / "train.toml").string() + " --workdir " + dir.path().string() +
      " --nproc-per-node 2 > " + log + " 2>&1 & launcher=$!\n"
      "for i in $(seq 1200); do grep -q 'epoch 1/100000:' " + log + " && break; sleep 0.1; done\n"
      "workers=$(pgrep -P $launcher | tr '\\n' ' ')\n"
      "echo \"workers: $workers\"\n"
      "kill -9 $launcher\n"
      "for i in $(seq 100); do left=''; for w in $workers; do alive $w && left=\"$left $w\"; done; "
      "[ -z \"$left\" ] && break; sleep 0.1; done\n"
      "echo \"left running 10 s after the launcher's SIGKILL:${left:- none}\"\n"
      "kill -9 $workers 2>/dev/null; true\n");
  const std::string launcher_log = testing::read_text(dir / "launcher.log");
  const auto workers_line = result.output.substr(0, result.output.find('\n'));
  EXPECT_EQ(std::count(workers_line.begin(), workers_line.end(), ' '), 3) << result.output << launcher_log;
  EXPECT_NE(result.output.find("left running 10 s after the launcher's SIGKILL: none"), std::string::npos)
      << result.output << launcher_log;
}

// Three `trainpoint run` ranks (torchrun's variables) train until rank 1 is stopped with SIGSTOP:
// ranks 0 and 2 report it by rank, step and phase within dist.stall_s, and rank 0 tells the webhook once; then
// their all-reduce times out after dist.timeout_s and they exit 202 naming it (retryable: nothing more is
// told). After SIGCONT rank 1 finds its peers gone and exits too: nothing is left running.
TEST(Distributed, StoppedRankIsReportedByStepAndPhaseAndThePeersExitRetryable) {
  testing::TempDir dir;
  testing::WebhookReceiver receiver("json");
  write_endless_job(dir, "[dist]\ntimeout_s = 15\nheartbeat_s = 1\nstall_s = 3\n");
  const int port = testing::free_port();
  const std::string run = testing::trainpoint_binary() + " run --spec " + (dir / "train.toml").string() +
                          " --workdir " + dir.path().string();
  const std::string log = (dir / "r").string();  // r0.log, r1.log, r2.log
  std::string script = "cleanup() { kill -CONT $pid1 2>/dev/null; kill -9 $pid0 $pid1 $pid2 2>/dev/null; }\n"
                       "trap cleanup EXIT TERM INT\n";
  for (int rank = 0; rank < 3; ++rank) {
    script += "TRAINPOINT_NOTIFY_WEBHOOK=" + receiver.url() + " " + torchrun_env(rank, 3, port) + run + " > " + log +
              std::to_string(rank) + ".log 2>&1 & pid" +
              std::to_string(rank) + "=$!\n";
  }
  script +=
      // Two epochs done: every rank is well into the training loop and has published steps.
      "for i in $(seq 1200); do grep -q 'epoch 2/100000:' " + log + "0.log && break; sleep 0.1; done\n"
      "sleep 1.5\n"
      // Only what the survivors log after the stop counts.
      "from0=$(( $(stat -c %s " + log + "0.log) + 1 )); from2=$(( $(stat -c %s " + log + "2.log) + 1 ))\n"
      "kill -STOP $pid1; stopped=$(date +%s%N)\n"
      "for i in $(seq 600); do tail -c +$from0 " + log + "0.log | grep -q 'stalled: rank 1 ' && tail -c +$from2 " +
      log + "2.log | grep -q 'stalled: rank 1 ' && break; sleep 0.05; done\n"
      "echo \"reported $(( ($(date +%s%N) - stopped) / 1000000 )) ms after SIGSTOP\"\n"
      "wait $pid0; code0=$?; wait $pid2; code2=$?\n"
      "echo \"survivors exit $code0 $code2 after $(( ($(date +%s%N) - stopped) / 1000000 )) ms\"\n"
      "kill -CONT $pid1\n"
      "for i in $(seq 600); do kill -0 $pid1 2>/dev/null || break; sleep 0.1; done\n"
      "if kill -0 $pid1 2>/dev/null; then echo 'rank 1 still running 60s after SIGCONT'; fi\n"
      "wait $pid1; code1=$?\n"
      "echo \"rank 1 exit $code1\"\n"
      "for pid in $pid0 $pid1 $pid2; do kill -0 $pid 2>/dev/null && echo \"stray process $pid\"; done\n"
      "pgrep -f " + dir.path().string() + "/train.toml >/dev/null && echo 'stray trainpoint process'\n"
      "echo '--- rank 0 after the stop'; tail -c +$from0 " + log + "0.log\n"
      "echo '--- rank 2 after the stop'; tail -c +$from2 " + log + "2.log\n"
      "echo '--- rank 1'; tail -n 5 " + log + "1.log\n";
  testing::write_text(dir / "stop.sh", script);
  const auto result = run_command("timeout 300 bash " + (dir / "stop.sh").string());
  std::printf("%s", result.output.c_str());
  EXPECT_NE(result.output.find("survivors exit 202 202"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("rank 1 exit 202"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("stray"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("still running"), std::string::npos) << result.output;
  const std::vector<nlohmann::json> told = receiver.accepted();
  ASSERT_EQ(told.size(), 1u) << result.output;
  EXPECT_EQ(told[0]["event"], "stalled");
  EXPECT_EQ(told[0]["error"].get<std::string>().rfind("1 rank(s) made no progress for dist.stall_s (3 s)", 0), 0u)
      << told[0];

  // Both survivors name rank 1 with the same step (a number past the first) and a phase.
  std::vector<std::string> reports;
  for (const char* survivor : {"--- rank 0 after the stop", "--- rank 2 after the stop"}) {
    const auto section = result.output.find(survivor);
    ASSERT_NE(section, std::string::npos) << result.output;
    const auto stalled = result.output.find("stalled: rank 1 at step ", section);
    ASSERT_NE(stalled, std::string::npos) << survivor << "\n" << result.output;
    const auto step_start = stalled + std::string("stalled: rank 1 at step ").size();
    const long step = std::stol(result.output.substr(step_start));
    EXPECT_GT(step, 0) << result.output;
    const std::string rest = result.output.substr(step_start, result.output.find('\n', step_start) - step_start);
    const auto phase = rest.find(", phase ");
    ASSERT_NE(phase, std::string::npos) << rest;
    const std::string phase_name = rest.substr(phase + 8, rest.find(':', phase) - phase - 8);
    EXPECT_NE(std::string(" data forward backward all-reduce broadcast checkpoint validate ").find(" " + phase_name + " "),
              std::string::npos)
        << rest;
    reports.push_back(rest.substr(0, rest.find(':')));
    // The error of the timed-out collective names it the same way.
    EXPECT_NE(result.output.find("failed: lost rank 1 at step " + std::to_string(step), section), std::string::npos)
        << result.output;
  }
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0], reports[1]) << "both survivors read the same heartbeat of rank 1";
}

// The local launcher: `trainpoint run` with dist.nproc_per_node = 2 on one node.
class Launcher : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto made = run_command(std::string(TP_MAKE_DATASET_BIN) + " images --out " + (dir_ / "data").string() +
                                  " --classes 2 --per-class 120 --size 24 --format png --seed 2");
    ASSERT_EQ(made.exit_code, 0) << made.output;
    testing::write_text(dir_ / "train.toml", R"([job]
output = "out"
[data]
source = "data"
image_size = 24
workers = 1
[model]
arch = "small_cnn"
[train]
epochs = %EPOCHS%
batch_size = 16
lr = 3e-3
[dist]
nproc_per_node = 2
timeout_s = 20
)");
  }
  std::string command(int epochs) {
    std::ifstream in(dir_ / "train.toml");
    std::string spec((std::istreambuf_iterator<char>(in)), {});
    spec.replace(spec.find("%EPOCHS%"), 8, std::to_string(epochs));
    testing::write_text(dir_ / "train.toml", spec);
    return "env MASTER_PORT=" + std::to_string(testing::free_port()) + " " + testing::trainpoint_binary() +
           " run --spec " + (dir_ / "train.toml").string() + " --workdir " + dir_.path().string();
  }
  testing::TempDir dir_;
};

TEST_F(Launcher, TwoWorkersTrainAndRank0WritesTheOutputs) {
  const auto result = run_command("timeout 300 " + command(6));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("started 2 workers"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("[rank 0] "), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find(" info [rank 1] "), std::string::npos) << "rank 0 speaks for the job: " << result.output;
  std::ifstream record_file(dir_ / "out/run.json");
  const auto record = nlohmann::json::parse(record_file);
  EXPECT_EQ(record["world_size"], 2);
  EXPECT_GT(record["final"]["accuracy"].get<double>(), 0.8) << result.output;
}

// Frozen parameters get no gradient: the ranks synchronize only the parameters of the current phase.
// The run record lists the bad files every rank met, whichever rank read them.
TEST_F(Launcher, TwoWorkersFineTuneWithTheBodyFrozenThenUnfrozen) {
  const fs::path a_class = fs::directory_iterator(dir_ / "data")->path();
  testing::write_text(a_class / "broken.png", "not a PNG file");
  const auto result = run_command("timeout 300 " + command(3) + " --set train.freeze_epochs=1");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("fine-tuning: the head trains alone for 1 epoch(s)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("fine-tuning: the body trains from epoch 2"), std::string::npos) << result.output;
  std::ifstream record_file(dir_ / "out/run.json");
  const auto record = nlohmann::json::parse(record_file);
  EXPECT_EQ(record["world_size"], 2);
  EXPECT_EQ(record["final"]["epoch"], 3);
  EXPECT_EQ(record["data"]["bad_files"], nlohmann::json::array({(a_class / "broken.png").string()}));
}

TEST_F(Launcher, SigtermStopsTheWorkersAndExits143) {
  const std::string script = command(50) + " > " + (dir_ / "log").string() + " 2>&1 & pid=$!\n" +
                             "for i in $(seq 600); do grep -q 'epoch 1' " + (dir_ / "log").string() +
                             " && break; sleep 0.1; done\n" + "kill -TERM $pid; wait $pid; code=$?; cat " +
                             (dir_ / "log").string() + "; exit $code\n";
  testing::write_text(dir_ / "term.sh", script);
  const auto result = run_command("timeout 120 bash " + (dir_ / "term.sh").string());
  EXPECT_EQ(result.exit_code, 143) << result.output;
  EXPECT_NE(result.output.find("asking the workers to save a checkpoint and stop"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "out/model.pt"));
}

TEST_F(Launcher, AKilledWorkerStopsTheOtherAndThePodExitsRetryable) {
  const std::string script = command(50) + " > " + (dir_ / "log").string() + " 2>&1 & pid=$!\n" +
                             "for i in $(seq 600); do grep -q 'epoch 1' " + (dir_ / "log").string() +
                             " && break; sleep 0.1; done\n" +
                             "kill -9 $(pgrep -P $pid | tail -n 1); wait $pid; code=$?; cat " +
                             (dir_ / "log").string() + "; exit $code\n";
  testing::write_text(dir_ / "kill.sh", script);
  const auto result = run_command("timeout 120 bash " + (dir_ / "kill.sh").string());
  EXPECT_GE(result.exit_code, 128) << result.output;
  EXPECT_LT(result.exit_code, 256) << result.output;
  EXPECT_NE(result.output.find("stopping the other workers"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "out/model.pt"));
}

}  // namespace
}  // namespace tp
