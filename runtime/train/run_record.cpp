#include "train/run_record.h"

#include <torch/version.h>

#include "common/files.h"
#include "data/dataset.h"

namespace tp::train {

nlohmann::json run_record(const RunFacts& facts, const EpochMetrics& last, const std::vector<std::string>& bad_files,
                          double seconds) {
  const data::Datasets& data = facts.data;
  return {
      {"job", facts.spec.job.name},
      {"source", {{"repo", facts.origin.repo}, {"ref", facts.origin.ref}, {"commit", facts.origin.commit},
                  {"spec", facts.origin.spec_name}}},
      {"resolved_spec", facts.origin.resolved_spec},
      {"world_size", facts.world_size},
      {"data", {{"train_samples", data.train->size()}, {"valid_samples", data.valid ? data.valid->size() : 0},
                {"classes", data.schema.class_names}, {"bad_files", bad_files}}},
      {"final", {{"epoch", last.epoch}, {"train_loss", json_number(last.train_loss)},
                 {"valid_loss", json_number(last.valid_loss)}, {"accuracy", json_number(last.valid_accuracy)},
                 {"error_rate", json_number(last.error_rate)},
                 {"top_k_accuracy", json_number(last.top_k_accuracy)}, {"top_k", facts.spec.train.top_k},
                 {"mae", json_number(last.mae)}, {"mse", json_number(last.mse)}}},
      {"started", facts.started},
      {"seconds", seconds},
      {"versions", {{"trainpoint", TRAINPOINT_VERSION_STRING}, {"libtorch", TORCH_VERSION}}},
  };
}

void write_run_json(const std::filesystem::path& output_dir, const nlohmann::json& record) {
  write_file_atomic(output_dir / "run.json", record.dump(2) + "\n");
}

}  // namespace tp::train
