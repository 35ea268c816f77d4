// What a newcomer does wrong (issue "The first hour without traps"): each mistake that used to exit 0 with a
// wrong result now fails clearly or does the right thing, run through the real binary.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "support/background_process.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_checked;
using testing::run_command;
using testing::shell_quote;

std::string table_spec(int epochs) {
  return fmt::format(
      "[job]\nname = \"line\"\noutput = \"out\"\n"
      "[data]\nsource = \"data.csv\"\nformat = \"table_csv\"\ntarget = \"y\"\ntask = \"regression\"\n"
      "valid = 0.25\nworkers = 0\n[model]\narch = \"mlp\"\nhidden = [8]\n[train]\nepochs = {}\nbatch_size = 16\n",
      epochs);
}

std::size_t lines_in(const fs::path& file) {
  std::ifstream in(file);
  std::size_t count = 0;
  for (std::string line; std::getline(in, line);) ++count;
  return count;
}

// A local repository whose committed spec asks for 1 epoch.
class LocalRepository : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(repo_);
    std::string rows = "x,y\n";
    for (int i = 0; i < 32; ++i) rows += fmt::format("{},{}\n", i / 32.0, 2.0 * i / 32.0);
    testing::write_text(repo_ / "data.csv", rows);
    testing::write_text(repo_ / "train.toml", table_spec(1));
    git("init -q -b main");
    git("add -A");
    git("commit -q -m first");
  }
  std::string git(const std::string& arguments) {
    return run_checked("git -C " + shell_quote(repo_.string()) + " -c user.name=t -c user.email=t@t " + arguments);
  }
  testing::CommandResult trainpoint(const std::string& arguments) {
    return run_command("cd " + shell_quote(repo_.string()) + " && " + testing::trainpoint_binary() + " " + arguments);
  }
  testing::TempDir dir_;
  fs::path repo_ = dir_ / "repo";
};

TEST_F(LocalRepository, AnUncommittedSpecEditIsNamedAndTheCommitIsWhatRuns) {
  testing::write_text(repo_ / "train.toml", table_spec(2));
  testing::write_text(repo_ / "notes.txt", "not committed either\n");

  const auto checked = trainpoint("check --spec train.toml");
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(checked.output.find("train.toml is modified in the git working tree"), std::string::npos)
      << checked.output;
  EXPECT_NE(checked.output.find("`trainpoint run --repo` reads it as committed"), std::string::npos)
      << checked.output;

  const auto result =
      trainpoint("run --repo . --ref main --spec train.toml --workdir " + shell_quote((dir_ / "run").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("differs from commit"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("notes.txt (untracked), train.toml (modified)"), std::string::npos) << result.output;
  EXPECT_EQ(lines_in(dir_ / "run/out/metrics.jsonl"), 1u) << "the committed spec (1 epoch) ran";
}

TEST_F(LocalRepository, ASpecThatIsNotCommittedIsSaidToBeSo) {
  testing::write_text(repo_ / "other.toml", table_spec(1));
  const auto result =
      trainpoint("run --repo . --ref main --spec other.toml --workdir " + shell_quote((dir_ / "run").string()));
  EXPECT_EQ(result.exit_code, 3) << result.output;
  EXPECT_NE(result.output.find("other.toml: spec file not found in commit"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("in the working tree but not committed (git add other.toml"), std::string::npos)
      << result.output;
}

TEST_F(LocalRepository, ACleanWorkingTreeRunsWithoutAWarning) {
  const auto result =
      trainpoint("run --repo . --ref main --spec train.toml --workdir " + shell_quote((dir_ / "run").string()));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output.find("differs from commit"), std::string::npos) << result.output;
}


TEST_F(LocalRepository, WithoutWorkdirInsideTheRepositoryItsOutputsStayOutOfGit) {
  const auto result = trainpoint("run --repo . --ref main --spec train.toml");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_TRUE(fs::exists(repo_ / ".trainpoint/out/model.pt")) << result.output;
  EXPECT_EQ(git("status --porcelain"), "") << "checkouts and outputs are ignored by git";
  EXPECT_NE(result.output.find("outputs in " + (repo_ / ".trainpoint/out").string()), std::string::npos)
      << result.output;
}

TEST_F(LocalRepository, ADataSourceInTheCurrentDirectoryButNotInTheRepositoryIsPointedAt) {
  testing::write_text(dir_ / "table.csv", "x,y\n1,2\n");
  const auto result = run_command("cd " + shell_quote(dir_.path().string()) + " && " + testing::trainpoint_binary() +
                                  " run --repo repo --ref main --spec train.toml --workdir run --set data.source=table.csv");
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_NE(result.output.find("table.csv is in the current directory: did you mean data.source=" +
                               (dir_ / "table.csv").string() + "?"),
            std::string::npos)
      << result.output;
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

TEST_F(LocalRepository, TwoRanksSayEachThingOnceWithPathsAsTheyAre) {
  const auto result = run_command("cd " + shell_quote(repo_.string()) + " && MASTER_PORT=" +
                                  std::to_string(testing::free_port()) + " " + testing::trainpoint_binary() +
                                  " run --repo . --ref main --spec train.toml --workdir ../run --nproc-per-node 2");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("started 2 workers"), std::string::npos) << result.output;
  EXPECT_EQ(count_of(result.output, " preflight: "), 1u) << "one summary line: " << result.output;
  EXPECT_NE(result.output.find(" preflight: 8 checks passed in "), std::string::npos) << result.output;
  EXPECT_EQ(count_of(result.output, "spec train.toml is valid"), 1u) << result.output;
  EXPECT_EQ(count_of(result.output, " info [rank 1] "), 0u) << "rank 0 speaks for the job: " << result.output;
  EXPECT_EQ(count_of(result.output, "/../"), 0u) << result.output;
  EXPECT_NE(result.output.find("outputs in " + (dir_ / "run/out").string() + "\n"), std::string::npos)
      << result.output;
  std::ifstream in(dir_ / "run/out/run.json");
  std::stringstream record;
  record << in.rdbuf();
  EXPECT_NE(record.str().find("\"repo\": \"" + repo_.string() + "\""), std::string::npos)
      << "the repository by its absolute path, not as typed (.): " << record.str();
}

// Shapes images under data/train and data/valid, fastai's layout.
class FolderLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [split, count] : {std::pair<const char*, int>{"train", 12}, {"valid", 4}}) {
      run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((dir_ / "data" / split).string()) +
                  " --classes 2 --per-class " + std::to_string(count) + " --size 16 --format png --seed 1");
    }
    testing::write_text(dir_ / "train.toml",
                        "[job]\noutput = \"out\"\n[data]\nsource = \"data\"\nimage_size = 16\nworkers = 0\n"
                        "[model]\narch = \"small_cnn\"\n[train]\nepochs = 1\nbatch_size = 8\n");
  }
  testing::CommandResult trainpoint(const std::string& extra = "") { return testing::run_spec_in(dir_.path(), extra); }
  testing::TempDir dir_;
};

