// What checkout says when it cannot write the work directory: a full disk is retryable and says so.
#include "git/write_failure.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.h"

namespace tp::git {
namespace {

Error thrown_by_write_failed(const std::string& cause, int error_number) {
  try {
    write_failed("cannot write /work/repo/blob.bin", cause, error_number);
  } catch (const Error& error) {
    return error;
  }
}

TEST(GitWriteFailure, AFullDiskIsStorageAndSaysSo) {
  for (const int error_number : {ENOSPC, EDQUOT}) {
    const Error error = thrown_by_write_failed(std::strerror(error_number), error_number);
    EXPECT_EQ(error.code(), ExitCode::storage) << error.what();
    EXPECT_EQ(std::string(error.what()),
              "cannot write /work/repo/blob.bin: " + std::string(std::strerror(error_number)) +
                  " (the work directory's disk is full)");
  }
}

TEST(GitWriteFailure, WithoutAnErrnoTheTextTellsAFullDisk) {
  const Error error = thrown_by_write_failed("failed to write file: No space left on device", 0);
  EXPECT_EQ(error.code(), ExitCode::storage);
  EXPECT_NE(std::string(error.what()).find("(the work directory's disk is full)"), std::string::npos);
}

TEST(GitWriteFailure, AnIoErrorIsStorageWithoutTheFullDiskHint) {
  const Error error = thrown_by_write_failed(std::strerror(EIO), EIO);
  EXPECT_EQ(error.code(), ExitCode::storage);
  EXPECT_EQ(std::string(error.what()).find("disk is full"), std::string::npos) << error.what();
}

TEST(GitWriteFailure, AnythingElseIsAnOutputError) {
  EXPECT_EQ(thrown_by_write_failed(std::strerror(EACCES), EACCES).code(), ExitCode::output);
  EXPECT_EQ(thrown_by_write_failed("the index is locked", 0).code(), ExitCode::output);
}

}  // namespace
}  // namespace tp::git
