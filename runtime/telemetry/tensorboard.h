// A sink writing TensorBoard's event files (log.tensorboard): <directory>/events.out.tfevents.<time>.<host>,
// TFRecord-framed Event messages (telemetry/record_file.h, telemetry/tensorboard.proto). Scalars are
// simple_value summaries; the run's settings and its end go to the hparams plugin, so runs compare in
// TensorBoard's HParams tab. Each start of a run writes a file of its own; a resumed run's file opens with a
// SessionLog START at the step it resumed from, so TensorBoard drops what an earlier start had written past
// that step and the curves go on without duplicate steps. Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "telemetry/sinks.h"

namespace tp::telemetry {

class TensorBoardSink : public Sink {
 public:
  // Writes into `directory` (created with the first record). `first_step`: the optimizer steps already taken
  // (0 for a fresh run; a resumed run's checkpoint step).
  TensorBoardSink(const std::filesystem::path& directory, std::int64_t first_step);
  ~TensorBoardSink() override;

  std::string name() const override { return "TensorBoard"; }
  void scalars(std::int64_t step, double wall_time, const Scalars& values) override;
  void run_started(const HParams& hparams, double wall_time) override;
  // A text summary ("outcome", the Text tab) at the run's last step.
  void outcome(const std::string& text, double wall_time) override;
  void run_ended(RunEnd end, double wall_time) override;
  void flush() override;
  std::vector<std::filesystem::path> files() const override { return {file_}; }

  const std::filesystem::path& file() const { return file_; }

 private:
  void open();
  void write(const std::string& event);

  const std::filesystem::path file_;
  const std::int64_t first_step_;
  std::int64_t last_step_ = 0;
  std::ofstream out_;
};

// An event of a file, decoded: what tests and tools need to check a file.
struct ReadEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;  // the first event's
  int session_status = 0;    // SessionLog's: 1 START, 2 STOP, 3 CHECKPOINT; 0 none
  Scalars scalars;           // simple_value summaries
  std::vector<std::string> plugin_tags;  // the tags of plugin summaries ("_hparams_/session_start_info")
};
// The events of `file` (telemetry/record_file.h's read_records); throws tp::Error(output) on a damaged one.
std::vector<ReadEvent> read_events(const std::filesystem::path& file);

// events.out.tfevents.<seconds>.<host>, TensorBoard's name for an event file (its own writers add a suffix
// when a second file starts within the same second; here the name is made unique in `directory`).
std::filesystem::path event_file_name(const std::filesystem::path& directory);

}  // namespace tp::telemetry
