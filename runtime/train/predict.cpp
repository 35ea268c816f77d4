#include "train/predict.h"

#include <spdlog/spdlog.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "common/digest.h"
#include "common/error.h"
#include "common/files.h"
#include "data/loader.h"
#include "data/prediction_inputs.h"
#include "model/model.h"

namespace tp::train {

namespace fs = std::filesystem;
using storage::Prediction;
using storage::PredictionTally;

namespace {

torch::jit::Module load_model(const fs::path& file, const std::string& as_named) {
  try {
    return torch::jit::load(file.string());
  } catch (const c10::Error& error) {
    fail(ExitCode::model, "--model {}: not a TorchScript model: {}", as_named, error.what_without_backtrace());
  }
}

// An s3:// --data as the data module reads files: the objects listed once, each downloaded when the loader
// announces the samples of a part (or a reader first asks for it), so that a rank fetches only its parts'.
class RemoteFiles final : public data::FileStore {
 public:
  explicit RemoteFiles(std::shared_ptr<const storage::RemoteData> data) : data_(std::move(data)) {}

  std::vector<fs::path> list(const fs::path& dir) const override {
    std::vector<fs::path> under;
    for (const fs::path& file : data_->files()) {
      const fs::path inside = file.lexically_relative(dir);
      if (!inside.empty() && *inside.begin() != "..") under.push_back(file);
    }
    if (under.empty()) fail(ExitCode::data, "{}: no such directory among the objects listed", dir.string());
    data::sort_paths(under);
    return under;
  }
  bool exists(const fs::path& file) const override { return data_->holds(file); }
  std::string read(const fs::path& file) const override { return read_file(acquire(file), ExitCode::data); }
  void will_read(const std::vector<fs::path>& files) const override { data_->fetch(files); }
  fs::path acquire(const fs::path& file) const override {
    data_->fetch({file});
    return file;
  }
  std::uint64_t size(const fs::path& file) const override { return data_->size(file); }

 private:
  std::shared_ptr<const storage::RemoteData> data_;
};

// The data to predict, its files read through `store`.
struct DataFiles {
  fs::path path;
  std::shared_ptr<const data::FileStore> store;
  std::shared_ptr<const storage::RemoteData> remote;  // an s3:// --data's objects; null for a local one
};

// A local --data as it is. An s3:// one listed once: its objects downloaded under `directory` as this rank
// predicts them, except a table's, whose one CSV is downloaded before it is read. The images an image model's
// CSV lists are beside it: an s3:// CSV is read from the listing of its folder.
DataFiles data_files(const storage::PredictRequest& request, const data::Schema& schema, const fs::path& directory) {
  const bool table = !schema.feature_names.empty();
  const bool image_csv = !table && fs::path(request.data).extension() == ".csv";
  const std::string listed = image_csv ? request.data.substr(0, request.data.rfind('/') + 1) : request.data;
  DataFiles data;
  data.remote = storage::remote_data(listed, request.connection, directory);
  if (!data.remote) {
    data.path = fs::absolute(request.data);
    data.store = data::local_files();
    return data;
  }
  if (table) data.remote->fetch(data.remote->files());
  data.path = image_csv ? data.remote->path() / fs::path(request.data).filename() : data.remote->path();
  data.store = std::make_shared<RemoteFiles>(data.remote);
  return data;
}

// What names this prediction run's parts: the model's bytes, the samples, and how the lines are written.
std::string run_key(const fs::path& model_file, const data::Dataset& samples, const storage::PredictionLayout& layout,
                    std::int64_t part_size) {
  std::string identity = file_digest_hex(model_file, HashAlgorithm::sha256, ExitCode::model);
  for (std::size_t i = 0; i < samples.size(); ++i) identity += "\n" + samples.sample_name(i);
  identity += fmt::format("\n{} {} {} {} {}", static_cast<int>(layout.format), layout.classification, layout.top_k,
                          layout.labelled, part_size);
  return sha256_hex(identity).substr(0, 16);
}

// One batch's outputs as predictions, with what the labelled ones add up to. The scores, the top k and the
// labels are read as whole tensors, not element by element.
class BatchReader {
 public:
  BatchReader(const data::Schema& schema, const storage::PredictionLayout& layout) : schema_(schema), layout_(layout) {}

