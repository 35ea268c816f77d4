// Runs the trainpoint binary as a user would: a git repository with two commits whose specs
// differ, generated data, and bad input of every kind the CLI must explain.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <set>
#include <sstream>

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

const char* kSpecTemplate = R"([job]
name = "%NAME%"
seed = 3
output = "out"

[data]
source = "data"
format = "image_folder"
image_size = 24
valid = 0.25
workers = 2

[model]
arch = "small_cnn"

[train]
epochs = %EPOCHS%
batch_size = 16
lr = 3e-3
)";

std::string spec_text(const std::string& name, int epochs) {
  std::string text = kSpecTemplate;
  text.replace(text.find("%NAME%"), 6, name);
  text.replace(text.find("%EPOCHS%"), 8, std::to_string(epochs));
  return text;
}

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// A repository whose first commit asks for 6 epochs of job "first" and second for 1 epoch of "second".
class EndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    repo_ = dir_ / "repo";
    run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((repo_ / "data").string()) +
                " --classes 2 --per-class 150 --size 24 --format mixed --seed 4");
    const std::string git = "git -C " + shell_quote(repo_.string()) + " -c user.name=t -c user.email=t@example.invalid ";
    run_checked("git init -q -b main " + shell_quote(repo_.string()));
    testing::write_text(repo_ / "train.toml", spec_text("first", 6));
    run_checked(git + "add -A && " + git + "commit -q -m first");
    first_ = trim(run_checked(git + "rev-parse HEAD"));
    testing::write_text(repo_ / "train.toml", spec_text("second", 1));
    run_checked(git + "commit -q -am second");
  }

  static std::string trim(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    return text;
  }

  // Copies the repository's data to s3://test-bucket/shapes; returns the `env ...` prefix of commands that
  // reach the server.
  std::string upload_data(const testing::S3Server& server) {
    const std::string s3_env = "env AWS_ENDPOINT_URL=" + server.endpoint() +
                               " " + testing::S3Server::key_environment() + " ";
    run_checked(s3_env + testing::trainpoint_binary() + " s3 cp --recursive " +
                shell_quote((repo_ / "data").string()) + " s3://test-bucket/shapes");
    return s3_env;
  }

  testing::CommandResult trainpoint(const std::string& arguments) {
    return run_command(testing::trainpoint_binary() + " " + arguments);
  }

  testing::TempDir dir_;
  fs::path repo_;
  std::string first_;
};

