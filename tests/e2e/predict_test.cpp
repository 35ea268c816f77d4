// `trainpoint predict` as a user runs it: a model trained by trainpoint applied to a validation folder, a table
// and S3, by one process and by two pods, one of them killed and started again.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

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

std::vector<std::vector<std::string>> read_csv_rows(const fs::path& file) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream parts(line);
    for (std::string cell; std::getline(parts, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

// Expects the rows of two prediction tables, in any order, to be the same but for the last printed digit of a
// probability: the same images in batches of other images (another order, another packing) go through other
// summation orders in oneDNN and BLAS, which moves a probability by about 1e-7 (0.338211 against 0.338212 in CI).
void expect_same_rows(std::vector<std::vector<std::string>> actual, std::vector<std::vector<std::string>> expected) {
  std::sort(actual.begin(), actual.end());
  std::sort(expected.begin(), expected.end());
  ASSERT_EQ(actual.size(), expected.size());
  const auto number = [](const std::string& cell, double& value) {
    char* end = nullptr;
    value = std::strtod(cell.c_str(), &end);
    return !cell.empty() && end == cell.c_str() + cell.size();
  };
  for (std::size_t r = 0; r < actual.size(); ++r) {
    ASSERT_FALSE(actual[r].empty()) << "row " << r;
    ASSERT_EQ(actual[r].size(), expected[r].size()) << "row " << r << " (" << actual[r][0] << ")";
    for (std::size_t c = 0; c < actual[r].size(); ++c) {
      double a = 0, e = 0;
      if (number(actual[r][c], a) && number(expected[r][c], e)) {
        EXPECT_NEAR(a, e, 1e-5) << "row " << r << " (" << actual[r][0] << "), column " << c;
      } else {
        EXPECT_EQ(actual[r][c], expected[r][c]) << "row " << r << ", column " << c;
      }
    }
  }
}

// `trainpoint predict ARGUMENTS` in `dir` with the variables of `environment` ("A=1 B=2"), exec'ed by the shell.
std::string predict(const fs::path& dir, const std::string& arguments, const std::string& environment = "") {
  return "cd " + shell_quote(dir.string()) + " && exec env " + environment + " " + testing::trainpoint_binary() +
         " predict " + arguments;
}

// An image model trained once for the suite: 3 classes, fastai's train/ and valid/ folders.
class Predict : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const fs::path root = dir_->path();
    for (const auto& [split, seed, count] : {std::tuple{"train", 4, 40}, std::tuple{"valid", 5, 12}}) {
      run_checked(std::string(TP_MAKE_DATASET_BIN) + " images --out " + shell_quote((root / "data" / split).string()) +
                  fmt::format(" --classes 3 --per-class {} --size 24 --seed {}", count, seed));
    }
    testing::write_text(root / "train.toml",
                        "[job]\nname = \"shapes\"\nseed = 3\noutput = \"out\"\n"
                        "[data]\nsource = \"data\"\nformat = \"image_folder\"\nimage_size = 24\nnormalize = \"imagenet\"\n"
                        "[model]\narch = \"small_cnn\"\n[train]\nepochs = 2\nbatch_size = 16\nlr = 3e-3\n");
    const auto result = testing::run_spec_in(root);
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path root() { return dir_->path(); }
  static std::string model() { return (root() / "out" / "model.pt").string(); }
  static std::string valid() { return (root() / "data" / "valid").string(); }

  static testing::TempDir* dir_;
};

testing::TempDir* Predict::dir_ = nullptr;

double last_epoch_accuracy(const fs::path& metrics) {
  std::ifstream in(metrics);
  double accuracy = -1;
  for (std::string line; std::getline(in, line);) {
    const auto json = nlohmann::json::parse(line);
    if (json.contains("accuracy")) accuracy = json.at("accuracy").get<double>();
  }
  return accuracy;
}

TEST_F(Predict, TheValidationFolderGivesTheAccuracyTheRunReportedAndPythonsProbabilities) {
  testing::TempDir dir;
  const auto result = run_command(predict(dir.path(), "--model " + model() + " --data " + valid() + " --out p.csv"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto rows = read_csv_rows(dir / "p.csv");
  ASSERT_EQ(rows.size(), 37u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"id", "prediction", "probability", "class_2", "probability_2",
                                               "class_3", "probability_3", "label"}));
  std::set<std::string> ids;
  int correct = 0;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    ids.insert(rows[r][0]);
    EXPECT_EQ(rows[r][0].substr(0, rows[r][0].find('/')), rows[r][7]) << "the label is the class folder";
    correct += rows[r][1] == rows[r][7];
  }
  EXPECT_EQ(ids.size(), 36u);
  // model.pt is the last epoch's: its accuracy on the validation folder is what the run reported for it.
  const double reported = last_epoch_accuracy(root() / "out" / "metrics.jsonl");
  EXPECT_NEAR(correct / 36.0, reported, 1e-9) << result.output;
  EXPECT_NE(result.output.find(fmt::format("accuracy {:.4f} on 36 labelled samples", reported)), std::string::npos)
      << result.output;

  // Python's torch.jit.load on the same PNG files, preprocessed by what the model carries.
  const std::string python = R"(
import csv, sys, torch
from PIL import Image
model = torch.jit.load(sys.argv[1]).eval()
rows = list(csv.DictReader(open(sys.argv[3])))
mean, std = torch.tensor(model.pixel_mean).view(3, 1, 1), torch.tensor(model.pixel_std).view(3, 1, 1)
worst = 0.0
for row in rows:
    image = Image.open(f"{sys.argv[2]}/{row['id']}").convert("RGB")
    assert image.size == (model.image_size, model.image_size)
    x = torch.tensor(list(image.getdata()), dtype=torch.float32).view(24, 24, 3).permute(2, 0, 1) / 255
    with torch.no_grad():
        p = torch.softmax(model(((x - mean) / std).unsqueeze(0)), 1)[0]
    index = model.class_names.index(row["prediction"])
    worst = max(worst, abs(p[index].item() - float(row["probability"])))
    assert p.argmax().item() == index, row
print(worst)
)";
  testing::write_text(dir / "check.py", python);
  const double worst = std::stod(run_checked("/usr/bin/python3 " + (dir / "check.py").string() + " " + model() + " " +
                                             valid() + " " + (dir / "p.csv").string()));
  EXPECT_LT(worst, 1e-5);
}

