#include "train/metrics.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCsvHeader =
    "epoch,step,lr,train_loss,valid_loss,accuracy,error_rate,top_k_accuracy,mae,mse,seconds,f1\n";

double number_of(const json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}
std::string cell(double value) {
  return std::isnan(value) ? std::string() : fmt::format("{}", value);
}

// An epoch's metrics as its metrics.jsonl line holds them, without the line's extra entries.
json epoch_json(const EpochMetrics& m) {
  json line{{"epoch", m.epoch},
              {"step", m.step},
              {"lr", m.lr},
              {"train_loss", json_number(m.train_loss)},
              {"valid_loss", json_number(m.valid_loss)},
              {"accuracy", json_number(m.valid_accuracy)},
              {"error_rate", json_number(m.error_rate)},
              {"top_k_accuracy", json_number(m.top_k_accuracy)},
              {"f1", json_number(m.f1)},
              {"mae", json_number(m.mae)},
              {"mse", json_number(m.mse)},
              {"seconds", m.seconds}};
  if (!m.class_f1.empty()) {
    json scores = json::object();
    for (const auto& [name, value] : m.class_f1) scores[name] = json_number(value);
    line["class_f1"] = scores;
  }
  return line;
}

std::string json_line(const EpochMetrics& m, const json& extra) {
  json line = epoch_json(m);
  if (extra.is_object()) line.update(extra);
  return line.dump() + "\n";
}

// The metrics of a metrics.jsonl line; those it lacks (written before they were) NaN.
EpochMetrics epoch_metrics(const json& line) {
  EpochMetrics m;
  m.epoch = line.value("epoch", std::int64_t{0});
  m.step = line.value("step", std::int64_t{0});
  m.lr = number_of(line.value("lr", json()));
  m.train_loss = number_of(line.value("train_loss", json()));
  m.valid_loss = number_of(line.value("valid_loss", json()));
  m.valid_accuracy = number_of(line.value("accuracy", json()));
  m.error_rate = number_of(line.value("error_rate", json()));
  m.top_k_accuracy = number_of(line.value("top_k_accuracy", json()));
  m.f1 = number_of(line.value("f1", json()));
  const json class_f1 = line.value("class_f1", json::object());  // items() must not outlive it
  for (const auto& [name, value] : class_f1.items()) m.class_f1.emplace_back(name, number_of(value));
  m.mae = number_of(line.value("mae", json()));
  m.mse = number_of(line.value("mse", json()));
  m.seconds = number_of(line.value("seconds", json()));
  return m;
}

// The entries of a metrics.jsonl line that are not `m`'s metrics (per_class, early_stop...).
json extra_entries(const json& line, const EpochMetrics& m) {
  const json metrics = epoch_json(m);
  json extra = json::object();
  for (const auto& [key, value] : line.items()) {
    if (!metrics.contains(key)) extra[key] = value;
  }
  return extra;
}

std::string csv_line(const EpochMetrics& m) {
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", m.epoch, m.step, m.lr, cell(m.train_loss),
                     cell(m.valid_loss), cell(m.valid_accuracy), cell(m.error_rate), cell(m.top_k_accuracy),
                     cell(m.mae), cell(m.mse), m.seconds, cell(m.f1));
}

std::string json_line(const StepRecord& s) {
  json line{{"step", s.step}, {"lr", s.lr}, {"train_loss", json_number(s.train_loss)}};
  if (!std::isnan(s.seconds)) {
    line["step_s"] = s.seconds;
    for (std::size_t part = 0; part < kStepParts; ++part) {
      line[std::string(step_part_name(static_cast<StepPart>(part))) + "_s"] = s.times.seconds[part];
    }
  }
  return line.dump() + "\n";
}

// A line of steps.jsonl; its timing is NaN when it has none (written before steps were timed).
StepRecord step_record(const json& line) {
  StepRecord s(line.value("step", std::int64_t{0}), number_of(line.value("lr", json())),
               number_of(line.value("train_loss", json())));
  s.seconds = number_of(line.value("step_s", json()));
  for (std::size_t part = 0; part < kStepParts; ++part) {
    s.times.seconds[part] = number_of(line.value(std::string(step_part_name(static_cast<StepPart>(part))) + "_s", json()));
  }
  return s;
}

// The JSON lines of `file`; a line that does not parse (the last one of a killed run) ends the list.
std::vector<json> read_lines(const fs::path& file) {
  std::vector<json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    json parsed = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded() || !parsed.is_object()) break;
    lines.push_back(std::move(parsed));
  }
  return lines;
}

}  // namespace

ClassValues class_f1_scores(const ClassCounts& counts, const std::vector<std::string>& class_names) {
  ClassValues scores;
  for (std::size_t c = 0; c < class_names.size(); ++c) {
    const double seen = counts.predicted.at(c) + counts.actual.at(c);
    scores.emplace_back(class_names[c], seen > 0 ? 2 * counts.true_positives.at(c) / seen
                                                 : std::numeric_limits<double>::quiet_NaN());
  }
  return scores;
}

