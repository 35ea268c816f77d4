// Training step throughput of a built-in model as trainpoint's trainer runs it, on synthetic data already on the
// device: the model placed by the trainer's place_model (channels_last for the convolutional nets, as
// train.channels_last = "auto"; cuDNN's algorithm search on a GPU), its forward under train.precision's autocast
// (train/precision.h), cross-entropy, backward, and apply_gradients with the trainer's SGD and momentum
// (train/foreach_sgd.h; --sgd loop: LibTorch's, a few kernels per parameter); each step timed as
// the trainer times it. On a GPU, --step-timer says how: "events" (the trainer's: CUDA events read every 50
// steps, where the trainer reads its losses) or "synchronize" (the host waits for the GPU twice a step, which
// is how the trainer timed steps before), to show what a synchronisation per step costs.
// Prints one JSON line with images per second and per CPU-second (process CPU time, which holds up when
// other work shares the cores), and the milliseconds per step that the host and (on a GPU) the GPU spent in
// forward and backward and in the optimizer: a step whose host time exceeds its GPU time is bound by the
// host's kernel launches.
// usage: tp-train-bench ARCH BATCH SIZE CHANNELS STEPS THREADS [--device cpu|cuda] [--precision fp32|bf16|fp16]
//                       [--step-timer events|synchronize] [--sgd foreach|loop] [--channels-last auto|true|false]
//                       [--warmup STEPS (5)]
#include <torch/script.h>
#include <torch/torch.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "measure/cpu_time.h"
#include "model/model.h"
#include "spec/spec.h"
#include "train/foreach_sgd.h"
#include "train/gpu_step_time.h"
#include "train/precision.h"
#include "train/training_step.h"

#if TRAINPOINT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace {

