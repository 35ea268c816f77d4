// `trainpoint predict`'s request, and its output: one file of predictions (CSV or JSON lines, local or s3://).
// The ranks write it in parts, each part by the rank that owns it (part % world size), so that a killed run
// keeps what it wrote and a restart skips it; rank 0 waits for every part, then writes the file under a
// temporary name and renames it (S3: one upload), and removes the parts. Torch-free.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "s3/credentials.h"

namespace tp::storage {

enum class PredictionFormat { csv, jsonl };
constexpr std::array<std::string_view, 2> choice_names(PredictionFormat) { return {"csv", "jsonl"}; }

struct PredictRequest {
  std::string model;  // a model.pt trainpoint saved: a local path or s3://bucket/key
  std::string data;   // a local file or folder, or s3://bucket/prefix (staged under workdir first)
  std::string out;    // a local path or s3://bucket/key
  PredictionFormat format = PredictionFormat::csv;
  int top_k = 3;                 // classes given with their probabilities (at most the model's classes)
  std::int64_t batch_size = 64;
  int workers = 2;               // threads decoding images
  std::string id_column;         // tables: the column that names a row
  std::string label_column;      // tables: the true class or value
  std::int64_t max_bad_files = 0;
  std::int64_t part_size = 1024;  // samples a part holds: what a killed run may redo, per rank
  std::chrono::seconds wait_for_parts{1800};  // rank 0 waits this long for the other ranks' parts
  s3::ConnectionOptions connection;
  std::filesystem::path workdir;  // an s3:// model or data downloaded, parts before their upload
};

// One sample's prediction, as it is written.
struct Prediction {
  std::string id;         // the image's path below the data folder, or the table's id column or file:line
  // The class (multi-label: every class over 0.5, space-separated) or the value (a number, as the label; JSON
  // lines write both as numbers).
  std::string predicted;
  double probability = 0;                           // classification: the predicted class's
  std::vector<std::pair<std::string, double>> top;  // classification: the top k classes, most likely first
  std::optional<std::string> label;                 // the true class or value, where the data has one
};

// What the predictions of labelled samples add up to, summed over parts.
struct PredictionTally {
  std::int64_t samples = 0;
  std::int64_t labelled = 0;
  std::int64_t correct = 0;    // classification: the predicted class is the label
  double absolute_error = 0;   // regression: the sums over labelled samples
  double squared_error = 0;
  void add(const PredictionTally& other);
};

// What every line of the file holds.
struct PredictionLayout {
  PredictionFormat format = PredictionFormat::csv;
  bool classification = true;
  int top_k = 1;
  bool labelled = false;
};

// The CSV header line (with its newline; empty for JSON lines): id,prediction,probability, then
// class_2,probability_2 ... class_k,probability_k, then label; for regression id,prediction[,label].
std::string prediction_header(const PredictionLayout& layout);
// One line with its newline.
std::string format_prediction(const PredictionLayout& layout, const Prediction& prediction);

// The parts of one predictions file. `run_key` names what is predicted (the model's and the data's digests and
// the layout): parts another run left under the same output are not taken for this one's.
class PredictionParts {
 public:
  PredictionParts(const PredictRequest& request, const std::string& run_key, std::size_t count);
  ~PredictionParts();
  PredictionParts(const PredictionParts&) = delete;
  PredictionParts& operator=(const PredictionParts&) = delete;

  // Which parts are complete, written by this or an earlier attempt.
  std::vector<bool> written() const;
  // Writes part `index`'s lines, then its tally, which marks it complete.
  void write(std::size_t index, const std::string& lines, const PredictionTally& tally) const;
  // Rank 0: waits until every part is complete (PredictRequest::wait_for_parts; then tp::Error(peer_lost) naming
  // the first missing part, counted from 1 as the log counts them, and the rank of `world_size` that owns it), then writes the output, `header` first,
  // and removes the parts. Returns the tally of every part.
  PredictionTally merge(const std::string& header, int world_size) const;

  class Place;  // local directory or S3 prefix: where the parts and the output are
 private:
  std::unique_ptr<Place> place_;
  std::size_t count_;
  std::chrono::seconds wait_;
};

// An s3:// --data listed once: its objects appear as files under a local folder (laid out as local_copy lays
// them out), each downloaded the first time it is asked for, so that a rank fetches only the samples of its own
// parts. A file of the object's contents already there (an earlier attempt's) is kept. Thread-safe.
class RemoteData {
 public:
  // Throws tp::Error: data when nothing is there, usage (credentials), network.
  RemoteData(const std::string& location, const s3::ConnectionOptions& connection,
             const std::filesystem::path& directory);
  ~RemoteData();
  RemoteData(const RemoteData&) = delete;
  RemoteData& operator=(const RemoteData&) = delete;

  // The local path of what the location names: the folder of its objects, or the file of the one object.
  const std::filesystem::path& path() const;
  // Every object's local path, downloaded or not, in key order.
  const std::vector<std::filesystem::path>& files() const;
  // Whether `file` is one of the objects' local paths.
  bool holds(const std::filesystem::path& file) const;
  // The object's size. Throws tp::Error(data) for a file that is not one of the objects.
  std::uint64_t size(const std::filesystem::path& file) const;
  // Downloads those of `files` that are not on disk yet (all of them: files()). Throws tp::Error: data naming a
  // file that is not one of the objects, network, storage.
  void fetch(const std::vector<std::filesystem::path>& files) const;
  // The objects downloaded so far by this process, and those kept from an earlier attempt.
  std::size_t downloaded() const;
  std::size_t kept() const;

 private:
  struct Objects;
  std::unique_ptr<Objects> objects_;
};

// The RemoteData of an s3:// `location` under `directory`; null for a local path, which is read where it is.
std::shared_ptr<const RemoteData> remote_data(const std::string& location, const s3::ConnectionOptions& connection,
                                              const std::filesystem::path& directory);

// The local path of `location` (returned as it is) or of the s3:// object or prefix it names, copied under
// `directory` as `trainpoint s3 cp` copies (s3::stage; a file of the same contents there is kept). Throws
// tp::Error: `missing` when nothing is there (or a key cannot be a local path), network or storage for S3
// failures.
std::filesystem::path local_copy(const std::string& location, const s3::ConnectionOptions& connection,
                                 const std::filesystem::path& directory, ExitCode missing);

}  // namespace tp::storage
