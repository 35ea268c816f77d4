// Restarts as a cluster does them: jobs of several pods, each pod a real `trainpoint run` in its own
// session and work directory (PyTorchJob v1's variables), killed with SIGKILL or stopped with SIGTERM and
// started again, with the spec changed between starts, at another world size, and two jobs into one output.
#include <gtest/gtest.h>
#include <torch/script.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "s3/s3_server.h"
#include "support/background_process.h"
#include "support/fault_proxy.h"
#include "support/process.h"
#include "support/tables.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::shell_quote;


constexpr const char* kSpec = R"([job]
seed = 5
output = "%OUTPUT%"
[data]
source = "%DATA%"
format = "table_csv"
target = "label"
valid = 0.1
workers = 0
%ENDPOINT%
[model]
arch = "mlp"
hidden = [32]
[train]
epochs = %EPOCHS%
batch_size = %BATCH%
lr = 0.01
[dist]
timeout_s = 20
heartbeat_s = 1
stall_s = 5
)";

struct JobSettings {
  std::string output = "out";
  std::string data = "table.csv";
  int epochs = 3;
  int batch = 16;
  std::string endpoint;  // for an s3:// output
};

std::string spec_text(const JobSettings& settings) {
  std::string text = kSpec;
  const auto put = [&](const std::string& key, const std::string& value) { text.replace(text.find(key), key.size(), value); };
  put("%OUTPUT%", settings.output);
  put("%DATA%", settings.data);
  put("%ENDPOINT%", settings.endpoint.empty() ? "" : "endpoint = \"" + settings.endpoint + "\"");
  put("%EPOCHS%", std::to_string(settings.epochs));
  put("%BATCH%", std::to_string(settings.batch));
  return text;
}

struct PodResult {
  int exit_code = -1;
  std::string log;
};

// One start of a job: `pods` pods of `per_pod` processes, pod i in work directory <root>/pod<i>, each
// in its own session (so that a signal reaches the pod's launcher and its workers, as in a container).
// `action` runs while they do: shell lines that may signal pod i's process group, -$pod<i>.
class JobStart {
 public:
  JobStart(const fs::path& root, int pods, int per_pod) : root_(root), pods_(pods), per_pod_(per_pod) {}

  std::vector<PodResult> run(const std::string& arguments, const std::string& action = "",
                             const std::string& environment = "") {
    const int port = testing::free_port();
    std::string script = "cleanup() { for p in $pods; do kill -9 -- -$p 2>/dev/null; done; }\ntrap cleanup EXIT\n";
    for (int pod = 0; pod < pods_; ++pod) {
      const std::string launcher =
          pods_ * per_pod_ == 1 ? "" : fmt::format("RANK={} WORLD_SIZE={} PET_NPROC_PER_NODE={} MASTER_ADDR=127.0.0.1 "
                                                   "MASTER_PORT={} ", pod, pods_ * per_pod_, per_pod_, port);
      script += fmt::format("env {}{} setsid {} run {} --workdir {} > {} 2>&1 & pod{}=$!; pods=\"$pods $pod{}\"\n",
                            launcher, environment, testing::trainpoint_binary(), arguments,
                            shell_quote(workdir(pod).string()), shell_quote(log(pod).string()), pod, pod);
    }
    script += action + "\n";
    for (int pod = 0; pod < pods_; ++pod) script += fmt::format("wait $pod{0}; echo \"pod{0} exit $?\"\n", pod);
    testing::write_text(root_ / "start.sh", script);
    const auto result = run_command("timeout 300 bash " + shell_quote((root_ / "start.sh").string()));
    std::vector<PodResult> results(static_cast<std::size_t>(pods_));
    for (int pod = 0; pod < pods_; ++pod) {
      std::smatch match;
      const std::regex line(fmt::format("pod{} exit ([0-9]+)", pod));
      if (std::regex_search(result.output, match, line)) results[pod].exit_code = std::stoi(match[1]);
      std::ifstream in(log(pod));
      results[pod].log = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return results;
  }

  fs::path workdir(int pod) const { return root_ / fmt::format("pod{}", pod); }
  fs::path log(int pod) const { return root_ / fmt::format("pod{}.log", pod); }

 private:
  fs::path root_;
  int pods_;
  int per_pod_;
};

// Shell lines that wait (up to a minute) until `file` exists, or its glob matches, and holds `text`.
std::string wait_for(const std::string& pattern, const std::string& text = "") {
  return fmt::format("for i in $(seq 600); do grep -qs {} {} && break; sleep 0.1; done\n",
                     shell_quote(text.empty() ? "." : text), pattern);
}

std::string all_logs(const std::vector<PodResult>& pods) {
  std::string text;
  for (std::size_t i = 0; i < pods.size(); ++i) text += fmt::format("--- pod {} (exit {})\n{}", i, pods[i].exit_code, pods[i].log);
  return text;
}

// The largest difference between two TorchScript models' parameters.
double largest_difference(const fs::path& a, const fs::path& b) {
  auto first = torch::jit::load(a.string());
  auto second = torch::jit::load(b.string());
  const auto left = first.named_parameters();
  const auto right = second.named_parameters();
  double largest = 0;
  auto r = right.begin();
  for (auto l = left.begin(); l != left.end(); ++l, ++r) {
    largest = std::max(largest, ((*l).value - (*r).value).abs().max().item<double>());
  }
  return largest;
}

// Files below `directory` and their sizes and contents' hashes: to show that nothing changed.
std::map<std::string, std::size_t> snapshot(const fs::path& directory) {
  std::map<std::string, std::size_t> files;
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    files[entry.path().lexically_relative(directory).string()] = std::hash<std::string>{}(bytes);
  }
  return files;
}