TEST_F(EndToEnd, TrainsFromTheFirstCommitWithItsSpecAndTheLossFalls) {
  const auto result = trainpoint("run --repo file://" + repo_.string() + " --ref " + first_ +
                                 " --spec train.toml --workdir " + shell_quote(dir_.path().string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("checked out " + first_), std::string::npos) << result.output;

  const auto record = read_json(dir_ / "out/run.json");
  EXPECT_EQ(record["source"]["commit"], first_);
  EXPECT_EQ(record["job"], "first");
  const auto metrics = read_lines(dir_ / "out/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 6u) << "the first commit's spec asks for 6 epochs";
  EXPECT_LT(metrics.back()["train_loss"].get<double>(), 0.5 * metrics.front()["train_loss"].get<double>());
  EXPECT_GT(metrics.back()["accuracy"].get<double>(), 0.85);
  EXPECT_DOUBLE_EQ(metrics.back()["error_rate"].get<double>(), 1.0 - metrics.back()["accuracy"].get<double>());
  EXPECT_TRUE(fs::exists(dir_ / "out/model.pt"));
  EXPECT_TRUE(fs::exists(dir_ / "out/report.html"));
  EXPECT_TRUE(record["data"]["bad_files"].is_array());
  EXPECT_TRUE(fs::is_directory(dir_ / ("checkouts/" + first_)));
}

TEST_F(EndToEnd, ShortShaAndBranchResolve) {
  const auto check_first = trainpoint("check --repo " + repo_.string() + " --ref " + first_.substr(0, 10) +
                                      " --spec train.toml --workdir " + shell_quote(dir_.path().string()));
  ASSERT_EQ(check_first.exit_code, 0) << check_first.output;
  EXPECT_NE(check_first.output.find("name = \"first\""), std::string::npos) << check_first.output;
  const auto check_main = trainpoint("check --repo " + repo_.string() + " --ref main --spec train.toml --workdir " +
                                     shell_quote(dir_.path().string()));
  ASSERT_EQ(check_main.exit_code, 0) << check_main.output;
  EXPECT_NE(check_main.output.find("name = \"second\""), std::string::npos);
  EXPECT_NE(check_main.output.find("epochs = 1"), std::string::npos);
  const auto list_value = trainpoint("check --repo " + repo_.string() + " --spec train.toml --workdir " +
                                     shell_quote(dir_.path().string()) +
                                     " --set 'data.augment=[\"flip\", \"random_resized_crop\"]'");
  ASSERT_EQ(list_value.exit_code, 0) << list_value.output;
  EXPECT_NE(list_value.output.find("augment = [\"flip\", \"random_resized_crop\"]"), std::string::npos)
      << list_value.output;
}

TEST_F(EndToEnd, EnvironmentSetsOptionsAndTheCommandLineWins) {
  const auto result = run_command("TRAINPOINT_REPO=" + repo_.string() + " TRAINPOINT_REF=" + first_ +
                                  " TRAINPOINT_SPEC=train.toml TRAINPOINT_SET='train.epochs=2;train.lr=0.01' " +
                                  testing::trainpoint_binary() + " check --set train.epochs=3 --workdir " +
                                  shell_quote(dir_.path().string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("epochs = 3"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("lr = 0.01"), std::string::npos) << result.output;
}

// One error line, the documented exit code, no stack trace, and no finished-looking outputs.
void expect_clean_failure(const testing::CommandResult& result, int code, const std::string& message,
                          const fs::path& output_dir) {
  EXPECT_EQ(result.exit_code, code) << result.output;
  EXPECT_NE(result.output.find(message), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("Exception raised from"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("frame #"), std::string::npos) << result.output;
  std::size_t error_lines = 0;
  for (std::size_t at = result.output.find(" error "); at != std::string::npos; at = result.output.find(" error ", at + 1)) {
    ++error_lines;
  }
  EXPECT_EQ(error_lines, 1u) << result.output;
  EXPECT_FALSE(fs::exists(output_dir / "model.pt"));
  EXPECT_FALSE(fs::exists(output_dir / "run.json"));
}

TEST_F(EndToEnd, BadInputGetsOneClearLineAndTheRightExitClass) {
  const std::string workdir = " --workdir " + shell_quote(dir_.path().string());
  expect_clean_failure(trainpoint("run --repo " + (dir_ / "nowhere").string() + " --spec train.toml" + workdir), 4,
                       "repository not found", dir_ / "out");
  expect_clean_failure(trainpoint("run --repo " + repo_.string() + " --ref no-such-branch --spec train.toml" + workdir),
                       4, "ref 'no-such-branch' not found", dir_ / "out");
  expect_clean_failure(
      trainpoint("run --repo " + repo_.string() + " --ref 0123456789abcdef0123456789abcdef01234567 --spec train.toml" +
                 workdir),
      4, "not found", dir_ / "out");
  expect_clean_failure(trainpoint("run --repo " + repo_.string() + " --spec absent.toml" + workdir), 3,
                       "absent.toml: spec file not found", dir_ / "out");
  expect_clean_failure(trainpoint("run --repo " + repo_.string() + " --spec train.toml --set trian.lr=1" + workdir), 3,
                       "unknown key 'trian.lr' (did you mean 'train.lr'?)", dir_ / "out");
  expect_clean_failure(trainpoint("run --repo " + repo_.string() + " --spec train.toml --set train.lr=-1" + workdir), 3,
                       "train.lr: -1 is out of range", dir_ / "out");
  expect_clean_failure(trainpoint("run --spec train.toml --bogus" + workdir), 2, "bogus", dir_ / "out");
  expect_clean_failure(trainpoint("launch"), 2, "unknown command 'launch'", dir_ / "out");
  expect_clean_failure(
      trainpoint("run --repo " + repo_.string() + " --spec train.toml --set data.source=/nonexistent" + workdir), 5,
      "/nonexistent", dir_ / "out");
}

TEST_F(EndToEnd, LocalSpecFileWithAMisspelledKeyNamesLineAndColumn) {
  testing::write_text(dir_ / "local/train.toml", spec_text("local", 1) + "\n[train]\n");
  auto duplicate = trainpoint("check --spec " + (dir_ / "local/train.toml").string());
  EXPECT_EQ(duplicate.exit_code, 3) << duplicate.output;
  testing::write_text(dir_ / "local/train.toml", "[data]\nsource = \"d\"\n[model]\narch = \"mlp\"\n[trian]\nlr = 1\n");
  const auto result = trainpoint("check --spec " + (dir_ / "local/train.toml").string());
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_NE(result.output.find(":6:1: unknown key 'trian.lr' (did you mean 'train.lr'?)"), std::string::npos)
      << result.output;
}

// Kubernetes stops a pod with SIGTERM: the run saves a checkpoint where it is and exits 143; the
// restarted pod resumes there, mid-epoch, and ends with the same model as an uninterrupted run.
TEST_F(EndToEnd, SigtermSavesACheckpointAndTheRestartEndsWhereAStraightRunDoes) {
  const std::string base = testing::trainpoint_binary() + " run --repo " + repo_.string() + " --ref " + first_ +
                           " --spec train.toml --set train.epochs=3 --set train.batch_size=8 --workdir " +
                           shell_quote(dir_.path().string());
  const auto straight = run_command(base + " --set job.output=straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  const fs::path log = dir_ / "interrupted.log";
  const std::string interrupted = base + " --set job.output=interrupted";
  testing::write_text(dir_ / "stop.sh", interrupted + " > " + log.string() + " 2>&1 & pid=$!\n" +
                                            "for i in $(seq 600); do [ -s " + (dir_ / "interrupted/metrics.jsonl").string() +
                                            " ] && break; sleep 0.05; done\n" +
                                            "kill -TERM $pid; wait $pid; code=$?; cat " + log.string() + "; exit $code\n");
  const auto stopped = run_command("timeout 300 bash " + (dir_ / "stop.sh").string());
  ASSERT_EQ(stopped.exit_code, 143) << stopped.output;
  EXPECT_NE(stopped.output.find("stopped by a signal at epoch"), std::string::npos) << stopped.output;
  EXPECT_FALSE(fs::exists(dir_ / "interrupted/model.pt"));

  const auto resumed = run_command(interrupted);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(std::regex_search(resumed.output, std::regex("resumed from .*_sample-[0-9]+\\.ckpt after epoch")))
      << resumed.output;
  const double straight_loss = read_lines(dir_ / "straight/metrics.jsonl").back()["valid_loss"].get<double>();
  const double resumed_loss = read_lines(dir_ / "interrupted/metrics.jsonl").back()["valid_loss"].get<double>();
  EXPECT_NEAR(resumed_loss, straight_loss, 1e-6) << "the resumed run must end with the same model";
}

// Data in an S3 bucket (MinIO), staged by two ranks that each take their share, then again from the cache.
TEST_F(EndToEnd, TwoRanksTrainFromS3WithShardedStagingAndACacheOnRestart) {
  testing::S3Server server;
  const std::string s3_env = upload_data(server);
  const std::string run = s3_env + "MASTER_PORT=" + std::to_string(testing::free_port()) + " " +
                          testing::trainpoint_binary() + " run --repo " + repo_.string() + " --ref " + first_ +
                          " --spec train.toml --set data.source=s3://test-bucket/shapes --set data.staging=shard" +
                          " --set dist.nproc_per_node=2 --set train.epochs=2 --workdir " +
                          shell_quote(dir_.path().string());
  const auto first = run_command(run);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("[rank 0] staged s3://test-bucket/shapes"), std::string::npos) << first.output;
  const auto record = read_json(dir_ / "out/run.json");
  EXPECT_EQ(record["world_size"], 2);
  // Each rank trained on its own share: together they hold every image once.
  std::size_t staged = 0;
  for (const char* rank : {"rank-0", "rank-1"}) {
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / "data" / rank / "train")) {
      staged += entry.is_regular_file() ? 1 : 0;
    }
  }
  EXPECT_EQ(staged, 300u);

  const auto again = run_command(run);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(0 downloaded"), std::string::npos) << again.output;
}

// Training reads the images straight from S3 (streaming) and its outputs go to an s3:// prefix, where
// checkpoints beyond checkpoint.keep are deleted as on a local disk; a pod restarted with an empty disk
// resumes from the checkpoint it finds there.
TEST_F(EndToEnd, StreamsFromS3WritesOutputsToS3AndResumesFromThemOnANewDisk) {
  testing::S3Server server;
  const std::string s3_env = upload_data(server);
  const auto run = [&](int epochs, const std::string& workdir) {
    return run_command(
        s3_env + "MASTER_PORT=" + std::to_string(testing::free_port()) + " " + testing::trainpoint_binary() +
        " run --repo " + repo_.string() + " --ref " + first_ +
        " --spec train.toml --set data.source=s3://test-bucket/shapes --set data.staging=stream" +
        " --set data.stream_cache_mb=16 --set job.output=s3://test-bucket/runs/a" +
        " --set dist.nproc_per_node=2 --set checkpoint.keep=1 --set train.epochs=" + std::to_string(epochs) +
        " --workdir " + shell_quote((dir_ / workdir).string()));
  };
  const auto first = run(2, "pod-1");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_NE(first.output.find("[rank 0] streaming s3://test-bucket/shapes: 300 images"), std::string::npos)
      << first.output;
  EXPECT_FALSE(fs::exists(dir_ / "pod-1" / "data")) << "streaming stages nothing";

  s3::Client client(testing::test_connection(server.endpoint()));
  // Keys below runs/a/, with the run's checkpoint directory (checkpoints/<run key>/) as checkpoints/RUN/.
  const auto keys = [&] {
    std::set<std::string> found;
    for (const auto& object : client.list("test-bucket", "runs/a/").objects) {
      found.insert(std::regex_replace(object.key, std::regex("/checkpoints/[0-9a-f]{12}/"), "/checkpoints/RUN/"));
    }
    return found;
  };
  for (const char* file : {"model.pt", "run.json", "metrics.jsonl", "metrics.csv", "checkpoints/RUN/epoch-000002.ckpt",
                           "checkpoints/RUN/identity.json"}) {
    EXPECT_EQ(keys().count(std::string("runs/a/") + file), 1u) << file << "\n" << first.output;
  }
  EXPECT_EQ(keys().count("runs/a/checkpoints/RUN/epoch-000001.ckpt"), 0u) << "pruned (keep = 1)";

  // A new pod: nothing on its disk, one more epoch asked for.
  const auto second = run(3, "pod-2");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(std::regex_search(second.output, std::regex("resumed from .*epoch-000002\\.ckpt after epoch 2 ")))
      << second.output;
  const fs::path metrics = dir_ / "metrics.jsonl";
  const auto listing = client.list("test-bucket", "runs/a/metrics.jsonl");
  ASSERT_EQ(listing.objects.size(), 1u);
  client.download("test-bucket", {{listing.objects[0], metrics}});
  const auto lines = read_lines(metrics);
  ASSERT_EQ(lines.size(), 3u) << "the metrics of the first pod go on";
  EXPECT_EQ(lines.back()["epoch"], 3);
  EXPECT_EQ(keys().count("runs/a/checkpoints/RUN/epoch-000003.ckpt"), 1u);
  EXPECT_EQ(keys().count("runs/a/checkpoints/RUN/epoch-000002.ckpt"), 0u) << "pruned (keep = 1)";
}

// A model written in Python and scripted there (torch.jit.script) trains in trainpoint as
// model.torchscript, and Python loads the exported model.pt and predicts with it.
const char* kPythonProgram = R"(import csv, json, sys
import torch
from torch import nn

root, action = sys.argv[1], sys.argv[2]
if action == "make":
    torch.manual_seed(0)
    centers = torch.randn(3, 4) * 3
    labels = torch.randint(0, 3, (600,))
    x = centers[labels] + torch.randn(600, 4)
    with open(f"{root}/data/table.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["x0", "x1", "x2", "x3", "label"])
        for row, label in zip(x.tolist(), labels.tolist()):
            out.writerow([f"{v:.5f}" for v in row] + [f"class{label}"])

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.ReLU())
            self.head = nn.Linear(32, 3)

        def forward(self, x):
            return self.head(self.body(x))

    torch.jit.script(Net()).save(f"{root}/net.pt")
else:
    model = torch.jit.load(f"{root}/out/model.pt")
    model.eval()
    # What trainpoint saved with the model: its classes, input columns and their training-split statistics.
    classes = model.class_names
    assert classes == json.load(open(f"{root}/out/run.json"))["data"]["classes"]
    assert model.feature_names == [f"x{i}" for i in range(4)], model.feature_names
    rows = list(csv.DictReader(open(f"{root}/data/table.csv")))
    x = torch.tensor([[float(r[name]) for name in model.feature_names] for r in rows])
    x = (x - torch.tensor(model.feature_mean)) / torch.tensor(model.feature_std)
    y = torch.tensor([classes.index(r["label"]) for r in rows])
    with torch.no_grad():
        scores = model(x)
    print(tuple(scores.shape), (scores.argmax(1) == y).float().mean().item())
)";

class PythonModel : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "data");
    testing::write_text(dir_ / "program.py", kPythonProgram);
    python("make");
    testing::write_text(dir_ / "train.toml", R"([job]
output = "out"
seed = 1
[data]
source = "data/table.csv"
format = "table_csv"
target = "label"
valid = 0.25
workers = 0
[model]
torchscript = "net.pt"
[train]
epochs = 6
batch_size = 32
lr = 0.01
)");
  }
  std::string python(const std::string& action) {
    return run_checked("/usr/bin/python3 " + shell_quote((dir_ / "program.py").string()) + " " +
                       shell_quote(dir_.path().string()) + " " + action);
  }
  testing::CommandResult trainpoint(const std::string& extra = "") { return testing::run_spec_in(dir_.path(), extra); }
  testing::TempDir dir_;
};

