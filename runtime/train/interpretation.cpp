#include "train/interpretation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "common/base64.h"
#include "common/error.h"

namespace tp::train {
namespace {

using nlohmann::json;

// A sample's fields in the packed CBOR: an array per sample, the thumbnail as a CBOR byte string.
constexpr std::size_t kClassifiedFields = 5;
constexpr std::size_t kRegressedFields = 3;

std::vector<json> unpack_all(const std::vector<std::string>& packed, std::size_t fields) {
  std::vector<json> samples;
  for (std::size_t rank = 0; rank < packed.size(); ++rank) {
    json list;
    try {
      list = json::from_cbor(packed[rank]);
    } catch (const json::exception& error) {
      fail(ExitCode::internal, "the validation predictions of rank {} do not unpack: {}", rank, error.what());
    }
    for (json& sample : list) {
      if (!sample.is_array() || sample.size() != fields) {
        fail(ExitCode::internal, "a validation prediction of rank {} has {} fields, not {}", rank,
             sample.size(), fields);
      }
      samples.push_back(std::move(sample));
    }
  }
  return samples;
}

double ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0.0;  // scikit-learn's zero_division=0
}

// The samples in name order, so that the file does not depend on how they were split over the ranks.
template <typename Sample>
std::vector<const Sample*> by_name(const std::vector<Sample>& samples) {
  std::vector<const Sample*> sorted;
  for (const Sample& sample : samples) sorted.push_back(&sample);
  std::sort(sorted.begin(), sorted.end(), [](const Sample* a, const Sample* b) { return a->name < b->name; });
  return sorted;
}

// [actual][predicted] counts over `classes` classes.
std::vector<std::vector<std::int64_t>> confusion_counts(const std::vector<ClassifiedSample>& samples,
                                                        std::size_t classes) {
  std::vector<std::vector<std::int64_t>> counts(classes, std::vector<std::int64_t>(classes, 0));
  for (const ClassifiedSample& s : samples) {
    if (s.actual < 0 || s.predicted < 0 || static_cast<std::size_t>(s.actual) >= classes ||
        static_cast<std::size_t>(s.predicted) >= classes) {
      fail(ExitCode::internal, "{}: class {} predicted as {}, but there are {} classes", s.name, s.actual,
           s.predicted, classes);
    }
    ++counts[static_cast<std::size_t>(s.actual)][static_cast<std::size_t>(s.predicted)];
  }
  return counts;
}

// The normalized matrix and the per-class scores from the counts.
void add_per_class_scores(ClassificationInterpretation& result) {
  const std::vector<std::vector<std::int64_t>>& counts = result.confusion_matrix;
  const std::size_t n = counts.size();
  for (std::size_t c = 0; c < n; ++c) {
    const auto support = std::accumulate(counts[c].begin(), counts[c].end(), std::int64_t{0});
    std::int64_t predicted_as_c = 0;
    for (std::size_t a = 0; a < n; ++a) predicted_as_c += counts[a][c];
    std::vector<double> row;
    for (std::size_t p = 0; p < n; ++p) {
      row.push_back(ratio(static_cast<double>(counts[c][p]), static_cast<double>(support)));
    }
    result.confusion_matrix_normalized.push_back(std::move(row));
    const auto true_positives = static_cast<double>(counts[c][c]);
    const double precision = ratio(true_positives, static_cast<double>(predicted_as_c));
    const double recall = ratio(true_positives, static_cast<double>(support));
    result.per_class.push_back(
        {result.classes[c], precision, recall, ratio(2 * precision * recall, precision + recall), support});
  }
}

// The off-diagonal cells with a count, the highest first (equal counts in matrix order).
std::vector<ConfusedPair> most_confused(const std::vector<std::vector<std::int64_t>>& counts,
                                        const std::vector<std::string>& classes) {
  std::vector<ConfusedPair> pairs;
  for (std::size_t a = 0; a < counts.size(); ++a) {
    for (std::size_t p = 0; p < counts.size(); ++p) {
      if (a != p && counts[a][p] > 0) pairs.push_back({classes[a], classes[p], counts[a][p]});
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const ConfusedPair& x, const ConfusedPair& y) { return x.count > y.count; });
  return pairs;
}

const ClassificationInterpretation* classification_of(const std::optional<Interpretation>& interpretation) {
  return interpretation ? std::get_if<ClassificationInterpretation>(&interpretation->task) : nullptr;
}

}  // namespace

std::string pack(const std::vector<ClassifiedSample>& samples) {
  json list = json::array();
  for (const ClassifiedSample& s : samples) {
    const std::vector<std::uint8_t> thumbnail(s.thumbnail.begin(), s.thumbnail.end());
    list.push_back(json::array({s.name, s.actual, s.predicted, s.loss, json::binary(thumbnail)}));
  }
  const std::vector<std::uint8_t> bytes = json::to_cbor(list);
  return {bytes.begin(), bytes.end()};
}