TEST_F(FolderLayout, TrainAndValidFoldersAreTheSplitAndTheClassesAreLoggedWithTheirCounts) {
  const auto result = trainpoint();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("train/ and valid/ are the training and validation split"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("2 classes, training examples of each: circle 12, square 12"), std::string::npos)
      << result.output;
  std::ifstream in(dir_ / "out/run.json");
  std::stringstream record;
  record << in.rdbuf();
  EXPECT_NE(record.str().find("\"classes\": [\n      \"circle\",\n      \"square\"\n    ]"), std::string::npos)
      << record.str();
  EXPECT_NE(record.str().find("\"train_samples\": 24"), std::string::npos) << record.str();
  EXPECT_NE(record.str().find("\"valid_samples\": 8"), std::string::npos) << record.str();
}

TEST_F(FolderLayout, AClassFolderHoldingOnlyFoldersIsRefused) {
  const auto result = trainpoint(" --set data.valid_source=data/valid");
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_NE(result.output.find("the class folder 'train' holds only folders (circle, square), not images"),
            std::string::npos)
      << result.output;
  EXPECT_FALSE(fs::exists(dir_ / "out/model.pt"));
}

// Shapes images wider than tall (24x20) under data/train and data/valid, trained with resize = "crop".
class ImageModel : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const auto& [split, count] : {std::pair<const char*, int>{"train", 100}, {"valid", 10}}) {
      run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((dir_ / "data" / split).string()) +
                  " --classes 2 --per-class " + std::to_string(count) + " --size 24x20 --format png --seed " +
                  std::to_string(count));
    }
    testing::write_text(dir_ / "train.toml",
                        "[job]\noutput = \"out\"\n[data]\nsource = \"data\"\nimage_size = 20\nresize = \"crop\"\n"
                        "workers = 0\n[model]\narch = \"small_cnn\"\n[train]\nepochs = 6\nbatch_size = 16\nlr = 3e-3\n");
  }
  testing::CommandResult trainpoint(const std::string& extra = "") { return testing::run_spec_in(dir_.path(), extra); }
  std::string python(const std::string& arguments) { return run_checked("/usr/bin/python3 " + arguments); }
  testing::TempDir dir_;
};

