// Communicator over a c10d process group (Gloo on CPU, NCCL on CUDA), with heartbeats in the
// rendezvous store so that a failed collective can name the ranks that were lost, and a watchdog that
// holds every collective to dist.timeout_s (with NCCL the host does not wait for collectives).
#include <torch/torch.h>
#ifdef TRAINPOINT_WITH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "dist/c10d_compat.h"
#include "dist/collective_watch.h"
#include "dist/communicator.h"
#include "dist/rendezvous.h"

namespace tp::dist {
namespace {

using Clock = std::chrono::steady_clock;

// The backends' own deadline for a collective is this much later than dist.timeout_s, so that the
// watchdog's error, which names the lost ranks, comes first.
constexpr std::chrono::seconds kBackendGrace{30};
// How often the watchdog polls the collectives in flight.
constexpr std::chrono::milliseconds kWatchInterval{250};

// The heartbeat and hang watchdog. Every `options.heartbeat` each rank publishes its record
// "<beat> <step> <phase> <ms in this step and phase>" to the rendezvous store over its own connection
// and reads the other ranks' records. Staleness is measured on the reader's own clock from when a
// record last changed (beats, not timestamps, so clock skew between nodes does not matter).
// A rank whose step and phase have not changed for `options.stall` is logged by every rank, once per
// stall; the error of a failed collective names the same ranks. A rank waiting in a collective is
// never the cause while another stalled rank is not waiting. Both store connections use a short
// timeout so that a dead or stopped master cannot block them for long.
class Heartbeat {
 public:
  Heartbeat(const ProcessGroupOptions& options, CollectiveWatch& watch)
      : options_(options),
        watch_(watch),
        store_(connect_store(options, false, kStoreTimeout)),
        watching_since_(Clock::now()),
        phase_since_(watching_since_),
        ranks_(static_cast<std::size_t>(options.world_size)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  void set_progress(std::int64_t step, Phase phase) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (step != step_ || phase != phase_) phase_since_ = Clock::now();
    step_ = step;
    phase_ = phase;
  }

  // While a collective waits for the other ranks, the published phase is the collective's.
  void enter_collective(Phase collective) {
    std::lock_guard<std::mutex> lock(mutex_);
    collective_ = collective;
    phase_since_ = Clock::now();
  }
  void leave_collective() {
    std::lock_guard<std::mutex> lock(mutex_);
    collective_.reset();
    phase_since_ = Clock::now();
  }

  // Ranks seen as stalled at the last heartbeat (for /metrics).
  int stalled_ranks() const { return stalled_count_; }

  // The ranks to blame for a failed collective: those whose heartbeat has stopped, and those that
  // stalled. Unless a heartbeat is already overdue, waits up to three beats for one to be, so that a
  // rank that has just died is seen to have stopped beating.
  std::string describe_lost_ranks() {
    std::unique_lock<std::mutex> lock(mutex_);
    // The diagnosis may not hold the exit back by more than half the collective timeout (at least 3 s):
    // a job must fail within about dist.timeout_s even when the heartbeats are slower than that.
    const auto started = Clock::now();
    const auto give_up = started + std::max<Clock::duration>(std::chrono::seconds(3), options_.timeout / 2);
    const auto until = [&](Clock::duration wait) { return std::min(Clock::now() + wait, give_up); };
    // One fresh round first: this rank's view may be old if the process itself was paused.
    const std::int64_t fresh = rounds_ + 1;
    observed_.wait_until(lock, until(options_.heartbeat + kStoreTimeout + std::chrono::seconds(1)),
                         [&] { return rounds_ >= fresh || stopping_; });
    observed_.wait_until(lock, until(options_.heartbeat * 3 + std::chrono::seconds(2)),
                         [this] { return store_error_ || stopping_ || any_silent(Clock::now()); });
    // Once the store is gone nothing more is learnt: judge the ranks as they were when it went.
    const auto now = store_error_ ? store_failed_at_ : Clock::now();
    std::vector<std::string> blamed;
    for (int r = 0; r < options_.world_size; ++r) {
      if (r != options_.rank && silent(ranks_[static_cast<std::size_t>(r)], now)) {
        blamed.push_back("lost " + describe(r, now));
      }
    }
    for (int r : culprits(now)) {
      if (r == options_.rank || !silent(ranks_[static_cast<std::size_t>(r)], now)) {
        blamed.push_back("stalled " + describe(r, now));
      }
    }
    const std::string master_gone = "lost rank 0 (the master: its rendezvous store no longer answers)";
    if (blamed.empty()) return store_error_ ? master_gone : "every rank is still sending heartbeats";
    return fmt::format("{}{}", fmt::join(blamed, "; "), store_error_ ? "; then " + master_gone : "");
  }

