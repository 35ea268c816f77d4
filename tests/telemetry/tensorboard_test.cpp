// The sinks of a run's records and TensorBoard's event files, without a run: CRC32C and TFRecord framing
// against known values, the events a sink writes read back, and a failing or slow sink that costs training
// nothing but one warning. sinks_run_test reads a real run's files with the tensorboard package.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/error.h"
#include "support/captured_log.h"
#include "support/temp_dir.h"
#include "telemetry/record_file.h"
#include "telemetry/sinks.h"
#include "telemetry/tensorboard.h"

namespace tp::telemetry {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(Crc32c, MaskedAsTfRecordMasksIt) {
  const std::uint32_t crc = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789"), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST(RecordFile, FramesLengthItsCrcDataAndItsCrc) {
  const std::string framed = frame_record("hello");
  ASSERT_EQ(framed.size(), 8u + 4 + 5 + 4);
  EXPECT_EQ(framed.substr(0, 8), std::string("\x05\0\0\0\0\0\0\0", 8));
  auto le32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(framed[at + i])) << (8 * i);
    return v;
  };
  EXPECT_EQ(le32(8), masked_crc32c(framed.substr(0, 8)));
  EXPECT_EQ(framed.substr(12, 5), "hello");
  EXPECT_EQ(le32(17), masked_crc32c("hello"));
}

TEST(RecordFile, ReadsBackWhatWasFramedAndStopsAtATruncatedTail) {
  testing::TempDir dir;
  const fs::path file = dir / "records";
  const std::string big(100000, 'x');
  testing::write_text(file, frame_record("one") + frame_record("") + frame_record(big) + frame_record("four").substr(0, 10));
  const auto records = read_records(file);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], "one");
  EXPECT_EQ(records[1], "");
  EXPECT_EQ(records[2], big);
}

TEST(RecordFile, ADamagedRecordIsAnErrorNamingTheFileAndOffset) {
  testing::TempDir dir;
  const fs::path file = dir / "records";
  std::string bytes = frame_record("one") + frame_record("two");
  bytes[19 + 12] = 'X';  // the data of the second record
  testing::write_text(file, bytes);
  try {
    read_records(file);
    FAIL() << "a damaged record was read";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(file.string() + ": the record at byte 19 fails its CRC32C"),
              std::string::npos)
        << error.what();
  }
}

TEST(TensorBoardSink, WritesTheVersionAStartAtTheFirstStepAndEachStepsScalars) {
  testing::TempDir dir;
  fs::path file;
  {
    TensorBoardSink sink(dir / "tensorboard", 10);
    file = sink.file();
    EXPECT_EQ(file.parent_path(), dir / "tensorboard");
    EXPECT_EQ(file.filename().string().rfind("events.out.tfevents.", 0), 0u) << file;
    EXPECT_FALSE(fs::exists(file)) << "nothing is written before the first record";
    sink.run_started({{"train.lr", 0.01}, {"train.optimizer", std::string("adamw")}, {"data.drop_last", false}}, 1.5);
    sink.scalars(11, 2.0, {{"train/loss", 0.5}, {"valid/mae", std::nan("")}});
    sink.scalars(12, 3.0, {{"train/loss", 0.25}, {"train/lr", 1e-3}});
    sink.run_ended(RunEnd::finished, 4.0);
    sink.flush();
  }
  const auto events = read_events(file);
  ASSERT_EQ(events.size(), 6u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].session_status, 1) << "SessionLog START";
  EXPECT_EQ(events[1].step, 11) << "TensorBoard drops an earlier start's steps from here on";
  EXPECT_EQ(events[2].plugin_tags, std::vector<std::string>{"_hparams_/session_start_info"});
  EXPECT_EQ(events[3].step, 11);
  EXPECT_DOUBLE_EQ(events[3].wall_time, 2.0);
  EXPECT_EQ(events[3].scalars, (Scalars{{"train/loss", 0.5}})) << "a NaN (a metric that does not apply) is left out";
  EXPECT_EQ(events[4].step, 12);
  ASSERT_EQ(events[4].scalars.size(), 2u);
  EXPECT_EQ(events[4].scalars[1].first, "train/lr");
  EXPECT_EQ(events[4].scalars[1].second, static_cast<float>(1e-3)) << "simple_value is a float";
  EXPECT_EQ(events[5].plugin_tags, std::vector<std::string>{"_hparams_/session_end_info"});
  EXPECT_EQ(events[5].step, 12);
}

