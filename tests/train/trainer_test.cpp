#include "train/lr_find.h"
#include "train/trainer.h"

#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "spec/spec.h"
#include "data/labelled_images.h"
#include "model/model.h"
#include "support/ranks_on_threads.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;

// `inputs` and `targets` split 3:1 (chosen by `seed`) into training and validation sets.
data::Datasets split(const torch::Tensor& inputs, const torch::Tensor& targets, std::uint64_t seed) {
  auto all = std::make_shared<data::TensorDataset>(inputs, targets);
  const auto [train_idx, valid_idx] = data::split_indices(static_cast<std::size_t>(inputs.size(0)), 0.25, seed);
  data::Datasets datasets;
  datasets.train = std::make_shared<data::SubsetDataset>(all, train_idx);
  datasets.valid = std::make_shared<data::SubsetDataset>(all, valid_idx);
  datasets.bad_files = std::make_shared<data::BadFiles>(10);
  return datasets;
}

// The position after `epochs` complete epochs, which names a checkpoint.
TrainingPosition after_epochs(std::int64_t epochs) {
  TrainingPosition position;
  position.epochs_done = epochs;
  return position;
}

// What a checkpoint holds after `epochs` complete epochs and `step` optimizer steps.
CheckpointState state_after(std::int64_t epochs, std::int64_t step) {
  CheckpointState state;
  state.position = after_epochs(epochs);
  state.position.step = step;
  return state;
}

// Three Gaussian blobs in 8 dimensions: learnable to high accuracy in a few epochs.
data::Datasets blobs(std::int64_t n, std::uint64_t seed) {
  torch::manual_seed(seed);
  const auto labels = torch::randint(0, 3, {n}, torch::kLong);
  const auto centers = torch::randn({3, 8}) * 3;
  const auto inputs = centers.index_select(0, labels) + torch::randn({n, 8});
  data::Datasets datasets = split(inputs, labels, seed);
  datasets.schema.input_shape = {8};
  datasets.schema.num_outputs = 3;
  datasets.schema.class_names = {"a", "b", "c"};
  return datasets;
}

// The spec's defaults, with a small MLP and settings that train the blobs quickly.
spec::Spec small_spec() {
  spec::Spec spec = spec::load_string("[data]\nsource = \"unused\"\n[model]\narch = \"mlp\"\n", {}, "test").spec;
  spec.job.seed = 1;
  spec.job.output = "out";
  spec.data.workers = 1;
  spec.model.hidden = {16};
  spec.train.epochs = 4;
  spec.train.batch_size = 32;
  spec.train.optimizer = spec::Optimizer::adamw;
  spec.train.lr = 0.01;
  spec.train.weight_decay = 0.0;
  spec.checkpoint.keep = 2;
  return spec;
}

// y = x . w + noise in 8 dimensions, for regression.
data::Datasets line(std::int64_t n, std::uint64_t seed) {
  torch::manual_seed(seed);
  const auto inputs = torch::randn({n, 8});
  const auto targets = inputs.matmul(torch::randn({8})) + 0.1 * torch::randn({n});
  data::Datasets datasets = split(inputs, targets, seed);
  datasets.schema.input_shape = {8};
  datasets.schema.num_outputs = 1;
  datasets.schema.classification = false;
  return datasets;
}

