#include "dist/in_process_group.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/error.h"

namespace tp::dist {
namespace {

// What a rank brought to the current collective.
struct Contribution {
  const char* operation = "";
  std::vector<at::Tensor>* tensors = nullptr;  // the rank's own, read by the others until the second barrier
  int root = -1;
};

// The state the ranks share: each collective posts every rank's contribution and meets at a barrier; the
// ranks then read each other's tensors and meet again before anyone changes their own.
class Group {
 public:
  explicit Group(int world_size)
      : world_size_(world_size), contributions_(static_cast<std::size_t>(world_size)),
        left_(static_cast<std::size_t>(world_size), false) {}

  int world_size() const { return world_size_; }
  const Contribution& contribution(int rank) const { return contributions_[static_cast<std::size_t>(rank)]; }

  // Records `mine` (when given) and blocks until every rank has arrived at this barrier.
  void arrive(int rank, const Contribution* mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (mine != nullptr) contributions_[static_cast<std::size_t>(rank)] = *mine;
    const std::uint64_t generation = generation_;
    if (++arrived_ == world_size_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    changed_.wait(lock, [&] { return generation_ != generation || !lost().empty(); });
    if (generation_ != generation) return;
    --arrived_;
    fail(ExitCode::peer_lost, "rank {}: rank(s) {} left the in-process group before this {}", rank,
         fmt::join(lost(), ", "), contributions_[static_cast<std::size_t>(rank)].operation);
  }

  void leave(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    left_[static_cast<std::size_t>(rank)] = true;
    changed_.notify_all();
  }

 private:
  std::vector<int> lost() const {
    std::vector<int> ranks;
    for (int r = 0; r < world_size_; ++r) {
      if (left_[static_cast<std::size_t>(r)]) ranks.push_back(r);
    }
    return ranks;
  }

  const int world_size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  std::vector<Contribution> contributions_;
  std::vector<bool> left_;
};

class Completed final : public PendingCollective {
 public:
  void wait() override {}
};

class InProcessRank final : public Communicator {
 public:
  InProcessRank(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  ~InProcessRank() override { group_->leave(rank_); }

  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size(); }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    begin({"all_reduce_sum", &tensors});
    std::vector<at::Tensor> sums;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      at::Tensor sum = (*group_->contribution(0).tensors)[i].clone();
      for (int r = 1; r < world_size(); ++r) sum.add_((*group_->contribution(r).tensors)[i]);
      sums.push_back(std::move(sum));
    }
    group_->arrive(rank_, nullptr);  // every rank has read every rank's tensors
    for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(sums[i]);
  }

  // Done by the time it returns, which a caller waiting later cannot tell from a collective in flight.
  std::unique_ptr<PendingCollective> all_reduce_sum_async(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    all_reduce_sum(tensors);
    return std::make_unique<Completed>();
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    if (root < 0 || root >= world_size()) {
      fail(ExitCode::internal, "rank {}: broadcast from rank {}, outside the world of {}", rank_, root, world_size());
    }
    begin({"broadcast", &tensors, root});
    if (rank_ != root) {
      const std::vector<at::Tensor>& sent = *group_->contribution(root).tensors;
      for (std::size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(sent[i]);
    }
    group_->arrive(rank_, nullptr);  // the root's tensors are copied before it changes them
  }

  void barrier() override {
    begin({"barrier"});
    group_->arrive(rank_, nullptr);  // every rank has compared the contributions before one posts its next
  }

 private:
  // Posts this rank's contribution, waits for every rank's, and checks that they match. Every rank finds the
  // same mismatch, so all throw alike, but only after every rank has finished reading the others' tensors:
  // a rank that threw at once would free its tensors under a rank still comparing them.
  void begin(Contribution mine) {
    group_->arrive(rank_, &mine);
    const std::string mismatch = find_mismatch();
    if (mismatch.empty()) return;
    group_->arrive(rank_, nullptr);
    fail(ExitCode::internal, "rank {}: {}", rank_, mismatch);
  }

  // What differs between rank 0's contribution and another rank's, or nothing.
  std::string find_mismatch() const {
    const Contribution& first = group_->contribution(0);
    for (int r = 1; r < world_size(); ++r) {
      const Contribution& other = group_->contribution(r);
      if (std::string(other.operation) != first.operation || other.root != first.root) {
        return fmt::format("mismatched collectives: rank 0 called {} (root {}), rank {} {} (root {})",
                           first.operation, first.root, r, other.operation, other.root);
      }
      if (first.tensors == nullptr) continue;
      if (other.tensors->size() != first.tensors->size()) {
        return fmt::format("{}: rank 0 passed {} tensor(s), rank {} {}", first.operation, first.tensors->size(), r,
                           other.tensors->size());
      }
      for (std::size_t i = 0; i < first.tensors->size(); ++i) {
        const at::Tensor& a = (*first.tensors)[i];
        const at::Tensor& b = (*other.tensors)[i];
        if (!a.sizes().equals(b.sizes()) || a.scalar_type() != b.scalar_type()) {
          return fmt::format("{}: tensor {} is {} [{}] on rank 0 but {} [{}] on rank {}", first.operation, i,
                             a.toString(), fmt::join(a.sizes(), ", "), b.toString(), fmt::join(b.sizes(), ", "), r);
        }
      }
    }
    return {};
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> in_process_group(int world_size) {
  if (world_size < 1) fail(ExitCode::internal, "an in-process group of {} ranks", world_size);
  auto group = std::make_shared<Group>(world_size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int rank = 0; rank < world_size; ++rank) ranks.push_back(std::make_unique<InProcessRank>(group, rank));
  return ranks;
}

}  // namespace tp::dist
