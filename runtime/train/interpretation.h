// What the model gets wrong at the end of training, as fastai's ClassificationInterpretation shows it: for
// classification the confusion matrix, precision, recall and F1 per class with their support, the most
// confused pairs and the validation samples with the highest loss; for regression predicted against actual.
// Rank 0 builds it from every rank's final validation predictions and writes interpretation.json, which
// report.html draws (docs/training.md, "What the model gets wrong"). Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/metrics.h"

namespace tp::train {

// One validation sample of a single-label classification.
struct ClassifiedSample {
  std::string name;  // data::Dataset::sample_name: a file relative to the data's folder, a CSV file's line
  std::int64_t actual = 0;     // class indices
  std::int64_t predicted = 0;  // the highest score
  double loss = 0;             // the sample's cross-entropy
  std::string thumbnail;       // JPEG bytes of what the model saw; only for images among a rank's highest losses
};

// One validation sample of a regression.
struct RegressedSample {
  std::string name;
  double actual = 0;
  double predicted = 0;
};

// A rank's samples as one string for dist::all_gather_strings (CBOR), and every rank's back in one list.
std::string pack(const std::vector<ClassifiedSample>& samples);
std::string pack(const std::vector<RegressedSample>& samples);
std::vector<ClassifiedSample> unpack_classified(const std::vector<std::string>& packed);
std::vector<RegressedSample> unpack_regressed(const std::vector<std::string>& packed);

// The indices of the `count` samples with the highest loss, highest first (ties by name): the ones a rank
// makes thumbnails of, and the report's top losses.
std::vector<std::size_t> highest_losses(const std::vector<ClassifiedSample>& samples, std::size_t count);

// Where in training the predictions were made.
struct InterpretedAt {
  std::int64_t epoch = 0;  // 1-based
  std::int64_t step = 0;
};

// interpretation.json of a classification (field names: docs/training.md). `top_losses`: how many of the
// samples with the highest loss it lists (report.top_losses).
nlohmann::json interpret_classification(const std::vector<ClassifiedSample>& samples,
                                        const std::vector<std::string>& classes, std::size_t top_losses,
                                        InterpretedAt at);

// interpretation.json of a regression: every sample's error summed up, and up to `max_points` of them
// (evenly spread over the samples sorted by name) for the scatter plots.
nlohmann::json interpret_regression(const std::vector<RegressedSample>& samples, std::size_t max_points,
                                    InterpretedAt at);

// The per-class scores of a classification's interpretation as metrics.jsonl's "per_class" object:
// {"<class>": {"precision", "recall", "f1", "support"}}; null for a regression or no interpretation (null).
nlohmann::json per_class_scores(const nlohmann::json& interpretation);

// The per-class scores for the sinks: interpretation/precision/<class>, interpretation/recall/<class>,
// interpretation/f1/<class> (bytes of the class name that MLflow does not take in a metric's name as '_'); none
// for a regression or no interpretation (null).
NamedValues per_class_values(const nlohmann::json& interpretation);

// Writes `interpretation` to `file` atomically: a temporary file, read back and compared, then renamed.
// Throws tp::Error (output) when it cannot be written or does not read back the same.
void write_interpretation(const std::filesystem::path& file, const nlohmann::json& interpretation);

}  // namespace tp::train