std::vector<nlohmann::json> read_metrics(const fs::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(Trainer, LossFallsToTargetAndOutputsAreWritten) {
  testing::TempDir dir;
  const auto data = blobs(600, 5);
  data.bad_files->report("data/b/broken.png", "not a PNG file");
  const auto spec = small_spec();
  auto model = model::create(spec.model, data.schema, ".", 1);
  auto single = dist::single_process();
  FitEnvironment environment;
  std::vector<fs::path> published, withdrawn;
  environment.publish = [&](const fs::path& file) { published.push_back(file); };
  environment.withdraw = [&](const fs::path& file) { withdrawn.push_back(file); };
  const auto result =
      fit(model, data, spec, *single, dir / "out", {"repo", "main", "abc123", "train.toml", ""}, environment);
  EXPECT_EQ(result.epochs_run, 4);
  EXPECT_LT(result.last.train_loss, 0.3);
  EXPECT_GT(result.last.valid_accuracy, 0.9);
  const auto metrics = read_metrics(dir / "out/metrics.jsonl");
  ASSERT_EQ(metrics.size(), 4u);
  EXPECT_LT(metrics.back()["train_loss"].get<double>(), metrics.front()["train_loss"].get<double>());
  EXPECT_DOUBLE_EQ(metrics.back()["error_rate"].get<double>(), 1.0 - metrics.back()["accuracy"].get<double>());
  EXPECT_TRUE(metrics.back()["top_k_accuracy"].is_null()) << "3 classes: top-5 accuracy says nothing";
  EXPECT_TRUE(metrics.back()["mae"].is_null());
  // 450 training samples in batches of 32: 15 steps per epoch, each recorded.
  const auto steps = read_metrics(dir / "out/steps.jsonl");
  ASSERT_EQ(steps.size(), 60u);
  EXPECT_EQ(steps.back()["step"], 60);
  EXPECT_EQ(metrics.back()["step"], 60);
  EXPECT_GT(steps.front()["train_loss"].get<double>(), steps.back()["train_loss"].get<double>());
  EXPECT_TRUE(fs::exists(dir / "out/report.html"));
  EXPECT_TRUE(fs::exists(dir / "out/model.pt"));
  auto reloaded = torch::jit::load((dir / "out/model.pt").string());
  EXPECT_EQ(reloaded.forward({torch::randn({2, 8})}).toTensor().size(1), 3);
  std::ifstream record_file(dir / "out/run.json");
  const auto record = nlohmann::json::parse(record_file);
  EXPECT_EQ(record["source"]["commit"], "abc123");
  EXPECT_EQ(record["final"]["epoch"], 4);
  EXPECT_EQ(record["final"]["error_rate"].get<double>(), metrics.back()["error_rate"].get<double>());
  EXPECT_EQ(record["data"]["bad_files"], nlohmann::json::array({"data/b/broken.png"}));
  // keep = 2: only the two newest checkpoints remain.
  EXPECT_FALSE(fs::exists(checkpoint_path(dir / "out/checkpoints", after_epochs(2))));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir / "out/checkpoints", after_epochs(3))));
  EXPECT_TRUE(fs::exists(checkpoint_path(dir / "out/checkpoints", after_epochs(4))));
  // Each checkpoint was published; the pruned ones were withdrawn after their successors were published.
  const fs::path first = checkpoint_path(dir / "out/checkpoints", after_epochs(1));
  EXPECT_EQ(std::count(published.begin(), published.end(), first), 1);
  EXPECT_EQ(withdrawn, (std::vector<fs::path>{first, checkpoint_path(dir / "out/checkpoints", after_epochs(2))}));
}

// small_spec with SGD at a constant lr and no loader threads: for runs compared with a straight run.
spec::Spec resumable_spec() {
  spec::Spec spec = small_spec();
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.schedule = spec::Schedule::constant;
  spec.data.workers = 0;
  return spec;
}

TEST(Trainer, ResumeContinuesFromTheLastCheckpointAndMatchesAStraightRun) {
  testing::TempDir dir;
  const auto data = blobs(300, 6);
  auto spec = resumable_spec();
  auto single = dist::single_process();

  auto straight = model::create(spec.model, data.schema, ".", 1);
  fit(straight, data, spec, *single, dir / "straight", {});

  auto first = model::create(spec.model, data.schema, ".", 1);
  auto half = spec;
  half.train.epochs = 2;
  fit(first, data, half, *single, dir / "resumed", {});
  // A new process: fresh weights, then resume from the checkpoint after epoch 2.
  auto second = model::create(spec.model, data.schema, ".", 99);
  const auto result = fit(second, data, spec, *single, dir / "resumed", {});
  EXPECT_EQ(result.epochs_run, 2);
  const auto a = straight.parameters();
  const auto b = second.parameters();
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    EXPECT_TRUE(torch::allclose(*ia, *ib, 1e-6, 1e-7));
  }
  EXPECT_EQ(read_metrics(dir / "resumed/metrics.jsonl").size(), 4u);
}

