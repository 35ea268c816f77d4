#include "train/evaluation.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cstddef>
#include <vector>

#include "data/loader.h"
#include "train/training_step.h"

namespace tp::train {
namespace {

// Correct predictions in a batch: whole samples for classification, the mean of the per-label
// decisions of each sample for multi-label.
double correct_in(const torch::Tensor& output, const torch::Tensor& target, const data::Schema& schema) {
  if (schema.multi_label) return output.gt(0).eq(target.gt(0.5)).to(torch::kDouble).mean(1).sum().item<double>();
  return output.argmax(1).eq(target).sum().item<double>();
}

// Samples whose target is among the k highest scores.
double top_k_correct_in(const torch::Tensor& output, const torch::Tensor& target, std::int64_t k) {
  return std::get<1>(output.topk(k, 1)).eq(target.unsqueeze(1)).any(1).sum().item<double>();
}

}  // namespace

Totals summed_over_ranks(const Totals& mine, dist::Communicator& communicator) {
  const std::vector<double> sums = dist::sum_over_ranks(
      communicator,
      std::vector<double>{mine.loss_sum, mine.correct, mine.top_k_correct, mine.absolute_error, mine.count});
  return {sums[0], sums[1], sums[2], sums[3], sums[4]};
}

bool reports_top_k(const data::Schema& schema, std::int64_t k) {
  return schema.classification && !schema.multi_label && schema.num_outputs > k;
}

Totals validate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                dist::Communicator& communicator, const Precision& precision, c10::Device device) {
  const std::size_t first = data.rank_share ? 0 : static_cast<std::size_t>(communicator.rank());
  const std::size_t stride = data.rank_share ? 1 : static_cast<std::size_t>(communicator.world_size());
  Totals totals;
  std::vector<std::size_t> mine;
  for (std::size_t i = first; i < data.valid->size(); i += stride) mine.push_back(i);
  torch::NoGradGuard no_grad;
  model.eval();
  data::Loader loader(data.valid, mine, 0, loader_options(spec, device));
  while (auto next = loader.next()) {
    const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
    const torch::Tensor output = precision.forward(model, batch.inputs);
    const double n = static_cast<double>(batch.targets.size(0));
    totals.loss_sum += loss_of(output, batch.targets, data.schema).item<double>() * n;
    if (data.schema.classification) totals.correct += correct_in(output, batch.targets, data.schema);
    if (reports_top_k(data.schema, spec.train.top_k)) {
      totals.top_k_correct += top_k_correct_in(output, batch.targets, spec.train.top_k);
    }
    if (!data.schema.classification) {
      totals.absolute_error += (output.reshape({-1}) - batch.targets.to(torch::kFloat)).abs().sum().item<double>();
    }
    totals.count += n;
  }
  model.train();
  return summed_over_ranks(totals, communicator);
}

}  // namespace tp::train