// Two pods (RANK 0 and 1 of 2) each predict their parts; rank 0 is killed after writing its own and started
// again: it redoes none of them, and the file is byte for byte what one process writes.
TEST_F(Predict, TwoPodsWriteEverySampleOnceAndAKilledPodRedoesNothingItWrote) {
  testing::TempDir dir;
  const std::string arguments = "--model " + model() + " --data " + valid() + " --part-size 5 --out ";
  run_checked(predict(dir.path(), arguments + "one.csv"));

  const fs::path pid_file = dir / "rank0.pid";
  std::optional<testing::BackgroundProcess> rank0;
  // The inner shell writes its pid, which trainpoint keeps when the shell execs it.
  rank0.emplace("sh -c " + shell_quote("echo $$ > " + pid_file.string() + "; " +
                                       predict(dir.path(), arguments + "two.csv", "RANK=0 WORLD_SIZE=2")),
                dir / "rank0.log");
  // Rank 0 owns parts 0, 2, 4 and 6 of 8; once they are written it waits for rank 1's.
  const auto owned_written = [&] {
    int count = 0;
    if (!fs::exists(dir / "two.csv.parts")) return 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir / "two.csv.parts")) {
      const std::string name = entry.path().filename().string();
      for (const char* part : {"part-000000.json", "part-000002.json", "part-000004.json", "part-000006.json"}) {
        count += name == part;
      }
    }
    return count;
  };
  for (int i = 0; i < 600 && owned_written() < 4; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(owned_written(), 4) << rank0->log();
  EXPECT_FALSE(fs::exists(dir / "two.csv"));
  ASSERT_EQ(::kill(std::stoi(testing::read_text(pid_file)), SIGKILL), 0);
  rank0.reset();

  const auto rank1 = run_command(predict(dir.path(), arguments + "two.csv", "RANK=1 WORLD_SIZE=2"));
  ASSERT_EQ(rank1.exit_code, 0) << rank1.output;
  EXPECT_FALSE(fs::exists(dir / "two.csv")) << "rank 1 writes its parts only";
  const auto again = run_command(predict(dir.path(), arguments + "two.csv", "RANK=0 WORLD_SIZE=2"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("4 parts of rank 0 were written by an earlier attempt"), std::string::npos)
      << again.output;
  EXPECT_EQ(again.output.find("written: "), std::string::npos) << "no part predicted again:\n" << again.output;
  EXPECT_EQ(testing::read_text(dir / "two.csv"), testing::read_text(dir / "one.csv"));
  EXPECT_FALSE(fs::exists(dir / "two.csv.parts"));
}

// The validation folder packed into shards (`trainpoint pack --valid 0`): the same images give the same
// probabilities and labels, named by shard and key.
TEST_F(Predict, PackedShardsPredictAsTheFolderTheyWerePackedFrom) {
  testing::TempDir dir;
  run_checked(testing::trainpoint_binary() + " pack " + valid() + " " + (dir / "shards").string() +
              " --valid 0 --shard-size-mb 0.0625 --seed 1");
  run_checked(predict(dir.path(), "--model " + model() + " --data " + valid() + " --out folder.csv --top-k 1"));
  const auto result = run_command(predict(dir.path(), "--model " + model() + " --data shards --out shards.csv --top-k 1"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto without_ids = [](std::vector<std::vector<std::string>> rows) {
    rows.erase(rows.begin());
    for (auto& row : rows) row.erase(row.begin());
    return rows;
  };
  const auto packed = read_csv_rows(dir / "shards.csv");
  ASSERT_EQ(packed.size(), 37u);
  EXPECT_EQ(packed[0], (std::vector<std::string>{"id", "prediction", "probability", "label"}));
  EXPECT_NE(packed[1][0].find(".tar/"), std::string::npos) << packed[1][0];
  expect_same_rows(without_ids(packed), without_ids(read_csv_rows(dir / "folder.csv")));
}

// The images of `folder` (a copy in `listed`) with a CSV that lists them in `order` (rows of a predictions file:
// their ids) and labels them by their class folder, as image_csv does.
void write_listed_images(const fs::path& folder, const fs::path& listed,
                         const std::vector<std::vector<std::string>>& order) {
  fs::copy(folder, listed, fs::copy_options::recursive);
  std::string csv = "image,label\n";
  for (const auto& row : order) csv += row[0] + "," + row[0].substr(0, row[0].find('/')) + "\n";
  testing::write_text(listed / "images.csv", csv);
}

// The validation images listed in a CSV (image_csv; last first) and in their class folders give the same lines,
// in the CSV's order, named as the CSV names them.
TEST_F(Predict, ImagesListedInACsvPredictAsTheSameImagesInTheirFolders) {
  testing::TempDir dir;
  run_checked(predict(dir.path(), "--model " + model() + " --data " + valid() + " --out folder.csv"));
  const auto folder = read_csv_rows(dir / "folder.csv");
  ASSERT_EQ(folder.size(), 37u);
  write_listed_images(valid(), dir / "listed", {folder.rbegin(), folder.rend() - 1});
  const auto result = run_command(predict(dir.path(), "--model " + model() + " --data listed --out listed.csv"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto listed = read_csv_rows(dir / "listed.csv");
  ASSERT_EQ(listed.size(), 37u);
  EXPECT_EQ(listed[1][0], folder[36][0]) << "the CSV's order";
  expect_same_rows(listed, folder);
  const double reported = last_epoch_accuracy(root() / "out" / "metrics.jsonl");
  EXPECT_NE(result.output.find(fmt::format("accuracy {:.4f} on 36 labelled samples", reported)), std::string::npos)
      << result.output;
}

// The image files below `workdir`, named below `folder` (where predict downloaded s3://test-bucket/FOLDER).
std::set<std::string> downloaded_images(const fs::path& workdir, const std::string& folder) {
  std::set<std::string> images;
  const fs::path root = workdir / "predict-inputs" / "data" / testing::S3Server::kBucket / folder;
  if (!fs::exists(root)) return images;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.path().extension() == ".png") images.insert(entry.path().lexically_relative(root).generic_string());
  }
  return images;
}

// Two pods on s3:// images, in class folders and listed in a CSV (named by its folder or itself): each downloads
// only the images of its own parts, and together they write every sample once, the file one process writes from
// local disk.
TEST_F(Predict, TwoPodsOnS3ImagesDownloadOnlyTheImagesOfTheirOwnParts) {
  testing::S3Server server;
  testing::TempDir dir;
  const std::string bucket = std::string("s3://") + testing::S3Server::kBucket;
  const std::string s3_env = "AWS_ENDPOINT_URL=" + server.endpoint() + " " + testing::S3Server::key_environment();
  run_checked(predict(dir.path(), "--model " + model() + " --data " + valid() + " --part-size 5 --out one.csv"));
  const auto one = read_csv_rows(dir / "one.csv");
  ASSERT_EQ(one.size(), 37u);
  write_listed_images(valid(), dir / "listed", {one.begin() + 1, one.end()});
  const std::string s3 = "env " + s3_env + " " + testing::trainpoint_binary() + " s3 cp --recursive ";
  run_checked(s3 + valid() + " " + bucket + "/valid");
  run_checked(s3 + (dir / "listed").string() + " " + bucket + "/listed");

  // 36 samples in parts of 5: rank 0 predicts parts 0, 2, 4 and 6 (20 samples), rank 1 parts 1, 3, 5 and 7 (16).
  std::set<std::string> owned[2];
  for (std::size_t row = 1; row < one.size(); ++row) owned[(row - 1) / 5 % 2].insert(one[row][0]);
  const std::pair<std::string, std::string> sources[] = {{"valid", "valid"}, {"listed", "listed"},
                                                         {"listed/images.csv", "listed"}};
  for (std::size_t source = 0; source < std::size(sources); ++source) {
    const auto& [data, folder] = sources[source];
    SCOPED_TRACE(data);
    const auto name = [&](int rank) { return fmt::format("{}-{}", source, rank); };
    const auto rank = [&](int rank) {
      return "(" + predict(dir.path(), "--model " + model() + " --data " + bucket + "/" + data + " --part-size 5 " +
                                           "--out " + bucket + fmt::format("/scores/{}.csv --workdir ", source) +
                                           name(rank),
                           s3_env + fmt::format(" RANK={} WORLD_SIZE=2", rank)) +
             ") > " + name(rank) + ".log 2>&1";
    };
    const auto both = run_command("cd " + shell_quote(dir.path().string()) + " || exit 1; " + rank(0) + " & " +
                                  rank(1) + "; one=$?; wait $! && test $one = 0");
    const std::string log1 = testing::read_text(dir / (name(1) + ".log"));
    ASSERT_EQ(both.exit_code, 0) << testing::read_text(dir / (name(0) + ".log")) << log1;
    for (const int r : {0, 1}) EXPECT_EQ(downloaded_images(dir / name(r), folder), owned[r]) << "rank " << r;
    const int csv = folder == "listed";  // the CSV, which every rank reads
    EXPECT_NE(log1.find(fmt::format("rank 1 downloaded {} of the {} objects", 16 + csv, 36 + csv)), std::string::npos)
        << log1;
    const fs::path written = dir / fmt::format("{}.csv", source);
    run_checked("env " + s3_env + " " + testing::trainpoint_binary() + " s3 cp " + bucket +
                fmt::format("/scores/{}.csv ", source) + written.string());
    EXPECT_EQ(testing::read_text(written), testing::read_text(dir / "one.csv"));
  }
}

TEST_F(Predict, ModelDataAndPredictionsInS3) {
  testing::S3Server server;
  testing::TempDir dir;
  const std::string bucket = std::string("s3://") + testing::S3Server::kBucket;
  const std::string s3_env = "AWS_ENDPOINT_URL=" + server.endpoint() + " " + testing::S3Server::key_environment();
  const std::string s3 = "env " + s3_env + " " + testing::trainpoint_binary() + " s3 ";
  run_checked(s3 + "cp " + model() + " " + bucket + "/models/model.pt");
  run_checked(s3 + "cp --recursive " + valid() + " " + bucket + "/valid");
  run_checked(predict(dir.path(), "--model " + model() + " --data " + valid() + " --out local.jsonl"));
  const auto result = run_command(predict(dir.path(), "--model " + bucket + "/models/model.pt --data " + bucket +
                                              "/valid --out " + bucket + "/scores/p.jsonl --workdir work", s3_env));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  run_checked(s3 + "cp " + bucket + "/scores/p.jsonl " + (dir / "fetched.jsonl").string());
  const std::string local = testing::read_text(dir / "local.jsonl");
  EXPECT_EQ(testing::read_text(dir / "fetched.jsonl"), local);
  const auto first = nlohmann::json::parse(local.substr(0, local.find('\n')));
  EXPECT_EQ(first.at("top_k").size(), 3u);
  EXPECT_TRUE(first.contains("label"));
}

// A table model (a categorical column, missing numbers) trained by trainpoint: predictions keep the id column and
// equal Python's torch.jit.load on rows encoded by examples/tabular/predict.py from what the model carries.
TEST(PredictTable, KeepsTheIdColumnAndEqualsPythonWithin1e5) {
  testing::TempDir dir;
  // The model trains without the id column; the rows to score have it first.
  std::string training = "size,weight,colour,kind\n";
  std::string scored = "item,size,weight,colour,kind\n";
  const char* colours[] = {"red", "green", "blue"};
  for (int i = 0; i < 120; ++i) {
    const double size = (i * 37 % 100) / 100.0;
    const std::string weight = i % 9 == 0 ? "" : fmt::format("{:.3f}", (i * 53 % 100) / 50.0);
    const std::string row = fmt::format("{:.2f},{},{},{}\n", size, weight, colours[i % 3], size > 0.5 ? "big" : "small");
    training += row;
    scored += fmt::format("item-{},", i) + row;
  }
  testing::write_text(dir / "items.csv", training);
  testing::write_text(dir / "score.csv", scored);
  testing::write_text(dir / "train.toml", "[job]\nname = \"items\"\noutput = \"out\"\n"
                                          "[data]\nsource = \"items.csv\"\nformat = \"table_csv\"\ntarget = \"kind\"\n"
                                          "categorical = [\"colour\"]\nvalid = 0.2\n"
                                          "[model]\narch = \"mlp\"\nhidden = [16]\n[train]\nepochs = 3\nbatch_size = 16\n");
  const auto trained = testing::run_spec_in(dir.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto result = run_command(predict(dir.path(), "--model out/model.pt --data score.csv --out p.jsonl "
                                                      "--id-column item --label-column kind --top-k 5"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string python = R"(
import json, sys, csv, torch
sys.path.insert(0, sys.argv[1])
from predict import encode
model = torch.jit.load("out/model.pt").eval()
rows = list(csv.DictReader(open("score.csv")))
with torch.no_grad():
    p = torch.softmax(model(torch.tensor([encode(model, row) for row in rows])), 1)
worst = 0.0
for row, line, probabilities in zip(rows, open("p.jsonl"), p):
    line = json.loads(line)
    assert line["id"] == row["item"] and line["label"] == row["kind"], (line, row)
    assert len(line["top_k"]) == 2, line
    for top in line["top_k"]:
        worst = max(worst, abs(probabilities[model.class_names.index(top["class"])].item() - top["probability"]))
print(worst)
)";
  testing::write_text(dir / "check.py", python);
  const double worst = std::stod(run_checked("cd " + shell_quote(dir.path().string()) + " && /usr/bin/python3 check.py " +
                                             testing::source_dir() + "/examples/tabular"));
  EXPECT_LT(worst, 1e-5);
  EXPECT_NE(result.output.find("on 120 labelled samples"), std::string::npos) << result.output;
}

TEST_F(Predict, WhatCannotBePredictedIsNamedWithItsExitClass) {
  testing::TempDir dir;
  const std::string python = "import torch\n"
                             "torch.jit.script(torch.nn.Linear(3, 2)).save('plain.pt')\n";
  run_checked("cd " + shell_quote(dir.path().string()) + " && /usr/bin/python3 -c " + shell_quote(python));
  auto result = run_command(predict(dir.path(), "--model plain.pt --data " + valid() + " --out p.csv"));
  EXPECT_EQ(result.exit_code, 6) << result.output;
  EXPECT_NE(result.output.find("plain.pt: the model does not say how its input is made"), std::string::npos)
      << result.output;
  result = run_command(predict(dir.path(), "--model " + model() + " --data missing --out p.csv"));
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_NE(result.output.find("missing: no such file or folder"), std::string::npos) << result.output;
  result = run_command(predict(dir.path(), "--model " + model() + " --data " + valid() + " --out p.csv --id-column x"));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  // A line of an image CSV that does not fit: named by the CSV's file and line.
  const fs::path image = *std::find_if(fs::recursive_directory_iterator(valid()), fs::recursive_directory_iterator(),
                                       [](const fs::directory_entry& entry) { return entry.is_regular_file(); });
  const std::string listed = image.lexically_relative(dir.path()).generic_string();
  testing::write_text(dir / "gone.csv", "image\n" + listed + "\nnone/x.png\n");
  result = run_command(predict(dir.path(), "--model " + model() + " --data gone.csv --out p.csv"));
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_NE(result.output.find("gone.csv:3: no image 'none/x.png'"), std::string::npos) << result.output;
  testing::write_text(dir / "cow.csv", "image,label\n" + listed + ",cow\n");
  result = run_command(predict(dir.path(), "--model " + model() + " --data cow.csv --out p.csv"));
  EXPECT_EQ(result.exit_code, 5) << result.output;
  EXPECT_NE(result.output.find("cow.csv:2: column 'label': 'cow' is not among the training classes"),
            std::string::npos) << result.output;
  result = run_command(predict(dir.path(), "--model " + model() + " --data " + valid()));
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("usage: trainpoint predict"), std::string::npos) << result.output;
  EXPECT_FALSE(fs::exists(dir / "p.csv"));
}

}  // namespace
}  // namespace tp
