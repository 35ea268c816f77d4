#include "train/run_checkpoints.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/files.h"
#include "storage/run_identity.h"

namespace tp::train {

namespace fs = std::filesystem;

RunCheckpoints run_checkpoints_of(const FitEnvironment& environment, const fs::path& output_dir,
                                  dist::Communicator& communicator) {
  const fs::path root = environment.checkpoints_root.empty() ? output_dir / "checkpoints" : environment.checkpoints_root;
  const std::string document = dist::broadcast_bytes(
      communicator, environment.identity ? storage::identity_json(*environment.identity).dump() : "", 0);
  RunCheckpoints checkpoints{root, communicator.rank() == 0 || environment.node_copy};
  if (document.empty()) return checkpoints;
  const storage::RunIdentity identity = storage::identity_from_json(nlohmann::json::parse(document), "rank 0's run");
  checkpoints.directory = storage::run_checkpoints(root, identity);
  if (!checkpoints.keeps) return checkpoints;
  const auto recorded = storage::record_identity(checkpoints.directory, identity);
  if (recorded && communicator.rank() == 0 && environment.publish) environment.publish(*recorded);
  return checkpoints;
}

void forget_checkpoints(const fs::path& directory, const FitEnvironment& environment, bool writer) {
  const std::vector<fs::path> removed = prune_checkpoints(directory, 0);
  if (removed.empty()) return;
  spdlog::warn("checkpoint.resume = \"never\": deleted {} checkpoint(s) of an earlier start of this run in {}",
               removed.size(), directory.string());
  for (const fs::path& file : removed) {
    if (writer && environment.withdraw) environment.withdraw(file);
  }
}

std::optional<Checkpoint> agree_on_checkpoint(std::optional<Checkpoint> mine, dist::Communicator& communicator,
                                              const RunCheckpoints& checkpoints) {
  if (communicator.world_size() == 1) return mine;
  const std::vector<std::int64_t> steps =
      dist::all_gather_values(communicator, mine ? mine->state.position.step + 1 : 0);  // 0: none
  const std::int64_t newest = *std::max_element(steps.begin(), steps.end());
  if (newest == 0) return std::nullopt;
  if (std::count(steps.begin(), steps.end(), newest) == communicator.world_size()) {
    return mine;  // every rank has it: nothing to send
  }
  const int holder = static_cast<int>(std::find(steps.begin(), steps.end(), newest) - steps.begin());
  const bool lacking = !mine || mine->state.position.step + 1 != newest;
  std::string bytes = dist::broadcast_bytes(communicator, communicator.rank() == holder ? mine->bytes : "", holder);
  if (!lacking) return mine;
  Checkpoint received = read_checkpoint(std::move(bytes), fmt::format("rank {}'s checkpoint at step {}", holder, newest - 1));
  spdlog::warn("rank {}: {} the newest checkpoint (step {}); received it from rank {}", communicator.rank(),
               mine ? fmt::format("has only step {}, not", mine->state.position.step) : std::string("has no checkpoint, not"),
               newest - 1, holder);
  if (checkpoints.keeps) {
    received.file = checkpoint_path(checkpoints.directory, received.state.position);
    fs::create_directories(checkpoints.directory);
    write_file_atomic(received.file, received.bytes);
  }
  return received;
}

double save_timed(const fs::path& file, const torch::jit::Module& model, const torch::optim::Optimizer& optimizer,
                  const CheckpointState& state, const spec::Spec& spec, bool writer) {
  const auto begun = std::chrono::steady_clock::now();
  save_checkpoint(file, model, optimizer, state);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count();
  const double megabytes = static_cast<double>(fs::file_size(file)) / (1 << 20);
  if (seconds > static_cast<double>(spec.k8s.grace_s) / 2) {
    spdlog::warn("checkpoint {} ({:.1f} MiB) took {:.1f}s to save, more than half of k8s.grace_s = {}: a "
                 "preempted pod may be killed before its checkpoint is complete; raise k8s.grace_s",
                 file.string(), megabytes, seconds, spec.k8s.grace_s);
  } else if (writer) {
    // At debug: the epoch line gives the save time; a slow save warns above.
    spdlog::debug("checkpoint {} saved ({:.1f} MiB in {:.2f}s)", file.string(), megabytes, seconds);
  }
  return seconds;
}

}  // namespace tp::train
