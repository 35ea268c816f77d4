// What the pod of rank 0 tells [notify]'s webhooks of a run (runtime/telemetry/notify.h): its end (finished, or
// failed for good) from `run`, and its stalls from the training rank of rank 0.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "spec/spec.h"
#include "telemetry/notify.h"

namespace tp::notifications {

// What a notification says of the run: what it trains, then, once the spec has loaded (also when its preflight
// fails), the job, its outputs and [notify].
struct RunDescription {
  telemetry::JobOutcome outcome;
  std::optional<std::filesystem::path> output_dir;  // where metrics.jsonl is written, when this process sees it
  spec::NotifySpec notify = spec::defaults().notify;  // the spec's, once loaded
};

// Fills `described` from the commit being trained ("" until resolved) and the spec, when it has loaded (nullptr:
// the job is named by its spec file).
void describe_run(const cli::Options& options, const std::string& commit, const spec::LoadedSpec* loaded,
                  RunDescription& described);

// The webhooks [notify] names that hear of `event`. Throws tp::Error (usage) for a malformed one.
std::vector<telemetry::Webhook> webhooks_for(const spec::NotifySpec& notify, telemetry::JobEvent event);

// Rank 0's watch over stalled ranks (`stalled_ranks`: the communicator's count), told to the webhooks of
// [notify]; nullptr when none hears of stalls.
std::unique_ptr<telemetry::StallNotifier> watch_stalls(const cli::Options& options, const std::string& commit,
                                                       const spec::Spec& spec, std::function<int()> stalled_ranks);

// `run`, then, from the pod of rank 0, its end told to the webhooks of [notify]: a finished run with its last
// epoch's metrics, or a failure of the permanent class (a retryable one restarts the pod). Before the spec has
// loaded, [notify]'s defaults hold (the webhook of the pod's Secret).
// `speaks_for_job`: this process is the pod of node rank 0 (its launcher, or its only process).
int run_and_notify(bool speaks_for_job, const std::function<int(RunDescription&)>& run);

}  // namespace tp::notifications
