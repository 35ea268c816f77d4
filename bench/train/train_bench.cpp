// Training step throughput of a built-in model (as trainpoint's trainer runs it: the TorchScript module op by op,
// in channels_last memory format for the convolutional nets (train.channels_last = "auto"), cross-entropy,
// backward, SGD with momentum) on synthetic data. Prints one JSON line with images per
// second and per CPU-second (process CPU time, which holds up when other work shares the cores).
// usage: tp-train-bench ARCH BATCH SIZE CHANNELS STEPS THREADS
#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "measure/cpu_time.h"
#include "model/model.h"

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: tp-train-bench ARCH BATCH SIZE CHANNELS STEPS THREADS\n");
    return 2;
  }
  const std::string arch = argv[1];
  const int batch = std::atoi(argv[2]);
  const int size = std::atoi(argv[3]);
  const int channels = std::atoi(argv[4]);
  const int steps = std::atoi(argv[5]);
  tp::model::set_compute_threads(std::atoi(argv[6]));  // LibTorch's and OpenBLAS's, as the entrypoint does

  tp::spec::ModelSpec model_spec;
  model_spec.arch = arch;
  tp::data::Schema schema;
  schema.input_shape = {channels, size, size};
  schema.num_outputs = 10;
  torch::jit::Module model = tp::model::create(model_spec, schema, ".", 1);
  tp::model::configure_process_for_training();  // as the trainer does
  const bool channels_last = tp::model::is_built_in_convnet(model_spec);  // as train.channels_last = "auto"
  std::vector<torch::Tensor> parameters;
  for (const auto& parameter : model.parameters()) {
    if (channels_last && parameter.dim() == 4) {
      torch::NoGradGuard no_grad;
      parameter.set_data(parameter.to(parameter.options(), false, false, at::MemoryFormat::ChannelsLast));
    }
    parameters.push_back(parameter);
  }
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.01).momentum(0.9));
  model.train();
  torch::Tensor inputs = torch::randn({batch, channels, size, size});
  if (channels_last) inputs = inputs.to(inputs.options(), false, false, at::MemoryFormat::ChannelsLast);
  const torch::Tensor labels = torch::randint(0, 10, {batch}, torch::kLong);

  const auto step = [&] {
    optimizer.zero_grad();
    torch::nn::functional::cross_entropy(model.forward({inputs}).toTensor(), labels).backward();
    optimizer.step();
  };
  for (int i = 0; i < 5; ++i) step();  // warm-up, including the TorchScript executor's profiling runs
  const auto started = std::chrono::steady_clock::now();
  const double cpu_started = tp::bench::process_cpu_seconds();
  for (int i = 0; i < steps; ++i) step();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double cpu = tp::bench::process_cpu_seconds() - cpu_started;
  std::printf(
      "{\"engine\": \"trainpoint\", \"config\": \"%s batch %d, %dx%dx%d\", \"images_per_s\": %.1f, "
      "\"images_per_cpu_s\": %.1f}\n",
      arch.c_str(), batch, channels, size, size, batch * steps / seconds, batch * steps / cpu);
  return 0;
}