 private:
  static constexpr std::chrono::milliseconds kStoreTimeout{5000};

  // What this rank knows of one rank: its last record and when that record last changed.
  struct Seen {
    bool published = false;
    std::int64_t beat = -1;
    std::int64_t step = 0;
    std::string phase;
    std::chrono::milliseconds in_phase{0};  // at the time of the record
    Clock::time_point changed;              // on this rank's clock
    bool reported = false;                  // logged as stalled, not yet advanced again
  };

  static std::string key(int rank) { return "trainpoint/heartbeat/" + std::to_string(rank); }
  static double seconds(Clock::duration duration) { return std::chrono::duration<double>(duration).count(); }

  Clock::duration silence(const Seen& seen, Clock::time_point now) const {
    return now - (seen.published ? seen.changed : watching_since_);
  }
  // A heartbeat two beats late (and a second of slack): the process is stopped, hung or dead.
  bool silent(const Seen& seen, Clock::time_point now) const {
    return silence(seen, now) > options_.heartbeat * 2 + std::chrono::seconds(1);
  }
  bool any_silent(Clock::time_point now) const {
    for (int r = 0; r < options_.world_size; ++r) {
      if (r != options_.rank && silent(ranks_[static_cast<std::size_t>(r)], now)) return true;
    }
    return false;
  }
  Clock::duration not_advanced(const Seen& seen, Clock::time_point now) const {
    return seen.in_phase + silence(seen, now);
  }
  static bool waiting_for_others(const Seen& seen) { return seen.phase == "all-reduce" || seen.phase == "broadcast"; }

  // Ranks whose step and phase have not changed for options_.stall, without those merely waiting in a
  // collective for one of them.
  std::vector<int> culprits(Clock::time_point now) const {
    std::vector<int> stalled, blamed;
    for (int r = 0; r < options_.world_size; ++r) {
      const Seen& seen = ranks_[static_cast<std::size_t>(r)];
      const bool is_silent = r != options_.rank && silent(seen, now);
      if (not_advanced(seen, now) >= options_.stall) {
        stalled.push_back(r);
        if (is_silent || !waiting_for_others(seen)) blamed.push_back(r);
      }
    }
    return blamed.empty() ? stalled : blamed;
  }

  // "rank 1 at step 14, phase backward: not advanced for 12.0s, no heartbeat for 11.5s (...)".
  std::string describe(int r, Clock::time_point now) const {
    const Seen& seen = ranks_[static_cast<std::size_t>(r)];
    if (!seen.published) return fmt::format("rank {} (no heartbeat at all for {:.1f}s)", r, seconds(silence(seen, now)));
    std::string text = fmt::format("rank {} at step {}, phase {}: not advanced for {:.1f}s", r, seen.step, seen.phase,
                                   seconds(not_advanced(seen, now)));
    if (r != options_.rank && silent(seen, now)) {
      text += fmt::format(", no heartbeat for {:.1f}s (stopped, hung or dead)", seconds(silence(seen, now)));
    }
    return text;
  }

  // `held` is the oldest collective in flight: with NCCL this rank's GPU may be held in it while its host
  // has gone on (and blocks at its next synchronisation), and then that collective is its phase.
  std::string own_record(std::int64_t beat, const std::optional<CollectiveWatch::Running>& held) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = Clock::now();
    Phase phase = collective_.value_or(phase_);
    auto since = phase_since_;
    if (!collective_ && held && now - held->since > options_.heartbeat) {
      phase = held->what;
      since = held->since;
    }
    const auto in_phase = std::chrono::duration_cast<std::chrono::milliseconds>(now - since);
    Seen& self = ranks_[static_cast<std::size_t>(options_.rank)];
    self.published = true;
    self.beat = beat;
    self.step = step_;
    self.phase = phase_name(phase);
    self.in_phase = in_phase;
    self.changed = now;
    return fmt::format("{} {} {} {}", beat, self.step, self.phase, in_phase.count());
  }

