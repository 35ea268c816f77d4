// What makes a run the same run across restarts: the settings that change what it computes, the
// contents of the repository files it reads, and its data. A restart resumes only checkpoints of its own
// run; each run keeps its checkpoints in checkpoints/<key>/ beside an identity.json (docs/distributed.md,
// "Restarts"). Torch-free, so preflight can check it too.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "spec/spec.h"

namespace tp::storage {

// One thing a checkpoint must agree on to be resumed: a setting ("train.lr" = "0.01"), or the contents of
// what the run reads ("data.source contents" = "1,200 files, 3.4 MiB, sha256 1a2b3c4d5e6f").
struct IdentityItem {
  std::string name;
  std::string value;
  bool operator==(const IdentityItem& other) const { return name == other.name && value == other.value; }
};

struct RunIdentity {
  std::vector<IdentityItem> items;  // in a fixed order
  // Recorded, not compared: a new commit that changes none of the items continues the run.
  std::string commit;

  // SHA-256 of the items, hex.
  std::string digest() const;
  // The name of the run's checkpoint directory: the digest's first 12 hex digits.
  std::string key() const { return digest().substr(0, 12); }
};

// The identity of the run `spec` describes, with the repository checked out at `root` (commit `commit`):
// its run settings (spec::run_settings), the contents of model.torchscript and model.weights when they are
// repository files, and a description of data.source and data.valid_source (names, sizes and, in S3,
// ETags; a listing, not the bytes). Throws tp::Error as reading the data would (data, network, usage).
RunIdentity run_identity(const spec::Spec& spec, const std::filesystem::path& root, const std::string& commit);

// "train.lr: 0.01 -> 0.003" for each item that differs, in `now`'s order, then items `before` alone had.
std::vector<std::string> identity_changes(const RunIdentity& before, const RunIdentity& now);

nlohmann::json identity_json(const RunIdentity& identity);
// Throws tp::Error(output) naming `origin` when the JSON is not an identity.
RunIdentity identity_from_json(const nlohmann::json& json, const std::string& origin);

// Where a run keeps its checkpoints: <checkpoints_root>/<key>/, with identity.json beside them.
std::filesystem::path run_checkpoints(const std::filesystem::path& checkpoints_root, const RunIdentity& identity);
inline constexpr char kIdentityFile[] = "identity.json";
// Beside it, the MLflow run the run logs to (telemetry/mlflow.h), so that a restart continues that run.
inline constexpr char kMlflowRunFile[] = "mlflow-run.json";
// checkpoint.keep_best's model of the best epoch, best-epoch-NNNNNN.pt, beside the run's checkpoints.
inline constexpr char kBestModelPrefix[] = "best-epoch-";
// Writes identity.json into the run's directory if it is not there yet; returns the file when it wrote it.
std::optional<std::filesystem::path> record_identity(const std::filesystem::path& run_directory,
                                                     const RunIdentity& identity);

// checkpoint.resume = "auto" before rendezvous: returns the run's checkpoint directory when it holds
// checkpoints (the run resumes), nothing when no run has checkpoints under `checkpoints_root` (a fresh
// start). When only other runs have checkpoints there, throws tp::Error(spec) naming each setting that
// changed against the newest of them (old -> new) and the two ways out; nothing is deleted.
std::optional<std::filesystem::path> require_same_run(const RunIdentity& now,
                                                      const std::filesystem::path& checkpoints_root,
                                                      const std::string& output_name);

}  // namespace tp::storage
