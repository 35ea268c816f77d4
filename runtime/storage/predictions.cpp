#include "storage/predictions.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "common/files.h"
#include "s3/client.h"
#include "s3/paths.h"
#include "s3/stage.h"

namespace tp::storage {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// A CSV cell, quoted when it holds a comma, quote or line break (RFC 4180).
std::string csv_cell(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string probability_text(double probability) { return fmt::format("{:.6g}", probability); }

std::string part_name(std::size_t index, const char* suffix) { return fmt::format("part-{:06d}.{}", index, suffix); }

}  // namespace

void PredictionTally::add(const PredictionTally& other) {
  samples += other.samples;
  labelled += other.labelled;
  correct += other.correct;
  absolute_error += other.absolute_error;
  squared_error += other.squared_error;
}

std::string prediction_header(const PredictionLayout& layout) {
  if (layout.format == PredictionFormat::jsonl) return "";
  std::string header = "id,prediction";
  if (layout.classification) {
    header += ",probability";
    for (int k = 2; k <= layout.top_k; ++k) header += fmt::format(",class_{0},probability_{0}", k);
  }
  return header + (layout.labelled ? ",label\n" : "\n");
}

std::string format_prediction(const PredictionLayout& layout, const Prediction& prediction) {
  if (layout.format == PredictionFormat::jsonl) {
    // A regression's value and label are JSON numbers.
    const auto value = [&](const std::string& text) { return layout.classification ? Json(text) : Json(std::stod(text)); };
    Json line{{"id", prediction.id}, {"prediction", value(prediction.predicted)}};
    if (layout.classification) {
      line["probability"] = prediction.probability;
      Json top = Json::array();
      for (const auto& [name, probability] : prediction.top) top.push_back({{"class", name}, {"probability", probability}});
      line["top_k"] = std::move(top);
    }
    if (prediction.label) line["label"] = value(*prediction.label);
    return line.dump() + "\n";
  }
  std::string line = csv_cell(prediction.id) + "," + csv_cell(prediction.predicted);
  if (layout.classification) {
    line += "," + probability_text(prediction.probability);
    for (std::size_t k = 1; k < static_cast<std::size_t>(layout.top_k); ++k) {
      line += k < prediction.top.size()
                  ? "," + csv_cell(prediction.top[k].first) + "," + probability_text(prediction.top[k].second)
                  : std::string(",,");
    }
  }
  if (layout.labelled) line += "," + csv_cell(prediction.label.value_or(""));
  return line + "\n";
}

// Where the parts and the output are. Part files are named by part_name(); a part is complete when its
// ".json" (the tally) is there, which is written after its ".rows".
class PredictionParts::Place {
 public:
  virtual ~Place() = default;
  virtual std::vector<std::string> list() const = 0;  // the file names among the parts
  virtual void put(const std::string& name, const std::string& bytes) const = 0;
  virtual std::string get(const std::string& name) const = 0;
  virtual void remove_parts() const = 0;
  // A local file to write the output into, then publish() it under the output's name.
  virtual fs::path output_draft() const = 0;
  virtual void publish(const fs::path& draft) const = 0;
};

namespace {

void create_folder(const fs::path& folder) {
  std::error_code error;
  fs::create_directories(folder, error);
  if (error) fail(write_failure_class(error.value()), "predict: cannot make {}: {}", folder.string(), error.message());
}

class LocalPlace final : public PredictionParts::Place {
 public:
  LocalPlace(fs::path out, const std::string& run_key)
      : out_(std::move(out)), parts_(fs::path(out_.string() + ".parts") / run_key) {}
  std::vector<std::string> list() const override {
    std::vector<std::string> names;
    std::error_code missing;  // no folder: no parts (a merge removed them)
    for (const auto& entry : fs::directory_iterator(parts_, missing)) names.push_back(entry.path().filename().string());
    return names;
  }
  void put(const std::string& name, const std::string& bytes) const override {
    create_folder(parts_);
    write_file_atomic(parts_ / name, bytes);
  }
  std::string get(const std::string& name) const override { return read_file(parts_ / name, ExitCode::output); }
  void remove_parts() const override {
    std::error_code ignored;
    fs::remove_all(parts_, ignored);
    fs::remove(parts_.parent_path(), ignored);  // only when no other run's parts are left
  }
  fs::path output_draft() const override { return temporary_sibling(out_); }
  void publish(const fs::path& draft) const override { commit_file(draft, out_); }