std::string pack(const std::vector<RegressedSample>& samples) {
  json list = json::array();
  for (const RegressedSample& s : samples) list.push_back(json::array({s.name, s.actual, s.predicted}));
  const std::vector<std::uint8_t> bytes = json::to_cbor(list);
  return {bytes.begin(), bytes.end()};
}

std::vector<ClassifiedSample> unpack_classified(const std::vector<std::string>& packed) {
  std::vector<ClassifiedSample> samples;
  for (const json& s : unpack_all(packed, kClassifiedFields)) {
    const auto& thumbnail = s[4].get_binary();
    samples.push_back({s[0].get<std::string>(), s[1].get<std::int64_t>(), s[2].get<std::int64_t>(),
                       s[3].is_number() ? s[3].get<double>() : INFINITY,
                       std::string(thumbnail.begin(), thumbnail.end())});
  }
  return samples;
}

std::vector<RegressedSample> unpack_regressed(const std::vector<std::string>& packed) {
  std::vector<RegressedSample> samples;
  for (const json& s : unpack_all(packed, kRegressedFields)) {
    samples.push_back({s[0].get<std::string>(), s[1].get<double>(), s[2].get<double>()});
  }
  return samples;
}

std::vector<std::size_t> highest_losses(const std::vector<ClassifiedSample>& samples, std::size_t count) {
  std::vector<std::size_t> order(samples.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  count = std::min(count, order.size());
  const auto higher = [&](std::size_t a, std::size_t b) {
    // NaN losses sort last; they are no evidence of a mistake.
    const double la = std::isnan(samples[a].loss) ? -INFINITY : samples[a].loss;
    const double lb = std::isnan(samples[b].loss) ? -INFINITY : samples[b].loss;
    return std::tie(lb, samples[a].name) < std::tie(la, samples[b].name);
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(count), order.end(), higher);
  order.resize(count);
  return order;
}

Interpretation interpret_classification(const std::vector<ClassifiedSample>& samples,
                                        const std::vector<std::string>& classes, std::size_t top_losses,
                                        InterpretedAt at) {
  ClassificationInterpretation result;
  result.classes = classes;
  result.confusion_matrix = confusion_counts(samples, classes.size());
  std::int64_t correct = 0;
  for (std::size_t c = 0; c < classes.size(); ++c) correct += result.confusion_matrix[c][c];
  result.accuracy = ratio(static_cast<double>(correct), static_cast<double>(samples.size()));
  add_per_class_scores(result);
  result.most_confused = most_confused(result.confusion_matrix, classes);
  for (const std::size_t i : highest_losses(samples, top_losses)) {
    const ClassifiedSample& s = samples[i];
    result.top_losses.push_back({s.name, classes[static_cast<std::size_t>(s.actual)],
                                 classes[static_cast<std::size_t>(s.predicted)], s.loss,
                                 s.thumbnail.empty() ? "" : "data:image/jpeg;base64," + base64(s.thumbnail)});
  }
  // Without their thumbnails: the ones written are in top_losses.
  for (const ClassifiedSample* s : by_name(samples)) {
    result.predictions.push_back({s->name, s->actual, s->predicted, s->loss, ""});
  }
  return {at, samples.size(), std::move(result)};
}

Interpretation interpret_regression(const std::vector<RegressedSample>& samples, std::size_t max_points,
                                    InterpretedAt at) {
  const std::vector<const RegressedSample*> sorted = by_name(samples);
  double absolute = 0, squared = 0;
  for (const RegressedSample* s : sorted) {
    absolute += std::abs(s->actual - s->predicted);
    squared += (s->actual - s->predicted) * (s->actual - s->predicted);
  }
  RegressionInterpretation result;
  const auto count = static_cast<double>(samples.size());
  result.mae = samples.empty() ? NAN : absolute / count;
  result.rmse = samples.empty() ? NAN : std::sqrt(squared / count);
  const std::size_t shown = std::min(max_points, sorted.size());
  for (std::size_t k = 0; k < shown; ++k) result.points.push_back(*sorted[k * sorted.size() / shown]);
  return {at, samples.size(), std::move(result)};
}

json per_class_scores(const std::optional<Interpretation>& interpretation) {
  const ClassificationInterpretation* classification = classification_of(interpretation);
  if (!classification) return nullptr;
  json scores = json::object();
  for (const ClassScores& c : classification->per_class) {
    scores[c.name] = {{"precision", c.precision}, {"recall", c.recall}, {"f1", c.f1}, {"support", c.support}};
  }
  return scores;
}

NamedValues per_class_values(const std::optional<Interpretation>& interpretation) {
  NamedValues values;
  const ClassificationInterpretation* classification = classification_of(interpretation);
  if (!classification) return values;
  for (const auto& [score, member] : {std::pair{"precision", &ClassScores::precision},
                                      std::pair{"recall", &ClassScores::recall},
                                      std::pair{"f1", &ClassScores::f1}}) {
    for (const ClassScores& c : classification->per_class) {
      values.emplace_back(fmt::format("interpretation/{}/{}", score, c.name), c.*member);
    }
  }
  return values;
}

}  // namespace tp::train
