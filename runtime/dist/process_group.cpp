// Communicator over a c10d process group (Gloo on CPU, NCCL on CUDA), with heartbeats in the
// rendezvous store so that a failed collective can name the ranks that were lost.
#include <torch/torch.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "dist/c10d_compat.h"
#include "dist/communicator.h"

namespace tp::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kHeartbeatInterval{500};

c10::intrusive_ptr<c10d::TCPStore> connect_store(const ProcessGroupOptions& options, bool server,
                                                 std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = server;
  store_options.numWorkers = options.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  return c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
}

// Workers often start before the master's name resolves or its port listens: retry with backoff.
c10::intrusive_ptr<c10d::TCPStore> rendezvous(const ProcessGroupOptions& options) {
  const auto deadline = Clock::now() + options.timeout;
  auto delay = std::chrono::milliseconds(100);
  for (int attempt = 1;; ++attempt) {
    try {
      return connect_store(options, options.rank == 0, options.timeout);
    } catch (const std::exception& error) {
      const std::string cause = error.what();
      if (options.rank == 0) {
        fail(ExitCode::peer_lost, "rank 0: cannot serve the rendezvous store on {}:{}: {}", options.master_addr,
             options.master_port, cause.substr(0, cause.find('\n')));
      }
      if (Clock::now() + delay >= deadline) {
        fail(ExitCode::peer_lost, "rank {}: rendezvous with the master {}:{} failed after {} attempts in {}s: {}",
             options.rank, options.master_addr, options.master_port, attempt, options.timeout.count(),
             cause.substr(0, cause.find('\n')));
      }
      spdlog::info("rank {}: master {}:{} not reachable yet (attempt {}), retrying in {}ms", options.rank,
                   options.master_addr, options.master_port, attempt, delay.count());
      std::this_thread::sleep_for(delay);
      delay = std::min(delay * 2, std::chrono::milliseconds(5000));
    }
  }
}

// Each rank bumps a counter in the store every kHeartbeatInterval over its own connection. Ranks
// whose counter stops moving are the lost ones (counters, not clocks, so clock skew does not matter).
// Both connections use a short timeout so that a dead or stopped master cannot block them for long.
class Heartbeat {
 public:
  explicit Heartbeat(const ProcessGroupOptions& options)
      : options_(options), store_(connect_store(options, false, kStoreTimeout)) {
    thread_ = std::thread([this] { beat(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stopped_.notify_all();
    thread_.join();
  }

  // Which ranks' heartbeats did not advance over a few intervals. Called after a failure.
  std::string describe_lost_ranks() const {
    try {
      auto store = connect_store(options_, false, kStoreTimeout);
      std::vector<std::int64_t> before;
      for (int r = 0; r < options_.world_size; ++r) before.push_back(store->add(key(r), 0));
      std::this_thread::sleep_for(kHeartbeatInterval * 4);
      std::vector<int> lost;
      for (int r = 0; r < options_.world_size; ++r) {
        if (r != options_.rank && store->add(key(r), 0) == before[static_cast<std::size_t>(r)]) lost.push_back(r);
      }
      if (lost.empty()) return "every rank is still sending heartbeats";
      return fmt::format("lost rank{} {} (no heartbeat for {}ms)", lost.size() > 1 ? "s" : "", fmt::join(lost, ", "),
                         (kHeartbeatInterval * 4).count());
    } catch (const std::exception&) {
      return "lost rank 0 (the master: its rendezvous store no longer answers)";
    }
  }

 private:
  static constexpr std::chrono::milliseconds kStoreTimeout{5000};

  std::string key(int rank) const { return "trainpoint/heartbeat/" + std::to_string(rank); }
  void beat() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      lock.unlock();
      try {
        store_->add(key(options_.rank), 1);
      } catch (const std::exception&) {
        // The master is gone; the failing collective reports it.
      }
      lock.lock();
      stopped_.wait_for(lock, kHeartbeatInterval, [this] { return stopping_; });
    }
  }

  ProcessGroupOptions options_;
  c10::intrusive_ptr<c10d::TCPStore> store_;  // used by the heartbeat thread only
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool stopping_ = false;
  std::thread thread_;
};

// The local address from which this host reaches `host`: the one a UDP socket connected there would
// use (connecting a UDP socket sends nothing). Empty when `host` does not resolve.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) return "";
  std::string address;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) != nullptr) address = text;
  }
  if (fd >= 0) ::close(fd);
  freeaddrinfo(found);
  return address;
}