  // Reads the other ranks' records; returns them as (rank, record) for those that have one.
  std::vector<std::pair<int, std::string>> read_others() {
    std::vector<std::pair<int, std::string>> records;
    for (int r = 0; r < options_.world_size; ++r) {
      if (r == options_.rank) continue;
      const bool known = ranks_[static_cast<std::size_t>(r)].published;  // written by this thread only
      if (!known && !store_->check({key(r)})) continue;
      const std::vector<std::uint8_t> bytes = store_->get(key(r));
      records.emplace_back(r, std::string(bytes.begin(), bytes.end()));
    }
    return records;
  }

  void observe(const std::vector<std::pair<int, std::string>>& records, Clock::time_point now) {
    for (const auto& [r, record] : records) {
      Seen& seen = ranks_[static_cast<std::size_t>(r)];
      std::istringstream fields(record);
      std::int64_t beat = 0, step = 0, in_phase_ms = 0;
      std::string phase;
      if (!(fields >> beat >> step >> phase >> in_phase_ms) || beat == seen.beat) continue;
      seen.published = true;
      seen.beat = beat;
      seen.step = step;
      seen.phase = phase;
      seen.in_phase = std::chrono::milliseconds(in_phase_ms);
      seen.changed = now;
    }
  }

  // Logs each rank that became stalled, and each that advanced again.
  void report(Clock::time_point now) {
    const std::vector<int> blamed = culprits(now);
    stalled_count_ = static_cast<int>(blamed.size());
    for (int r = 0; r < options_.world_size; ++r) {
      Seen& seen = ranks_[static_cast<std::size_t>(r)];
      const bool stalled = std::find(blamed.begin(), blamed.end(), r) != blamed.end();
      if (stalled && !seen.reported) {
        spdlog::warn("stalled: {} (dist.stall_s = {})", describe(r, now), options_.stall.count());
      } else if (!stalled && seen.reported && not_advanced(seen, now) < options_.stall) {
        spdlog::info("rank {} advanced again: step {}, phase {}", r, seen.step, seen.phase);
      } else {
        continue;
      }
      seen.reported = stalled;
    }
  }

  // When this process itself was stopped or starved, the other ranks' records only look old: they get a
  // fresh start instead of being taken for lost.
  void forgive_own_pause(Clock::time_point now, Clock::time_point previous_round) {
    const auto gap = now - previous_round;
    if (gap <= options_.heartbeat * 2 + std::chrono::seconds(1)) return;
    spdlog::warn("heartbeat: this rank was paused for {:.1f}s (stopped, or starved of CPU); the other ranks may "
                 "have reported it as stalled", seconds(gap));
    watching_since_ = now;
    for (int r = 0; r < options_.world_size; ++r) {
      Seen& seen = ranks_[static_cast<std::size_t>(r)];
      if (r != options_.rank && seen.published) seen.changed = now;
    }
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    auto previous_round = Clock::now();
    for (std::int64_t beat = 0; !stopping_; ++beat) {
      forgive_own_pause(Clock::now(), previous_round);
      previous_round = Clock::now();
      lock.unlock();
      const std::string record = own_record(beat, watch_.inspect(Clock::now()).oldest);
      std::vector<std::pair<int, std::string>> records;
      std::optional<std::string> error;
      try {
        store_->set(key(options_.rank), std::vector<std::uint8_t>(record.begin(), record.end()));
        records = read_others();
      } catch (const std::exception& failure) {
        error = failure.what();
      }
      lock.lock();
      if (error && !store_error_) {
        // The master is gone or stopped; a failing collective reports it.
        const std::string first_line = error->substr(0, error->find('\n'));
        spdlog::warn("heartbeat: the rendezvous store at {}:{} (rank 0) does not answer: {}", options_.master_addr,
                     options_.master_port, first_line);
      }
      if (error && !store_error_) store_failed_at_ = Clock::now();
      store_error_ = error.has_value();
      if (!error) {
        const auto now = Clock::now();
        observe(records, now);
        report(now);
      }
      ++rounds_;
      observed_.notify_all();
      wake_.wait_for(lock, options_.heartbeat, [this] { return stopping_; });
    }
  }