TEST_F(PythonModel, TrainedByTrainpointItPredictsInPythonAboveChance) {
  const auto result = trainpoint();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string prediction = python("predict");
  std::istringstream words(prediction);
  std::string shape_first, shape_second;
  double accuracy = 0;
  words >> shape_first >> shape_second >> accuracy;
  EXPECT_EQ(shape_first + " " + shape_second, "(600, 3)") << prediction;
  EXPECT_GT(accuracy, 0.8) << "chance is 1/3: " << prediction;
  EXPECT_TRUE(fs::exists(dir_ / "out/report.html"));
}

TEST_F(PythonModel, LrFindWritesTheSweepAndSuggestsALearningRateInsteadOfTraining) {
  const auto result = trainpoint(" --set train.lr_find=true");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("lr_find: "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("suggested train.lr "), std::string::npos) << result.output;
  EXPECT_FALSE(read_lines(dir_ / "out/lr_find.jsonl").empty());
  EXPECT_TRUE(fs::exists(dir_ / "out/lr_find.html"));
  EXPECT_FALSE(fs::exists(dir_ / "out/model.pt"));
  EXPECT_FALSE(fs::exists(dir_ / "out/run.json"));
}

TEST_F(PythonModel, Fp16WithoutCudaExitsWithAUsageError) {
  const auto result = trainpoint(" --set train.precision=fp16");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("train.precision = fp16 needs a CUDA device"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "out/model.pt"));
}

