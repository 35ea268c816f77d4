// Training on a GPU (label gpu: scripts/gpu-check runs these on the GPU machine; a machine without a GPU
// fails them, so CPU test runs leave the label out): the model placed and trained on the GPU, autocast in
// bf16 and fp16 with loss scaling, channels_last, pinned batches copied without blocking, checkpoints moving
// between the GPU and the CPU, the foreach SGD's multi-tensor kernels, GPU memory in /metrics, and step times
// from CUDA events that never make the host wait for the GPU.
#include <ATen/cuda/Sleep.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <fstream>
#include <limits>
#include <numeric>
#include <nlohmann/json.hpp>

#include "data/labelled_images.h"
#include "model/model.h"
#include "spec/spec.h"
#include "support/background_process.h"
#include "support/http.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/foreach_sgd.h"
#include "train/gpu_step_time.h"
#include "train/monitor.h"
#include "train/precision.h"
#include "train/trainer.h"
#include "train/training_step.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
const c10::Device kGpu(c10::kCUDA, 0);

class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(torch::cuda::is_available()) << "no GPU visible: these tests run on the GPU machine only "
                                                "(scripts/gpu-check); CPU runs leave out the label gpu";
  }
};

// 3x16x16 images whose class (0-3) is the brighter quadrant, split 3:1 into training and validation.
data::Datasets quadrants(std::int64_t n) {
  torch::manual_seed(7);
  const auto labels = torch::randint(0, 4, {n}, torch::kLong);
  auto inputs = torch::randn({n, 3, 16, 16}) * 0.5;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t label = labels[i].item<std::int64_t>();
    inputs[i].narrow(1, label / 2 * 8, 8).narrow(2, label % 2 * 8, 8).add_(1.5);
  }
  auto all = std::make_shared<data::TensorDataset>(inputs, labels);
  const auto [train, valid] = data::split_indices(static_cast<std::size_t>(n), 0.25, 7);
  data::Datasets datasets;
  datasets.train = std::make_shared<data::SubsetDataset>(all, train);
  datasets.valid = std::make_shared<data::SubsetDataset>(all, valid);
  datasets.bad_files = std::make_shared<data::BadFiles>(10);
  datasets.schema.input_shape = {3, 16, 16};
  datasets.schema.num_outputs = 4;
  datasets.schema.class_names = {"a", "b", "c", "d"};
  return datasets;
}

spec::Spec cnn_spec(const std::string& precision = "fp32") {
  spec::Spec spec = spec::load_string("[data]\nsource = \"unused\"\n[model]\narch = \"small_cnn\"\n[train]\n"
                                      "epochs = 3\nbatch_size = 32\noptimizer = \"sgd\"\nlr = 0.05\n"
                                      "precision = \"" + precision + "\"\n",
                                      {}, "test")
                          .spec;
  spec.job.seed = 1;
  spec.data.workers = 1;
  return spec;
}

std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

FitResult fit_on_gpu(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                     const fs::path& output) {
  FitEnvironment environment;
  environment.device = kGpu;
  auto single = dist::single_process();
  return fit(model, data, spec, *single, output, {"repo", "main", "abc123", "train.toml", ""}, environment);
}

TEST_F(Gpu, TheModelTrainsOnTheGpuAndIsSavedForTheCpuWithStepTimesThatAddUp) {
  testing::TempDir dir;
  const auto data = quadrants(512);
  const auto spec = cnn_spec();
  auto model = model::create(spec.model, data.schema, ".", 1);
  const auto result = fit_on_gpu(model, data, spec, dir / "out");
  EXPECT_GT(result.last.valid_accuracy, 0.9);
  auto saved = torch::jit::load((dir / "out/model.pt").string());
  for (const auto& parameter : saved.parameters()) EXPECT_TRUE(parameter.device().is_cpu());
  saved.eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(saved.forward({torch::randn({2, 3, 16, 16})}).toTensor().size(1), 4);

  // 384 training samples in batches of 32: 12 steps an epoch, each timed on the GPU.
  const auto steps = read_lines(dir / "out/steps.jsonl");
  ASSERT_EQ(steps.size(), 36u);
  for (const auto& step : steps) {
    double parts = 0;
    for (const char* part : {"data_wait_s", "forward_backward_s", "allreduce_s", "optimizer_s", "checkpoint_s"}) {
      ASSERT_TRUE(step.contains(part)) << step.dump();
      EXPECT_GE(step[part].get<double>(), 0.0) << step.dump();
      parts += step[part].get<double>();
    }
    EXPECT_NEAR(parts, step["step_s"].get<double>(), 1e-4 + 1e-3 * parts) << step.dump();
    EXPECT_GT(step["forward_backward_s"].get<double>(), 0.0) << step.dump();
  }
}

