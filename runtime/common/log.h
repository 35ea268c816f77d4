// Logging setup (spdlog) and progress reporting for long steps.
// Log lines go to stderr; stdout is left to commands that print results (check, version).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace tp::log {

enum class Format { text, json };

// Installs the process-wide logger. Safe to call again (for example after fork).
void init(Format format, spdlog::level::level_enum level);
// Adds the rank to every following line once it is known.
void set_rank(int rank);

// Progress of a long step: a redrawn bar on a terminal, a line every few seconds otherwise
// (Kubernetes logs), and always one closing line with the total and the rate.
class Progress {
 public:
  Progress(std::string label, std::uint64_t total, std::string unit);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::uint64_t amount = 1);
  // Extra text shown after the counts, such as the running loss.
  void set_note(std::string note) { note_ = std::move(note); }
  void finish();

 private:
  void draw(bool final_line);

  std::string label_;
  std::uint64_t total_;
  std::string unit_;
  std::string note_;
  std::uint64_t done_ = 0;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tp::log
