#include "telemetry/tensorboard.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <system_error>

#include "common/error.h"
#include "telemetry/record_file.h"
#include "tensorboard.pb.h"

namespace tp::telemetry {
namespace {

namespace fs = std::filesystem;
namespace pb = tp::telemetry::tensorboard;

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

pb::Event event_at(double wall_time, std::int64_t step) {
  pb::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  return event;
}

// A summary of the hparams plugin, as its own writers make it: the data in the metadata, a null tensor.
pb::Event hparams_event(const pb::HParamsPluginData& data, const char* tag, double wall_time, std::int64_t step) {
  pb::Event event = event_at(wall_time, step);
  pb::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  pb::SummaryMetadata* metadata = value->mutable_metadata();
  metadata->mutable_plugin_data()->set_plugin_name("hparams");
  metadata->mutable_plugin_data()->set_content(data.SerializeAsString());
  metadata->set_data_class(pb::DATA_CLASS_TENSOR);
  pb::TensorProto* tensor = value->mutable_tensor();
  tensor->set_dtype(pb::DT_FLOAT);
  tensor->mutable_tensor_shape();
  tensor->add_float_val(0.0f);
  return event;
}

google::protobuf::Value proto_value(const HParam& hparam) {
  google::protobuf::Value value;
  if (const auto* flag = std::get_if<bool>(&hparam)) {
    value.set_bool_value(*flag);
  } else if (const auto* number = std::get_if<double>(&hparam)) {
    value.set_number_value(*number);
  } else {
    value.set_string_value(std::get<std::string>(hparam));
  }
  return value;
}

}  // namespace

fs::path event_file_name(const fs::path& directory) {
  const std::string base = fmt::format("events.out.tfevents.{}.{}", static_cast<long long>(std::time(nullptr)),
                                       host_name());
  fs::path file = directory / base;
  std::error_code error;
  for (int n = 1; fs::exists(file, error); ++n) file = directory / fmt::format("{}.{}", base, n);
  return file;
}

TensorBoardSink::TensorBoardSink(const fs::path& directory, std::int64_t first_step)
    : file_(event_file_name(directory)), first_step_(first_step), last_step_(first_step) {}

TensorBoardSink::~TensorBoardSink() = default;

void TensorBoardSink::open() {
  if (out_.is_open()) return;
  std::error_code error;
  fs::create_directories(file_.parent_path(), error);
  if (error) fail(ExitCode::output, "cannot create {}: {}", file_.parent_path().string(), error.message());
  out_.open(file_, std::ios::binary | std::ios::app);
  if (!out_) fail(ExitCode::output, "cannot write {}", file_.string());
  const double now = unix_seconds();
  pb::Event version = event_at(now, first_step_);
  version.set_file_version("brain.Event:2");
  write(version.SerializeAsString());
  // What an earlier start wrote past this run's first step is dropped by TensorBoard (its files load first,
  // by name): a resumed run's curves go on from its checkpoint, a fresh one's start over.
  pb::Event start = event_at(now, first_step_ + 1);
  start.mutable_session_log()->set_status(pb::SessionLog::START);
  write(start.SerializeAsString());
}

void TensorBoardSink::write(const std::string& event) {
  out_ << frame_record(event);
  if (!out_) fail(ExitCode::output, "cannot write {} (disk full?)", file_.string());
}

void TensorBoardSink::scalars(std::int64_t step, double wall_time, const Scalars& values) {
  open();
  pb::Event event = event_at(wall_time, step);
  for (const auto& [tag, number] : values) {
    if (std::isnan(number)) continue;  // a metric that does not apply
    pb::Summary::Value* value = event.mutable_summary()->add_value();
    value->set_tag(tag);
    value->set_simple_value(static_cast<float>(number));
  }
  if (event.summary().value_size() == 0) return;
  write(event.SerializeAsString());
  last_step_ = std::max(last_step_, step);
}

void TensorBoardSink::run_started(const HParams& hparams, double wall_time) {
  open();
  pb::HParamsPluginData data;
  pb::SessionStartInfo* start = data.mutable_session_start_info();
  for (const auto& [name, value] : hparams) (*start->mutable_hparams())[name] = proto_value(value);
  start->set_start_time_secs(wall_time);
  write(hparams_event(data, "_hparams_/session_start_info", wall_time, first_step_).SerializeAsString());
}

void TensorBoardSink::outcome(const std::string& text, double wall_time) {
  open();
  // As tf.summary.text writes it: a string tensor of rank 0 under the text plugin.
  pb::Event event = event_at(wall_time, last_step_);
  pb::Summary::Value* value = event.mutable_summary()->add_value();
  value->set_tag("outcome");
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  value->mutable_metadata()->set_data_class(pb::DATA_CLASS_TENSOR);
  pb::TensorProto* tensor = value->mutable_tensor();
  tensor->set_dtype(pb::DT_STRING);
  tensor->mutable_tensor_shape();
  tensor->add_string_val(text);
  write(event.SerializeAsString());
}

void TensorBoardSink::run_ended(RunEnd end, double wall_time) {
  if (end == RunEnd::killed) return;  // stopped to be resumed: the run is not over
  open();
  pb::HParamsPluginData data;
  data.mutable_session_end_info()->set_status(end == RunEnd::finished ? pb::STATUS_SUCCESS : pb::STATUS_FAILURE);
  data.mutable_session_end_info()->set_end_time_secs(wall_time);
  write(hparams_event(data, "_hparams_/session_end_info", wall_time, last_step_).SerializeAsString());
}

void TensorBoardSink::flush() {
  if (!out_.is_open()) return;
  out_.flush();
  if (!out_) fail(ExitCode::output, "cannot write {} (disk full?)", file_.string());
}

std::vector<ReadEvent> read_events(const fs::path& file) {
  std::vector<ReadEvent> events;
  for (const std::string& record : read_records(file)) {
    pb::Event event;
    if (!event.ParseFromString(record)) fail(ExitCode::output, "{}: a record is not an Event message", file.string());
    ReadEvent read;
    read.wall_time = event.wall_time();
    read.step = event.step();
    read.file_version = event.file_version();
    if (event.has_session_log()) read.session_status = event.session_log().status();
    for (const auto& value : event.summary().value()) {
      if (value.has_metadata() && !value.metadata().plugin_data().plugin_name().empty()) {
        read.plugin_tags.push_back(value.tag());
      } else if (value.value_case() == pb::Summary::Value::kSimpleValue) {
        read.scalars.emplace_back(value.tag(), value.simple_value());
      }
    }
    events.push_back(std::move(read));
  }
  return events;
}

}  // namespace tp::telemetry