double macro_average(const ClassValues& scores) {
  double sum = 0;
  int counted = 0;
  for (const auto& score : scores) {
    if (std::isnan(score.second)) continue;
    sum += score.second;
    ++counted;
  }
  return counted > 0 ? sum / counted : std::numeric_limits<double>::quiet_NaN();
}

json json_number(double value) {
  return std::isnan(value) ? json(nullptr) : json(value);
}

NamedValues step_values(const StepRecord& s) {
  NamedValues values{{"train/loss", s.train_loss}, {"train/lr", s.lr}};
  if (!std::isnan(s.seconds)) {
    values.emplace_back("step_time/step_s", s.seconds);
    for (std::size_t part = 0; part < kStepParts; ++part) {
      values.emplace_back(std::string("step_time/") + step_part_name(static_cast<StepPart>(part)) + "_s",
                          s.times.seconds[part]);
    }
  }
  return values;
}

NamedValues epoch_values(const EpochMetrics& m, double samples_per_second, bool images) {
  NamedValues values{{"train/epoch_loss", m.train_loss},
          {"epoch/epoch", static_cast<double>(m.epoch)},
          {"epoch/seconds", m.seconds},
          {"epoch/lr", m.lr},
          {"valid/loss", m.valid_loss},
          {"valid/accuracy", m.valid_accuracy},
          {"valid/error_rate", m.error_rate},
          {"valid/top_k_accuracy", m.top_k_accuracy},
          {"valid/f1", m.f1},
          {"valid/mae", m.mae},
          {"valid/mse", m.mse},
          {images ? "throughput/images_per_s" : "throughput/rows_per_s", samples_per_second}};
  for (const auto& [name, value] : m.class_f1) values.emplace_back("valid/f1/" + name, value);
  return values;
}

std::string describe_validation(const EpochMetrics& m, std::int64_t top_k) {
  std::string text;
  auto add = [&](const std::string& name, double value) {
    if (!std::isnan(value)) text += fmt::format("{}{} {:.4f}", text.empty() ? "" : " ", name, value);
  };
  add("valid_loss", m.valid_loss);
  add("accuracy", m.valid_accuracy);
  add("error_rate", m.error_rate);
  add(fmt::format("top_{}_accuracy", top_k), m.top_k_accuracy);
  add("f1", m.f1);
  add("mae", m.mae);
  add("mse", m.mse);
  return text;
}

std::vector<EpochMetrics> read_epoch_metrics(const fs::path& output_dir) {
  std::vector<EpochMetrics> epochs;
  for (const json& line : read_lines(output_dir / "metrics.jsonl")) epochs.push_back(epoch_metrics(line));
  return epochs;
}

MetricsLog::MetricsLog(const fs::path& output_dir, std::int64_t epochs_done, std::int64_t steps_done)
    : directory_(output_dir) {
  std::string steps_text;
  for (const json& line : read_lines(output_dir / "steps.jsonl")) {
    const StepRecord s = step_record(line);
    if (s.step < 1 || s.step > steps_done) continue;
    steps_.push_back(s);
    steps_text += json_line(s);
  }
  // The extra entries of an epoch's line stay (per_class: the last epoch of an earlier start, which ended its run
  // then).
  std::string json_text;
  std::string csv_text = kCsvHeader;
  for (const json& line : read_lines(output_dir / "metrics.jsonl")) {
    const EpochMetrics m = epoch_metrics(line);
    if (m.epoch < 1 || m.epoch > epochs_done) continue;
    epochs_.push_back(m);
    json_text += json_line(m, extra_entries(line, m));
    csv_text += csv_line(m);
  }
  write_file_atomic(output_dir / "steps.jsonl", steps_text);
  write_file_atomic(output_dir / "metrics.jsonl", json_text);
  write_file_atomic(output_dir / "metrics.csv", csv_text);
  steps_file_.open(output_dir / "steps.jsonl", std::ios::app);
  json_.open(output_dir / "metrics.jsonl", std::ios::app);
  csv_.open(output_dir / "metrics.csv", std::ios::app);
  if (!steps_file_ || !json_ || !csv_)
    fail(ExitCode::output, "cannot write metrics in {}", output_dir.string());
}

void MetricsLog::write_step(const StepRecord& record) {
  steps_.push_back(record);
  steps_file_ << json_line(record);
}

void MetricsLog::write_epoch(const EpochMetrics& metrics, const json& extra) {
  epochs_.push_back(metrics);
  json_ << json_line(metrics, extra);
  csv_ << csv_line(metrics);
  for (std::ofstream* file : {&steps_file_, &json_, &csv_}) {
    file->flush();
    if (!*file)
      fail(ExitCode::output, "cannot write the metrics in {}: writing failed (disk full?)",
           directory_.string());
  }
}

}  // namespace tp::train