std::vector<fs::path> checkpoints_in(const fs::path& output) {
  std::vector<fs::path> files;
  if (!fs::exists(output / "checkpoints")) return files;
  for (const auto& entry : fs::recursive_directory_iterator(output / "checkpoints")) {
    if (entry.path().extension() == ".ckpt") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class Restarts : public ::testing::Test {
 protected:
  void SetUp() override { testing::write_text(dir_ / "table.csv", testing::separable_table(2400)); }

  // The spec file for `settings`, with its data beside it.
  std::string spec_arguments(const JobSettings& settings, const std::string& name = "train.toml") {
    testing::write_text(dir_ / name, spec_text(settings));
    return "--spec " + shell_quote((dir_ / name).string());
  }

  testing::TempDir dir_;
};

// The product's promise on several pods with node-local outputs: a pod killed mid-epoch, both pods
// started again, and the job ends as if nothing had happened: the same model.pt, to the last bit.
void KillOnePodMidEpochAndRestartBoth(const fs::path& root, const std::string& spec, int per_pod,
                                      const std::string& environment, const std::function<fs::path(const fs::path&)>& model_of) {
  JobStart reference(root / "reference", 2, per_pod);
  const auto straight = reference.run(spec, "", environment);
  ASSERT_EQ(straight[0].exit_code, 0) << all_logs(straight);
  ASSERT_EQ(straight[1].exit_code, 0) << all_logs(straight);

  JobStart job(root / "job", 2, per_pod);
  // Killed once epoch 2 has begun: its first epoch's checkpoint is written, some of epoch 2 is not.
  const std::string kill = wait_for(shell_quote(job.log(0).string()), "epoch 1/3:") + "sleep 0.1\nkill -9 -- -$pod1\n";
  const auto killed = job.run(spec, kill, environment);
  EXPECT_NE(killed[0].exit_code, 0) << all_logs(killed);
  EXPECT_GE(killed[0].exit_code, 128) << "a lost pod is retryable, never permanent\n" << all_logs(killed);
  EXPECT_EQ(killed[1].exit_code, 137) << all_logs(killed);

  const auto restarted = job.run(spec, "", environment);
  ASSERT_EQ(restarted[0].exit_code, 0) << all_logs(restarted);
  ASSERT_EQ(restarted[1].exit_code, 0) << all_logs(restarted);
  EXPECT_NE(restarted[0].log.find("resumed from"), std::string::npos) << all_logs(restarted);
  EXPECT_EQ(largest_difference(model_of(reference.workdir(0)), model_of(job.workdir(0))), 0.0)
      << "the restarted job's model differs from an uninterrupted run's\n" << all_logs(restarted);
}

TEST_F(Restarts, TwoPodsWithLocalOutputsSurviveAPodKilledMidEpoch) {
  const std::string spec = spec_arguments({});
  KillOnePodMidEpochAndRestartBoth(dir_.path(), spec, 1, "", [](const fs::path& pod) { return pod / "out/model.pt"; });
}

TEST_F(Restarts, TwoPodsOfTwoRanksWithAnS3OutputSurviveAPodKilledMidEpoch) {
  testing::S3Server server;
  const std::string environment = testing::S3Server::key_environment();
  JobSettings settings;
  settings.output = "s3://test-bucket/restarts/run";
  settings.endpoint = server.endpoint();
  settings.batch = 8;
  const std::string spec = spec_arguments(settings);
  // Each start writes to its own prefix: the reference under reference/, the killed job under job/.
  const std::string reference_spec = spec_arguments([&] {
    JobSettings reference = settings;
    reference.output = "s3://test-bucket/reference/run";
    return reference;
  }(), "reference.toml");
  JobStart reference(dir_ / "reference", 2, 2);
  const auto straight = reference.run(reference_spec, "", environment);
  ASSERT_EQ(straight[0].exit_code, 0) << all_logs(straight);
  ASSERT_EQ(straight[1].exit_code, 0) << all_logs(straight);

  JobStart job(dir_ / "job", 2, 2);
  const std::string kill = wait_for(shell_quote(job.log(0).string()), "epoch 1/3:") + "sleep 0.1\nkill -9 -- -$pod0\n";
  const auto killed = job.run(spec, kill, environment);
  EXPECT_EQ(killed[0].exit_code, 137) << all_logs(killed);
  EXPECT_GE(killed[1].exit_code, 128) << all_logs(killed);
  // Pod 0 comes back on a fresh node: nothing of its work directory is left, only what is in S3.
  fs::remove_all(job.workdir(0));
  const auto restarted = job.run(spec, "", environment);
  ASSERT_EQ(restarted[0].exit_code, 0) << all_logs(restarted);
  ASSERT_EQ(restarted[1].exit_code, 0) << all_logs(restarted);
  const fs::path local_copy = "outputs/test-bucket/restarts/run/model.pt";
  EXPECT_EQ(largest_difference(reference.workdir(0) / "outputs/test-bucket/reference/run/model.pt",
                               job.workdir(0) / local_copy), 0.0)
      << all_logs(restarted);

  // The same job once more (a pod restarted after success): it says it is complete and rewrites nothing.
  const fs::path bucket = server.data_dir() / testing::S3Server::kBucket;  // MinIO's folder of the bucket
  const auto before = snapshot(bucket);
  const auto again = job.run(spec, "", environment);
  ASSERT_EQ(again[0].exit_code, 0) << all_logs(again);
  ASSERT_EQ(again[1].exit_code, 0) << all_logs(again);
  EXPECT_NE(again[0].log.find("already complete"), std::string::npos) << all_logs(again);
  EXPECT_EQ(again[0].log.find("accuracy 0.0000 error_rate 0.0000"), std::string::npos) << all_logs(again);
  EXPECT_NE(again[0].log.find("done (already): train_loss"), std::string::npos) << all_logs(again);
  EXPECT_EQ(snapshot(bucket), before) << "a complete run rewrote its outputs";
}

// The main workflow: change the spec and run again into the same output. A setting that changes the run
// is refused before any rendezvous, naming old and new values and the ways out, and nothing is deleted;
// more epochs continue the run; the finished run run again says so.
TEST_F(Restarts, AChangedSettingIsRefusedNamingItAndMoreEpochsContinue) {
  testing::write_text(dir_ / "other.csv", testing::separable_table(2000));
  const std::string spec = spec_arguments({});
  const std::string workdir = " --workdir " + shell_quote(dir_.path().string());
  const auto first = run_command(testing::trainpoint_binary() + " run " + spec + workdir + " --set train.epochs=1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto before = snapshot(dir_ / "out");
  ASSERT_EQ(checkpoints_in(dir_ / "out").size(), 1u);

  for (const auto& [change, expected] : std::vector<std::pair<std::string, std::string>>{
           {"train.optimizer=sgd", "train.optimizer: \"adamw\" -> \"sgd\""},
           {"train.lr=0.003", "train.lr: 0.01 -> 0.003"},
           {"data.source=other.csv", "data.source: \"table.csv\" -> \"other.csv\""}}) {
    const auto changed = run_command(testing::trainpoint_binary() + " run " + spec + workdir + " --set " + change);
    EXPECT_EQ(changed.exit_code, 3) << change << "\n" << changed.output;
    EXPECT_NE(changed.output.find(expected), std::string::npos) << changed.output;
    EXPECT_NE(changed.output.find("another job.output"), std::string::npos) << changed.output;
    EXPECT_NE(changed.output.find("checkpoint.resume = \"never\""), std::string::npos) << changed.output;
    EXPECT_EQ(changed.output.find("joining"), std::string::npos) << "refused before the rendezvous";
    EXPECT_EQ(snapshot(dir_ / "out"), before) << change << ": the output changed";
  }
  // More epochs: the same run, continued from its checkpoint.
  const auto more = run_command(testing::trainpoint_binary() + " run " + spec + workdir + " --set train.epochs=2");
  ASSERT_EQ(more.exit_code, 0) << more.output;
  EXPECT_NE(more.output.find("resumed from"), std::string::npos) << more.output;
  EXPECT_NE(more.output.find("epoch 2/2"), std::string::npos) << more.output;
  EXPECT_EQ(more.output.find("epoch 1/2"), std::string::npos) << "epoch 1 was not trained again\n" << more.output;

  // The same, again: complete; nothing is trained or rewritten.
  const auto finished = snapshot(dir_ / "out");
  const auto again = run_command(testing::trainpoint_binary() + " run " + spec + workdir + " --set train.epochs=2");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("already complete"), std::string::npos) << again.output;
  EXPECT_EQ(snapshot(dir_ / "out"), finished) << "a complete run rewrote its outputs";

  // checkpoint.resume = "never" starts this run afresh beside the others' checkpoints.
  const auto fresh = run_command(testing::trainpoint_binary() + " run " + spec + workdir +
                                 " --set train.optimizer=sgd --set checkpoint.resume=never --set train.epochs=1");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  EXPECT_EQ(checkpoints_in(dir_ / "out").size(), 3u) << "the first run's 2 checkpoints stay beside the new run's";
}

// Which samples every rank trained in each epoch, from TRAINPOINT_TRACE_SAMPLES files.
std::map<int, std::multiset<int>> traced_samples(const fs::path& directory) {
  std::map<int, std::multiset<int>> epochs;
  for (const auto& entry : fs::directory_iterator(directory)) {
    std::ifstream in(entry.path());
    for (int epoch = 0, sample = 0; in >> epoch >> sample;) epochs[epoch].insert(sample);
  }
  return epochs;
}

// How many pods a job has, and ranks in each.
struct Pods {
  int pods = 1;
  int per_pod = 1;
  int world() const { return pods * per_pod; }
};

// SIGTERM to the last pod mid-epoch: one checkpoint at one step, every pod exits 143; then the job starts
// again with other pods and trains every remaining sample of the interrupted epoch once (of
// `training_samples` in each epoch). `stopped_trace`, when given, gets the stopped run's trace
// (samples-rank-<rank>.txt) before the resumed run appends to it.
void StopMidEpochAndResumeAt(const fs::path& root, const std::string& spec, Pods pods_before, Pods pods_after,
                             std::size_t training_samples = 2160, std::map<int, std::string>* stopped_trace = nullptr) {
  const int world_before = pods_before.world();
  const int world_after = pods_after.world();
  const std::string trace = "TRAINPOINT_TRACE_SAMPLES=" + (root / "trace").string();
  JobStart before(root, pods_before.pods, pods_before.per_pod);
  const std::string stop = wait_for(shell_quote(before.log(0).string()), "epoch 1/") + "sleep 1\n" +
                           fmt::format("kill -TERM -- -$pod{}\n", pods_before.pods - 1);
  const auto stopped = before.run(spec + " --set train.epochs=1000", stop, trace);
  for (int rank = 0; stopped_trace && rank < world_before; ++rank) {
    (*stopped_trace)[rank] = testing::read_text(root / "trace" / fmt::format("samples-rank-{}.txt", rank));
  }
  std::smatch match;
  for (int pod = 0; pod < pods_before.pods; ++pod) EXPECT_EQ(stopped[pod].exit_code, 143) << all_logs(stopped);
  ASSERT_TRUE(std::regex_search(stopped[0].log, match,
                                std::regex("stopped by a signal at epoch ([0-9]+) step ([0-9]+) \\(([0-9]+) of")))
      << all_logs(stopped);
  const int epoch = std::stoi(match[1]);
  const std::string step = match[2];
  ASSERT_GT(std::stoi(match[3]), 0) << "the stop came mid-epoch\n" << all_logs(stopped);
  ASSERT_LT(std::stoul(match[3]), training_samples) << "the stop came mid-epoch\n" << all_logs(stopped);
  std::vector<fs::path> mid_epoch;
  for (const fs::path& file : checkpoints_in(before.workdir(0) / "out")) {
    if (file.filename().string().find("_sample-") != std::string::npos) mid_epoch.push_back(file);
  }
  EXPECT_EQ(mid_epoch.size(), 1u) << "one checkpoint at the stop\n" << all_logs(stopped);

  // Every pod's work directory carries over (the same nodes); the new pods may be fewer or more.
  JobStart after(root, pods_after.pods, pods_after.per_pod);
  const auto resumed = after.run(spec + fmt::format(" --set train.epochs={}", epoch), "", trace);
  for (int pod = 0; pod < pods_after.pods; ++pod) ASSERT_EQ(resumed[pod].exit_code, 0) << all_logs(resumed);
  EXPECT_NE(resumed[0].log.find("(step " + step + ")"), std::string::npos) << "resumed at the stop's step\n"
                                                                           << all_logs(resumed);
  const std::string changed = world_before != world_after
                                  ? fmt::format("world size changed from {} to {}", world_before, world_after)
                                  : fmt::format("the ranks now stand in {} node(s) of {}", pods_after.pods, pods_after.per_pod);
  EXPECT_NE(resumed[0].log.find(changed), std::string::npos) << all_logs(resumed);

  const auto epochs = traced_samples(root / "trace");
  ASSERT_EQ(epochs.size(), static_cast<std::size_t>(epoch));
  for (const auto& [traced_epoch, trained] : epochs) {
    const std::set<int> distinct(trained.begin(), trained.end());
    EXPECT_EQ(distinct.size(), training_samples) << "epoch " << traced_epoch << ": a sample was never trained";
    EXPECT_LE(trained.size() - distinct.size(), static_cast<std::size_t>(world_after - 1))
        << "epoch " << traced_epoch << ": samples trained twice beyond the padding to equal shares";
  }
}

// On two pods, rank 0's refusal reaches the other pod: it stops in the same class with rank 0's message,
// instead of waiting dist.timeout_s (20 s here) for a master that never serves and then exiting 202.
TEST_F(Restarts, AChangedSettingRefusedByRank0StopsTheOtherPodWithItsMessage) {
  const std::string spec = spec_arguments({}) + " --set train.epochs=1";
  JobStart job(dir_ / "job", 2, 1);
  const auto first = job.run(spec);
  ASSERT_EQ(first[0].exit_code, 0) << all_logs(first);
  ASSERT_EQ(first[1].exit_code, 0) << all_logs(first);
  const auto changed = job.run(spec + " --set train.lr=0.003");
  EXPECT_EQ(changed[0].exit_code, 3) << all_logs(changed);
  EXPECT_EQ(changed[1].exit_code, 3) << all_logs(changed);
  EXPECT_NE(changed[1].log.find("rank 0 failed before the rendezvous: "), std::string::npos) << all_logs(changed);
  EXPECT_NE(changed[1].log.find("train.lr: 0.01 -> 0.003"), std::string::npos) << all_logs(changed);
}

// Batches of one: epochs of seconds, so that the stop comes mid-epoch and not at an epoch's end.
JobSettings many_steps() {
  JobSettings settings;
  settings.batch = 1;
  return settings;
}

TEST_F(Restarts, AStopMidEpochResumesFromTwoRanksOnOne) {
  StopMidEpochAndResumeAt(dir_.path(), spec_arguments(many_steps()), {2, 1}, {1, 1});
}

TEST_F(Restarts, AStopMidEpochResumesFromOneRankOnThree) {
  StopMidEpochAndResumeAt(dir_.path(), spec_arguments(many_steps()), {1, 1}, {3, 1});
}

// 1,000 images in 3 classes, packed by `trainpoint pack` (900 for training) into shards of 64 KiB at
// `destination` (a directory, or s3:// with `s3_options` naming the endpoint and `environment` the keys).
void pack_images(const fs::path& dir, const std::string& destination, const std::string& s3_options = "",
                 const std::string& environment = "") {
  const std::string trainpoint = testing::trainpoint_binary();
  testing::run_checked(trainpoint + " make-dataset images --out " + shell_quote((dir / "images").string()) +
                       " --classes 3 --count 1000 --size 24 --format jpeg --seed 3");
  testing::run_checked("env " + environment + " " + trainpoint + " pack " + shell_quote((dir / "images").string()) +
                       " " + shell_quote(destination) + " --valid 0.1 --shard-size-mb 0.0625 " + s3_options);
}

// A spec training a small CNN on the packed shards at settings.data, written to `file`.
fs::path write_shards_spec(const fs::path& file, const JobSettings& settings) {
  std::string spec = spec_text(settings);
  spec.replace(spec.find("format = \"table_csv\""), 20, "format = \"shards\"\nimage_size = 16\nshuffle_buffer = 64");
  spec.replace(spec.find("arch = \"mlp\"\nhidden = [32]"), 26, "arch = \"small_cnn\"");
  testing::write_text(file, spec);
  return file;
}

// Shards packed in <dir>/shards and a spec of many steps training on them; returns the spec's path.
fs::path packed_shards_spec(const fs::path& dir) {
  pack_images(dir, (dir / "shards").string());
  JobSettings settings = many_steps();
  settings.data = (dir / "shards").string();
  return write_shards_spec(dir / "shards.toml", settings);
}

// The training shard of each training sample, from the index.json `trainpoint pack` wrote.
std::vector<int> training_shard_of_samples(const fs::path& shards) {
  const auto index = nlohmann::json::parse(testing::read_text(shards / "index.json"));
  std::vector<int> shard;
  int number = 0;
  for (const auto& info : index.at("train").at("shards")) shard.insert(shard.end(), info.at("samples").get<std::size_t>(), number++);
  return shard;
}

// In a trace of 2 pods x 2 ranks, each epoch's shards that both pods read: the order deals shards to nodes
// (pods), so only the one shard cut between their stretches.
void ExpectEachPodReadItsOwnShards(const std::map<int, std::string>& trace, const std::vector<int>& shard_of) {
  std::map<int, std::array<std::set<int>, 2>> read;  // epoch -> pod -> shards
  for (const auto& [rank, lines] : trace) {
    std::istringstream in(lines);
    for (int epoch = 0, sample = 0; in >> epoch >> sample;) read[epoch][rank / 2].insert(shard_of.at(sample));
  }
  ASSERT_FALSE(read.empty());
  for (const auto& [epoch, pods] : read) {
    std::vector<int> both;
    std::set_intersection(pods[0].begin(), pods[0].end(), pods[1].begin(), pods[1].end(), std::back_inserter(both));
    EXPECT_LE(both.size(), 1u) << "epoch " << epoch << ": pod 0 read " << pods[0].size() << " shards, pod 1 "
                               << pods[1].size() << ", " << both.size() << " of them the same";
    EXPECT_GE(pods[0].size() + pods[1].size(), 2u);
  }
}

// Packed shards are dealt to nodes: stopped on 2 pods of 2 ranks (each pod reading its own shards), resumed
// on 3 pods of 1 and on 1 pod of 4, every sample of the interrupted epoch is trained once.
TEST_F(Restarts, AStopMidEpochOverPackedShardsOnTwoPodsOfTwoResumesOnThreePodsOfOne) {
  const fs::path spec = packed_shards_spec(dir_.path());
  std::map<int, std::string> trace;
  StopMidEpochAndResumeAt(dir_ / "job", "--spec " + shell_quote(spec.string()), {2, 2}, {3, 1}, 900, &trace);
  ExpectEachPodReadItsOwnShards(trace, training_shard_of_samples(dir_ / "shards"));
}

TEST_F(Restarts, AStopMidEpochOverPackedShardsOnTwoPodsOfTwoResumesOnOnePodOfFour) {
  const fs::path spec = packed_shards_spec(dir_.path());
  StopMidEpochAndResumeAt(dir_ / "job", "--spec " + shell_quote(spec.string()), {2, 2}, {1, 4}, 900);
}

// A job of 2 pods x 2 ranks streaming packed shards from S3: each pod reads its own shards into one cache for
// its ranks, so the job downloads each training shard about once an epoch (the shard cut between the pods'
// stretches twice), where ranks with caches of their own and every shard each downloaded them 4 times.
// GETs counted at a proxy in front of MinIO.
TEST_F(Restarts, TwoPodsOfTwoRanksStreamingShardsDownloadEachShardAboutOnce) {
  testing::S3Server server;
  const std::string environment = testing::S3Server::key_environment();
  pack_images(dir_.path(), "s3://test-bucket/shards", "--endpoint " + server.endpoint(), environment);
  const testing::FaultProxy proxy(server.port(), "[]");
  JobSettings settings;
  settings.data = "s3://test-bucket/shards";
  settings.endpoint = proxy.endpoint();
  settings.epochs = 1;
  const fs::path spec = write_shards_spec(dir_ / "shards.toml", settings);
  JobStart job(dir_ / "job", 2, 2);
  const auto ran = job.run("--spec " + shell_quote(spec.string()), "", environment);
  ASSERT_EQ(ran[0].exit_code, 0) << all_logs(ran);
  ASSERT_EQ(ran[1].exit_code, 0) << all_logs(ran);

  std::map<std::string, int> gets;
  std::istringstream log(proxy.requests());
  for (std::string method, path, range, fault; log >> method >> path >> range >> fault;) {
    if (method == "GET" && fs::path(path).extension() == ".tar") ++gets[fs::path(path).filename().string()];
  }
  int training_gets = 0;
  std::size_t training_shards = 0;
  for (const auto& [name, count] : gets) {
    EXPECT_LE(count, 2) << name << ": once per pod at most";
    if (name.rfind("train-", 0) == 0) {
      training_gets += count;
      ++training_shards;
    }
  }
  ASSERT_GE(training_shards, 30u) << proxy.requests();
  EXPECT_LE(training_gets, static_cast<int>(training_shards) + 2) << proxy.requests();
}

// Each epoch's train_loss in <output>/metrics.jsonl.
std::vector<double> train_losses(const fs::path& output) {
  std::vector<double> losses;
  std::ifstream in(output / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) losses.push_back(nlohmann::json::parse(line).at("train_loss"));
  return losses;
}

// A stop mid-epoch, then the same two pods again for one more epoch: every epoch's train_loss is the
// uninterrupted run's, the interrupted epoch's (its totals before the stop went with the checkpoint) and the
// next one's (which starts from nothing). A constant lr, so that the stopped run's longer train.epochs does
// not change its steps.
TEST_F(Restarts, AfterAStopMidEpochEveryEpochReportsTheLossOfAnUninterruptedRun) {
  const std::string spec = spec_arguments({}) + " --set train.schedule=constant";
  JobStart before(dir_ / "job", 2, 1);
  const std::string stop = wait_for(shell_quote(before.log(0).string()), "epoch 1/") + "sleep 1\nkill -TERM -- -$pod1\n";
  const auto stopped = before.run(spec + " --set train.epochs=1000", stop);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(stopped[0].log, match, std::regex("stopped by a signal at epoch ([0-9]+) step [0-9]+ "
                                                                   "\\(([0-9]+) of")))
      << all_logs(stopped);
  ASSERT_GT(std::stoi(match[2]), 0) << "the stop came mid-epoch\n" << all_logs(stopped);
  const int epochs = std::stoi(match[1]) + 1;

  JobStart after(dir_ / "job", 2, 1);
  const auto resumed = after.run(spec + fmt::format(" --set train.epochs={}", epochs));
  ASSERT_EQ(resumed[0].exit_code, 0) << all_logs(resumed);
  JobStart reference(dir_ / "reference", 2, 1);
  const auto straight = reference.run(spec + fmt::format(" --set train.epochs={}", epochs));
  ASSERT_EQ(straight[0].exit_code, 0) << all_logs(straight);

  const std::vector<double> expected = train_losses(reference.workdir(0) / "out");
  const std::vector<double> reported = train_losses(after.workdir(0) / "out");
  ASSERT_EQ(expected.size(), static_cast<std::size_t>(epochs));
  ASSERT_EQ(reported.size(), expected.size());
  for (std::size_t epoch = 0; epoch < expected.size(); ++epoch) {
    // The ranks' totals are added in another order after a stop: equal up to rounding.
    EXPECT_NEAR(reported[epoch], expected[epoch], 1e-9 * expected[epoch]) << "epoch " << epoch + 1;
  }
  EXPECT_EQ(largest_difference(reference.workdir(0) / "out/model.pt", after.workdir(0) / "out/model.pt"), 0.0);
}

// checkpoint.every_steps: a pod killed without notice (kill -9, a lost node) loses at most that many steps.
// The job resumes from the newest periodic checkpoint, mid-epoch, and ends with the model of an uninterrupted
// run to the last bit. No epoch checkpoints (every_epochs = 0), so that only the periodic ones can be resumed.
TEST_F(Restarts, APodKilledWithoutNoticeResumesFromItsLastEveryStepsCheckpoint) {
  const std::string spec = spec_arguments({}) +
                           " --set train.schedule=constant --set checkpoint.every_epochs=0 --set checkpoint.every_steps=10";
  JobStart job(dir_ / "job", 2, 1);
  const std::string kill = wait_for(shell_quote(job.log(0).string()), "checkpoint at epoch 2 step") + "kill -9 -- -$pod1\n";
  const auto killed = job.run(spec + " --set train.epochs=1000", kill);
  EXPECT_EQ(killed[1].exit_code, 137) << all_logs(killed);
  EXPECT_GE(killed[0].exit_code, 128) << "a lost pod is retryable\n" << all_logs(killed);
  // Rank 0 logs each checkpoint once it is written; the newest is where the job goes on.
  const std::regex saved("checkpoint at epoch ([0-9]+) step ([0-9]+) \\(([0-9]+) of the epoch's 2160 samples trained\\)");
  int newest_step = 0, newest_epoch = 0, checkpoints = 0;
  for (auto it = std::sregex_iterator(killed[0].log.begin(), killed[0].log.end(), saved); it != std::sregex_iterator(); ++it) {
    ++checkpoints;
    newest_epoch = std::stoi((*it)[1]);
    newest_step = std::stoi((*it)[2]);
    EXPECT_EQ(newest_step % 10, 0) << it->str();
    EXPECT_GT(std::stoi((*it)[3]), 0) << "mid-epoch\n" << it->str();
  }
  ASSERT_GE(checkpoints, 7) << "a checkpoint every 10 of the 68 steps of each epoch\n" << all_logs(killed);

  const std::string epochs = fmt::format(" --set train.epochs={}", newest_epoch);
  const auto restarted = job.run(spec + epochs);
  ASSERT_EQ(restarted[0].exit_code, 0) << all_logs(restarted);
  ASSERT_EQ(restarted[1].exit_code, 0) << all_logs(restarted);
  EXPECT_TRUE(std::regex_search(restarted[0].log, std::regex(fmt::format(
                  "resumed from [^ ]+_sample-[0-9]+\\.ckpt after epoch {} and [0-9]+ samples of epoch {} \\(step {}\\)",
                  newest_epoch - 1, newest_epoch, newest_step))))
      << all_logs(restarted);
  JobStart reference(dir_ / "reference", 2, 1);
  const auto straight = reference.run(spec + epochs);
  ASSERT_EQ(straight[0].exit_code, 0) << all_logs(straight);
  EXPECT_EQ(largest_difference(reference.workdir(0) / "out/model.pt", job.workdir(0) / "out/model.pt"), 0.0)
      << all_logs(restarted);
}

// Pod 1 of `job` killed without notice once rank 0 has logged `line`, then both pods started again: the
// restarted pods, checked to have resumed and succeeded.
std::vector<PodResult> killed_and_restarted(JobStart& job, const std::string& spec, const std::string& line) {
  const std::string kill = wait_for(shell_quote(job.log(0).string()), line) + "sleep 0.1\nkill -9 -- -$pod1\n";
  const auto killed = job.run(spec, kill);
  EXPECT_EQ(killed[1].exit_code, 137) << all_logs(killed);
  auto restarted = job.run(spec);
  EXPECT_EQ(restarted[0].exit_code, 0) << all_logs(restarted);
  EXPECT_EQ(restarted[1].exit_code, 0) << all_logs(restarted);
  EXPECT_NE(restarted[0].log.find("resumed from"), std::string::npos) << all_logs(restarted);
  return restarted;
}

// The run's epoch records in <output>/metrics.jsonl.
std::vector<nlohmann::json> epoch_records(const fs::path& output) {
  std::vector<nlohmann::json> records;
  std::ifstream in(output / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

std::string file_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// [train.early_stop] on two pods: both stop after the same epoch, rank 0 says why in its log, run.json and
// report.html; with checkpoint.keep_best, model.pt is the best epoch's model; run again, the job is complete.
TEST_F(Restarts, EarlyStoppingStopsEveryRankAtOneEpochAndKeepsTheBestModel) {
  // No epoch beats the first by 10: the run stops after epoch 2.
  const std::string spec = spec_arguments({}) +
                           " --set train.epochs=10 --set train.early_stop.patience=1 --set train.early_stop.min_delta=10"
                           " --set checkpoint.keep_best=accuracy --set checkpoint.keep=1";
  JobStart job(dir_ / "job", 2, 1);
  const auto pods = job.run(spec);
  ASSERT_EQ(pods[0].exit_code, 0) << all_logs(pods);
  ASSERT_EQ(pods[1].exit_code, 0) << all_logs(pods);
  EXPECT_TRUE(std::regex_search(pods[0].log, std::regex("stopped at epoch 2: valid_loss [0-9.e-]+ did not improve by "
                                                        "10 for 1 epoch; best [0-9.e-]+ at epoch 1")))
      << all_logs(pods);
  EXPECT_EQ(pods[0].log.find("epoch 3/10"), std::string::npos) << all_logs(pods);
  const fs::path out = job.workdir(0) / "out";
  ASSERT_EQ(epoch_records(out).size(), 2u);
  const auto run = nlohmann::json::parse(file_bytes(out / "run.json"));
  EXPECT_EQ(run.at("early_stop").at("epoch"), 2) << run.dump(2);
  EXPECT_EQ(run.at("early_stop").at("best_epoch"), 1) << run.dump(2);
  EXPECT_EQ(run.at("best").at("metric"), "accuracy") << run.dump(2);
  // The best accuracy of the two epochs (the first on a tie).
  const auto epochs = epoch_records(out);
  // metrics.jsonl says it too, on the line of the epoch it stopped at.
  EXPECT_FALSE(epochs[0].contains("early_stop")) << epochs[0].dump();
  EXPECT_EQ(epochs[1].value("early_stop", nlohmann::json()), run.at("early_stop"));
  const int best = epochs[1].at("accuracy").get<double>() > epochs[0].at("accuracy").get<double>() ? 2 : 1;
  EXPECT_EQ(run.at("best").at("epoch"), best) << run.dump(2);
  const std::vector<fs::path> kept = [&] {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(out / "checkpoints")) {
      if (entry.path().filename().string().rfind("best-epoch-", 0) == 0) files.push_back(entry.path());
    }
    return files;
  }();
  ASSERT_EQ(kept.size(), 1u) << "one best model, the one it replaced deleted; checkpoint.keep = 1 does not rotate it";
  EXPECT_EQ(kept[0].filename().string(), fmt::format("best-epoch-{:06d}.pt", best));
  EXPECT_EQ(file_bytes(out / "model.pt"), file_bytes(kept[0])) << "model.pt is the best epoch's";
  EXPECT_NE(file_bytes(out / "report.html").find("stopped at epoch 2"), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "interpretation.json")) << "the stopped model is interpreted as a last epoch's";

  const auto again = job.run(spec);
  ASSERT_EQ(again[0].exit_code, 0) << all_logs(again);
  EXPECT_NE(again[0].log.find("already complete"), std::string::npos) << all_logs(again);
}

// An early stop decided at the run's last epoch: every rank ends alike (the last epoch's end has interpreted the
// model; no rank validates once more while another does not). It watches the F1 of one class, as metrics.jsonl
// reports it each epoch; a class the data does not have fails the job before it trains, naming the classes.
TEST_F(Restarts, AnEarlyStopAtTheLastEpochEndsEveryRank) {
  const std::string spec = spec_arguments({}) +
                           " --set train.epochs=2 --set train.early_stop.patience=1 --set train.early_stop.min_delta=10";
  JobStart job(dir_ / "job", 2, 1);
  const auto pods = job.run(spec + " --set train.early_stop.monitor=f1:c1");
  ASSERT_EQ(pods[0].exit_code, 0) << all_logs(pods);
  ASSERT_EQ(pods[1].exit_code, 0) << all_logs(pods);
  const auto epochs = epoch_records(job.workdir(0) / "out");
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_NE(pods[0].log.find(fmt::format("stopped at epoch 2: f1:c1 {:.4g} did not improve by 10 for 1 epoch; best "
                                         "{:.4g} at epoch 1",
                                         epochs[1].at("class_f1").at("c1").get<double>(),
                                         epochs[0].at("class_f1").at("c1").get<double>())),
            std::string::npos)
      << all_logs(pods);
  EXPECT_TRUE(fs::exists(job.workdir(0) / "out/interpretation.json"));

  JobStart wrong(dir_ / "wrong", 2, 1);
  const auto refused = wrong.run(spec + " --set train.early_stop.monitor=f1:c7");
  for (const PodResult& pod : refused) {
    EXPECT_EQ(pod.exit_code, 2) << all_logs(refused);
    EXPECT_NE(pod.log.find("train.early_stop.monitor = \"f1:c7\": the data has no class 'c7'; its classes are: c0, "
                           "c1, c2"),
              std::string::npos)
        << all_logs(refused);
    EXPECT_EQ(pod.log.find("epoch 1/2"), std::string::npos) << "refused before training\n" << all_logs(refused);
  }
}

// An early-stopped job whose pod is killed without notice and restarted stops after the same epoch as an
// uninterrupted one, with the same model: the trackers are replayed from the records the checkpoint keeps.
TEST_F(Restarts, AnEarlyStoppedJobKilledAndRestartedStopsAtTheSameEpoch) {
  const std::string spec = spec_arguments({}) +
                           " --set train.epochs=40 --set train.schedule=constant --set train.early_stop.patience=2"
                           " --set train.early_stop.min_delta=0.01 --set train.lr=0.001";
  JobStart reference(dir_ / "reference", 2, 1);
  const auto straight = reference.run(spec);
  ASSERT_EQ(straight[0].exit_code, 0) << all_logs(straight);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(straight[0].log, match, std::regex("stopped at epoch ([0-9]+):"))) << all_logs(straight);
  const int stop_epoch = std::stoi(match[1]);
  ASSERT_GT(stop_epoch, 4) << "the kill below must come before the stop\n" << all_logs(straight);
  // The epoch the run's own records say it should stop after: 2 epochs without beating the best by 0.01.
  int expected = 0;
  double best = 0;
  for (const nlohmann::json& record : epoch_records(reference.workdir(0) / "out")) {
    const int epoch = record.at("epoch");
    const double loss = record.at("valid_loss");
    if (epoch == 1 || loss < best - 0.01) best = loss, expected = epoch;
    if (epoch - expected == 2) break;
  }
  EXPECT_EQ(stop_epoch, expected + 2) << all_logs(straight);
  EXPECT_EQ(epoch_records(reference.workdir(0) / "out").size(), static_cast<std::size_t>(stop_epoch));

  JobStart job(dir_ / "job", 2, 1);
  const auto restarted = killed_and_restarted(job, spec, "epoch 3/40:");
  EXPECT_NE(restarted[0].log.find(fmt::format("stopped at epoch {}:", stop_epoch)), std::string::npos)
      << all_logs(restarted);
  EXPECT_EQ(largest_difference(reference.workdir(0) / "out/model.pt", job.workdir(0) / "out/model.pt"), 0.0)
      << all_logs(restarted);
}

