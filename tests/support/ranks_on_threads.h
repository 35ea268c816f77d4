// Ranks of an in-process group (dist/in_process_group.h), each on its own thread, for tests of multi-rank
// logic. Header-only: only tests that link tp_dist include it.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "dist/in_process_group.h"

namespace tp::testing {

// Runs `body` on one thread per rank, each with its rank's Communicator, and waits for all. A rank's
// Communicator goes when its body ends, so a rank that throws leaves the group and its peers' collectives
// throw rather than wait. Returns each rank's exception, null where the body returned.
inline std::vector<std::exception_ptr> run_ranks(int world_size,
                                                 const std::function<void(dist::Communicator&)>& body) {
  std::vector<std::unique_ptr<dist::Communicator>> ranks = dist::in_process_group(world_size);
  std::vector<std::exception_ptr> errors(ranks.size());
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    threads.emplace_back([&, r, communicator = std::move(ranks[r])]() mutable {
      try {
        body(*communicator);
      } catch (...) {
        errors[r] = std::current_exception();
      }
      communicator.reset();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return errors;
}

// run_ranks, rethrowing the lowest rank's exception.
inline void on_ranks(int world_size, const std::function<void(dist::Communicator&)>& body) {
  for (const std::exception_ptr& error : run_ranks(world_size, body)) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace tp::testing