TEST_F(Gpu, Bf16AndFp16AutocastTrainWithFp32Weights) {
  testing::TempDir dir;
  const auto data = quadrants(512);
  for (const std::string precision : {"bf16", "fp16"}) {
    const auto spec = cnn_spec(precision);
    auto model = model::create(spec.model, data.schema, ".", 1);
    const auto result = fit_on_gpu(model, data, spec, dir / precision);
    EXPECT_GT(result.last.valid_accuracy, 0.9) << precision;
    for (const auto& parameter : model.parameters()) EXPECT_EQ(parameter.scalar_type(), torch::kFloat) << precision;
  }
}

TEST_F(Gpu, Fp16LossScalingSkipsAnOverflowedStepAndUnscalesTheOthers) {
  LossScaler scaler;
  auto parameter = torch::zeros({2}, torch::TensorOptions(kGpu).requires_grad(true));
  parameter.mutable_grad() = torch::tensor({65536.0f, 2 * 65536.0f}, torch::TensorOptions(kGpu));
  ASSERT_TRUE(scaler.unscale({parameter}));
  EXPECT_TRUE(torch::equal(parameter.grad().cpu(), torch::tensor({1.0f, 2.0f})));
  parameter.mutable_grad() = torch::tensor({1.0f, std::numeric_limits<float>::infinity()}, torch::TensorOptions(kGpu));
  EXPECT_FALSE(scaler.unscale({parameter}));
  EXPECT_EQ(scaler.scale(), 32768.0);
}

TEST_F(Gpu, ChannelsLastWeightsAndBatchesOnTheGpu) {
  const auto data = quadrants(64);
  const auto spec = cnn_spec();
  ASSERT_TRUE(uses_channels_last(spec));
  auto model = model::create(spec.model, data.schema, ".", 1);
  const Parameters placed = place_model(model, spec, kGpu);
  for (std::size_t i = 0; i < placed.tensors.size(); ++i) {
    EXPECT_TRUE(placed.tensors[i].is_cuda()) << placed.names[i];
    if (placed.tensors[i].dim() == 4) {
      EXPECT_TRUE(placed.tensors[i].is_contiguous(at::MemoryFormat::ChannelsLast)) << placed.names[i];
    }
  }
  data::Batch batch{torch::randn({8, 3, 16, 16}), torch::zeros({8}, torch::kLong)};
  const auto on_gpu = on_device(batch, kGpu, true);
  EXPECT_TRUE(on_gpu.inputs.is_cuda());
  EXPECT_TRUE(on_gpu.inputs.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::equal(on_gpu.inputs.cpu(), batch.inputs));
}

TEST_F(Gpu, BatchesArePinnedAndCopiedToTheGpuWithoutBlocking) {
  const auto data = quadrants(96);
  const auto options = loader_options(cnn_spec(), kGpu);
  ASSERT_TRUE(options.pin_memory);
  std::vector<std::size_t> indices(data.train->size());
  std::iota(indices.begin(), indices.end(), 0);
  data::Loader loader(data.train, indices, 0, options);
  std::size_t batches = 0;
  while (auto batch = loader.next()) {
    EXPECT_TRUE(batch->inputs.is_pinned());
    EXPECT_TRUE(batch->targets.is_pinned());
    const auto on_gpu = on_device(*batch, kGpu, false);
    EXPECT_TRUE(torch::equal(on_gpu.inputs.cpu(), batch->inputs));
    EXPECT_TRUE(torch::equal(on_gpu.targets.cpu(), batch->targets));
    ++batches;
  }
  EXPECT_EQ(batches, loader.num_batches());
}

// A model and an SGD optimizer with momentum that has taken one step on `device`.
struct Trained {
  torch::jit::Module model;
  std::unique_ptr<torch::optim::SGD> optimizer;
};
Trained one_step(const data::Datasets& data, const spec::Spec& spec, c10::Device device, std::uint64_t seed) {
  Trained trained{model::create(spec.model, data.schema, ".", seed), nullptr};
  trained.model.to(device);
  std::vector<torch::Tensor> parameters;
  for (const auto& parameter : trained.model.parameters()) parameters.push_back(parameter);
  trained.optimizer = std::make_unique<torch::optim::SGD>(parameters, torch::optim::SGDOptions(0.1).momentum(0.9));
  const auto output = trained.model.forward({torch::randn({4, 3, 16, 16}).to(device)}).toTensor();
  output.sum().backward();
  trained.optimizer->step();
  return trained;
}

std::vector<torch::Tensor> parameters_on_cpu(const torch::jit::Module& model) {
  std::vector<torch::Tensor> values;
  for (const auto& parameter : model.parameters()) values.push_back(parameter.detach().cpu());
  return values;
}