  void read(const torch::Tensor& outputs, const torch::Tensor& targets, const data::Dataset& samples,
            const std::vector<std::size_t>& indices, std::string& lines, PredictionTally& tally) const {
    const auto rows = static_cast<std::int64_t>(indices.size());
    const torch::Tensor scores = (schema_.classification
                                      ? (schema_.multi_label ? outputs.sigmoid() : outputs.softmax(1))
                                      : outputs.reshape({rows, 1}))
                                     .to(torch::kDouble)
                                     .contiguous();
    // One number a sample, or (multi-label) a row of 0 and 1 over the classes.
    const torch::Tensor labels = targets.to(torch::kCPU).to(torch::kDouble).reshape({rows, -1}).contiguous();
    const auto k = std::min<std::int64_t>(std::max(layout_.top_k, 1), scores.size(1));
    const auto [top_values, top_classes] = scores.topk(k, 1);
    const torch::Tensor values = top_values.contiguous();
    const torch::Tensor classes = top_classes.contiguous();
    for (std::int64_t r = 0; r < rows; ++r) {
      Prediction prediction;
      prediction.id = samples.sample_name(indices[static_cast<std::size_t>(r)]);
      const double* label = labels.data_ptr<double>() + r * labels.size(1);
      if (schema_.classification) {
        classify(scores.data_ptr<double>() + r * scores.size(1), values.data_ptr<double>() + r * k,
                 classes.data_ptr<std::int64_t>() + r * k, k, prediction);
      } else {
        prediction.predicted = fmt::format("{:.7g}", scores.data_ptr<double>()[r]);
      }
      if (layout_.labelled) add_label(label, scores.data_ptr<double>()[r], prediction, tally);
      ++tally.samples;
      lines += storage::format_prediction(layout_, prediction);
    }
  }

 private:
  void classify(const double* probabilities, const double* top_values, const std::int64_t* top_classes,
                std::int64_t k, Prediction& prediction) const {
    for (std::int64_t i = 0; i < k; ++i) {
      prediction.top.emplace_back(schema_.class_names.at(static_cast<std::size_t>(top_classes[i])), top_values[i]);
    }
    prediction.probability = top_values[0];
    if (!schema_.multi_label) {
      prediction.predicted = prediction.top.front().first;
      return;
    }
    for (std::size_t c = 0; c < schema_.class_names.size(); ++c) {
      if (probabilities[c] <= 0.5) continue;
      prediction.predicted += (prediction.predicted.empty() ? "" : " ") + schema_.class_names[c];
    }
  }

  // The true class, classes (multi-label: `label` is a row over the classes) or value (`value`: the regression's
  // prediction), and what it adds to the tally.
  void add_label(const double* label, double value, Prediction& prediction, PredictionTally& tally) const {
    ++tally.labelled;
    if (schema_.multi_label) {
      prediction.label.emplace();
      for (std::size_t c = 0; c < schema_.class_names.size(); ++c) {
        if (label[c] > 0.5) *prediction.label += (prediction.label->empty() ? "" : " ") + schema_.class_names[c];
      }
    } else if (schema_.classification) {
      prediction.label = schema_.class_names.at(static_cast<std::size_t>(label[0]));
    } else {
      prediction.label = fmt::format("{:.7g}", label[0]);
      tally.absolute_error += std::abs(value - label[0]);
      tally.squared_error += (value - label[0]) * (value - label[0]);
      return;
    }
    tally.correct += prediction.predicted == *prediction.label;
  }

