#include "train/evaluation.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <cstddef>
#include <vector>

#include "data/loader.h"
#include "data/thumbnail.h"
#include "train/training_step.h"

namespace tp::train {
namespace {

// Correct predictions in a batch: whole samples for classification, the mean of the per-label
// decisions of each sample for multi-label.
double correct_in(const torch::Tensor& output, const torch::Tensor& target, const data::Schema& schema) {
  if (schema.multi_label) return output.gt(0).eq(target.gt(0.5)).to(torch::kDouble).mean(1).sum().item<double>();
  return output.argmax(1).eq(target).sum().item<double>();
}

// Adds the batch's predicted, actual and correctly predicted counts per class (per label, multi-label).
void count_classes(const torch::Tensor& output, const torch::Tensor& target, const data::Schema& schema,
                   ClassCounts& counts) {
  const std::int64_t classes = output.size(1);
  torch::Tensor predicted, actual, true_positives;
  if (schema.multi_label) {
    const torch::Tensor predicted_labels = output.gt(0);
    const torch::Tensor actual_labels = target.gt(0.5);
    predicted = predicted_labels.sum(0);
    actual = actual_labels.sum(0);
    true_positives = predicted_labels.logical_and(actual_labels).sum(0);
  } else {
    const torch::Tensor predicted_class = output.argmax(1);
    predicted = predicted_class.bincount({}, classes);
    actual = target.bincount({}, classes);
    true_positives = target.masked_select(predicted_class.eq(target)).bincount({}, classes);
  }
  auto add = [&](std::vector<double>& sums, const torch::Tensor& batch) {
    const torch::Tensor values = batch.to(torch::kCPU, torch::kDouble).contiguous();
    for (std::int64_t c = 0; c < classes; ++c) sums[static_cast<std::size_t>(c)] += values.data_ptr<double>()[c];
  };
  add(counts.predicted, predicted);
  add(counts.actual, actual);
  add(counts.true_positives, true_positives);
}

// Samples whose target is among the k highest scores.
double top_k_correct_in(const torch::Tensor& output, const torch::Tensor& target, std::int64_t k) {
  return std::get<1>(output.topk(k, 1)).eq(target.unsqueeze(1)).any(1).sum().item<double>();
}

// The largest side of a top-loss thumbnail in the report, in pixels.
constexpr int kThumbnailSize = 128;
// The points of a regression's scatter plots.
constexpr std::size_t kRegressionPoints = 2000;

// The inputs of the samples with the highest loss so far on this rank, for their thumbnails: after each
// batch the batch's samples join them and only the `count` highest stay, copied out of the batch.
class HighestLossInputs {
 public:
  explicit HighestLossInputs(std::size_t count) : count_(count) {}

  void add(std::vector<ClassifiedSample>& samples, std::size_t first, const torch::Tensor& inputs) {
    if (count_ == 0) return;
    for (std::size_t i = first; i < samples.size(); ++i) {
      kept_.push_back({i, inputs[static_cast<std::int64_t>(i - first)]});
    }
    std::vector<ClassifiedSample> candidates;
    for (const Kept& k : kept_) candidates.push_back({samples[k.sample].name, 0, 0, samples[k.sample].loss, {}});
    std::vector<Kept> highest;
    for (const std::size_t c : highest_losses(candidates, count_)) {
      const Kept& k = kept_[c];
      highest.push_back({k.sample, k.sample >= first ? k.input.clone() : k.input});
    }
    kept_ = std::move(highest);
  }

  // Each kept sample's thumbnail into `samples`.
  void draw(std::vector<ClassifiedSample>& samples, const data::Schema& schema) const {
    for (const Kept& k : kept_) samples[k.sample].thumbnail = data::thumbnail_jpeg(k.input, schema, kThumbnailSize);
  }