// Files in a directory, by name.
std::vector<std::string> names_in(const fs::path& directory) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(directory)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Two ranks on threads of this process (an in-process group), each on its own node: rank 0 writes the
// outputs, and both keep checkpoints on their own disk (rank 1 as a node's copy). Returns each rank's
// result and parameters; both models start from the same seed, made here, off the ranks' threads.
struct TwoRanksRun {
  std::vector<FitResult> results{2};
  std::vector<std::vector<torch::Tensor>> parameters{2};
};
TwoRanksRun fit_on_two_ranks(const data::Datasets& data, const spec::Spec& spec, const fs::path& run) {
  std::vector<torch::jit::Module> models{model::create(spec.model, data.schema, ".", 1),
                                         model::create(spec.model, data.schema, ".", 1)};
  TwoRanksRun done;
  testing::on_ranks(2, [&](dist::Communicator& communicator) {
    const auto rank = static_cast<std::size_t>(communicator.rank());
    FitEnvironment environment;
    environment.local_rank = communicator.rank();
    environment.checkpoints_root = run / fmt::format("node{}", rank) / "checkpoints";
    environment.node_copy = rank > 0;
    done.results[rank] = fit(models[rank], data, spec, communicator, run / "out", {}, environment);
    for (const auto& parameter : models[rank].parameters()) done.parameters[rank].push_back(parameter);
  });
  return done;
}

TEST(Trainer, OnTwoRanksTheNewestCheckpointReachesTheRankThatLostItsOwnAndTheResumeMatchesAStraightRun) {
  testing::TempDir dir;
  const auto data = blobs(300, 6);
  auto spec = resumable_spec();
  spec.train.epochs = 3;
  const TwoRanksRun straight = fit_on_two_ranks(data, spec, dir / "straight");

  auto first_two = spec;
  first_two.train.epochs = 2;
  fit_on_two_ranks(data, first_two, dir / "resumed");
  fs::remove_all(dir / "resumed/node0/checkpoints");  // rank 0's node lost its disk
  const TwoRanksRun resumed = fit_on_two_ranks(data, spec, dir / "resumed");

  for (std::size_t rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(resumed.results[rank].epochs_run, 1) << "rank " << rank;
    ASSERT_EQ(resumed.parameters[rank].size(), straight.parameters[0].size());
    for (std::size_t i = 0; i < straight.parameters[0].size(); ++i) {
      EXPECT_TRUE(torch::equal(straight.parameters[rank][i], straight.parameters[0][i])) << "rank " << rank;
      EXPECT_TRUE(torch::equal(resumed.parameters[rank][i], straight.parameters[0][i])) << "rank " << rank;
    }
  }
  // Rank 0 stored the checkpoint it received (after epoch 2) beside the one it wrote after epoch 3.
  const std::vector<std::string> kept = names_in(dir / "resumed/node0/checkpoints");
  EXPECT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept, names_in(dir / "resumed/node1/checkpoints"));
  EXPECT_EQ(read_metrics(dir / "resumed/out/metrics.jsonl").size(), 3u);
}

// Each rank reads only its own losses; the read point's all-reduce tells the others. Rank 1's inputs are
// all NaN (as a rank's own share of sharded data could be), so its first loss is NaN and rank 0's is not.
TEST(Trainer, ALossThatBecomesNanOnOneRankFailsEveryRankAtTheSameReadPoint) {
  testing::TempDir dir;
  const auto data = blobs(200, 8);
  data::Datasets poisoned = blobs(200, 8);
  poisoned.train = std::make_shared<data::TensorDataset>(torch::full({150, 8}, NAN), torch::zeros({150}, torch::kLong));
  const auto spec = resumable_spec();
  std::vector<torch::jit::Module> models{model::create(spec.model, data.schema, ".", 1),
                                         model::create(spec.model, data.schema, ".", 1)};
  const auto errors = testing::run_ranks(2, [&](dist::Communicator& communicator) {
    const auto rank = static_cast<std::size_t>(communicator.rank());
    FitEnvironment environment;
    environment.local_rank = communicator.rank();
    fit(models[rank], rank == 0 ? data : poisoned, spec, communicator, dir / "out", {}, environment);
  });
  std::vector<std::string> messages;
  for (const auto& error : errors) {
    try {
      if (error) std::rethrow_exception(error);
      ADD_FAILURE() << "a rank finished training";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::training) << e.what();
      messages.emplace_back(e.what());
    }
  }
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_NE(messages[0].find("another rank's loss became nan or inf by epoch 1 step 1:"), std::string::npos)
      << messages[0];
  EXPECT_NE(messages[1].find("epoch 1"), std::string::npos) << messages[1];
  EXPECT_EQ(messages[1].find("another rank"), std::string::npos) << messages[1];
  EXPECT_FALSE(fs::exists(dir / "out/model.pt"));
  EXPECT_FALSE(fs::exists(dir / "out/run.json"));
}

