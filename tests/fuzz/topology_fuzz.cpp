// The launcher environment conventions (torchrun, PyTorchJob v1, Trainer v2) on arbitrary bytes: the
// input is KEY=VALUE lines taken as the environment; its first two bytes pick the spec's
// dist.nproc_per_node (0 = auto) and the visible GPUs. Invariants: read_topology returns or throws
// tp::Error(usage); a returned topology is consistent: nodes, processes per node and the world size
// are positive and fit an int, the node rank is one of the nodes, the port is a TCP port, and a worker's
// ranks lie inside the world and its node.
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <string_view>

#include "dist/topology.h"
#include "fuzz_support.h"

using namespace tp;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quiet_logs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const int spec_nproc = data[0] % 2 == 0 ? 0 : data[0] * 4 % 1025;  // 0 ("auto") or 1..1024
  const int devices = data[1] % 17;
  std::map<std::string, std::string> environment;
  std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    const auto equals = line.find('=');
    // Like the real environment: a name cannot hold '=' or NUL, and the first definition wins (getenv).
    if (equals != std::string_view::npos && line.substr(0, equals).find('\0') == std::string_view::npos) {
      std::string value(line.substr(equals + 1));
      value = value.substr(0, value.find('\0'));
      environment.emplace(std::string(line.substr(0, equals)), value);
    }
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  const dist::EnvironmentLookup lookup = [&](const std::string& name) -> std::optional<std::string> {
    const auto found = environment.find(name);
    return found == environment.end() ? std::nullopt : std::optional<std::string>(found->second);
  };

  dist::Topology topology;
  if (!fuzz::returns_or_fails_with(ExitCode::usage,
                                   [&] { topology = dist::read_topology(lookup, spec_nproc, devices); })) {
    return 0;
  }
  const std::string detail = std::string(reinterpret_cast<const char*>(data) + 2, size - 2);
  TP_FUZZ_CHECK(topology.nnodes >= 1 && topology.nproc_per_node >= 1, detail);
  const long long world = static_cast<long long>(topology.nnodes) * topology.nproc_per_node;
  TP_FUZZ_CHECK(world <= std::numeric_limits<int>::max(), "world size overflows int: " + std::to_string(world));
  TP_FUZZ_CHECK(topology.node_rank >= 0 && topology.node_rank < topology.nnodes, detail);
  TP_FUZZ_CHECK(topology.master_port >= 1 && topology.master_port <= 65535, detail);
  TP_FUZZ_CHECK(!topology.master_addr.empty() && !topology.convention.empty(), detail);
  TP_FUZZ_CHECK(topology.rank.has_value() == topology.local_rank.has_value(), detail);
  if (topology.rank) {
    TP_FUZZ_CHECK(*topology.rank >= 0 && *topology.rank < topology.world_size(), detail);
    TP_FUZZ_CHECK(*topology.local_rank >= 0 && *topology.local_rank < topology.nproc_per_node, detail);
    TP_FUZZ_CHECK(*topology.rank / topology.nproc_per_node == topology.node_rank, detail);
  } else if (spec_nproc > 0) {
    TP_FUZZ_CHECK(topology.nproc_per_node == spec_nproc, detail);
  }
  return 0;
}
