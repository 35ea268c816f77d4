// What a run measures and where it is written: one record per optimizer step (steps.jsonl) and one
// per epoch (metrics.jsonl and metrics.csv). Torch-free, so the report can be built and tested alone.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "train/step_time.h"

namespace tp::train {

// A value per class, named, in the classes' order.
using ClassValues = std::vector<std::pair<std::string, double>>;

// How often each class (each label, multi-label) was predicted, was the truth, and both, in a validation.
struct ClassCounts {
  std::vector<double> true_positives;
  std::vector<double> predicted;
  std::vector<double> actual;
};

// Each class's F1 (2 TP / (predicted + actual)), NaN for a class neither present nor predicted.
ClassValues class_f1_scores(const ClassCounts& counts, const std::vector<std::string>& class_names);
// The mean of the scores that are not NaN (scikit-learn's macro average over the labels it saw); NaN for none.
double macro_average(const ClassValues& scores);

// Validation metrics are NaN when they do not apply: no validation data, or a metric of the other
// task (accuracy for regression, MAE for classification), or top-k with k or fewer classes.
struct EpochMetrics {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t step = 0;   // optimizer steps taken by the end of the epoch
  double lr = 0;
  double train_loss = 0;
  double valid_loss = 0;
  double valid_accuracy = 0;  // classification; multi-label: the mean of the per-label decisions
  double error_rate = 0;      // 1 - valid_accuracy
  double top_k_accuracy = 0;  // single-label classification with more than train.top_k classes
  double f1 = std::numeric_limits<double>::quiet_NaN();  // classification: the mean F1 over the classes (macro), as scikit-learn's
  ClassValues class_f1;       // classification: each class's F1, NaN for a class neither present nor predicted
  double mae = 0;             // regression: mean absolute error
  double mse = 0;             // regression: mean squared error
  double seconds = 0;
};

// One optimizer step: its number (1-based), learning rate and the mean loss of its batches on rank 0, and
// where its time went on rank 0 (steps.jsonl: "step_s" and "<part>_s"; NaN in records written before).
struct StepRecord {
  StepRecord() = default;
  StepRecord(std::int64_t step_number, double step_lr, double loss)
      : step(step_number), lr(step_lr), train_loss(loss) {}

  std::int64_t step = 0;
  double lr = 0;
  double train_loss = 0;
  double seconds = std::numeric_limits<double>::quiet_NaN();
  StepTimes times;
};

// One step of the learning-rate range test.
struct LrFindPoint {
  std::int64_t step = 0;  // 1-based
  double lr = 0;
  double loss = 0;           // the step's loss, averaged over ranks
  double smoothed_loss = 0;  // debiased exponential moving average
};

// A metric for JSON: null when it does not apply (NaN).
nlohmann::json json_number(double value);

// The records as named values for the sinks (telemetry/sinks.h: TensorBoard's tags), NaN where a metric does not
// apply. A step: train/loss, train/lr, step_time/step_s and step_time/<part>_s (steps.jsonl's keys). An epoch, at
// its last step: train/epoch_loss, epoch/epoch, epoch/seconds, epoch/lr, valid/loss, valid/accuracy,
// valid/error_rate, valid/top_k_accuracy, valid/f1, valid/f1/<class>, valid/mae, valid/mse (metrics.jsonl's),
// and the throughput of all
// ranks, throughput/images_per_s (image data) or throughput/rows_per_s (tables).
using NamedValues = std::vector<std::pair<std::string, double>>;
NamedValues step_values(const StepRecord& record);
NamedValues epoch_values(const EpochMetrics& metrics, double samples_per_second, bool images);

// The validation metrics that apply, as "valid_loss 0.1234 accuracy 0.9000 ..." for the epoch log line.
std::string describe_validation(const EpochMetrics& metrics, std::int64_t top_k);

// The epochs recorded in `output_dir`/metrics.jsonl, read without changing anything.
std::vector<EpochMetrics> read_epoch_metrics(const std::filesystem::path& output_dir);

// The records of a run in its output directory. Opening keeps only the records up to where training
// resumes (all of them are rewritten), so a run resumed from an older checkpoint has no duplicates
// and a fresh run starts with empty files.
class MetricsLog {
 public:
  MetricsLog(const std::filesystem::path& output_dir, std::int64_t epochs_done, std::int64_t steps_done);
  void write_step(const StepRecord& record);
  // Appends the epoch and flushes every file, so they can be read while training runs. The entries of `extra`
  // (an object, or null) join its metrics.jsonl line: the last epoch's `per_class` scores
  // (train/interpretation.h), the `early_stop` verdict of the epoch a run stopped at. Reopened, the log keeps
  // the extra entries of the lines it keeps.
  void write_epoch(const EpochMetrics& metrics, const nlohmann::json& extra = nullptr);
  const std::vector<StepRecord>& steps() const { return steps_; }
  const std::vector<EpochMetrics>& epochs() const { return epochs_; }

 private:
  std::filesystem::path directory_;
  std::ofstream steps_file_;
  std::ofstream json_;
  std::ofstream csv_;
  std::vector<StepRecord> steps_;
  std::vector<EpochMetrics> epochs_;
};

}  // namespace tp::train