TEST(Trainer, AccumulatingTwoHalfBatchesEqualsOneFullBatch) {
  testing::TempDir dir;
  const auto data = blobs(256, 9);
  auto spec = small_spec();
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.schedule = spec::Schedule::constant;
  spec.train.epochs = 2;
  spec.data.workers = 0;
  auto single = dist::single_process();
  auto full = model::create(spec.model, data.schema, ".", 1);
  fit(full, data, spec, *single, dir / "full", {});
  auto accumulated_spec = spec;
  accumulated_spec.train.batch_size = 16;
  accumulated_spec.train.accumulate = 2;
  auto accumulated = model::create(spec.model, data.schema, ".", 1);
  fit(accumulated, data, accumulated_spec, *single, dir / "accumulated", {});
  const auto a = full.parameters();
  const auto b = accumulated.parameters();
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) EXPECT_TRUE(torch::allclose(*ia, *ib, 1e-5, 1e-6));
  std::ifstream csv(dir / "full/metrics.csv");
  std::string header;
  std::getline(csv, header);
  EXPECT_EQ(header, "epoch,step,lr,train_loss,valid_loss,accuracy,error_rate,top_k_accuracy,mae,mse,seconds,f1");
}

TEST(Trainer, TopKAccuracyIsReportedWithMoreClassesThanK) {
  testing::TempDir dir;
  const auto data = blobs(300, 11);
  auto spec = small_spec();
  spec.train.epochs = 1;
  spec.train.lr = 1e-4;  // barely trained, so that top-1 and top-2 differ
  spec.train.top_k = 2;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  const auto result = fit(model, data, spec, *single, dir / "out", {});
  EXPECT_GT(result.last.top_k_accuracy, result.last.valid_accuracy);
  EXPECT_LE(result.last.top_k_accuracy, 1.0);
  const auto metrics = read_metrics(dir / "out/metrics.jsonl");
  EXPECT_DOUBLE_EQ(metrics.back()["top_k_accuracy"].get<double>(), result.last.top_k_accuracy);
}

TEST(Trainer, RegressionReportsMaeAndMse) {
  testing::TempDir dir;
  const auto data = line(400, 12);
  auto spec = small_spec();
  spec.train.epochs = 6;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  const auto result = fit(model, data, spec, *single, dir / "out", {});
  EXPECT_DOUBLE_EQ(result.last.mse, result.last.valid_loss);
  EXPECT_GT(result.last.mae, 0.0);
  EXPECT_LE(result.last.mae * result.last.mae, result.last.mse + 1e-12) << "MAE^2 <= MSE";
  const auto metrics = read_metrics(dir / "out/metrics.jsonl");
  EXPECT_LT(metrics.back()["mae"].get<double>(), metrics.front()["mae"].get<double>());
  EXPECT_TRUE(metrics.back()["accuracy"].is_null());
  EXPECT_TRUE(metrics.back()["error_rate"].is_null());
  std::ifstream record_file(dir / "out/run.json");
  const auto record = nlohmann::json::parse(record_file);
  EXPECT_DOUBLE_EQ(record["final"]["mae"].get<double>(), result.last.mae);
}

TEST(Trainer, ClippingBoundsTheStepAndLabelSmoothingRaisesTheLoss) {
  testing::TempDir dir;
  const auto data = blobs(128, 10);
  auto spec = small_spec();
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.momentum = 0.0;
  spec.train.schedule = spec::Schedule::constant;
  spec.train.lr = 1.0;
  spec.train.epochs = 1;
  spec.train.batch_size = 128;
  spec.train.clip_norm = 1e-3;
  spec.data.workers = 0;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  std::vector<torch::Tensor> before;
  for (const auto& p : model.parameters()) before.push_back(p.detach().clone());
  fit(model, data, spec, *single, dir / "clipped", {});
  double moved = 0;
  std::size_t i = 0;
  for (const auto& p : model.parameters()) moved += (p.detach() - before[i++]).pow(2).sum().item<double>();
  // One SGD step of lr 1 on gradients clipped to norm 1e-3 moves the weights by exactly that norm.
  EXPECT_NEAR(std::sqrt(moved), 1e-3, 1e-6);

  spec.train.clip_norm = 0;
  spec.train.lr = 1e-9;
  auto plain = model::create(spec.model, data.schema, ".", 1);
  const auto plain_result = fit(plain, data, spec, *single, dir / "plain", {});
  spec.train.label_smoothing = 0.3;
  auto smoothed = model::create(spec.model, data.schema, ".", 1);
  const auto smoothed_result = fit(smoothed, data, spec, *single, dir / "smoothed", {});
  EXPECT_NE(plain_result.last.train_loss, smoothed_result.last.train_loss);
}