TEST_F(Gpu, ACheckpointSavedOnTheGpuLoadsOnTheCpuAndBackOnTheGpu) {
  testing::TempDir dir;
  const auto data = quadrants(16);
  const auto spec = cnn_spec();
  Trained on_gpu = one_step(data, spec, kGpu, 1);
  const fs::path file = dir / "gpu.ckpt";
  save_checkpoint(file, on_gpu.model, *on_gpu.optimizer, {{1, 0, 1}, 1, 0, 0});
  std::ifstream in(file, std::ios::binary);
  const Checkpoint checkpoint = read_checkpoint(std::string(std::istreambuf_iterator<char>(in), {}), file);
  const auto expected = parameters_on_cpu(on_gpu.model);

  for (const c10::Device device : {c10::Device(c10::kCPU), kGpu}) {
    Trained other = one_step(data, spec, device, 2);
    apply_checkpoint(checkpoint, other.model, *other.optimizer);
    const auto loaded = parameters_on_cpu(other.model);
    ASSERT_EQ(loaded.size(), expected.size());
    for (std::size_t i = 0; i < loaded.size(); ++i) EXPECT_TRUE(torch::equal(loaded[i], expected[i])) << device;
    for (const auto& parameter : other.model.parameters()) EXPECT_EQ(parameter.device(), device);
    for (const auto& [key, state] : other.optimizer->state()) {
      const auto& momentum = static_cast<torch::optim::SGDParamState&>(*state).momentum_buffer();
      EXPECT_EQ(momentum.device(), device) << "the optimizer's state must live where the parameters do";
    }
  }
}

TEST_F(Gpu, TheForeachSgdStepsOnTheGpuAsTorchsSGD) {
  torch::manual_seed(5);
  std::vector<torch::Tensor> theirs, mine;
  for (const std::int64_t size : {64, 3, 1000}) {
    theirs.push_back(torch::randn({size}, torch::TensorOptions(kGpu)));
    mine.push_back(theirs.back().clone());
  }
  const auto options = torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01);
  torch::optim::SGD reference(theirs, options);
  ForeachSGD foreach(mine, options);
  for (int step = 0; step < 5; ++step) {
    for (std::size_t i = 0; i < mine.size(); ++i) {
      theirs[i].mutable_grad() = torch::randn(theirs[i].sizes(), torch::TensorOptions(kGpu));
      mine[i].mutable_grad() = theirs[i].grad().clone();
    }
    reference.step();
    foreach.step();
  }
  // The GPU's multi-tensor kernels may round differently (fused multiply-adds): equal to float precision.
  for (std::size_t i = 0; i < mine.size(); ++i) EXPECT_TRUE(torch::allclose(mine[i], theirs[i], 1e-5, 1e-6));
}

TEST_F(Gpu, MetricsReportTheGpuMemoryOfTheRanksDevice) {
  const int port = testing::free_port();
  MonitorSettings settings;
  settings.job = "gpu";
  settings.metrics_port = port;
  settings.metrics_address = "127.0.0.1";
  settings.total_steps = 1;
  settings.total_epochs = 1;
  settings.cuda_device = 0;
  const auto held = torch::ones({64, 1024, 1024}, torch::TensorOptions(kGpu));  // 256 MiB
  RunMonitor monitor(settings, [](const std::string&) { return std::optional<std::string>(); });
  monitor.start_epoch(1);
  StepRecord record{1, 0.01, 0.5};
  record.seconds = 0.1;
  monitor.step_done(record, 32, 0);
  const auto response = testing::http_get("http://127.0.0.1:" + std::to_string(port) + "/metrics");
  ASSERT_TRUE(response.reached);
  const std::string name = "trainpoint_gpu_memory_allocated_bytes{trainpoint_job=\"gpu\",rank=\"0\"} ";
  const auto at = response.body.find(name);
  ASSERT_NE(at, std::string::npos) << response.body;
  EXPECT_GE(std::stod(response.body.substr(at + name.size())), static_cast<double>(held.nbytes()));
  EXPECT_NE(response.body.find("trainpoint_gpu_memory_reserved_bytes"), std::string::npos);
}

TEST_F(Gpu, StepTimesComeFromEventsWithoutWaitingForTheGpu) {
  auto timer = GpuStepTimer::on(kGpu);
  ASSERT_TRUE(timer);
  EXPECT_FALSE(GpuStepTimer::on(c10::Device(c10::kCPU)));
  const auto stream = c10::cuda::getCurrentCUDAStream(0);
  timer->start();
  timer->enter(StepPart::forward_backward);
  at::cuda::sleep(200'000'000);  // about 0.1 s at the H200's 1.98 GHz: far longer than the host's calls below
  timer->enter(StepPart::optimizer);
  timer->end_step(1);
  EXPECT_EQ(cudaStreamQuery(stream.stream()), cudaErrorNotReady) << "the timer waited for the GPU";
  const StepTimer::Step step = timer->take(1);
  EXPECT_NEAR(step.times.total(), step.seconds, 1e-4);
  EXPECT_GT(step.times[StepPart::forward_backward], 0.9 * step.seconds) << "the sleep is the step's work";
}

}  // namespace
}  // namespace tp::train
