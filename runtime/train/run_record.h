// The run record: run.json at the end of a run, and the facts report.html shows at every epoch end.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/spec.h"
#include "train/metrics.h"

namespace tp::data {
struct Datasets;
}

namespace tp::train {

// What the run record says about where the job came from.
struct RunOrigin {
  std::string repo;
  std::string ref;
  std::string commit;
  std::string spec_name;
  std::string resolved_spec;  // spec::describe() of the spec used
};

// What the record says of the run besides its last metrics.
struct RunFacts {
  const RunOrigin& origin;
  const spec::Spec& spec;
  const data::Datasets& data;
  int world_size;
  std::string started;  // common/time.h's utc_timestamp
};

// The record after the epoch `last`, `seconds` into the run, with every rank's bad files.
nlohmann::json run_record(const RunFacts& facts, const EpochMetrics& last, const std::vector<std::string>& bad_files,
                          double seconds);

// Writes `record` to <output_dir>/run.json, whole or not at all.
void write_run_json(const std::filesystem::path& output_dir, const nlohmann::json& record);

}  // namespace tp::train