 private:
  fs::path out_;
  fs::path parts_;
};

class S3Place final : public PredictionParts::Place {
 public:
  S3Place(const std::string& out, const std::string& run_key, const PredictRequest& request)
      : url_(s3::parse_s3_url(out)),
        parts_prefix_(url_.key + ".parts/" + run_key + "/"),
        scratch_(request.workdir / "predict" / run_key),
        client_(s3::resolve_connection(request.connection)) {
    if (url_.key.empty() || url_.key.back() == '/') {
      fail(ExitCode::usage, "--out {}: name an object (such as s3://bucket/predictions.csv), not a prefix", out);
    }
    fs::create_directories(scratch_);
  }
  std::vector<std::string> list() const override {
    std::vector<std::string> names;
    for (const s3::ObjectInfo& object : client_.list(url_.bucket, parts_prefix_).objects) {
      names.push_back(object.key.substr(parts_prefix_.size()));
    }
    return names;
  }
  void put(const std::string& name, const std::string& bytes) const override {
    const fs::path file = temporary_sibling(scratch_ / name);
    write_file_atomic(file, bytes);
    client_.upload(url_.bucket, {{file, parts_prefix_ + name}});
    fs::remove(file);
  }
  std::string get(const std::string& name) const override {
    const auto object = client_.head(url_.bucket, parts_prefix_ + name);
    if (!object) fail(ExitCode::output, "s3://{}/{}{}: gone while merging", url_.bucket, parts_prefix_, name);
    const fs::path file = scratch_ / name;
    client_.download(url_.bucket, {{*object, file}});
    std::string bytes = read_file(file, ExitCode::storage);
    fs::remove(file);
    return bytes;
  }
  void remove_parts() const override {
    for (const std::string& name : list()) client_.remove(url_.bucket, parts_prefix_ + name);
  }
  fs::path output_draft() const override { return temporary_sibling(scratch_ / "predictions"); }
  void publish(const fs::path& draft) const override {
    client_.upload(url_.bucket, {{draft, url_.key}});
    fs::remove(draft);
  }

