// Checkpoints written beside training (checkpoint.every_steps, every_minutes): the step that takes one only
// serializes it in memory (train/checkpoint.h's checkpoint_bytes: the state as of that step), and one thread
// writes those bytes (temporary name, then rename), then runs what follows a written checkpoint (publishing it
// to an s3:// output, pruning older ones, the log line), so that steps do not wait for the disk or S3.
// The promises, each kept in one place:
// - one write at a time, in the order given: a checkpoint due while the previous one is still being written
//   waits for it (submit), so the newest file on disk is always the newest checkpoint taken;
// - wait() returns once nothing is pending (before a synchronous checkpoint, the run's end);
// - a write that failed (a full disk, S3 refusing) fails the run at the training thread's next submit or wait,
//   with the write's own error; the destructor waits and only logs it (the run is already ending).
// Torch-free.
#pragma once

#include <condition_variable>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace tp::train {

class CheckpointWriter {
 public:
  // `write_seconds`: how long the write of the bytes took.
  using AfterWrite = std::function<void(double write_seconds)>;
  // Writes `bytes` to `file` atomically (train/checkpoint.h's write_checkpoint).
  using Write = std::function<void(const std::filesystem::path& file, const std::string& bytes)>;

  explicit CheckpointWriter(Write write);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Queues the write of `bytes` to `file`, then `after` on the writer's thread. Waits for the previous one
  // first; rethrows its error.
  void submit(std::filesystem::path file, std::string bytes, AfterWrite after);
  // Until nothing is pending; rethrows the error of a write that failed.
  void wait();

 private:
  struct Job {
    std::filesystem::path file;
    std::string bytes;
    AfterWrite after;
  };
  void loop();
  // mutex_ held by `lock`: until no job is pending, then the stored error, if any, rethrown.
  void wait_idle(std::unique_lock<std::mutex>& lock);

  Write write_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<Job> job_;  // pending or being written
  std::exception_ptr error_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tp::train