// train.reduce_lr_on_plateau on two pods: the lr each epoch trains at follows the run's own validation losses, and
// a pod killed without notice and both restarted give the model of an uninterrupted run to the last bit: rank 0
// replays the reductions from metrics.jsonl and rank 1, whose pod has no records, is told them.
TEST_F(Restarts, TheLrReducedOnAPlateauIsReplayedOnEveryRankAfterAKill) {
  // No epoch beats the first by 10: after epoch 2, and after each one from then on, the lr halves.
  const std::string spec = spec_arguments({}) +
                           " --set train.epochs=6 --set train.schedule=constant"
                           " --set train.reduce_lr_on_plateau.patience=1 --set train.reduce_lr_on_plateau.min_delta=10"
                           " --set train.reduce_lr_on_plateau.factor=0.5";
  JobStart reference(dir_ / "reference", 2, 1);
  const auto straight = reference.run(spec);
  ASSERT_EQ(straight[0].exit_code, 0) << all_logs(straight);
  const auto epochs = epoch_records(reference.workdir(0) / "out");
  ASSERT_EQ(epochs.size(), 6u);
  for (std::size_t i = 0; i < epochs.size(); ++i) {
    EXPECT_DOUBLE_EQ(epochs[i].at("lr").get<double>(), 0.01 * std::pow(0.5, std::max<int>(0, static_cast<int>(i) - 1)))
        << epochs[i].dump();
    EXPECT_EQ(epochs[i].contains("reduce_lr_on_plateau"), i >= 1) << epochs[i].dump();
  }
  EXPECT_TRUE(std::regex_search(straight[0].log, std::regex("reduce_lr_on_plateau: valid_loss [0-9.e-]+ did not improve "
                                                            "by 10 for 1 epoch \\(best [0-9.e-]+ at epoch 1\\): the lr "
                                                            "is multiplied by 0.5 from epoch 3 on \\(x0.5 in all\\)")))
      << all_logs(straight);

  JobStart job(dir_ / "job", 2, 1);
  const auto restarted = killed_and_restarted(job, spec, "epoch 4/6:");
  EXPECT_EQ(largest_difference(reference.workdir(0) / "out/model.pt", job.workdir(0) / "out/model.pt"), 0.0)
      << all_logs(restarted);
}

