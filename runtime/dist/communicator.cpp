#include "dist/communicator.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace tp::dist {

const char* phase_name(Phase phase) {
  switch (phase) {
    case Phase::start: return "start";
    case Phase::data: return "data";
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::all_reduce: return "all-reduce";
    case Phase::broadcast: return "broadcast";
    case Phase::checkpoint: return "checkpoint";
    case Phase::validate: return "validate";
  }
  return "unknown";
}

namespace {

class Done final : public PendingCollective {
 public:
  void wait() override {}
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  void all_reduce_sum(std::vector<at::Tensor>&) override {}
  std::unique_ptr<PendingCollective> all_reduce_sum_async(at::Tensor&) override { return std::make_unique<Done>(); }
  void broadcast(std::vector<at::Tensor>&, int) override {}
  void barrier() override {}
};

}  // namespace

std::string broadcast_bytes(Communicator& communicator, std::string bytes, int root) {
  if (communicator.world_size() == 1) return bytes;
  const bool sending = communicator.rank() == root;
  std::vector<at::Tensor> length{at::full({1}, sending ? static_cast<std::int64_t>(bytes.size()) : 0, at::kLong)};
  communicator.broadcast(length, root);
  const std::int64_t size = length[0].item<std::int64_t>();
  std::vector<at::Tensor> data{sending ? at::from_blob(bytes.data(), {size}, at::kByte).clone()
                                       : at::empty({size}, at::kByte)};
  communicator.broadcast(data, root);
  if (sending) return bytes;
  const auto* received = data[0].data_ptr<std::uint8_t>();
  return std::string(received, received + size);
}

namespace {

// Sums `values` (a 1-D tensor) over the ranks and returns them as a vector; the identity for one rank.
template <typename T>
std::vector<T> summed(Communicator& communicator, at::Tensor values) {
  if (communicator.world_size() > 1) {
    std::vector<at::Tensor> tensors{values};
    communicator.all_reduce_sum(tensors);
  }
  const T* data = values.data_ptr<T>();
  return std::vector<T>(data, data + values.numel());
}

// A zeroed buffer of `size` values in which this rank fills only its own slots: summed, it holds every
// rank's values.
at::Tensor zeroed_longs(std::int64_t size) { return at::zeros({size}, at::kLong); }

}  // namespace

std::vector<std::int64_t> sum_over_ranks(Communicator& communicator, std::vector<std::int64_t> mine) {
  return summed<std::int64_t>(communicator, at::tensor(mine, at::kLong));
}

std::vector<double> sum_over_ranks(Communicator& communicator, std::vector<double> mine) {
  return summed<double>(communicator, at::tensor(mine, at::kDouble));
}

std::vector<std::int64_t> all_gather_values(Communicator& communicator, std::int64_t mine) {
  at::Tensor values = zeroed_longs(communicator.world_size());
  values[communicator.rank()] = mine;
  return summed<std::int64_t>(communicator, values);
}

std::int64_t min_over_ranks(Communicator& communicator, std::int64_t mine) {
  const std::vector<std::int64_t> all = all_gather_values(communicator, mine);
  return *std::min_element(all.begin(), all.end());
}

bool any_rank(Communicator& communicator, bool mine) {
  return sum_over_ranks(communicator, std::vector<std::int64_t>{mine ? 1 : 0})[0] > 0;
}

std::vector<std::string> all_gather_strings(Communicator& communicator, const std::vector<std::string>& mine) {
  if (communicator.world_size() == 1) return mine;
  const int world = communicator.world_size();
  const int rank = communicator.rank();
  // First how many strings and bytes each rank has ([count, bytes] per rank), then one buffer with every
  // string's length followed by every rank's bytes, each rank filling its own part.
  std::int64_t my_bytes = 0;
  for (const std::string& text : mine) my_bytes += static_cast<std::int64_t>(text.size());
  at::Tensor sizes = zeroed_longs(2 * world);
  sizes[2 * rank] = static_cast<std::int64_t>(mine.size());
  sizes[2 * rank + 1] = my_bytes;
  const std::vector<std::int64_t> counts = summed<std::int64_t>(communicator, sizes);
  std::int64_t strings = 0, bytes = 0, my_first_string = 0, my_first_byte = 0;
  for (int r = 0; r < world; ++r) {
    if (r == rank) {
      my_first_string = strings;
      my_first_byte = bytes;
    }
    strings += counts[2 * r];
    bytes += counts[2 * r + 1];
  }
  if (strings == 0) return {};
  at::Tensor buffer = zeroed_longs(strings + bytes);
  std::int64_t* slots = buffer.data_ptr<std::int64_t>();
  std::int64_t* byte_slot = slots + strings + my_first_byte;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    slots[my_first_string + static_cast<std::int64_t>(i)] = static_cast<std::int64_t>(mine[i].size());
    for (const char c : mine[i]) *byte_slot++ = static_cast<unsigned char>(c);
  }
  const std::vector<std::int64_t> gathered = summed<std::int64_t>(communicator, buffer);
  std::vector<std::string> all;
  all.reserve(static_cast<std::size_t>(strings));
  std::int64_t next_byte = strings;
  for (std::int64_t i = 0; i < strings; ++i) {
    std::string text;
    for (std::int64_t b = 0; b < gathered[i]; ++b) text += static_cast<char>(gathered[next_byte + b]);
    next_byte += gathered[i];
    all.push_back(std::move(text));
  }
  return all;
}

std::unique_ptr<Communicator> single_process() { return std::make_unique<SingleProcess>(); }

}  // namespace tp::dist