// `trainpoint run` of `spec` written as spec.toml in `dir`, which is also the working directory.
testing::CommandResult run_local_spec(const testing::TempDir& dir, const std::string& spec) {
  testing::write_text(dir / "spec.toml", spec);
  return run_command("cd " + shell_quote(dir.path().string()) + " && " + testing::trainpoint_binary() +
                     " run --spec spec.toml --workdir .");
}

TEST(Cli, ARegressionRunEndsWithItsOwnMetrics) {
  testing::TempDir dir;
  std::string rows = "x,y\n";
  for (int i = 0; i < 64; ++i) rows += fmt::format("{},{}\n", i / 64.0, 3.0 * i / 64.0 + 1);
  testing::write_text(dir / "data.csv", rows);
  const auto result = run_local_spec(dir,
                                     "[job]\nname = \"line\"\noutput = \"out\"\n"
                                     "[data]\nsource = \"data.csv\"\nformat = \"table_csv\"\ntarget = \"y\"\n"
                                     "task = \"regression\"\nvalid = 0.25\n"
                                     "[model]\narch = \"mlp\"\n[train]\nepochs = 1\nbatch_size = 16\n");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::size_t done = result.output.find("done: train_loss ");
  ASSERT_NE(done, std::string::npos) << result.output;
  const std::string summary = result.output.substr(done, result.output.find('\n', done) - done);
  EXPECT_NE(summary.find(" valid_loss "), std::string::npos) << summary;
  EXPECT_NE(summary.find(" mae "), std::string::npos) << summary;
  EXPECT_EQ(summary.find("accuracy"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("nan"), std::string::npos) << summary;
}

// A table with a categorical column and missing numbers, trained by trainpoint; examples/tabular/predict.py
// predicts in Python from raw rows with what the saved model carries.
TEST(TabularModel, PredictsInPythonFromRawRowsWithTheEncodingItCarries) {
  testing::TempDir dir;
  std::mt19937 random(3);
  std::uniform_real_distribution<double> uniform(0, 1);
  const char* colours[] = {"red", "green", "blue"};
  std::string rows = "size,weight,colour,price\n";
  std::vector<double> prices;
  for (int i = 0; i < 400; ++i) {
    const double size = 100 * uniform(random), weight = uniform(random);
    const int colour = static_cast<int>(random() % 3);
    prices.push_back(0.5 * size + 20 * weight + 15 * colour + uniform(random));
    // Every 10th row lacks its weight, as an empty cell or "NA".
    const std::string weight_cell = i % 10 == 3 ? "" : i % 10 == 7 ? "NA" : fmt::format("{:.3f}", weight);
    rows += fmt::format("{:.3f},{},{},{:.3f}\n", size, weight_cell, colours[colour], prices.back());
  }
  testing::write_text(dir / "items.csv", rows);
  const auto result =
      run_local_spec(dir,
                     "[job]\nname = \"items\"\noutput = \"out\"\n"
                     "[data]\nsource = \"items.csv\"\nformat = \"table_csv\"\n"
                     "target = \"price\"\ntask = \"regression\"\ncategorical = [\"colour\"]\n"
                     "valid = 0.2\n[model]\narch = \"mlp\"\nhidden = [32]\n"
                     "[train]\nepochs = 40\nbatch_size = 32\noptimizer = \"adam\"\nlr = 0.02\n");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string names = testing::run_checked(
      "/usr/bin/python3 -c 'import sys, torch; print(*torch.jit.load(sys.argv[1]).feature_names)' " +
      (dir / "out/model.pt").string());
  EXPECT_EQ(names, "size weight weight=#na# colour=blue colour=green colour=red\n");
  const std::string output =
      testing::run_checked("/usr/bin/python3 " + testing::source_dir() + "/examples/tabular/predict.py " +
                           (dir / "out/model.pt").string() + " " + (dir / "items.csv").string());
  std::vector<double> predicted;
  std::istringstream lines(output);
  for (double value; lines >> value;) predicted.push_back(value);
  ASSERT_EQ(predicted.size(), prices.size()) << output;
  double mean = 0;
  for (double price : prices) mean += price / static_cast<double>(prices.size());
  double mae = 0, baseline = 0;
  for (std::size_t i = 0; i < prices.size(); ++i) {
    mae += std::abs(predicted[i] - prices[i]) / static_cast<double>(prices.size());
    baseline += std::abs(mean - prices[i]) / static_cast<double>(prices.size());
  }
  ASSERT_GT(baseline, 10);
  // Predicting the mean is off by the baseline; the model, fed rows encoded as it says, by far less.
  EXPECT_LT(mae, 0.25 * baseline) << "MAE " << mae << ", baseline " << baseline;
}

TEST(Cli, VersionNamesTheLibraries) {
  const auto result = run_command(testing::trainpoint_binary() + " version");
  ASSERT_EQ(result.exit_code, 0);
  for (const char* part : {"trainpoint ", "libtorch ", "cuda ", "nccl ", "libgit2 ", "curl "}) {
    EXPECT_NE(result.output.find(part), std::string::npos) << part;
  }
}

TEST(Cli, JsonLogLinesParse) {
  testing::TempDir dir;
  const auto result = run_command(testing::trainpoint_binary() + " run --log-format json --spec " +
                                  (dir / "absent.toml").string());
  EXPECT_EQ(result.exit_code, 3);
  // Every line is a JSON object (the preflight checks' lines, then the error); one is the error.
  std::vector<nlohmann::json> errors;
  std::istringstream lines(result.output);
  for (std::string text; std::getline(lines, text);) {
    const auto line = nlohmann::json::parse(text);
    if (line["level"] == "error") errors.push_back(line);
  }
  ASSERT_EQ(errors.size(), 1u) << result.output;
  EXPECT_NE(errors[0]["msg"].get<std::string>().find("spec file not found"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace tp
