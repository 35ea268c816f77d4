#include "train/interpretation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <tuple>

#include "common/base64.h"
#include "common/error.h"
#include "common/files.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
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
        fail(ExitCode::internal, "a validation prediction of rank {} has {} fields, not {}", rank, sample.size(),
             fields);
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

// A class name as part of a metric's name: MLflow takes only letters, digits, '_', '-', '.', ' ', ':' and '/'
// (a batch with another fails whole), so any other byte becomes '_'.
std::string metric_name_part(const std::string& name) {
  std::string part = name;
  for (char& c : part) {
    const bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '_' || c == '-' || c == '.' || c == ' ' || c == ':' || c == '/';
    if (!allowed) c = '_';
  }
  return part;
}

bool is_classification(const json& interpretation) {
  return interpretation.is_object() && interpretation.value("task", "") == "classification";
}

}  // namespace

std::string pack(const std::vector<ClassifiedSample>& samples) {
  json list = json::array();
  for (const ClassifiedSample& s : samples) {
    list.push_back(json::array({s.name, s.actual, s.predicted, s.loss,
                                json::binary(std::vector<std::uint8_t>(s.thumbnail.begin(), s.thumbnail.end()))}));
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
                       s[3].is_number() ? s[3].get<double>() : INFINITY, std::string(thumbnail.begin(), thumbnail.end())});
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

json interpret_classification(const std::vector<ClassifiedSample>& samples, const std::vector<std::string>& classes,
                              std::size_t top_losses, InterpretedAt at) {
  const std::size_t n = classes.size();
  std::vector<std::vector<std::int64_t>> counts(n, std::vector<std::int64_t>(n, 0));
  json predictions = json::array();
  for (const ClassifiedSample* s : by_name(samples)) {
    if (s->actual < 0 || s->predicted < 0 || static_cast<std::size_t>(s->actual) >= n ||
        static_cast<std::size_t>(s->predicted) >= n) {
      fail(ExitCode::internal, "{}: class {} predicted as {}, but there are {} classes", s->name, s->actual,
           s->predicted, n);
    }
    ++counts[static_cast<std::size_t>(s->actual)][static_cast<std::size_t>(s->predicted)];
    predictions.push_back({{"sample", s->name}, {"actual", s->actual}, {"predicted", s->predicted},
                           {"loss", json_number(s->loss)}});
  }
  json normalized = json::array();
  json per_class = json::array();
  std::int64_t correct = 0;
  for (std::size_t c = 0; c < n; ++c) {
    const auto support = static_cast<double>(std::accumulate(counts[c].begin(), counts[c].end(), std::int64_t{0}));
    double predicted_as_c = 0;
    for (std::size_t a = 0; a < n; ++a) predicted_as_c += static_cast<double>(counts[a][c]);
    const auto true_positives = static_cast<double>(counts[c][c]);
    correct += counts[c][c];
    json row = json::array();
    for (std::size_t p = 0; p < n; ++p) row.push_back(ratio(static_cast<double>(counts[c][p]), support));
    normalized.push_back(std::move(row));
    const double precision = ratio(true_positives, predicted_as_c);
    const double recall = ratio(true_positives, support);
    per_class.push_back({{"class", classes[c]},
                         {"precision", precision},
                         {"recall", recall},
                         {"f1", ratio(2 * precision * recall, precision + recall)},
                         {"support", static_cast<std::int64_t>(support)}});
  }
  struct Pair {
    std::size_t actual, predicted;
    std::int64_t count;
  };
  std::vector<Pair> pairs;
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t p = 0; p < n; ++p) {
      if (a != p && counts[a][p] > 0) pairs.push_back({a, p, counts[a][p]});
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& x, const Pair& y) { return x.count > y.count; });
  json most_confused = json::array();
  for (const Pair& pair : pairs) {
    most_confused.push_back(
        {{"actual", classes[pair.actual]}, {"predicted", classes[pair.predicted]}, {"count", pair.count}});
  }
  json top = json::array();
  for (const std::size_t i : highest_losses(samples, top_losses)) {
    const ClassifiedSample& s = samples[i];
    json entry{{"sample", s.name},
               {"actual", classes[static_cast<std::size_t>(s.actual)]},
               {"predicted", classes[static_cast<std::size_t>(s.predicted)]},
               {"loss", json_number(s.loss)}};
    if (!s.thumbnail.empty()) entry["thumbnail"] = "data:image/jpeg;base64," + base64(s.thumbnail);
    top.push_back(std::move(entry));
  }
  return {{"task", "classification"},
          {"epoch", at.epoch},
          {"step", at.step},
          {"samples", samples.size()},
          {"accuracy", json_number(ratio(static_cast<double>(correct), static_cast<double>(samples.size())))},
          {"classes", classes},
          {"confusion_matrix", counts},
          {"confusion_matrix_normalized", std::move(normalized)},
          {"per_class", std::move(per_class)},
          {"most_confused", std::move(most_confused)},
          {"top_losses", std::move(top)},
          {"predictions", std::move(predictions)}};
}