// Until the GPU has done all the work queued so far.
void wait_for(c10::Device device) {
#if TRAINPOINT_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

// --name value pairs after the positional arguments.
std::map<std::string, std::string> options(int argc, char** argv, int first) {
  std::map<std::string, std::string> values{
      {"--device", "cpu"}, {"--precision", "fp32"}, {"--step-timer", "events"}, {"--sgd", "foreach"},
      {"--channels-last", "auto"}, {"--warmup", "5"}};
  for (int i = first; i + 1 < argc; i += 2) {
    if (!values.count(argv[i])) {
      std::fprintf(stderr, "tp-train-bench: unknown option %s\n", argv[i]);
      std::exit(2);
    }
    values[argv[i]] = argv[i + 1];
  }
  return values;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7 || (argc - 7) % 2 != 0) {
    std::fprintf(stderr, "usage: tp-train-bench ARCH BATCH SIZE CHANNELS STEPS THREADS [--device cpu|cuda] "
                         "[--precision fp32|bf16|fp16] [--step-timer events|synchronize] [--sgd foreach|loop] "
                         "[--channels-last auto|true|false] [--warmup STEPS]\n");
    return 2;
  }
  tp::log::init(tp::log::Format::text, spdlog::level::info);  // to stderr: standard output is the one JSON line
  const std::string arch = argv[1];
  const int batch = std::atoi(argv[2]);
  const int size = std::atoi(argv[3]);
  const int channels = std::atoi(argv[4]);
  const int steps = std::atoi(argv[5]);
  tp::model::set_compute_threads(std::atoi(argv[6]));  // LibTorch's and OpenBLAS's, as the entrypoint does
  auto option = options(argc, argv, 7);
  const c10::Device device(option["--device"] == "cuda" ? c10::kCUDA : c10::kCPU, 0);
  const bool synchronize_each_step = option["--step-timer"] == "synchronize";

  tp::spec::Spec spec = tp::spec::load_string("[data]\nsource = \"unused\"\n[model]\narch = \"" + arch +
                                                  "\"\n[train]\noptimizer = \"sgd\"\nlr = 0.01\nmomentum = 0.9\n"
                                                  "weight_decay = 0.0\nprecision = \"" + option["--precision"] +
                                                  "\"\nchannels_last = \"" + option["--channels-last"] + "\"\n",
                                              {}, "tp-train-bench")
                             .spec;
  tp::data::Schema schema;
  schema.input_shape = {channels, size, size};
  schema.num_outputs = 10;
  torch::jit::Module model = tp::model::create(spec.model, schema, ".", 1);
  const tp::train::Parameters placed = tp::train::place_model(model, spec, device);
  const bool channels_last = tp::train::uses_channels_last(spec);
  const auto sgd_options = torch::optim::SGDOptions(0.01).momentum(0.9);
  std::unique_ptr<torch::optim::Optimizer> optimizer =
      option["--sgd"] == "loop" ? std::make_unique<torch::optim::SGD>(placed.tensors, sgd_options)
                                : std::make_unique<tp::train::ForeachSGD>(placed.tensors, sgd_options);
  tp::train::Precision precision(spec.train.precision, device);
  model.train();
  torch::Tensor inputs = torch::randn({batch, channels, size, size}, torch::TensorOptions(device));
  if (channels_last) inputs = inputs.to(inputs.options(), false, false, at::MemoryFormat::ChannelsLast);
  const torch::Tensor labels = torch::randint(0, 10, {batch}, torch::TensorOptions(device).dtype(torch::kLong));

  tp::train::StepTimer timer;
  const auto gpu_timer = tp::train::GpuStepTimer::on(device);
  const auto wait_for_gpu = [&] {
    if (synchronize_each_step) wait_for(device);
  };
  std::vector<torch::Tensor> losses;
  std::int64_t step_number = 0, timed_steps = 0;
  // Where the measured steps' time went: on the host (the calls that queue the work) and on the GPU.
  tp::train::StepTimes host_parts, gpu_parts;
  // The trainer's read point: the losses copied to the host at once, then the steps' GPU times taken.
  const auto read_losses = [&] {
    if (losses.empty()) return;
    torch::stack(losses).cpu();
    losses.clear();
    if (gpu_timer) {
      for (; timed_steps < step_number; ++timed_steps) gpu_parts += gpu_timer->take(timed_steps + 1).times;
    }
  };
  const auto enter = [&](tp::train::StepPart part) {
    timer.enter(part);
    if (gpu_timer) gpu_timer->enter(part);
  };
  const auto step = [&] {
    enter(tp::train::StepPart::forward_backward);
    tp::train::drop_gradients(*optimizer);
    const torch::Tensor loss = tp::train::loss_of(precision.forward(model, inputs), labels, schema);
    precision.scaled(loss).backward();
    losses.push_back(loss.detach());
    wait_for_gpu();
    enter(tp::train::StepPart::optimizer);
    tp::train::apply_gradients(precision, placed.tensors, spec.train, *optimizer);
    wait_for_gpu();
    host_parts += timer.end_step().times;
    if (gpu_timer) gpu_timer->end_step(++step_number);
    if (losses.size() == 50) read_losses();
  };
  timer.start();
  if (gpu_timer) gpu_timer->start();
  // Warm-up: the allocator's first allocations, cuDNN's algorithm search.
  for (int i = 0; i < std::stoi(option["--warmup"]); ++i) step();
  read_losses();
  wait_for(device);
  host_parts = gpu_parts = {};
  const auto started = std::chrono::steady_clock::now();
  const double cpu_started = tp::bench::process_cpu_seconds();
  for (int i = 0; i < steps; ++i) step();
  read_losses();
  wait_for(device);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double cpu = tp::bench::process_cpu_seconds() - cpu_started;
  // Milliseconds per step of the parts a step spends its time in (the host's with the synchronising timer
  // include its waits for the GPU).
  const auto per_step = [&](const tp::train::StepTimes& times) {
    nlohmann::json parts;
    for (const auto part : {tp::train::StepPart::forward_backward, tp::train::StepPart::optimizer}) {
      parts[tp::train::step_part_name(part)] = 1000 * times[part] / steps;
    }
    return parts;
  };
  nlohmann::json line{{"engine", "trainpoint"},
                      {"config", fmt::format("{} batch {}, {}x{}x{}", arch, batch, channels, size, size)},
                      {"device", device.is_cuda() ? "cuda" : "cpu"},
                      {"precision", option["--precision"]},
                      {"channels_last", channels_last},
                      {"step_timer", option["--step-timer"]},
                      {"sgd", option["--sgd"]},
                      {"images_per_s", batch * steps / seconds},
                      {"images_per_cpu_s", batch * steps / cpu},
                      {"host_ms_per_step", per_step(host_parts)}};
  if (gpu_timer) line["gpu_ms_per_step"] = per_step(gpu_parts);
  std::printf("%s\n", line.dump().c_str());
  return 0;
}
