#include "common/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace tp::log {
namespace {

std::atomic<int> current_rank{-1};
Format current_format = Format::text;
// The fields of the line being logged by this thread (info_with_fields); formatting runs in the thread that logs.
thread_local const nlohmann::json* current_fields = nullptr;

// One JSON object per line: {"time", "level", "rank", "msg"}, for log collectors.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    using namespace std::chrono;
    const auto since_epoch = msg.time.time_since_epoch();
    const auto ms = duration_cast<milliseconds>(since_epoch).count() % 1000;
    std::time_t seconds = duration_cast<std::chrono::seconds>(since_epoch).count();
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char stamp[64];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                  utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(ms));
    nlohmann::json line = {{"time", stamp},
                           {"level", spdlog::level::to_string_view(msg.level).data()},
                           {"msg", std::string(msg.payload.data(), msg.payload.size())}};
    if (int rank = current_rank.load(); rank >= 0) line["rank"] = rank;
    if (current_fields != nullptr) {
      for (const auto& [key, value] : current_fields->items()) {
        if (!line.contains(key)) line[key] = value;
      }
    }
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonFormatter>(); }
};

void apply_format() {
  auto logger = spdlog::default_logger();
  if (current_format == Format::json) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
    return;
  }
  const int rank = current_rank.load();
  const std::string where = rank >= 0 ? fmt::format("[rank {}] ", rank) : std::string();
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ " + where + "%v");
}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const int total = static_cast<int>(seconds);
  return fmt::format("{}m{:02d}s", total / 60, total % 60);
}

}  // namespace

void init(Format format, spdlog::level::level_enum level) {
  current_format = format;
  auto logger = std::make_shared<spdlog::logger>("trainpoint", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  apply_format();
}

void set_rank(int rank) {
  current_rank = rank;
  // Rank 0 speaks for the job: the other ranks' information would repeat its own (--log-level debug shows it).
  auto logger = spdlog::default_logger();
  if (rank > 0 && logger->level() == spdlog::level::info) logger->set_level(spdlog::level::warn);
  apply_format();
}

void failure(const Error& error) {
  spdlog::error("{} (exit {}, {})", error.what(), static_cast<int>(error.code()), exit_class_name(error.code()));
}

void exit_now(const Error& error) {
  failure(error);
  spdlog::default_logger()->flush();
  std::_Exit(static_cast<int>(error.code()));
}

void info_with_fields(const nlohmann::json& fields, const std::string& message) {
  current_fields = &fields;
  spdlog::info("{}", message);
  current_fields = nullptr;
}

Progress::Progress(std::string label, std::uint64_t total, std::string unit)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      tty_(current_format == Format::text && isatty(STDERR_FILENO) == 1 &&
           spdlog::default_logger()->should_log(spdlog::level::info)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_ && tty_) std::fputs("\n", stderr);
}

void Progress::advance(std::uint64_t amount) {
  done_ += amount;
  const auto now = std::chrono::steady_clock::now();
  const auto interval = tty_ ? std::chrono::milliseconds(200) : std::chrono::milliseconds(10000);
  if (now - last_draw_ >= interval) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  draw(true);
}

void Progress::close() {
  if (finished_) return;
  finished_ = true;
  if (tty_) std::fputs("\r\033[K", stderr);
}

void Progress::draw(bool final_line) {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  const std::string note = note_.empty() ? std::string() : " " + note_;
  // What is left at the rate so far.
  const std::string eta = !final_line && rate > 0 && total_ > done_
                              ? ", ETA " + format_duration(static_cast<double>(total_ - done_) / rate)
                              : std::string();
  if (tty_ && !final_line) {
    constexpr int width = 30;
    const int filled = total_ > 0 ? static_cast<int>(width * std::min<double>(1.0, double(done_) / total_)) : 0;
    std::fprintf(stderr, "\r%s [%s%s] %llu/%llu %s %.1f %s/s%s%s\033[K", label_.c_str(),
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                 static_cast<unsigned long long>(done_), static_cast<unsigned long long>(total_),
                 format_duration(elapsed).c_str(), rate, unit_.c_str(), eta.c_str(), note.c_str());
    std::fflush(stderr);
    return;
  }
  if (tty_) std::fputs("\r\033[K", stderr);
  info_with_fields(fields_, fmt::format("{}: {}/{} {} in {} ({:.1f} {}/s{}){}", label_, done_, total_, unit_,
                                        format_duration(elapsed), rate, unit_, eta, note));
}

}  // namespace tp::log