 private:
  struct Kept {
    std::size_t sample;  // in the rank's predictions
    torch::Tensor input;
  };
  std::size_t count_;
  std::vector<Kept> kept_;
};

// The batch's predictions, named by `names` (those of its samples, in order), appended to `predictions`.
void record_predictions(const torch::Tensor& output, const torch::Tensor& targets, const data::Schema& schema,
                        const std::vector<std::string>& names, Predictions& predictions) {
  namespace F = torch::nn::functional;
  if (!schema.classification) {
    const torch::Tensor predicted = output.reshape({-1}).to(torch::kCPU, torch::kDouble).contiguous();
    const torch::Tensor actual = targets.to(torch::kCPU, torch::kDouble).contiguous();
    for (std::size_t i = 0; i < names.size(); ++i) {
      predictions.regressed.push_back({names[i], actual.data_ptr<double>()[i], predicted.data_ptr<double>()[i]});
    }
    return;
  }
  const torch::Tensor scores = output.to(torch::kFloat);
  const torch::Tensor losses =
      F::cross_entropy(scores, targets, F::CrossEntropyFuncOptions().reduction(torch::kNone))
          .to(torch::kCPU, torch::kDouble)
          .contiguous();
  const torch::Tensor predicted = scores.argmax(1).to(torch::kCPU, torch::kLong).contiguous();
  const torch::Tensor actual = targets.to(torch::kCPU, torch::kLong).contiguous();
  for (std::size_t i = 0; i < names.size(); ++i) {
    predictions.classified.push_back({names[i], actual.data_ptr<std::int64_t>()[i],
                                      predicted.data_ptr<std::int64_t>()[i], losses.data_ptr<double>()[i], {}});
  }
}

}  // namespace

bool interprets(const data::Datasets& data) {
  return data.valid && data.valid->size() > 0 && !data.schema.multi_label;
}

Totals summed_over_ranks(const Totals& mine, dist::Communicator& communicator) {
  // Every rank has as many class counts (none, or one per class), so one sum carries them all.
  std::vector<double> values{mine.loss_sum, mine.correct, mine.top_k_correct, mine.absolute_error, mine.count};
  for (const std::vector<double>* counts : {&mine.classes.true_positives, &mine.classes.predicted, &mine.classes.actual}) {
    values.insert(values.end(), counts->begin(), counts->end());
  }
  const std::vector<double> sums = dist::sum_over_ranks(communicator, values);
  Totals all{sums[0], sums[1], sums[2], sums[3], sums[4], {}};
  const auto classes = static_cast<std::ptrdiff_t>(mine.classes.actual.size());
  auto at = sums.begin() + 5;
  for (std::vector<double>* counts : {&all.classes.true_positives, &all.classes.predicted, &all.classes.actual}) {
    counts->assign(at, at + classes);
    at += classes;
  }
  return all;
}

bool reports_top_k(const data::Schema& schema, std::int64_t k) {
  return schema.classification && !schema.multi_label && schema.num_outputs > k;
}

Totals validate(torch::jit::Module& model, const data::Datasets& data, const spec::Spec& spec,
                dist::Communicator& communicator, const Precision& precision, c10::Device device,
                Predictions* predictions) {
  // Each rank a contiguous part, so that the ranks of a node read neighbouring samples: for packed shards,
  // about the node's own shards of the validation set.
  const std::size_t ranks = data.rank_share ? 1 : static_cast<std::size_t>(communicator.world_size());
  const std::size_t rank = data.rank_share ? 0 : static_cast<std::size_t>(communicator.rank());
  const std::size_t first = data.valid->size() * rank / ranks;
  const std::size_t end = data.valid->size() * (rank + 1) / ranks;
  Totals totals;
  if (data.schema.classification) {
    for (std::vector<double>* counts : {&totals.classes.true_positives, &totals.classes.predicted, &totals.classes.actual}) {
      counts->assign(static_cast<std::size_t>(data.schema.num_outputs), 0.0);
    }
  }
  std::vector<std::size_t> mine;
  for (std::size_t i = first; i < end; ++i) mine.push_back(i);
  torch::NoGradGuard no_grad;
  model.eval();
  // Images: the schema says how their pixels became the input.
  const bool thumbnails = predictions && data.schema.classification && !data.schema.pixel_mean.empty();
  HighestLossInputs highest(thumbnails ? static_cast<std::size_t>(spec.report.top_losses) : 0);
  std::size_t done = 0;  // of this rank's samples
  data::Loader loader(data.valid, mine, 0, loader_options(spec, device));
  while (auto next = loader.next()) {
    const auto batch = on_device(std::move(*next), device, uses_channels_last(spec));
    const torch::Tensor output = precision.forward(model, batch.inputs);
    const double n = static_cast<double>(batch.targets.size(0));
    if (predictions) {
      std::vector<std::string> names;
      for (std::int64_t i = 0; i < batch.targets.size(0); ++i) names.push_back(data.valid->sample_name(mine.at(done++)));
      const std::size_t first = predictions->classified.size();
      record_predictions(output, batch.targets, data.schema, names, *predictions);
      if (thumbnails) highest.add(predictions->classified, first, batch.inputs);
    }
    totals.loss_sum += loss_of(output, batch.targets, data.schema).item<double>() * n;
    if (data.schema.classification) {
      totals.correct += correct_in(output, batch.targets, data.schema);
      count_classes(output, batch.targets, data.schema, totals.classes);
    }
    if (reports_top_k(data.schema, spec.train.top_k)) {
      totals.top_k_correct += top_k_correct_in(output, batch.targets, spec.train.top_k);
    }
    if (!data.schema.classification) {
      totals.absolute_error += (output.reshape({-1}) - batch.targets.to(torch::kFloat)).abs().sum().item<double>();
    }
    totals.count += n;
  }
  model.train();
  if (thumbnails) highest.draw(predictions->classified, data.schema);
  return summed_over_ranks(totals, communicator);
}

std::optional<Interpretation> interpret(const Predictions& mine, const data::Schema& schema,
                                       const spec::Spec& spec, InterpretedAt at,
                                       dist::Communicator& communicator) {
  const std::vector<std::string> packed = dist::all_gather_strings(
      communicator, {schema.classification ? pack(mine.classified) : pack(mine.regressed)});
  if (communicator.rank() != 0) return std::nullopt;
  if (!schema.classification) return interpret_regression(unpack_regressed(packed), kRegressionPoints, at);
  return interpret_classification(unpack_classified(packed), schema.class_names,
                                  static_cast<std::size_t>(spec.report.top_losses), at);
}

}  // namespace tp::train
