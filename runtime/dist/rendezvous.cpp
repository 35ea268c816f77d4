#include "dist/rendezvous.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/retry.h"
#include "common/tcp.h"
#include "dist/c10d_compat.h"

namespace tp::dist {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kVerdict = "trainpoint/verdict";            // rank 0's: kGoOn, or a failure
const std::string kFailure = "trainpoint/failure";            // a failure another rank left before the rendezvous
const std::string kVerdictRead = "trainpoint/verdict-read";   // how many ranks read a failing verdict
const std::string kGoOn = "go on";
// How long a rank that failed before the rendezvous spends telling the others.
constexpr std::chrono::seconds kAnnounceFor{60};

std::string arrived(int rank) { return "trainpoint/arrived/" + std::to_string(rank); }

void set_text(c10d::TCPStore& store, const std::string& key, const std::string& text) {
  store.set(key, std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::string get_text(c10d::TCPStore& store, const std::string& key) {
  const std::vector<std::uint8_t> bytes = store.get(key);
  return std::string(bytes.begin(), bytes.end());
}

// A failure as the store carries it: "<exit code> <message>".
std::string encode(ExitCode code, const std::string& message) {
  return std::to_string(static_cast<int>(code)) + " " + message;
}

[[noreturn]] void fail_with(const std::string& failure) {
  const std::size_t space = failure.find(' ');
  int code = static_cast<int>(ExitCode::peer_lost);
  try {
    code = std::stoi(failure.substr(0, space));
  } catch (const std::exception&) {
  }
  if (code <= 0 || code > 255) code = static_cast<int>(ExitCode::peer_lost);
  throw Error(static_cast<ExitCode>(code), space == std::string::npos ? failure : failure.substr(space + 1));
}

std::chrono::seconds announce_window(const ProcessGroupOptions& options) {
  return std::min(options.timeout, std::chrono::duration_cast<std::chrono::seconds>(kAnnounceFor));
}

// Rank 0, after a failing verdict: keeps serving the store until `readers` ranks have read it, or the
// announcement's window passed (a rank that has not started by then waits for its own timeout).
void serve_until_read(const ProcessGroupOptions& options, c10d::TCPStore& store, int readers) {
  const auto until = Clock::now() + announce_window(options);
  if (readers > 0) {
    spdlog::info("telling the other ranks why (for up to {}s)", announce_window(options).count());
  }
  while (store.add(kVerdictRead, 0) < readers && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Rank 0: until every rank has said it arrived, or one left its failure, or the timeout passed.
void give_verdict(const ProcessGroupOptions& options, c10d::TCPStore& store) {
  std::vector<std::string> everyone;
  for (int rank = 1; rank < options.world_size; ++rank) everyone.push_back(arrived(rank));
  const auto deadline = Clock::now() + options.timeout;
  while (!store.check(everyone)) {
    if (store.check({kFailure})) {
      const std::string failure = get_text(store, kFailure);
      set_text(store, kVerdict, failure);
      serve_until_read(options, store, options.world_size - 2);  // all but rank 0 and the failed rank
      fail_with(failure);
    }
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int rank = 1; rank < options.world_size; ++rank) {
        if (!store.check({arrived(rank)})) missing.push_back(rank);
      }
      const std::string message =
          fmt::format("rank 0: rank{} {} did not reach the rendezvous at {}:{} within dist.timeout_s ({}s)",
                      missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), options.master_addr,
                      options.master_port, options.timeout.count());
      set_text(store, kVerdict, encode(ExitCode::peer_lost, message));
      serve_until_read(options, store, options.world_size - 1 - static_cast<int>(missing.size()));
      fail(ExitCode::peer_lost, "{}", message);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  set_text(store, kVerdict, kGoOn);
}

// The other ranks: arrived, then rank 0's verdict.
void await_verdict(const ProcessGroupOptions& options, c10d::TCPStore& store) {
  set_text(store, arrived(options.rank), "");
  try {
    store.wait({kVerdict}, options.timeout);
  } catch (const std::exception& error) {
    const std::string cause = error.what();
    fail(ExitCode::peer_lost, "rank {}: rank 0 (the master {}:{}) gave no verdict on the rendezvous: {}", options.rank,
         options.master_addr, options.master_port, cause.substr(0, cause.find('\n')));
  }
  const std::string verdict = get_text(store, kVerdict);
  if (verdict == kGoOn) return;
  store.add(kVerdictRead, 1);
  fail_with(verdict);
}

}  // namespace

c10::intrusive_ptr<c10d::TCPStore> connect_store(const ProcessGroupOptions& options, bool server,
                                                 std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = server;
  store_options.numWorkers = options.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  return compat::make_tcp_store(options.master_addr, store_options);
}

namespace {

// Workers often start before the master's name resolves or its port listens: the one retry policy, with
// shorter waits, until dist.timeout_s. Rank 0 serves the store and has nothing to wait for.
c10::intrusive_ptr<c10d::TCPStore> connect_to_master(const ProcessGroupOptions& options) {
  RetryPolicy policy = RetryPolicy::within(std::chrono::duration_cast<std::chrono::seconds>(options.timeout));
  policy.first_wait = std::chrono::milliseconds(100);
  policy.max_wait = std::chrono::milliseconds(5000);
  policy.retry_log_level = spdlog::level::info;
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    retry(policy, [&]() -> std::optional<std::string> {
      try {
        store = connect_store(options, options.rank == 0, options.timeout);
        return std::nullopt;
      } catch (const std::exception& error) {
        const std::string cause = std::string(error.what()).substr(0, std::string(error.what()).find('\n'));
        if (!compat::is_network_failure(error)) {
          // Retrying, here or by restarting the pod, would fail the same way.
          fail(ExitCode::internal, "rank {}: cannot create the rendezvous store for {}:{}, and not for a network "
               "reason: {}", options.rank, options.master_addr, options.master_port, cause);
        }
        if (options.rank == 0) {
          fail(ExitCode::peer_lost, "rank 0: cannot serve the rendezvous store on {}:{}: {}", options.master_addr,
               options.master_port, cause);
        }
        return fmt::format("rank {}: the master {}:{} is not reachable yet: {}", options.rank, options.master_addr,
                           options.master_port, cause);
      }
    });
  } catch (const Error& error) {
    if (error.code() != ExitCode::network) throw;
    fail(ExitCode::peer_lost, "{}", error.what());  // the master never came: the pod may be restarted
  }
  return store;
}

// A store whose rendezvous already said "go on" is an earlier master's: that rendezvous formed its group
// without this rank (this rank's pod was restarted while that master has yet to notice and exit). Joining it
// would join a group that is going away; the rank waits for the master's next start instead.
bool finished_without_this_rank(c10d::TCPStore& store) {
  try {
    return store.check({kVerdict}) && get_text(store, kVerdict) == kGoOn;
  } catch (const std::exception&) {
    return true;  // the earlier master went away while it was asked: connect again
  }
}

// Waits until the earlier master's store at master_addr:master_port closes a plain TCP connection (its process
// ended), or until `deadline`. Not with a store client: LibTorch 1.13's keeps a background thread on its
// connection that throws when the server goes away under it, and std::terminate aborts the rank (seen once in
// CI while it polled the earlier store once a second).
void wait_until_the_store_closes(const ProcessGroupOptions& options, Clock::time_point deadline) {
  std::string failure;
  const int fd = connect_tcp(options.master_addr, options.master_port, failure);
  if (fd < 0) return;  // nothing listens: already gone
  while (Clock::now() < deadline) {
    pollfd watched{fd, POLLIN | POLLRDHUP, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(&watched, 1, static_cast<int>(std::clamp<long long>(left, 1, 1000))) <= 0) continue;
    char byte = 0;
    const ssize_t received = ::recv(fd, &byte, 1, MSG_DONTWAIT);
    if (received == 0 || (received < 0 && errno != EAGAIN && errno != EINTR)) break;  // closed or reset: ended
  }
  ::close(fd);
}

c10::intrusive_ptr<c10d::TCPStore> connect_to_current_master(const ProcessGroupOptions& options) {
  const auto deadline = Clock::now() + options.timeout;
  c10::intrusive_ptr<c10d::TCPStore> store = connect_to_master(options);
  if (options.rank == 0 || !finished_without_this_rank(*store)) return store;
  spdlog::info("rank {}: the store at {}:{} is an earlier start's of the master, whose rendezvous ended without "
               "this rank; waiting for the master to start again", options.rank, options.master_addr,
               options.master_port);
  do {
    if (Clock::now() >= deadline) {
      fail(ExitCode::peer_lost, "rank {}: the master {}:{} did not start again within dist.timeout_s ({}s): its "
           "store still holds an earlier start's rendezvous", options.rank, options.master_addr, options.master_port,
           options.timeout.count());
    }
    store.reset();
    wait_until_the_store_closes(options, deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    store = connect_to_master(options);
  } while (finished_without_this_rank(*store));
  return store;
}

}  // namespace

c10::intrusive_ptr<c10d::TCPStore> rendezvous(const ProcessGroupOptions& options) {
  c10::intrusive_ptr<c10d::TCPStore> store = connect_to_current_master(options);
  if (options.rank == 0) {
    give_verdict(options, *store);
  } else {
    await_verdict(options, *store);
  }
  return store;
}

void announce_failure(const ProcessGroupOptions& options, ExitCode code, const std::string& message,
                      int silent_ranks) {
  const auto until = Clock::now() + announce_window(options);
  const std::string failure = encode(code, fmt::format("rank {} failed before the rendezvous: {}", options.rank,
                                                       message));
  try {
    if (options.rank == 0) {
      auto store = connect_store(options, true, announce_window(options));
      set_text(*store, kVerdict, failure);
      serve_until_read(options, *store, options.world_size - silent_ranks);
      return;
    }
    while (Clock::now() < until) {
      try {
        auto store = connect_store(options, false, std::chrono::seconds(2));
        if (!store->check({kVerdict})) set_text(*store, kFailure, failure);
        return;
      } catch (const std::exception&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));  // rank 0 is not serving yet
      }
    }
  } catch (const std::exception& error) {
    spdlog::warn("rank {}: could not tell the other ranks about this failure: {}", options.rank, error.what());
  }
}

}  // namespace tp::dist
