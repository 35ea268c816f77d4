// What the model gets wrong at the end of training, as fastai's ClassificationInterpretation shows it: for
// classification the confusion matrix, precision, recall and F1 per class with their support, the most
// confused pairs and the validation samples with the highest loss; for regression predicted against actual.
// Rank 0 builds it (an Interpretation) from every rank's final validation predictions and writes it as
// interpretation.json, whose field names only to_json writes; report.html, metrics.jsonl's per_class and the
// sinks read the struct (docs/training.md, "What the model gets wrong"). Torch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "train/metrics.h"

namespace tp::train {

// One validation sample of a single-label classification.
struct ClassifiedSample {
  std::string name;  // data::Dataset::sample_name: a file relative to the data's folder, a CSV file's line
  std::int64_t actual = 0;     // class indices
  std::int64_t predicted = 0;  // the highest score
  double loss = 0;             // the sample's cross-entropy
  std::string thumbnail;       // JPEG bytes of what the model saw, for images among a rank's highest losses
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

// A class's scores as scikit-learn's precision_recall_fscore_support with zero_division=0.
struct ClassScores {
  std::string name;
  double precision = 0;
  double recall = 0;
  double f1 = 0;
  std::int64_t support = 0;  // the validation samples of the class
};

// `count` samples of class `actual` predicted as `predicted`.
struct ConfusedPair {
  std::string actual;
  std::string predicted;
  std::int64_t count = 0;
};

// One of the samples with the highest loss, its classes by name.
struct TopLoss {
  std::string sample;
  std::string actual;
  std::string predicted;
  double loss = 0;        // NaN: none (null in interpretation.json, blank in the report)
  std::string thumbnail;  // a data:image/jpeg;base64 URI of what the model saw; empty when not an image
};

struct ClassificationInterpretation {
  double accuracy = 0;  // the share predicted right
  std::vector<std::string> classes;
  std::vector<std::vector<std::int64_t>> confusion_matrix;  // [actual][predicted]
  std::vector<std::vector<double>> confusion_matrix_normalized;  // each row over its sum; no samples: zeros
  std::vector<ClassScores> per_class;                            // in class order
  std::vector<ConfusedPair> most_confused;                       // the highest count first
  std::vector<TopLoss> top_losses;                               // the highest loss first
  std::vector<ClassifiedSample> predictions;  // every sample by name, without thumbnails
};

struct RegressionInterpretation {
  double mae = 0;   // NaN without samples
  double rmse = 0;  // NaN without samples
  std::vector<RegressedSample> points;  // some of the samples, evenly spread over them by name
};

// What the trained model gets wrong: interpretation.json's content.
struct Interpretation {
  InterpretedAt at;
  std::size_t samples = 0;  // of every rank, each once
  std::variant<ClassificationInterpretation, RegressionInterpretation> task;
};

// The interpretation of a classification. `top_losses`: how many of the samples with the highest loss it
// lists (report.top_losses).
Interpretation interpret_classification(const std::vector<ClassifiedSample>& samples,
                                        const std::vector<std::string>& classes, std::size_t top_losses,
                                        InterpretedAt at);

// The interpretation of a regression: every sample's error summed up, and up to `max_points` of them
// (evenly spread over the samples sorted by name) for the scatter plots.
Interpretation interpret_regression(const std::vector<RegressedSample>& samples, std::size_t max_points,
                                    InterpretedAt at);

// The per-class scores of a classification's interpretation as metrics.jsonl's "per_class" object:
// {"<class>": {"precision", "recall", "f1", "support"}}; null for a regression or no interpretation.
nlohmann::json per_class_scores(const std::optional<Interpretation>& interpretation);

// The per-class scores for the sinks: interpretation/precision/<class>, interpretation/recall/<class>,
// interpretation/f1/<class>, the class name as it is (the MLflow sink makes names it does not take safe);
// none for a regression or no interpretation.
NamedValues per_class_values(const std::optional<Interpretation>& interpretation);

// interpretation.json's content (field names: docs/training.md).
nlohmann::json to_json(const Interpretation& interpretation);

// Writes to_json(interpretation) to `file` atomically: a temporary file, read back and compared, then
// renamed. Throws tp::Error (output) when it cannot be written or does not read back the same.
void write_interpretation(const std::filesystem::path& file, const Interpretation& interpretation);

}  // namespace tp::train
