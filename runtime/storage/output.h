// job.output: a local directory, or s3://bucket/prefix written through a local directory under the
// workdir and uploaded file by file as each is complete.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "spec/spec.h"

namespace tp::s3 {
class Client;
}

namespace tp::storage {

class OutputLocation {
 public:
  // S3 outputs use the data's endpoint and credentials (`data.endpoint`, `data.credentials`).
  OutputLocation(const spec::Spec& spec, const std::filesystem::path& workdir);
  ~OutputLocation();
  OutputLocation(const OutputLocation&) = delete;
  OutputLocation& operator=(const OutputLocation&) = delete;

  // Where the files are written: job.output itself, or its local copy.
  const std::filesystem::path& local_dir() const { return local_dir_; }
  bool remote() const { return client_ != nullptr; }
  // job.output as the user wrote it, for messages.
  const std::string& name() const { return name_; }

  // Where runs keep their checkpoints: checkpoints/<run key>/ below local_dir() (storage/run_identity.h).
  std::filesystem::path checkpoints_root() const { return local_dir_ / "checkpoints"; }

  // S3 outputs: downloads what a restarted pod needs to resume and the local copy lacks: every run's
  // identity.json, the newest `keep` checkpoints of the run `run_key` and its mlflow-run.json (always), run.json,
  // and metrics.jsonl, metrics.csv and steps.jsonl so that their lines go on. Returns the number of files fetched.
  std::size_t fetch_for_resume(const std::string& run_key, std::int64_t keep);
  // Whether the final model.pt and run.json are there: in S3 as fetch_for_resume last listed it, else locally.
  bool has_final_outputs() const;
  // S3 outputs: uploads `file` (under local_dir(), or local_dir() itself) to the same relative key below
  // the prefix, or every file of a directory. Does nothing for local outputs. Throws tp::Error (network, storage, output).
  void publish(const std::filesystem::path& file) const;
  // S3 outputs: deletes the object that publish(file) wrote (for a file deleted locally). Does nothing for
  // local outputs. Throws tp::Error (network, storage, output).
  void withdraw(const std::filesystem::path& file) const;

 private:
  std::string key_of(const std::filesystem::path& file) const;

  std::string name_;
  std::filesystem::path local_dir_;
  std::string bucket_;
  std::string prefix_;  // ends with '/' (or is empty)
  bool remote_final_outputs_ = false;
  std::unique_ptr<s3::Client> client_;
};

// A local output directory in use by a running job: a second job into it is refused, naming the first.
// An advisory lock (flock) on <directory>/.trainpoint.lock that says who holds it (host, pid, start); the
// kernel releases it when the process ends however it ends, so a lock left by a killed job is taken over.
class OutputLock {
 public:
  // Throws tp::Error(output) naming the holder when another process holds the lock.
  explicit OutputLock(const std::filesystem::path& directory);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace tp::storage
