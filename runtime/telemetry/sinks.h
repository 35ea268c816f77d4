// Where a run's records go besides metrics.jsonl and steps.jsonl: sinks, such as TensorBoard's event files.
// The training loop hands each record to `Sinks` (a lock and a push into a bounded queue); one thread writes
// them to every sink. A sink that fails is one warning and then gets no more records but the run's end (so that
// a tracking server does not show the run running for ever): it never stops training, and never slows a step
// (a full queue drops records, with one warning). Torch-free.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace tp::telemetry {

// Named values at one optimizer step: ("train/loss", 0.42), ...
using Scalars = std::vector<std::pair<std::string, double>>;

// A setting of the run, as the hparams of a comparison of runs show it.
using HParam = std::variant<bool, double, std::string>;
using HParams = std::map<std::string, HParam>;

// How a run ended: its outputs written, an error, or stopped by a signal (to resume).
enum class RunEnd { finished, failed, killed };

// Seconds since the Unix epoch, now.
double unix_seconds();

// One place records go. Called on the sinks' thread only, in the order records were given; any exception is
// the sink's failure.
class Sink {
 public:
  virtual ~Sink() = default;
  // For messages: "TensorBoard".
  virtual std::string name() const = 0;
  virtual void scalars(std::int64_t step, double wall_time, const Scalars& values) = 0;
  // The run's settings, once at its start.
  virtual void run_started(const HParams& hparams, double wall_time) { (void)hparams, (void)wall_time; }
  // A finished output of the run (model.pt, report.html, metrics.jsonl) to keep with it, once complete.
  virtual void artifact(const std::filesystem::path& file) { (void)file; }
  // How a finished run came out, in words (early stopping's verdict, which epoch's model model.pt is), before
  // its end.
  virtual void outcome(const std::string& text, double wall_time) { (void)text, (void)wall_time; }
  // The run ended, once.
  virtual void run_ended(RunEnd end, double wall_time) { (void)end, (void)wall_time; }
  // What was given so far is on disk (or wherever the sink writes).
  virtual void flush() = 0;
  // The files the sink writes, to publish with the run's outputs (an s3:// job.output).
  virtual std::vector<std::filesystem::path> files() const { return {}; }
};

class Sinks {
 public:
  // At most `capacity` records wait for the thread; more are dropped. `close_wait`: how long the destructor
  // waits for the thread to write what is queued.
  explicit Sinks(std::vector<std::unique_ptr<Sink>> sinks, std::size_t capacity = 4096,
                 std::chrono::milliseconds close_wait = std::chrono::seconds(30));
  // Writes what is queued and joins the thread; a thread still writing after `close_wait` (a sink stuck in a
  // write) is left to finish alone, with a warning, so that the process can end.
  ~Sinks();
  Sinks(const Sinks&) = delete;
  Sinks& operator=(const Sinks&) = delete;

  void scalars(std::int64_t step, Scalars values);
  void run_started(HParams hparams);
  void artifact(std::filesystem::path file);
  void outcome(std::string text);
  void run_ended(RunEnd end);
  // Asks the thread to flush every sink once it has written what is queued; returns at once.
  void flush();
  // Flushes and waits up to `timeout` for it; returns whether every record given so far was written (or
  // dropped by a failed sink). For a read point that publishes the sinks' files. Once a wait has run out, the
  // next ones do not wait until the thread has caught up: a stuck sink delays one read point, not each.
  bool flush_and_wait(std::chrono::milliseconds timeout);
  // The files of the sinks that have not failed, once they exist.
  std::vector<std::filesystem::path> files() const;

 private:
  struct State;
  static void run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;  // shared with the thread, which may outlive this (see the destructor)
  const std::chrono::milliseconds close_wait_;
  std::thread thread_;
};

}  // namespace tp::telemetry