 private:
  s3::S3Url url_;
  std::string parts_prefix_;
  fs::path scratch_;
  mutable s3::Client client_;
};

PredictionTally read_tally(const std::string& text) {
  const Json json = Json::parse(text);
  PredictionTally tally;
  tally.samples = json.at("samples").get<std::int64_t>();
  tally.labelled = json.at("labelled").get<std::int64_t>();
  tally.correct = json.at("correct").get<std::int64_t>();
  tally.absolute_error = json.at("absolute_error").get<double>();
  tally.squared_error = json.at("squared_error").get<double>();
  return tally;
}

}  // namespace

PredictionParts::PredictionParts(const PredictRequest& request, const std::string& run_key, std::size_t count)
    : count_(count), wait_(request.wait_for_parts) {
  if (s3::is_s3_url(request.out)) {
    place_ = std::make_unique<S3Place>(request.out, run_key, request);
  } else {
    place_ = std::make_unique<LocalPlace>(fs::absolute(request.out), run_key);
  }
}

PredictionParts::~PredictionParts() = default;

std::vector<bool> PredictionParts::written() const {
  std::vector<bool> complete(count_, false);
  for (const std::string& name : place_->list()) {
    std::size_t index = 0;
    if (std::sscanf(name.c_str(), "part-%zu.json", &index) == 1 && name == part_name(index, "json") &&
        index < count_) {
      complete[index] = true;
    }
  }
  return complete;
}

void PredictionParts::write(std::size_t index, const std::string& lines, const PredictionTally& tally) const {
  place_->put(part_name(index, "rows"), lines);
  const Json json{{"samples", tally.samples}, {"labelled", tally.labelled}, {"correct", tally.correct},
                  {"absolute_error", tally.absolute_error}, {"squared_error", tally.squared_error}};
  place_->put(part_name(index, "json"), json.dump());
}

PredictionTally PredictionParts::merge(const std::string& header, int world_size) const {
  const auto deadline = std::chrono::steady_clock::now() + wait_;
  for (std::vector<bool> complete = written();; complete = written()) {
    std::vector<std::size_t> missing;
    for (std::size_t index = 0; index < count_; ++index) {
      if (!complete[index]) missing.push_back(index);
    }
    if (missing.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      fail(ExitCode::peer_lost, "predict: {} of {} parts were not written after {} s; the first is part {}, which "
           "rank {} of {} writes: is that rank running?", missing.size(), count_, wait_.count(), missing.front() + 1,
           missing.front() % static_cast<std::size_t>(world_size), world_size);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  const fs::path draft = place_->output_draft();
  PredictionTally total;
  {
    std::ofstream file(draft, std::ios::binary | std::ios::trunc);
    file << header;
    for (std::size_t index = 0; index < count_; ++index) {
      file << place_->get(part_name(index, "rows"));
      total.add(read_tally(place_->get(part_name(index, "json"))));
    }
    file.flush();
    if (!file) fail(ExitCode::storage, "predict: cannot write {}", draft.string());
  }
  place_->publish(draft);
  place_->remove_parts();
  return total;
}

namespace {

// The folder an s3:// location's objects are copied to under `directory`: the bucket's, then the URL's key.
fs::path copy_folder(const s3::S3Url& url, const fs::path& directory) {
  fs::path folder = directory / url.bucket;
  if (const std::string key = url.key.substr(0, url.key.find_last_not_of('/') + 1); !key.empty()) {
    folder /= s3::local_path_for_key(key, "");
  }
  return folder;
}

// The URL names one object (not a prefix): its file rather than the folder is the data.
bool names_one_object(const s3::SourceListing& listing, const s3::S3Url& url) {
  return listing.objects.size() == 1 && listing.objects.front().key == url.key;
}

}  // namespace

struct RemoteData::Objects {
  Objects(const std::string& location, const s3::ConnectionOptions& connection)
      : location(location), url(s3::parse_s3_url(location)), client(s3::resolve_connection(connection)) {}

  // The object of a local path; throws tp::Error(data) for another file.
  std::size_t index(const fs::path& file) const {
    const auto found = index_of.find(file.lexically_normal().string());
    if (found == index_of.end()) fail(ExitCode::data, "{}: not one of the objects under {}", file.string(), location);
    return found->second;
  }

  std::string location;
  s3::S3Url url;
  s3::Client client;
  s3::SourceListing listing;
  fs::path path;
  std::vector<fs::path> files;
  std::unordered_map<std::string, std::size_t> index_of;  // a file's path, lexically normal -> its object
  std::mutex mutex;  // guards what follows, and the client
  std::vector<bool> on_disk;
  std::size_t downloaded = 0;
  std::size_t kept = 0;
};

RemoteData::RemoteData(const std::string& location, const s3::ConnectionOptions& connection, const fs::path& directory)
    : objects_(std::make_unique<Objects>(location, connection)) {
  Objects& objects = *objects_;
  objects.listing = s3::list_source(objects.client, location);
  const fs::path folder = copy_folder(objects.url, directory);
  for (const s3::ObjectInfo& object : objects.listing.objects) {
    objects.files.push_back(folder / s3::local_path_for_key(object.key, objects.listing.prefix));
    objects.index_of.emplace(objects.files.back().lexically_normal().string(), objects.files.size() - 1);
  }
  objects.on_disk.assign(objects.files.size(), false);
  objects.path = names_one_object(objects.listing, objects.url) ? objects.files.front() : folder;
  create_folder(folder);
}

RemoteData::~RemoteData() = default;

const fs::path& RemoteData::path() const { return objects_->path; }

const std::vector<fs::path>& RemoteData::files() const { return objects_->files; }

bool RemoteData::holds(const fs::path& file) const {
  return objects_->index_of.count(file.lexically_normal().string()) > 0;
}

std::uint64_t RemoteData::size(const fs::path& file) const {
  return objects_->listing.objects[objects_->index(file)].size;
}

void RemoteData::fetch(const std::vector<fs::path>& files) const {
  Objects& objects = *objects_;
  std::vector<std::size_t> wanted;
  for (const fs::path& file : files) wanted.push_back(objects.index(file));
  std::sort(wanted.begin(), wanted.end());
  wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
  const std::lock_guard<std::mutex> lock(objects.mutex);
  std::vector<s3::DownloadItem> downloads;
  for (const std::size_t index : wanted) {
    if (objects.on_disk[index]) continue;
    const s3::ObjectInfo& object = objects.listing.objects[index];
    if (s3::holds_object(objects.files[index], object)) {
      ++objects.kept;
    } else {
      downloads.push_back({object, objects.files[index]});
    }
  }
  if (!downloads.empty()) objects.client.download(objects.url.bucket, downloads);
  for (const std::size_t index : wanted) objects.on_disk[index] = true;
  objects.downloaded += downloads.size();
}

std::size_t RemoteData::downloaded() const {
  const std::lock_guard<std::mutex> lock(objects_->mutex);
  return objects_->downloaded;
}

std::size_t RemoteData::kept() const {
  const std::lock_guard<std::mutex> lock(objects_->mutex);
  return objects_->kept;
}

std::shared_ptr<const RemoteData> remote_data(const std::string& location, const s3::ConnectionOptions& connection,
                                              const fs::path& directory) {
  if (!s3::is_s3_url(location)) return nullptr;
  return std::make_shared<const RemoteData>(location, connection, directory);
}

fs::path local_copy(const std::string& location, const s3::ConnectionOptions& connection, const fs::path& directory,
                    ExitCode missing) {
  if (!s3::is_s3_url(location)) {
    if (!fs::exists(location)) fail(missing, "{}: no such file or folder", location);
    return fs::absolute(location);
  }
  // As `trainpoint s3 cp` copies: the objects below the URL, or the one object it names, each kept where a copy
  // of the same contents is already there. The URL's key is the folder they go to, below the bucket's.
  const s3::S3Url url = s3::parse_s3_url(location);
  s3::StageRequest request;
  request.source = location;
  request.destination = copy_folder(url, directory);
  request.reuse = s3::Reuse::contents;
  request.connection = connection;
  s3::StagedData staged;
  try {
    staged = s3::stage(request);
  } catch (const Error& error) {
    if (error.code() != ExitCode::data) throw;
    fail(missing, "{}", error.what());
  }
  if (staged.downloaded > 0) spdlog::info("downloaded {} ({} objects)", location, staged.downloaded);
  const bool one_object = staged.objects.size() == 1 && staged.objects.front().key == url.key;
  return one_object ? staged.root / staged.objects.front().relative_path : staged.root;
}

}  // namespace tp::storage