std::map<std::string, torch::Tensor> snapshot(const torch::jit::Module& model) {
  std::map<std::string, torch::Tensor> values;
  for (const auto& p : model.named_parameters()) values[p.name] = p.value.detach().clone();
  return values;
}

TEST(Trainer, NesterovMomentumTrainsDifferentlyFromPlainMomentum) {
  testing::TempDir dir;
  const auto data = blobs(300, 15);
  auto spec = small_spec();
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.lr = 0.05;
  spec.train.epochs = 3;
  auto single = dist::single_process();
  auto plain = model::create(spec.model, data.schema, ".", 1);
  fit(plain, data, spec, *single, dir / "plain", {});
  spec.train.nesterov = true;
  auto nesterov = model::create(spec.model, data.schema, ".", 1);
  const auto result = fit(nesterov, data, spec, *single, dir / "nesterov", {});
  EXPECT_GT(result.last.valid_accuracy, 0.9);
  EXPECT_FALSE(torch::allclose(*plain.parameters().begin(), *nesterov.parameters().begin()));
}

TEST(Trainer, FineTuneTrainsOnlyTheHeadWhileFrozenThenEverythingAfterResume) {
  testing::TempDir dir;
  const auto data = blobs(300, 13);
  auto spec = small_spec();
  spec.train.freeze_epochs = 1;
  spec.train.epochs = 1;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  const auto initial = snapshot(model);
  fit(model, data, spec, *single, dir / "out", {});
  const auto frozen = snapshot(model);
  for (const auto& [name, value] : frozen) {
    const bool head = name.rfind("head.", 0) == 0;
    EXPECT_EQ(torch::equal(value, initial.at(name)), !head) << name << (head ? " must train" : " must stay frozen");
  }

  // A new process resumes after the frozen epoch: the rest trains everything.
  spec.train.epochs = 3;
  auto resumed = model::create(spec.model, data.schema, ".", 99);
  const auto result = fit(resumed, data, spec, *single, dir / "out", {});
  EXPECT_EQ(result.epochs_run, 2);
  for (const auto& [name, value] : snapshot(resumed)) {
    EXPECT_FALSE(torch::equal(value, frozen.at(name))) << name << " must train after the frozen epochs";
  }
  EXPECT_GT(result.last.valid_accuracy, 0.9);
  // Each phase has its own one-cycle schedule: both start at lr/25 (225 samples / 32: 8 steps per epoch).
  const auto steps = read_metrics(dir / "out/steps.jsonl");
  ASSERT_EQ(steps.size(), 24u);
  EXPECT_NEAR(steps[0]["lr"].get<double>(), 0.01 / 25, 1e-12);
  EXPECT_NEAR(steps[8]["lr"].get<double>(), 0.01 / 25, 1e-12);
  EXPECT_GT(steps[12]["lr"].get<double>(), 0.005);
}

TEST(Trainer, Bf16AutocastTrainsAndDiffersFromFp32) {
  testing::TempDir dir;
  const auto data = blobs(400, 14);
  auto spec = small_spec();
  spec.train.epochs = 3;
  auto single = dist::single_process();
  auto full = model::create(spec.model, data.schema, ".", 1);
  fit(full, data, spec, *single, dir / "fp32", {});
  spec.train.precision = spec::Precision::bf16;
  auto half = model::create(spec.model, data.schema, ".", 1);
  const auto result = fit(half, data, spec, *single, dir / "bf16", {});
  const auto metrics = read_metrics(dir / "bf16/metrics.jsonl");
  EXPECT_LT(metrics.back()["train_loss"].get<double>(), 0.5 * metrics.front()["train_loss"].get<double>());
  EXPECT_GT(result.last.valid_accuracy, 0.9);
  EXPECT_FALSE(torch::allclose(*full.parameters().begin(), *half.parameters().begin(), 1e-5, 1e-6))
      << "bf16 rounding must show: autocast was not applied";
  for (const auto& p : half.parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat) << "weights stay fp32";
}