// Two jobs into one local output at once: the second is refused, naming the first; once the first is
// killed, its lock is taken over.
TEST_F(Restarts, ASecondJobIntoABusyOutputIsRefusedAndAKilledJobsLockIsTakenOver) {
  const std::string spec = spec_arguments({});
  JobStart first(dir_ / "first", 1, 1);
  const std::string second_run = testing::trainpoint_binary() + " run " + spec + " --workdir " +
                                 shell_quote(first.workdir(0).string()) + " > " +
                                 shell_quote((dir_ / "second.log").string()) + " 2>&1; echo $? > " +
                                 shell_quote((dir_ / "second.exit").string()) + "\n";
  const std::string action = wait_for(shell_quote(first.log(0).string()), "epoch 1/") + second_run + "kill -9 -- -$pod0\n";
  const auto killed = first.run(spec + " --set train.epochs=1000", action);
  EXPECT_EQ(killed[0].exit_code, 137) << all_logs(killed);
  std::ifstream code_file(dir_ / "second.exit"), log_file(dir_ / "second.log");
  int code = -1;
  code_file >> code;
  const std::string second_log((std::istreambuf_iterator<char>(log_file)), {});
  EXPECT_EQ(code, 8) << second_log;
  EXPECT_TRUE(std::regex_search(second_log, std::regex("is in use by another job \\(host [^,]+, pid [0-9]+, started "
                                                       "[0-9T:-]+Z\\)")))
      << second_log;

  const auto taken_over = first.run(spec + " --set train.epochs=2");
  ASSERT_EQ(taken_over[0].exit_code, 0) << all_logs(taken_over);
  EXPECT_NE(taken_over[0].log.find("taking over the lock of a job that ended without releasing it"), std::string::npos)
      << all_logs(taken_over);
}

}  // namespace
}  // namespace tp