TEST(TensorBoardSink, ASecondStartWritesAFileOfItsOwn) {
  testing::TempDir dir;
  TensorBoardSink first(dir.path(), 0);
  first.scalars(1, 1.0, {{"train/loss", 1}});
  first.flush();
  TensorBoardSink second(dir.path(), 1);
  EXPECT_NE(first.file(), second.file());
  second.scalars(2, 2.0, {{"train/loss", 2}});
  second.flush();
  EXPECT_EQ(read_events(first.file()).back().step, 1);
  EXPECT_EQ(read_events(second.file()).back().step, 2);
}

// Records a sink was given, on its thread; `ends` counts the run ends it was told.
class CountingSink : public Sink {
 public:
  explicit CountingSink(std::atomic<int>& calls, bool fail = false, std::chrono::milliseconds delay = 0ms,
                        std::atomic<int>* ends = nullptr)
      : calls_(calls), fail_(fail), delay_(delay), ends_(ends) {}
  std::string name() const override { return "Counting"; }
  void scalars(std::int64_t, double, const Scalars&) override {
    std::this_thread::sleep_for(delay_);
    ++calls_;
    if (fail_) throw std::runtime_error("cannot write /nowhere/events: No space left on device");
  }
  void run_ended(RunEnd, double) override {
    if (ends_) ++*ends_;
    if (fail_) throw std::runtime_error("the disk is still full");
  }
  void flush() override {}

 private:
  std::atomic<int>& calls_;
  const bool fail_;
  const std::chrono::milliseconds delay_;
  std::atomic<int>* ends_;
};

// A failed sink is still told how the run ended (an MLflow run must not stay RUNNING), quietly.
TEST(Sinks, AFailingSinkIsOneWarningAndTheOthersGoOn) {
  testing::CapturedLog log;
  std::atomic<int> failing_calls{0}, good_calls{0}, failing_ends{0}, good_ends{0};
  {
    std::vector<std::unique_ptr<Sink>> sinks;
    sinks.push_back(std::make_unique<CountingSink>(failing_calls, /*fail=*/true, 0ms, &failing_ends));
    sinks.push_back(std::make_unique<CountingSink>(good_calls, false, 0ms, &good_ends));
    Sinks all(std::move(sinks));
    for (int step = 1; step <= 50; ++step) all.scalars(step, {{"train/loss", 1.0}});
    all.run_ended(RunEnd::finished);
    EXPECT_TRUE(all.flush_and_wait(10s));
  }
  EXPECT_EQ(failing_calls, 1) << "a failed sink gets no more records";
  EXPECT_EQ(good_calls, 50);
  EXPECT_EQ(failing_ends, 1) << "but it hears how the run ended";
  EXPECT_EQ(good_ends, 1);
  EXPECT_EQ(log.count("Counting: cannot write /nowhere/events: No space left on device; it gets no more records"), 1)
      << log.text();
  EXPECT_EQ(log.count("[warning]"), 1) << "its failing again at the end is no second warning: " << log.text();
}

TEST(Sinks, ASlowSinkNeverBlocksTheCallerAndDropsWhatOverflowsWithOneWarning) {
  testing::CapturedLog log;
  std::atomic<int> calls{0};
  std::vector<std::unique_ptr<Sink>> sinks;
  sinks.push_back(std::make_unique<CountingSink>(calls, false, 200ms));
  auto all = std::make_unique<Sinks>(std::move(sinks), /*capacity=*/8);
  const auto started = std::chrono::steady_clock::now();
  for (int step = 1; step <= 1000; ++step) all->scalars(step, {{"train/loss", 1.0}});
  EXPECT_LT(std::chrono::steady_clock::now() - started, 150ms) << "the records are queued, not written, by the caller";
  EXPECT_FALSE(all->flush_and_wait(10ms)) << "a flush that waits gives up after its time";
  all.reset();  // writes what was queued
  EXPECT_LE(calls, 9);
  EXPECT_GE(calls, 1);
  EXPECT_EQ(log.count("records are dropped"), 1) << log.text();
}