// examples/shapes/predict.py prepares image files as model.pt says: over the validation images, its
// probabilities give the run's own validation loss and accuracy (an input made otherwise, stretched instead of
// cropped for example, moves the loss by several hundredths).
TEST_F(ImageModel, PredictsInPythonFromImageFilesWithWhatItCarries) {
  const auto result = trainpoint();
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string model = shell_quote((dir_ / "out/model.pt").string());
  EXPECT_EQ(python("-c 'import sys, torch; m = torch.jit.load(sys.argv[1]); "
                   "print(m.task, m.image_size, m.channels, m.resize, m.class_names, m.pixel_mean, m.pixel_std)' " +
                   model),
            "classification 20 3 crop ['circle', 'square'] [0.48500001430511475, 0.4560000002384186, "
            "0.4059999883174896] [0.2290000021457672, 0.2240000069141388, 0.22499999403953552]\n");

  const std::string predictions = python(testing::source_dir() + "/examples/shapes/predict.py " + model + " " +
                                         shell_quote((dir_ / "data/valid").string()) + "/*/*.png");
  std::istringstream lines(predictions);
  int images = 0, correct = 0;
  double loss = 0;
  for (std::string file, name; lines >> file >> name; ++images) {
    double probability = 0;
    lines >> probability;
    const bool right = fs::path(file).parent_path().filename() == name;
    correct += right;
    loss -= std::log(right ? probability : 1 - probability);  // two classes
  }
  ASSERT_EQ(images, 20) << predictions;
  std::ifstream in(dir_ / "out/metrics.jsonl");
  std::string last;
  for (std::string line; std::getline(in, line);) last = line;
  const auto metric = [&](const std::string& name) {
    const std::size_t at = last.find("\"" + name + "\":");
    return at == std::string::npos ? std::nan("") : std::stod(last.substr(at + name.size() + 3));
  };
  EXPECT_GT(metric("accuracy"), 0.6) << last;
  EXPECT_DOUBLE_EQ(correct / 20.0, metric("accuracy")) << predictions << last;
  EXPECT_NEAR(loss / 20, metric("valid_loss"), 5e-4) << predictions << last;
}

TEST_F(ImageModel, ATorchScriptModelWhoseOutputsDoNotMatchTheClassesStopsBeforeTraining) {
  python("-c 'import sys, torch; from torch import nn; "
         "torch.jit.script(nn.Sequential(nn.Flatten(), nn.Linear(3 * 20 * 20, 3))).save(sys.argv[1])' " +
         shell_quote((dir_ / "net.pt").string()));
  std::ifstream in(dir_ / "train.toml");
  std::stringstream spec;
  spec << in.rdbuf();
  std::string text = spec.str();
  text.replace(text.find("arch = \"small_cnn\""), 18, "torchscript = \"net.pt\"");
  testing::write_text(dir_ / "train.toml", text);
  const auto result = trainpoint();
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("model.torchscript: net.pt gives outputs shaped [2, 3] for a batch of 2, but the "
                               "data needs 2 outputs, one per class (circle, square)"),
            std::string::npos)
      << result.output;
  EXPECT_EQ(result.output.find("epoch 1/"), std::string::npos) << result.output;
}

TEST(RenderJob, AnOutputInsideThePodWarnsHowToKeepTheModel) {
  testing::TempDir dir;
  testing::write_text(dir / "train.toml", "[job]\noutput = \"out\"\n[data]\nsource = \"data\"\n[model]\narch = "
                                          "\"small_cnn\"\n[k8s]\nimage = \"registry.example.org/trainpoint:1\"\n");
  const auto render = [&](const std::string& extra) {
    return run_command("cd " + shell_quote(dir.path().string()) + " && " + testing::trainpoint_binary() +
                       " render-job --repo https://git.example.org/a.git --ref main --spec train.toml -o job.yaml" +
                       extra);
  };
  const auto relative = render("");
  ASSERT_EQ(relative.exit_code, 0) << relative.output;
  EXPECT_NE(relative.output.find("job.output = \"out\" (train.toml:2:1) is written inside each pod "
                                 "(/scratch/work/$(POD_NAME)/out, an emptyDir), which is deleted when the pod ends"),
            std::string::npos)
      << relative.output;
  EXPECT_NE(relative.output.find("job.output = \"s3://bucket/prefix\""), std::string::npos) << relative.output;
  EXPECT_TRUE(fs::exists(dir / "job.yaml"));
  for (const char* kept : {" --set job.output=s3://models/run", " --scratch /mnt/trainpoint"}) {
    const auto result = render(kept);
    ASSERT_EQ(result.exit_code, 0) << result.output;
    EXPECT_EQ(result.output.find("job.output"), std::string::npos) << kept << ": " << result.output;
  }
}