  ProcessGroupOptions options_;
  CollectiveWatch& watch_;
  c10::intrusive_ptr<c10d::TCPStore> store_;  // used by the heartbeat thread only
  std::mutex mutex_;  // guards everything below
  Clock::time_point watching_since_;  // start, or the end of a pause of this process
  std::condition_variable wake_;
  std::condition_variable observed_;
  bool stopping_ = false;
  std::int64_t step_ = 0;
  Phase phase_ = Phase::start;
  std::optional<Phase> collective_;
  Clock::time_point phase_since_;
  std::vector<Seen> ranks_;
  std::int64_t rounds_ = 0;
  std::atomic<int> stalled_count_{0};  // read by the training thread without the mutex
  bool store_error_ = false;
  Clock::time_point store_failed_at_;
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
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout + kBackendGrace);
  switch (options.backend) {
    case Backend::nccl: {
#ifdef TRAINPOINT_WITH_CUDA
      compat::leave_nccl_failures_to_the_caller();
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = timeout;
      return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, options.rank, options.world_size, nccl_options);
#else
      fail(ExitCode::usage, "dist.backend = \"nccl\" needs a CUDA build of trainpoint; this one has only gloo");
#endif
    }
    case Backend::gloo: {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(timeout);
      gloo_options->devices.push_back(gloo_device(options));
      return c10::make_intrusive<c10d::ProcessGroupGloo>(store, options.rank, options.world_size, gloo_options);
    }
  }
  fail(ExitCode::internal, "unhandled backend {}", static_cast<int>(options.backend));
}

class ProcessGroupCommunicator;

class PendingWork final : public PendingCollective {
 public:
  PendingWork(ProcessGroupCommunicator& owner, c10::intrusive_ptr<c10d::Work> work, Phase what)
      : owner_(owner), work_(std::move(work)), what_(what) {}
  void wait() override;

 private:
  ProcessGroupCommunicator& owner_;
  c10::intrusive_ptr<c10d::Work> work_;
  Phase what_;
};