// Images (grayscale 8x8 unless asked) whose class is the brighter half (top or bottom): learnable by a small CNN.
data::Datasets halves(std::int64_t n, std::uint64_t seed, std::int64_t channels = 1, std::int64_t side = 8) {
  torch::manual_seed(seed);
  const auto labels = torch::randint(0, 2, {n}, torch::kLong);
  auto inputs = torch::randn({n, channels, side, side}) * 0.5;
  const auto bright = labels.to(torch::kFloat).view({n, 1, 1, 1});
  inputs.narrow(2, 0, side / 2).add_(bright);
  inputs.narrow(2, side / 2, side - side / 2).add_(1 - bright);
  data::Datasets datasets = split(inputs, labels, seed);
  datasets.schema.input_shape = {channels, side, side};
  datasets.schema.num_outputs = 2;
  datasets.schema.class_names = {"bottom", "top"};
  return datasets;
}

TEST(Trainer, BuiltInConvNetsTrainInChannelsLastByDefaultWithTheSameResult) {
  testing::TempDir dir;
  const auto data = halves(256, 21);
  auto spec = small_spec();
  spec.model.arch = "small_cnn";
  spec.train.epochs = 2;
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.momentum = 0.9;
  spec.train.lr = 0.05;
  auto single = dist::single_process();
  ASSERT_EQ(spec.train.channels_last, "auto");
  auto nhwc = model::create(spec.model, data.schema, ".", 1);
  const auto result = fit(nhwc, data, spec, *single, dir / "auto", {});
  spec.train.channels_last = "false";
  auto nchw = model::create(spec.model, data.schema, ".", 1);
  fit(nchw, data, spec, *single, dir / "false", {});

  const auto nhwc_weights = snapshot(nhwc), nchw_weights = snapshot(nchw);
  const auto& conv = nhwc_weights.at("conv2.weight");
  EXPECT_TRUE(conv.is_contiguous(at::MemoryFormat::ChannelsLast)) << "auto must pick channels_last for small_cnn";
  EXPECT_FALSE(conv.is_contiguous()) << "auto must pick channels_last for small_cnn";
  EXPECT_TRUE(nchw_weights.at("conv2.weight").is_contiguous());
  // One input channel: NCHW strides would pass for NHWC too, but the convolution would then run NCHW.
  EXPECT_EQ(nhwc_weights.at("conv1.weight").stride(1), 1);
  EXPECT_EQ(nchw_weights.at("conv1.weight").stride(1), 9);
  // The same arithmetic in another order: equal up to float rounding after 12 steps.
  for (const auto& [name, value] : nchw_weights) {
    EXPECT_TRUE(torch::allclose(nhwc_weights.at(name), value, 1e-3, 1e-5)) << name;
  }
  EXPECT_GT(result.last.valid_accuracy, 0.9);
  // The saved model takes ordinary (NCHW) inputs and predicts as the trained one.
  auto saved = torch::jit::load((dir / "auto/model.pt").string());
  saved.eval();
  nhwc.eval();
  const auto images = torch::randn({4, 1, 8, 8});
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(saved.forward({images}).toTensor(), nhwc.forward({images}).toTensor(), 1e-5, 1e-6));
}

// ResNet-18 on small images trains its last stage in NCHW and the rest in channels_last on the CPU (the faster
// layout of each, model::kept_nchw_on_cpu): the same arithmetic as all-NCHW up to float rounding. (Not on 8x8
// grayscale images: there PyTorch's own float32 gradients are 8% from float64's in NCHW and within 1e-5 in
// channels_last, or the reverse, as the weights fall; a 32x32 RGB batch is well conditioned in both.)
TEST(Trainer, ResNet18OnSmallImagesTrainsItsLastStageInNchwAndTheRestInChannelsLast) {
  testing::TempDir dir;
  const auto data = halves(64, 23, 3, 32);
  auto spec = small_spec();
  spec.model.arch = "resnet18";
  spec.train.epochs = 1;
  spec.train.batch_size = 16;
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.momentum = 0.9;
  spec.train.lr = 0.01;
  auto single = dist::single_process();
  auto mixed = model::create(spec.model, data.schema, ".", 1);
  fit(mixed, data, spec, *single, dir / "auto", {});
  spec.train.channels_last = "false";
  auto nchw = model::create(spec.model, data.schema, ".", 1);
  fit(nchw, data, spec, *single, dir / "false", {});

  const auto mixed_weights = snapshot(mixed), nchw_weights = snapshot(nchw);
  for (const char* name : {"layer1.0.conv1.weight", "layer3.1.conv2.weight"}) {
    EXPECT_TRUE(mixed_weights.at(name).is_contiguous(at::MemoryFormat::ChannelsLast)) << name;
    EXPECT_FALSE(mixed_weights.at(name).is_contiguous()) << name;
  }
  for (const char* name : {"layer4.0.conv1.weight", "layer4.1.conv2.weight", "layer4.0.downsample.0.weight"}) {
    EXPECT_TRUE(mixed_weights.at(name).is_contiguous()) << name;
  }
  // The updates of 3 steps agree as float rounding lets them: 2e-3 of their size here (by global norm), where a
  // wrong computation would be of their size.
  const auto initial = snapshot(model::create(spec.model, data.schema, ".", 1));
  double difference = 0, update = 0;
  for (const auto& [name, value] : nchw_weights) {
    difference += (mixed_weights.at(name) - value).pow(2).sum().item<double>();
    update += (value - initial.at(name)).pow(2).sum().item<double>();
  }
  ASSERT_GT(update, 0);
  EXPECT_LT(std::sqrt(difference / update), 0.02);
}

