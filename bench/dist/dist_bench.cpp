// Step time of trainpoint's gradient engine on CPU with Gloo, one process per rank (torchrun
// variables; none: world size 1). An MLP of about 9.5M parameters, one thread per rank.
// Prints one JSON line: step time, the time finish() waited for all-reduces after backward
// returned (the part not hidden), and the time of one all-reduce of all gradients alone.
#include <torch/script.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "dist/communicator.h"
#include "dist/gradient_sync.h"
#include "dist/topology.h"
#include "model/model.h"
#include "train/training_step.h"

using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
  const int batch = argc > 2 ? std::atoi(argv[2]) : 64;
  tp::model::set_compute_threads(1);  // LibTorch's and OpenBLAS's, as the entrypoint does
  const auto topology = tp::dist::read_topology(tp::dist::process_environment, 1, 0);
  auto communicator = topology.rank ? tp::dist::connect({tp::dist::Backend::gloo, *topology.rank, topology.world_size(),
                                                         topology.master_addr, topology.master_port,
                                                         std::chrono::seconds(120)})
                                    : tp::dist::single_process();
  tp::spec::ModelSpec model_spec;
  model_spec.arch = "mlp";
  model_spec.hidden = {2048, 2048, 2048};
  tp::data::Schema schema;
  schema.input_shape = {512};
  schema.num_outputs = 10;
  auto model = tp::model::create(model_spec, schema, ".", 1);
  tp::model::configure_process_for_training();  // as the trainer does
  std::vector<torch::Tensor> parameters;
  std::vector<std::string> names;
  std::int64_t count = 0;
  for (const auto& p : model.named_parameters()) {
    p.value.set_requires_grad(true);
    parameters.push_back(p.value);
    names.push_back(p.name);
    count += p.value.numel();
  }
  torch::optim::SGD optimizer(parameters, torch::optim::SGDOptions(0.01).momentum(0.9));
  std::optional<tp::dist::GradientSynchronizer> synchronizer;
  if (communicator->world_size() > 1) synchronizer.emplace(parameters, names, *communicator);
  const auto inputs = torch::randn({batch, 512});
  const auto labels = torch::randint(0, 10, {batch}, torch::kLong);

  double step_seconds = 0, wait_seconds = 0;
  const int warmup = 5;
  for (int step = 0; step < warmup + steps; ++step) {
    communicator->barrier();
    const auto start = Clock::now();
    tp::train::drop_gradients(optimizer);  // as the trainer does
    torch::nn::functional::cross_entropy(model.forward({inputs}).toTensor(), labels).backward();
    if (synchronizer) synchronizer->finish();
    optimizer.step();
    const auto end = Clock::now();
    if (step >= warmup) {
      step_seconds += std::chrono::duration<double>(end - start).count();
      if (synchronizer) {
        const auto& timing = synchronizer->last_timing();
        wait_seconds += std::chrono::duration<double>(timing.all_done - timing.backward_done).count();
      }
    }
  }
  // One all-reduce of every gradient at once, nothing to overlap with.
  double allreduce_seconds = 0;
  if (communicator->world_size() > 1) {
    std::vector<torch::Tensor> flat{torch::randn({count})};
    for (int i = 0; i < warmup + steps; ++i) {
      communicator->barrier();
      const auto start = Clock::now();
      communicator->all_reduce_sum(flat);
      if (i >= warmup) allreduce_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }
  }
  if (communicator->rank() == 0) {
    std::printf(
        "{\"world_size\": %d, \"parameters\": %lld, \"batch_per_rank\": %d, \"step_ms\": %.2f, "
        "\"exposed_allreduce_ms\": %.2f, \"allreduce_alone_ms\": %.2f, \"buckets\": %zu}\n",
        communicator->world_size(), static_cast<long long>(count), batch, 1000 * step_seconds / steps,
        1000 * wait_seconds / steps, 1000 * allreduce_seconds / steps, synchronizer ? synchronizer->bucket_count() : 1);
  }
  communicator->barrier();
  return 0;
}