class ProcessGroupCommunicator final : public Communicator {
 public:
  explicit ProcessGroupCommunicator(const ProcessGroupOptions& options) : options_(options), watch_(options.timeout) {
    if (options.cuda_device) {
#ifdef TRAINPOINT_WITH_CUDA
      // NCCL and the caching allocator work on the current device: this rank's, before the group exists.
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(*options.cuda_device));
#endif
    }
    store_ = rendezvous(options);
    heartbeat_ = std::make_unique<Heartbeat>(options, watch_);
    try {
      backend_ = make_backend(options, store_);
    } catch (const c10::Error& error) {
      fail(ExitCode::peer_lost, "rank {}: forming the {} process group of {} ranks failed: {}", options.rank,
           name(options.backend), options.world_size, error.what_without_backtrace());
    } catch (const std::exception&) {  // Gloo's own exceptions, such as a refused connection
      rethrow_as(ExitCode::peer_lost, "rank {}: forming the {} process group of {} ranks failed",
                 options.rank, name(options.backend), options.world_size);
    }
    watchdog_ = std::thread([this] { watch_collectives(); });
  }
  ~ProcessGroupCommunicator() override {
    {
      std::lock_guard<std::mutex> lock(watchdog_mutex_);
      stopping_ = true;
    }
    watchdog_wake_.notify_all();
    watchdog_.join();
    backend_.reset();
    heartbeat_.reset();
  }

  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }

  void all_reduce_sum(std::vector<at::Tensor>& tensors) override {
    for (auto& tensor : tensors) {
      at::Tensor staged = to_backend_device(tensor);
      all_reduce_sum_async(staged)->wait();
      if (!staged.is_same(tensor)) tensor.copy_(staged);
    }
  }

  std::unique_ptr<PendingCollective> all_reduce_sum_async(at::Tensor& tensor) override {
    std::vector<at::Tensor> one{tensor};
    return start([&] { return backend_->allreduce(one); }, Phase::all_reduce);
  }

  void broadcast(std::vector<at::Tensor>& tensors, int root) override {
    c10d::BroadcastOptions broadcast_options;
    broadcast_options.rootRank = root;
    for (auto& tensor : tensors) {
      std::vector<at::Tensor> one{to_backend_device(tensor)};
      start([&] { return backend_->broadcast(one, broadcast_options); }, Phase::broadcast)->wait();
      if (!one[0].is_same(tensor)) tensor.copy_(one[0]);
    }
  }

  void barrier() override {
    std::vector<at::Tensor> token{torch::zeros({1})};
    all_reduce_sum(token);
  }

  void set_progress(std::int64_t step, Phase phase) override { heartbeat_->set_progress(step, phase); }
  int stalled_ranks() const override { return heartbeat_->stalled_ranks(); }

  void raise_if_communication_failure(const std::exception& error) override {
    if (!compat::is_communication_failure(error)) return;
    // Which collective is not known here: the error surfaced at a later synchronisation.
    const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
    throw collective_error("a collective", torch_error ? torch_error->what_without_backtrace() : error.what());
  }

  // NCCL reduces only CUDA tensors: the trainer's small CPU tensors (counts, flags, totals) travel through
  // this rank's GPU and back, so training code need not know the backend.
  at::Tensor to_backend_device(const at::Tensor& tensor) const {
    if (options_.backend != Backend::nccl || tensor.is_cuda()) return tensor;
    return tensor.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(options_.cuda_device.value_or(0))));
  }

  Heartbeat& heartbeat() { return *heartbeat_; }

  // The error for a failed collective, naming the lost ranks.
  [[noreturn]] void collective_failed(Phase what, const std::string& cause) {
    throw collective_error(phase_name(what), cause);
  }

 private:
  // `what`: the collective, such as "all-reduce".
  Error collective_error(const std::string& what, const std::string& cause) {
    return Error(ExitCode::peer_lost, fmt::format("rank {}: {} failed: {}; cause: {}", options_.rank, what,
                                                  heartbeat_->describe_lost_ranks(), cause.substr(0, cause.find('\n'))));
  }

  template <typename Launch>
  std::unique_ptr<PendingCollective> start(Launch launch, Phase what) {
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = launch();
    } catch (const c10::Error& error) {
      collective_failed(what, error.what_without_backtrace());
    }
    watch_.add(what, Clock::now(), [work] {
      CollectiveWatch::Status status;
      status.finished = work->isCompleted();
      if (status.finished && work->exception()) status.error = describe(work->exception());
      return status;
    });
    return std::make_unique<PendingWork>(*this, work, what);
  }

  static std::string describe(const std::exception_ptr& failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const c10::Error& error) {
      return error.what_without_backtrace();
    } catch (const std::exception& error) {
      return error.what();
    }
  }

  // A collective that failed or outlasted dist.timeout_s ends the process with the error naming the lost ranks
  // (exit 202), even while the training thread is blocked: with NCCL it blocks at its next synchronisation
  // with the GPU, not in the collective's wait.
  void watch_collectives() {
    std::unique_lock<std::mutex> lock(watchdog_mutex_);
    while (!watchdog_wake_.wait_for(lock, kWatchInterval, [this] { return stopping_; })) {
      lock.unlock();
      if (const auto failure = watch_.inspect(Clock::now()).failure) {
        log::exit_now(collective_error(phase_name(failure->what), failure->cause));
      }
      lock.lock();
    }
  }

  ProcessGroupOptions options_;
  CollectiveWatch watch_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::unique_ptr<Heartbeat> heartbeat_;
  c10::intrusive_ptr<compat::BackendBase> backend_;
  std::thread watchdog_;
  std::mutex watchdog_mutex_;
  std::condition_variable watchdog_wake_;
  bool stopping_ = false;
};

void PendingWork::wait() {
  // Published while it waits, so that the watchdog tells ranks waiting for others from stalled ones.
  struct Waiting {
    Heartbeat& heartbeat;
    Waiting(Heartbeat& beating, Phase what) : heartbeat(beating) { heartbeat.enter_collective(what); }
    ~Waiting() { heartbeat.leave_collective(); }
  } waiting(owner_.heartbeat(), what_);
  try {
    work_->wait();  // NCCL: only the current CUDA stream waits; the watchdog holds the collective to its deadline
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

std::string nccl_version() {
#ifdef TRAINPOINT_WITH_CUDA
  return c10d::getNcclVersion();
#else
  return "";
#endif
}

}  // namespace tp::dist