TEST(Trainer, Fp16WithoutCudaIsAUsageError) {
  testing::TempDir dir;
  const auto data = blobs(100, 16);
  auto spec = small_spec();
  spec.train.precision = spec::Precision::fp16;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  try {
    fit(model, data, spec, *single, dir / "out", {});
    FAIL() << "expected a usage error";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage);
    EXPECT_NE(std::string(error.what()).find("train.precision = fp16 needs a CUDA device"), std::string::npos)
        << error.what();
  }
}

TEST(Trainer, LrFindSweepsExponentiallyStopsWhenTheLossBlowsUpAndItsSuggestionTrains) {
  testing::TempDir dir;
  const auto data = blobs(2000, 17);  // 47 steps per epoch: the sweep spans epochs
  auto spec = small_spec();
  spec.train.optimizer = spec::Optimizer::sgd;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  const auto result = find_learning_rate(model, data, spec, *single, dir / "out");
  ASSERT_GT(result.points.size(), 50u);
  EXPECT_LT(result.points.size(), 100u) << "plain SGD diverges before lr 10";
  EXPECT_DOUBLE_EQ(result.points[0].lr, 1e-7);
  const double growth = std::pow(1e8, 1.0 / 99);
  for (std::size_t i = 1; i < result.points.size(); ++i) {
    EXPECT_NEAR(result.points[i].lr / result.points[i - 1].lr, growth, 1e-9);
  }
  EXPECT_GT(result.points.back().smoothed_loss, 4 * result.points[result.points.size() / 2].smoothed_loss);
  EXPECT_GT(result.suggested_lr, 1e-4);
  EXPECT_LT(result.suggested_lr, 1.0);
  EXPECT_LT(result.steepest_lr, result.points.back().lr);
  EXPECT_EQ(read_metrics(dir / "out/lr_find.jsonl").size(), result.points.size());
  EXPECT_TRUE(fs::exists(dir / "out/lr_find.html"));
  EXPECT_FALSE(fs::exists(dir / "out/model.pt"));

  spec.train.lr = result.suggested_lr;
  spec.train.epochs = 2;
  auto trained = model::create(spec.model, data.schema, ".", 1);
  EXPECT_GT(fit(trained, data, spec, *single, dir / "trained", {}).last.valid_accuracy, 0.9);
}

TEST(Trainer, CorruptedNewestCheckpointIsSkipped) {
  testing::TempDir dir;
  const auto data = blobs(200, 7);
  auto spec = small_spec();
  spec.train.epochs = 2;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  fit(model, data, spec, *single, dir / "out", {});
  testing::write_text(checkpoint_path(dir / "out/checkpoints", after_epochs(2)), "truncated");
  auto fresh = model::create(spec.model, data.schema, ".", 1);
  spec.train.epochs = 3;
  const auto result = fit(fresh, data, spec, *single, dir / "out", {});
  EXPECT_EQ(result.epochs_run, 2) << "resumed after epoch 1, the newest valid checkpoint";
}

