// The thread that writes checkpoints beside training (train/checkpoint_writer.h), with a real file writer
// (common/files.h's write_file_atomic) into a temporary directory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/files.h"
#include "support/temp_dir.h"
#include "train/checkpoint_writer.h"

namespace tp::train {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST(CheckpointWriter, WritesInTheOrderGivenAndRunsWhatFollowsEachWriteAfterIt) {
  testing::TempDir dir;
  std::mutex mutex;
  std::vector<std::string> events;
  CheckpointWriter writer([&](const fs::path& file, const std::string& bytes) {
    std::this_thread::sleep_for(20ms);  // a slow disk: the next submit must wait for this write
    write_file_atomic(file, bytes);
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back("wrote " + file.filename().string());
  });
  for (int i = 0; i < 3; ++i) {
    const fs::path file = dir / ("epoch-" + std::to_string(i) + ".ckpt");
    writer.submit(file, std::string(1000, static_cast<char>('a' + i)), [&, file](double seconds) {
      EXPECT_GE(seconds, 0.015);
      std::lock_guard<std::mutex> lock(mutex);
      events.push_back("after " + file.filename().string() + (fs::exists(file) ? " (on disk)" : " (missing)"));
    });
  }
  writer.wait();
  EXPECT_EQ(events, (std::vector<std::string>{"wrote epoch-0.ckpt", "after epoch-0.ckpt (on disk)", "wrote epoch-1.ckpt",
                                              "after epoch-1.ckpt (on disk)", "wrote epoch-2.ckpt",
                                              "after epoch-2.ckpt (on disk)"}));
  EXPECT_EQ(testing::read_text(dir / "epoch-2.ckpt"), std::string(1000, 'c'));
}

TEST(CheckpointWriter, SubmitReturnsWhileTheWriteGoesOn) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> written{false};
  CheckpointWriter writer([&](const fs::path&, const std::string&) {
    released.wait();  // the disk answers only when the test says so
    written = true;
  });
  writer.submit("a.ckpt", "bytes", [](double) {});
  EXPECT_FALSE(written) << "submit waited for the write";
  release.set_value();
  writer.wait();
  EXPECT_TRUE(written);
}

TEST(CheckpointWriter, AFailedWriteFailsTheNextCallWithItsOwnErrorOnce) {
  int writes = 0;
  CheckpointWriter writer([&](const fs::path& file, const std::string&) {
    if (++writes == 1) throw std::runtime_error("no space left on device writing " + file.string());
  });
  bool followed = false;
  writer.submit("first.ckpt", "x", [&](double) { followed = true; });
  try {
    writer.submit("second.ckpt", "y", [](double) {});
    FAIL() << "the failed write was not reported";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "no space left on device writing first.ckpt");
  }
  EXPECT_FALSE(followed) << "what follows a write ran after it failed";
  // Reported once: the next checkpoint is taken (and written) as usual.
  writer.submit("third.ckpt", "z", [](double) {});
  writer.wait();
  EXPECT_EQ(writes, 2);
}

TEST(CheckpointWriter, TheDestructorWaitsForTheWriteGoingOn) {
  testing::TempDir dir;
  {
    CheckpointWriter writer([](const fs::path& file, const std::string& bytes) {
      std::this_thread::sleep_for(50ms);
      write_file_atomic(file, bytes);
    });
    writer.submit(dir / "last.ckpt", "the last", [](double) {});
  }
  EXPECT_EQ(testing::read_text(dir / "last.ckpt"), "the last");
}

}  // namespace
}  // namespace tp::train