json interpret_regression(const std::vector<RegressedSample>& samples, std::size_t max_points, InterpretedAt at) {
  const std::vector<const RegressedSample*> sorted = by_name(samples);
  double absolute = 0, squared = 0;
  for (const RegressedSample* s : sorted) {
    absolute += std::abs(s->actual - s->predicted);
    squared += (s->actual - s->predicted) * (s->actual - s->predicted);
  }
  const std::size_t shown = std::min(max_points, sorted.size());
  json points = json::array();
  for (std::size_t k = 0; k < shown; ++k) {
    const RegressedSample& s = *sorted[k * sorted.size() / shown];
    points.push_back({{"sample", s.name},
                      {"actual", json_number(s.actual)},
                      {"predicted", json_number(s.predicted)},
                      {"residual", json_number(s.actual - s.predicted)}});
  }
  const auto count = static_cast<double>(samples.size());
  return {{"task", "regression"},
          {"epoch", at.epoch},
          {"step", at.step},
          {"samples", samples.size()},
          {"mae", json_number(samples.empty() ? NAN : absolute / count)},
          {"rmse", json_number(samples.empty() ? NAN : std::sqrt(squared / count))},
          {"points", std::move(points)}};
}

json per_class_scores(const json& interpretation) {
  if (!is_classification(interpretation)) return nullptr;
  json scores = json::object();
  for (const json& c : interpretation.at("per_class")) {
    scores[c.at("class").get<std::string>()] = {
        {"precision", c.at("precision")}, {"recall", c.at("recall")}, {"f1", c.at("f1")}, {"support", c.at("support")}};
  }
  return scores;
}

NamedValues per_class_values(const json& interpretation) {
  NamedValues values;
  if (!is_classification(interpretation)) return values;
  for (const char* score : {"precision", "recall", "f1"}) {
    for (const json& c : interpretation.at("per_class")) {
      values.emplace_back(fmt::format("interpretation/{}/{}", score, metric_name_part(c.at("class").get<std::string>())),
                          c.at(score).get<double>());
    }
  }
  return values;
}

void write_interpretation(const fs::path& file, const json& interpretation) {
  const std::string text = interpretation.dump(1) + "\n";
  const fs::path temporary = temporary_sibling(file);
  {
    std::ofstream out(temporary, std::ios::binary);
    out << text;
    out.close();
    if (!out) fail(ExitCode::output, "{}: cannot write the interpretation (disk full?)", temporary.string());
  }
  std::ifstream in(temporary, std::ios::binary);
  std::stringstream written;
  written << in.rdbuf();
  if (written.str() != text || json::parse(written.str(), nullptr, false) != interpretation) {
    fs::remove(temporary);
    fail(ExitCode::output, "{}: the interpretation written does not read back the same", temporary.string());
  }
  commit_file(temporary, file);
}

}  // namespace tp::train