// Where Gloo listens and connects from: GLOO_SOCKET_IFNAME when set (as in PyTorch); else the address
// this host reaches the master from. Gloo's default, the address the host name resolves to, is
// 127.0.0.1 in many containers and strands the rank on loopback when the other ranks are elsewhere.
std::shared_ptr<::gloo::transport::Device> gloo_device(const ProcessGroupOptions& options) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface != '\0') {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  const std::string local = local_address_towards(options.master_addr, options.master_port);
  if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

c10::intrusive_ptr<compat::BackendBase> make_backend(const ProcessGroupOptions& options,
                                                     const c10::intrusive_ptr<c10d::Store>& store) {
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout);
  if (options.backend == "nccl") {
#ifdef TRAINPOINT_WITH_CUDA
    auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
    nccl_options->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size, nccl_options);
#else
    fail(ExitCode::usage, "dist.backend = \"nccl\" needs a CUDA build of trainpoint; this one has only gloo");
#endif
  }
  auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
  gloo_options->devices.push_back(gloo_device(options));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank, options.world_size, gloo_options);
}

class ProcessGroupCommunicator;

class PendingWork final : public PendingCollective {
 public:
  PendingWork(ProcessGroupCommunicator& owner, c10::intrusive_ptr<c10d::Work> work, const char* what)
      : owner_(owner), work_(std::move(work)), what_(what) {}
  void wait() override;

 private:
  ProcessGroupCommunicator& owner_;
  c10::intrusive_ptr<c10d::Work> work_;
  const char* what_;
};

class ProcessGroupCommunicator final : public Communicator {
 public:
  explicit ProcessGroupCommunicator(const ProcessGroupOptions& options) : options_(options) {
    store_ = rendezvous(options);
    heartbeat_ = std::make_unique<Heartbeat>(options);
    try {
      backend_ = make_backend(options, store_);
    } catch (const c10::Error& error) {
      fail(ExitCode::peer_lost, "rank {}: forming the {} process group of {} ranks failed: {}", options.rank,
           options.backend, options.world_size, error.what_without_backtrace());
    } catch (const std::exception& error) {  // Gloo's own exceptions, such as a refused connection
      fail(ExitCode::peer_lost, "rank {}: forming the {} process group of {} ranks failed: {}", options.rank,
           options.backend, options.world_size, error.what());
    }
  }
  ~ProcessGroupCommunicator() override {
    backend_.reset();
    heartbeat_.reset();
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    for (auto& tensor : tensors) all_reduce_sum_async(tensor)->wait();
  }

  std::unique_ptr<PendingCollective> all_reduce_sum_async(at::Tensor& tensor) override {
    std::vector<at::Tensor> one{tensor};
    return start([&] { return backend_->allreduce(one); }, "all-reduce");
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions broadcast_options;
    broadcast_options.rootRank = root;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{tensor};
      start([&] { return backend_->broadcast(one, broadcast_options); }, "broadcast")->wait();
    }
  }

  void barrier() override {
    std::vector<at::Tensor> token{torch::zeros({1})};
    all_reduce_sum(token);
  }

  // The error for a failed collective, naming the lost ranks.
  [[noreturn]] void collective_failed(const char* what, const std::string& cause) {
    const std::string first_line = cause.substr(0, cause.find('\n'));
    fail(ExitCode::peer_lost, "rank {}: {} failed: {}; cause: {}", options_.rank, what,
         heartbeat_->describe_lost_ranks(), first_line);
  }

 private:
  template <typename Launch>
  std::unique_ptr<PendingCollective> start(Launch launch, const char* what) {
    try {
      return std::make_unique<PendingWork>(*this, launch(), what);
    } catch (const c10::Error& error) {
      collective_failed(what, error.what_without_backtrace());
    }
  }

  ProcessGroupOptions options_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::unique_ptr<Heartbeat> heartbeat_;
  c10::intrusive_ptr<compat::BackendBase> backend_;
};

void PendingWork::wait() {
  try {
    work_->wait();
  } catch (const c10::Error& error) {
    owner_.collective_failed(what_, error.what_without_backtrace());
  } catch (const std::exception& error) {
    owner_.collective_failed(what_, error.what());
  }
}

}  // namespace

std::unique_ptr<Communicator> connect(const ProcessGroupOptions& options) {
  return std::make_unique<ProcessGroupCommunicator>(options);
}

}  // namespace tp::dist
