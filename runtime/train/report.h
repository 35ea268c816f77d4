// report.html: one self-contained page (inline CSS and SVG, no scripts, nothing fetched) with the
// run's charts and record, rewritten at every epoch end so it can be opened while training runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "train/interpretation.h"
#include "train/metrics.h"

namespace tp::train {

struct ReportInput {
  const nlohmann::json& record;  // the run record, as in run.json
  const std::vector<StepRecord>& steps;
  const std::vector<EpochMetrics>& epochs;
  std::int64_t total_epochs = 0;
  std::int64_t top_k = 0;
  bool finished = false;
  // What the model gets wrong, once the last epoch interpreted it; none: nullptr.
  const Interpretation* interpretation = nullptr;
};

// The page as a string; it is also well-formed XML, so tests can parse it.
std::string render_report(const ReportInput& input);

// Writes render_report(input) to `file` atomically.
void write_report(const std::filesystem::path& file, const ReportInput& input);

// lr_find.html: the loss against log10(lr), with the suggestions. Well-formed XML too.
std::string render_lr_find(const std::string& job, const std::vector<LrFindPoint>& points, double suggested_lr,
                           double steepest_lr);

}  // namespace tp::train