TEST(Sinks, ASinkStuckInAWriteDelaysOneReadPointAndNotTheEnd) {
  testing::CapturedLog log;
  static std::atomic<int> calls{0};  // the stuck thread outlives the test's frame
  std::vector<std::unique_ptr<Sink>> sinks;
  sinks.push_back(std::make_unique<CountingSink>(calls, false, 3s));
  auto all = std::make_unique<Sinks>(std::move(sinks), 8, /*close_wait=*/200ms);
  all->scalars(1, {{"train/loss", 1.0}});
  EXPECT_FALSE(all->flush_and_wait(100ms));
  auto started = std::chrono::steady_clock::now();
  EXPECT_FALSE(all->flush_and_wait(10s)) << "behind since the last wait: no waiting";
  EXPECT_LT(std::chrono::steady_clock::now() - started, 100ms);
  started = std::chrono::steady_clock::now();
  all.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s) << "the end waits close_wait, not for the sink";
  EXPECT_EQ(log.count("Counting has not written the run's last records after 0.2s"), 1) << log.text();
}

// A CountingSink under another name, to tell sinks apart in the warnings.
class NamedSink : public CountingSink {
 public:
  NamedSink(std::string name, std::atomic<int>& calls, std::chrono::milliseconds delay)
      : CountingSink(calls, false, delay), name_(std::move(name)) {}
  std::string name() const override { return name_; }

 private:
  const std::string name_;
};

// The queue is shared, so the warnings name the sink the thread waits for, not the first one given.
TEST(Sinks, TheWarningsOfAWriterThatFallsBehindNameTheSlowSink) {
  testing::CapturedLog log;
  static std::atomic<int> fast_calls{0}, slow_calls{0};  // the stuck thread outlives the test's frame
  std::vector<std::unique_ptr<Sink>> sinks;
  sinks.push_back(std::make_unique<NamedSink>("Fast", fast_calls, 0ms));
  sinks.push_back(std::make_unique<NamedSink>("Slow", slow_calls, 2s));
  auto all = std::make_unique<Sinks>(std::move(sinks), /*capacity=*/4, /*close_wait=*/200ms);
  all->scalars(1, {{"train/loss", 1.0}});
  std::this_thread::sleep_for(100ms);  // the thread is in Slow's write
  for (int step = 2; step <= 20; ++step) all->scalars(step, {{"train/loss", 1.0}});
  all.reset();
  EXPECT_EQ(log.count("Slow falls behind, and records are dropped"), 1) << log.text();
  EXPECT_EQ(log.count("Slow has not written the run's last records after 0.2s"), 1) << log.text();
  EXPECT_EQ(log.count("Fast"), 0) << log.text();
}

TEST(Sinks, FilesAreThoseOfSinksThatWroteAndDidNotFail) {
  testing::TempDir dir;
  std::vector<std::unique_ptr<Sink>> sinks;
  auto tensorboard = std::make_unique<TensorBoardSink>(dir / "tb", 0);
  const fs::path file = tensorboard->file();
  sinks.push_back(std::move(tensorboard));
  Sinks all(std::move(sinks));
  EXPECT_TRUE(all.files().empty()) << "no file before the first record";
  all.scalars(1, {{"train/loss", 1.0}});
  ASSERT_TRUE(all.flush_and_wait(10s));
  EXPECT_EQ(all.files(), std::vector<fs::path>{file});
  EXPECT_GT(bytes_of(file).size(), 0u) << "flushed";
}

TEST(Sinks, AnUnwritableDirectoryIsOneWarning) {
  testing::CapturedLog log;
  testing::TempDir dir;
  testing::write_text(dir / "file", "not a directory");
  {
    std::vector<std::unique_ptr<Sink>> sinks;
    sinks.push_back(std::make_unique<TensorBoardSink>(dir / "file" / "tensorboard", 0));
    Sinks all(std::move(sinks));
    for (int step = 1; step <= 5; ++step) all.scalars(step, {{"train/loss", 1.0}});
    all.run_ended(RunEnd::finished);
  }
  EXPECT_EQ(log.count("TensorBoard: cannot create"), 1) << log.text();
  EXPECT_EQ(log.count("[warning]"), 1) << log.text();
}

}  // namespace
}  // namespace tp::telemetry