TEST(RenderJob, AGraceSetAtRenderReachesThePodsLauncherAndOtherK8sSettingsDoNot) {
  testing::TempDir dir;
  testing::write_text(dir / "train.toml", "[job]\noutput = \"s3://models/run\"\n[data]\nsource = \"data\"\n[model]\n"
                                          "arch = \"small_cnn\"\n[k8s]\nimage = \"registry.example.org/trainpoint:1\"\n");
  const auto result = run_command("cd " + shell_quote(dir.path().string()) + " && " + testing::trainpoint_binary() +
                                  " render-job --repo https://git.example.org/a.git --ref main --spec train.toml "
                                  "--set k8s.grace_s=240 --set k8s.workers=3 --set train.epochs=3 -o job.yaml");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string manifest = testing::read_text(dir / "job.yaml");
  EXPECT_NE(manifest.find("terminationGracePeriodSeconds: 240"), std::string::npos) << manifest;
  // The pods' launcher gives its workers the same time to save a checkpoint; k8s.workers is the manifest's.
  EXPECT_NE(manifest.find("k8s.grace_s=240;train.epochs=3"), std::string::npos) << manifest;
  EXPECT_EQ(manifest.find("k8s.workers"), std::string::npos) << manifest;
}

testing::CommandResult trainpoint_in(const fs::path& directory, const std::string& arguments) {
  return run_command("cd " + shell_quote(directory.string()) + " && " + testing::trainpoint_binary() + " " + arguments);
}

TEST(Cli, ABareTrainpointPrintsTheOverviewOnStderrAndExits2) {
  const auto bare = run_command("{ " + testing::trainpoint_binary() + " 2>/dev/null; }");
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_EQ(bare.output, "") << "the overview goes to stderr";
  const auto overview = run_command("{ " + testing::trainpoint_binary() + " 2>&1 >/dev/null; }");
  EXPECT_EQ(overview.output.rfind("usage: trainpoint COMMAND [options]", 0), 0u) << overview.output;
  const auto help = run_command(testing::trainpoint_binary() + " --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.output, overview.output);
  const auto version = run_command(testing::trainpoint_binary() + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.output.rfind("trainpoint ", 0), 0u) << version.output;
}

TEST(Cli, EachCommandsHelpGivesItsUsageAndItsOwnOptions) {
  const auto help = [](const std::string& command) {
    const auto result = run_command(testing::trainpoint_binary() + " " + command + " --help");
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return result.output;
  };
  const std::string run = help("run");
  EXPECT_EQ(run.rfind("usage: trainpoint run --repo URL|PATH", 0), 0u) << run;
  for (const char* option : {"--nproc-per-node", "--no-preflight", "--git-cache", "--workdir"}) {
    EXPECT_NE(run.find(option), std::string::npos) << option;
  }
  EXPECT_EQ(run.find("--image"), std::string::npos) << run;
  const std::string render = help("render-job");
  EXPECT_EQ(render.rfind("usage: trainpoint render-job --repo URL", 0), 0u) << render;
  EXPECT_NE(render.find("--image"), std::string::npos) << render;
  EXPECT_NE(render.find("--scratch"), std::string::npos) << render;
  EXPECT_EQ(render.find("--no-preflight"), std::string::npos) << render;
  EXPECT_EQ(help("check").rfind("usage: trainpoint check FILE", 0), 0u);
  const std::string s3 = help("s3");
  EXPECT_EQ(s3.rfind("usage: trainpoint s3 ls", 0), 0u) << s3;
  EXPECT_NE(s3.find("--part-size-mib N"), std::string::npos) << s3;
  EXPECT_NE(s3.find("multipart part size in MiB (default 8)"), std::string::npos) << s3;
  EXPECT_EQ(help("s3 cp"), s3);

  const auto wrong = run_command(testing::trainpoint_binary() + " run --image x --spec train.toml");
  EXPECT_EQ(wrong.exit_code, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("(see trainpoint run --help)"), std::string::npos) << wrong.output;
}

TEST(Cli, CheckTakesTheSpecFileAndNprocPerNodeIsTheSetting) {
  testing::TempDir dir;
  testing::write_text(dir / "train.toml", table_spec(1));
  const auto checked = trainpoint_in(dir.path(), "check train.toml --nproc-per-node 3");
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_EQ(checked.output.rfind("# train.toml: valid\n", 0), 0u) << checked.output;
  EXPECT_NE(checked.output.find("nproc_per_node = 3 "), std::string::npos) << checked.output;
  EXPECT_EQ(trainpoint_in(dir.path(), "check train.toml --spec train.toml").exit_code, 2);
  const auto bad = trainpoint_in(dir.path(), "check train.toml --nproc-per-node two");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--nproc-per-node: 'two' is not a number of processes or auto"), std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace tp
