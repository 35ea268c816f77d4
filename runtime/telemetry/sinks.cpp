#include "telemetry/sinks.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace tp::telemetry {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Sinks::Sinks(std::vector<std::unique_ptr<Sink>> sinks, std::size_t capacity)
    : sinks_(std::move(sinks)), failed_(sinks_.size(), false), capacity_(capacity) {
  if (!sinks_.empty()) thread_ = std::thread([this] { run(); });
}

Sinks::~Sinks() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Sinks::push(Record record) {
  if (sinks_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= capacity_) {
      if (!dropping_warned_) {
        dropping_warned_ = true;
        spdlog::warn("{} records wait to be written to {}: the writer falls behind, and records are dropped "
                     "until it catches up (training goes on)", queue_.size(), sinks_.front()->name());
      }
      return;
    }
    queue_.push_back(std::move(record));
    ++pushed_;
  }
  wake_.notify_one();
}

void Sinks::scalars(std::int64_t step, Scalars values) {
  push(ScalarsRecord{step, unix_seconds(), std::move(values)});
}

void Sinks::run_started(HParams hparams) {
  push(StartRecord{std::move(hparams), unix_seconds()});
}

void Sinks::run_ended(bool success) {
  push(EndRecord{success, unix_seconds()});
}

void Sinks::flush() {
  push(FlushRecord{});
}

bool Sinks::flush_and_wait(std::chrono::milliseconds timeout) {
  if (sinks_.empty()) return true;
  flush();
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t target = pushed_;
  return done_.wait_for(lock, timeout, [&] { return written_ >= target; });
}

std::vector<std::filesystem::path> Sinks::files() const {
  std::vector<std::filesystem::path> all;
  std::lock_guard<std::mutex> lock(mutex_);
  for (std::size_t i = 0; i < sinks_.size(); ++i) {
    if (failed_[i]) continue;
    for (auto& file : sinks_[i]->files()) {
      std::error_code error;
      if (std::filesystem::exists(file, error)) all.push_back(std::move(file));  // written once records came
    }
  }
  return all;
}

void Sinks::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, with everything written
    Record record = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    deliver(record);
    lock.lock();
    ++written_;
    done_.notify_all();
  }
  lock.unlock();
  deliver(FlushRecord{});  // the last records reach the disk before the sinks close
}

void Sinks::deliver(const Record& record) {
  for (std::size_t i = 0; i < sinks_.size(); ++i) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failed_[i]) continue;
    }
    Sink& sink = *sinks_[i];
    try {
      if (const auto* values = std::get_if<ScalarsRecord>(&record)) {
        sink.scalars(values->step, values->wall_time, values->values);
      } else if (const auto* start = std::get_if<StartRecord>(&record)) {
        sink.run_started(start->hparams, start->wall_time);
      } else if (const auto* end = std::get_if<EndRecord>(&record)) {
        sink.run_ended(end->success, end->wall_time);
      } else {
        sink.flush();
      }
    } catch (const std::exception& error) {
      spdlog::warn("{}: {}; it gets no more records of this run (training goes on)", sink.name(), error.what());
      std::lock_guard<std::mutex> lock(mutex_);
      failed_[i] = true;
    }
  }
}

}  // namespace tp::telemetry
