// Runs one trainpoint clone-and-checkout, for bench/git/run.sh to time against the git CLI.
// Usage: git_checkout_bench URL REF WORKDIR CACHE_DIR|- CA_BUNDLE|-
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>

#include "common/error.h"
#include "git/checkout.h"

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
  spdlog::set_level(spdlog::level::warn);
  const auto start = std::chrono::steady_clock::now();
  try {
    const tp::git::Checkout checkout = tp::git::checkout(request);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    std::cout << checkout.commit << " " << elapsed.count() << "\n";
  } catch (const tp::Error& error) {
    std::cerr << error.what() << "\n";
    return static_cast<int>(error.code());
  }
  return 0;
}