// A checkpoint that cannot be written (here: past a file-size limit, EFBIG; the fault suite fills a real
// disk) is an error naming the intact previous checkpoint, not an abort, and leaves no temporary file.
TEST(Trainer, ACheckpointThatCannotBeWrittenFailsClearlyAndKeepsThePreviousOne) {
  testing::TempDir dir;
  const auto data = blobs(200, 7);
  auto spec = small_spec();
  spec.train.epochs = 1;
  auto single = dist::single_process();
  auto model = model::create(spec.model, data.schema, ".", 1);
  fit(model, data, spec, *single, dir / "out", {});
  const fs::path checkpoints = dir / "out/checkpoints";
  const fs::path previous = checkpoint_path(checkpoints, after_epochs(1));
  ASSERT_TRUE(fs::exists(previous));
  std::vector<torch::Tensor> parameters;
  for (const auto& parameter : model.parameters()) parameters.push_back(parameter);
  const torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.1));

  rlimit old_limit{};
  getrlimit(RLIMIT_FSIZE, &old_limit);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old_limit;
  small.rlim_cur = 1024;
  setrlimit(RLIMIT_FSIZE, &small);
  std::string message;
  ExitCode code = ExitCode::ok;
  try {
    save_checkpoint(checkpoint_path(checkpoints, after_epochs(2)), model, optimizer, state_after(2, 10));
  } catch (const Error& error) {
    message = error.what();
    code = error.code();
  }
  setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);

  EXPECT_EQ(code, ExitCode::output) << message;
  EXPECT_NE(message.find("checkpoint not saved"), std::string::npos) << message;
  EXPECT_NE(message.find("the previous checkpoint " + previous.string() + " is intact"), std::string::npos)
      << message;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(checkpoints)) left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{previous.filename().string()}) << "no temporary file stays";
}

// Loading is all or nothing: a checkpoint whose optimizer state does not fit this optimizer (written with
// SGD, loaded into AdamW) changes neither the model nor the optimizer, which trains on as before.
TEST(Checkpoint, WhoseOptimizerStateDoesNotLoadLeavesTheModelAndTheOptimizerAsTheyWere) {
  testing::TempDir dir;
  const auto data = blobs(64, 9);
  const auto spec = small_spec();
  const auto step = [&](torch::jit::Module& model, torch::optim::Optimizer& optimizer) {
    optimizer.zero_grad();
    const auto inputs = data.train->get(0, 0).input.unsqueeze(0);
    model.forward({inputs}).toTensor().pow(2).sum().backward();
    optimizer.step();
  };
  const auto parameters_of = [](const torch::jit::Module& model) {
    std::vector<torch::Tensor> parameters;
    for (const auto& parameter : model.parameters()) parameters.push_back(parameter);
    return parameters;
  };
  auto written = model::create(spec.model, data.schema, ".", 1);
  torch::optim::SGD sgd(parameters_of(written), torch::optim::SGDOptions(0.1).momentum(0.9));
  step(written, sgd);
  const fs::path file = checkpoint_path(dir.path(), after_epochs(1));
  save_checkpoint(file, written, sgd, state_after(1, 1));

  auto model = model::create(spec.model, data.schema, ".", 2);
  torch::optim::AdamW adamw(parameters_of(model), torch::optim::AdamWOptions(0.01));
  step(model, adamw);
  std::vector<torch::Tensor> before;
  for (const auto& parameter : parameters_of(model)) before.push_back(parameter.detach().clone());
  const std::size_t state_before = adamw.state().size();

  const auto checkpoint = newest_checkpoint(dir.path());
  ASSERT_TRUE(checkpoint);
  try {
    apply_checkpoint(*checkpoint, model, adamw);
    FAIL() << "an SGD state loaded into AdamW";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::model);
    EXPECT_NE(std::string(error.what()).find("left as they were"), std::string::npos) << error.what();
  }
  const auto after = parameters_of(model);
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(before[i], after[i])) << "parameter " << i;
  EXPECT_EQ(adamw.state().size(), state_before);
  step(model, adamw);  // the optimizer still works: its state is its own
  EXPECT_FALSE(torch::equal(before[0], parameters_of(model)[0]));
}

TEST(Trainer, DivergingRunFailsClearlyAndLeavesNoFinalOutputs) {
  testing::TempDir dir;
  const auto data = blobs(200, 8);
  auto spec = small_spec();
  spec.train.optimizer = spec::Optimizer::sgd;
  spec.train.schedule = spec::Schedule::constant;
  spec.train.lr = 10.0;
  spec.train.momentum = 0.99;
  spec.model.hidden = {256, 256};
  auto model = model::create(spec.model, data.schema, ".", 1);
  for (auto parameter : model.parameters()) parameter.data().mul_(1e18);
  auto single = dist::single_process();
  try {
    fit(model, data, spec, *single, dir / "out", {});
    FAIL() << "expected the run to fail";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::training);
    EXPECT_NE(std::string(error.what()).find("lower train.lr"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(dir / "out/model.pt"));
  EXPECT_FALSE(fs::exists(dir / "out/run.json"));
}

}  // namespace
}  // namespace tp::train
