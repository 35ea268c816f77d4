// Errors keep their cause: what failed, then why underneath, each reachable and joined into one line.
#include "common/error.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace tp {
namespace {

// The Error that `body` throws.
template <typename Body>
Error thrown_by(Body body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "no tp::Error thrown";
  return Error(ExitCode::internal, "nothing thrown");
}

// The text of the exception `cause` holds.
std::string what_of(const std::exception_ptr& cause) {
  try {
    std::rethrow_exception(cause);
  } catch (const std::exception& error) {
    return error.what();
  }
}

TEST(Error, WithoutACauseIsItsMessage) {
  const Error error = thrown_by([] { fail(ExitCode::data, "no images under {}", "/data"); });
  EXPECT_STREQ(error.what(), "no images under /data");
  EXPECT_EQ(error.message(), "no images under /data");
  EXPECT_FALSE(error.cause());
  EXPECT_EQ(error.code(), ExitCode::data);
}

TEST(Error, KeepsTheExceptionItWasHandlingAsItsCause) {
  const Error error = thrown_by([] {
    try {
      throw std::runtime_error("unexpected end of input");
    } catch (const std::exception&) {
      rethrow_as(ExitCode::source, "the LFS server {} answered with invalid JSON", "https://lfs.example");
    }
  });
  EXPECT_EQ(error.message(), "the LFS server https://lfs.example answered with invalid JSON");
  ASSERT_TRUE(error.cause());
  EXPECT_EQ(what_of(error.cause()), "unexpected end of input");
  EXPECT_STREQ(error.what(),
               "the LFS server https://lfs.example answered with invalid JSON: unexpected end of input");
}

TEST(Error, TakesTheClassItIsGivenOrKeepsTheCausesClass) {
  const auto storage_failure = [] { fail(ExitCode::storage, "cannot write x: No space left on device"); };
  const Error replaced = thrown_by([&] {
    try {
      storage_failure();
    } catch (const Error&) {
      rethrow_as(ExitCode::output, "job.output {}", "/out");
    }
  });
  EXPECT_EQ(replaced.code(), ExitCode::output);
  const Error kept = thrown_by([&] {
    try {
      storage_failure();
    } catch (const Error& error) {
      rethrow_as(error.code(), "checkpoint not saved");
    }
  });
  EXPECT_EQ(kept.code(), ExitCode::storage);
  EXPECT_STREQ(kept.what(), "checkpoint not saved: cannot write x: No space left on device");
}

TEST(Error, AThreeLevelChainReadsAsOneLine) {
  const Error error = thrown_by([] {
    try {
      try {
        throw std::runtime_error("No space left on device");
      } catch (const std::exception&) {
        rethrow_as(ExitCode::storage, "cannot write {}", "epoch-2.ckpt");
      }
    } catch (const Error& error) {
      rethrow_as(error.code(), "checkpoint not saved");
    }
  });
  EXPECT_STREQ(error.what(), "checkpoint not saved: cannot write epoch-2.ckpt: No space left on device");
  EXPECT_EQ(error.message(), "checkpoint not saved");
  EXPECT_EQ(error.code(), ExitCode::storage);
  try {
    std::rethrow_exception(error.cause());
  } catch (const Error& middle) {
    EXPECT_EQ(middle.message(), "cannot write epoch-2.ckpt");
    EXPECT_STREQ(middle.what(), "cannot write epoch-2.ckpt: No space left on device");
    EXPECT_EQ(what_of(middle.cause()), "No space left on device");
  }
}

TEST(Error, ACauseThatIsNoStdExceptionIsStillNamed) {
  const Error error = thrown_by([] {
    try {
      throw 42;
    } catch (...) {
      rethrow_as(ExitCode::internal, "the worker failed");
    }
  });
  EXPECT_EQ(error.message(), "the worker failed");
  EXPECT_STREQ(error.what(), "the worker failed: an exception that is not a std::exception");
}

TEST(Error, OutsideACatchBlockHasNoCause) {
  const Error error = thrown_by([] { rethrow_as(ExitCode::usage, "bad option"); });
  EXPECT_FALSE(error.cause());
  EXPECT_STREQ(error.what(), "bad option");
}

}  // namespace
}  // namespace tp
