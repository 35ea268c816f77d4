// Logging setup (spdlog) and progress reporting for long steps.
// Log lines go to stderr; stdout is left to commands that print results (check, version).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <string>

#include "common/error.h"

namespace tp::log {

enum class Format { text, json };

// Installs the process-wide logger. Safe to call again (for example after fork).
void init(Format format, spdlog::level::level_enum level);
// Adds the rank to every following line once it is known. Ranks other than 0 then log warnings and errors
// only, unless the level was set below info.
void set_rank(int rank);

// The run's one error line for the failure that ends it, naming the exit code and class.
void failure(const Error& error);
// Logs the error line and ends the process at once with the error's exit code: for a thread that finds the
// run failed while the main thread is blocked (the communicator's collective watchdog).
[[noreturn]] void exit_now(const Error& error);

// Logs `message` at info level. With the json format the line also carries each of `fields` as a key of its
// own, for log pipelines (a field never replaces time, level, msg or rank); the text format shows the
// message alone.
void info_with_fields(const nlohmann::json& fields, const std::string& message);

// Progress of a long step: a redrawn bar on a terminal with an ETA, a line every few seconds otherwise
// (Kubernetes logs), and one closing line with the total and the rate (finish), or none (close).
class Progress {
 public:
  Progress(std::string label, std::uint64_t total, std::string unit);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t amount = 1);
  // Extra text shown after the counts, such as the running loss.
  void set_note(std::string note) { note_ = std::move(note); }
  // Values the json format adds to each progress line as fields (see info_with_fields).
  void set_fields(nlohmann::json fields) { fields_ = std::move(fields); }
  void finish();
  // Ends without a closing line, for a caller that logs its own summary (an epoch's metrics): the bar is
  // erased from the terminal.
  void close();

 private:
  void draw(bool final_line);

  std::string label_;
  std::uint64_t total_;
  std::string unit_;
  std::string note_;
  nlohmann::json fields_ = nlohmann::json::object();
  std::uint64_t done_ = 0;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tp::log
