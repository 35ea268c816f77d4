// Runs one trainpoint clone-and-checkout, for bench/git/run.sh to time against the git CLI.
// Usage: git_checkout_bench URL REF WORKDIR CACHE_DIR|- CA_BUNDLE|-
// Prints "COMMIT FETCH_WALL FETCH_CPU CHECKOUT_WALL CHECKOUT_CPU" (seconds; CPU = user + system of every
// thread). The fetch ends when the commit is resolved in the mirror (its log line); the checkout is the rest:
// the working tree, its index, submodules and LFS files.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <chrono>
#include <iostream>
#include <mutex>
#include <optional>

#include "common/error.h"
#include "git/checkout.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Mark {
  Clock::time_point wall;
  double cpu;
  static Mark now() { return {Clock::now(), cpu_seconds()}; }
};

// Notes when checkout() logs that the ref is resolved: the fetch is over.
class FetchDone : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::optional<Mark> mark;

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    const std::string_view text(message.payload.data(), message.payload.size());
    if (!mark && text.find("' is commit ") != std::string_view::npos) mark = Mark::now();
  }
  void flush_() override {}
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::cerr << "usage: " << argv[0] << " URL REF WORKDIR CACHE_DIR|- CA_BUNDLE|-\n";
    return 2;
  }
  tp::git::CheckoutRequest request;
  request.url = argv[1];
  request.ref = argv[2];
  request.workdir = argv[3];
  if (std::string(argv[4]) != "-") request.cache_dir = argv[4];
  if (std::string(argv[5]) != "-") request.ca_bundle = argv[5];
  auto fetch_done = std::make_shared<FetchDone>();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("bench", fetch_done));
  spdlog::set_level(spdlog::level::info);
  const Mark start = Mark::now();
  try {
    const tp::git::Checkout checkout = tp::git::checkout(request);
    const Mark end = Mark::now();
    const Mark fetched = fetch_done->mark.value_or(start);
    const auto wall = [](const Mark& from, const Mark& to) {
      return std::chrono::duration<double>(to.wall - from.wall).count();
    };
    std::cout << checkout.commit << " " << wall(start, fetched) << " " << fetched.cpu - start.cpu << " "
              << wall(fetched, end) << " " << end.cpu - fetched.cpu << "\n";
  } catch (const tp::Error& error) {
    std::cerr << error.what() << "\n";
    return static_cast<int>(error.code());
  }
  return 0;
}