  const data::Schema& schema_;
  storage::PredictionLayout layout_;
};

struct PartResult {
  std::string lines;
  PredictionTally tally;
};

PartResult predict_part(torch::jit::Module& model, const data::PredictionInputs& inputs, const BatchReader& reader,
                        std::vector<std::size_t> indices, const storage::PredictRequest& request, c10::Device device) {
  PartResult result;
  data::LoaderOptions options;
  options.batch_size = request.batch_size;
  options.workers = request.workers;
  options.pin_memory = device.is_cuda();
  data::Loader loader(inputs.samples, indices, /*epoch=*/0, options);
  std::size_t first = 0;
  while (auto batch = loader.next()) {
    const auto count = static_cast<std::size_t>(batch->inputs.size(0));
    const torch::Tensor outputs =
        model.forward({batch->inputs.to(device, /*non_blocking=*/true)}).toTensor().to(torch::kCPU).to(torch::kFloat);
    const std::vector<std::size_t> batch_indices(indices.begin() + static_cast<std::ptrdiff_t>(first),
                                                 indices.begin() + static_cast<std::ptrdiff_t>(first + count));
    reader.read(outputs, batch->targets, *inputs.samples, batch_indices, result.lines, result.tally);
    first += count;
  }
  return result;
}

void log_summary(const PredictionTally& tally, const data::Schema& schema, const std::string& out) {
  std::string measure;
  if (tally.labelled > 0 && schema.classification && !schema.multi_label) {
    measure = fmt::format("; accuracy {:.4f} on {} labelled samples", static_cast<double>(tally.correct) /
                          static_cast<double>(tally.labelled), tally.labelled);
  } else if (tally.labelled > 0 && !schema.classification) {
    const auto n = static_cast<double>(tally.labelled);
    measure = fmt::format("; mae {:.6g}, mse {:.6g} on {} labelled samples", tally.absolute_error / n,
                          tally.squared_error / n, tally.labelled);
  }
  spdlog::info("predictions of {} samples written to {}{}", tally.samples, out, measure);
}

}  // namespace

int predict(const storage::PredictRequest& request, int rank, int world_size) {
  const fs::path inputs_dir = request.workdir / "predict-inputs";
  const fs::path model_file = storage::local_copy(request.model, request.connection, inputs_dir / "model", ExitCode::model);
  torch::jit::Module model = load_model(model_file, request.model);
  const data::Schema schema = model::saved_schema(model, request.model);
  const DataFiles data = data_files(request, schema, inputs_dir / "data");
  const data::PredictionInputs inputs = data::open_prediction_inputs(
      data.path, schema, {request.id_column, request.label_column}, request.max_bad_files, data.store);

  const storage::PredictionLayout layout{request.format, schema.classification,
                                         static_cast<int>(std::min<std::int64_t>(request.top_k, schema.num_outputs)),
                                         inputs.labelled};
  const std::size_t samples = inputs.samples->size();
  const auto part_size = static_cast<std::size_t>(request.part_size);
  const std::size_t parts_count = (samples + part_size - 1) / part_size;
  const storage::PredictionParts parts(request, run_key(model_file, *inputs.samples, layout, request.part_size),
                                       parts_count);

  const c10::Device device = torch::cuda::is_available() ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  model::configure_process_for_training();
  model.to(device);
  model.eval();
  c10::InferenceMode inference;  // no autograd at all, not only no gradients
  const BatchReader reader(schema, layout);
  const std::vector<bool> written = parts.written();
  std::size_t skipped = 0;
  for (std::size_t part = static_cast<std::size_t>(rank); part < parts_count; part += static_cast<std::size_t>(world_size)) {
    if (written[part]) {
      ++skipped;
      continue;
    }
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::size_t> indices(std::min(part_size, samples - part * part_size));
    std::iota(indices.begin(), indices.end(), part * part_size);
    const PartResult result = predict_part(model, inputs, reader, indices, request, device);
    parts.write(part, result.lines, result.tally);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    spdlog::info("part {} of {} written: {} samples, {:.0f} per second", part + 1, parts_count, indices.size(),
                 static_cast<double>(indices.size()) / std::max(seconds, 1e-9));
  }
  if (skipped > 0) spdlog::info("{} parts of rank {} were written by an earlier attempt: not predicted again", skipped, rank);
  if (data.remote) {
    spdlog::info("rank {} downloaded {} of the {} objects of {} ({} kept from an earlier attempt)", rank,
                 data.remote->downloaded(), data.remote->files().size(), request.data, data.remote->kept());
  }
  if (rank != 0) return 0;
  log_summary(parts.merge(storage::prediction_header(layout), world_size), schema, request.out);
  return 0;
}

}  // namespace tp::train
