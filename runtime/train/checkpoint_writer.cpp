#include "train/checkpoint_writer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <utility>

namespace tp::train {

CheckpointWriter::CheckpointWriter(Write write) : write_(std::move(write)), thread_([this] { loop(); }) {}

CheckpointWriter::~CheckpointWriter() {
  std::unique_lock<std::mutex> lock(mutex_);
  try {
    wait_idle(lock);
  } catch (const std::exception& error) {
    spdlog::warn("a checkpoint written beside training failed: {}", error.what());
  }
  stopping_ = true;
  changed_.notify_all();
  lock.unlock();
  thread_.join();
}

void CheckpointWriter::wait_idle(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [this] { return !job_; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void CheckpointWriter::submit(std::filesystem::path file, std::string bytes, AfterWrite after) {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle(lock);
  job_ = Job{std::move(file), std::move(bytes), std::move(after)};
  changed_.notify_all();
}

void CheckpointWriter::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  wait_idle(lock);
}

void CheckpointWriter::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return job_ || stopping_; });
    if (!job_) return;
    Job& job = *job_;
    lock.unlock();
    std::exception_ptr error;
    try {
      const auto begun = std::chrono::steady_clock::now();
      write_(job.file, job.bytes);
      job.bytes = std::string();  // its memory back before what follows (an upload reads the file)
      job.after(std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    job_.reset();
    changed_.notify_all();
  }
}

}  // namespace tp::train
