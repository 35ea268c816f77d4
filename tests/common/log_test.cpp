// Log lines as a log pipeline reads them: with --log-format json, epoch and step lines carry their values
// as fields of the line.
#include "common/log.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"

namespace tp::log {
namespace {

// The lines written to stderr while `body` runs, with the given format.
template <typename Body>
std::vector<std::string> logged(Format format, Body body) {
  ::testing::internal::CaptureStderr();
  init(format, spdlog::level::info);
  body();
  const std::string text = ::testing::internal::GetCapturedStderr();
  init(Format::text, spdlog::level::info);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(Log, JsonLinesCarryTheirFields) {
  const auto lines = logged(Format::json, [] {
    set_rank(0);
    info_with_fields({{"epoch", 2}, {"train_loss", 0.25}, {"msg", "not this"}, {"level", "not this"}},
                     "epoch 2/3: train_loss 0.2500");
    spdlog::info("a plain line");
    set_rank(-1);
  });
  ASSERT_EQ(lines.size(), 2u);
  const auto line = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(line["msg"], "epoch 2/3: train_loss 0.2500");
  EXPECT_EQ(line["level"], "info");
  EXPECT_EQ(line["rank"], 0);
  EXPECT_EQ(line["epoch"], 2);
  EXPECT_EQ(line["train_loss"], 0.25);
  const auto plain = nlohmann::json::parse(lines[1]);
  EXPECT_FALSE(plain.contains("epoch")) << "fields belong to their line only";
}

TEST(Log, ProgressLinesCarryTheirFields) {
  const auto lines = logged(Format::json, [] {
    Progress progress("epoch 1/2", 10, "batches");
    progress.set_fields({{"epoch", 1}, {"step", 7}, {"train_loss", 0.5}, {"lr", 0.01}, {"images_per_s", 900.0}});
    progress.advance(7);
    progress.finish();
  });
  ASSERT_EQ(lines.size(), 1u);
  const auto line = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(line["step"], 7);
  EXPECT_EQ(line["images_per_s"], 900.0);
  EXPECT_NE(line["msg"].get<std::string>().find("7/10 batches"), std::string::npos);
}

TEST(Log, RanksOtherThanZeroLogOnlyWarningsAndErrors) {
  const auto lines = logged(Format::text, [] {
    set_rank(1);
    spdlog::info("rank 0 says this for the job");
    Progress progress("epoch 1/2", 10, "batches");
    progress.advance(10);
    progress.finish();
    spdlog::warn("a warning of rank 1");
    set_rank(-1);
  });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" warning [rank 1] a warning of rank 1"), std::string::npos) << lines[0];
}

TEST(Log, AClosedProgressLeavesTheSummaryToItsCaller) {
  const auto lines = logged(Format::text, [] {
    Progress progress("epoch 1/2", 10, "batches");
    progress.advance(10);
    progress.close();
  });
  EXPECT_TRUE(lines.empty()) << lines.front();
}

TEST(Log, TextLinesShowTheMessageAlone) {
  const auto lines = logged(Format::text, [] { info_with_fields({{"epoch", 2}}, "epoch 2/3 done"); });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" info epoch 2/3 done"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].find("\"epoch\""), std::string::npos);
}

TEST(Log, TheFinalErrorLineIsTheCauseChainAndTheExitClass) {
  const auto lines = logged(Format::text, [] {
    try {
      try {
        fail(ExitCode::storage, "cannot write epoch-2.ckpt: No space left on device");
      } catch (const Error& error) {
        rethrow_as(error.code(), "checkpoint not saved");
      }
    } catch (const Error& error) {
      failure(error);
    }
  });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(
      lines[0].find("checkpoint not saved: cannot write epoch-2.ckpt: No space left on device (exit 201, "
                    "storage error)"),
      std::string::npos)
      << lines[0];
}

}  // namespace
}  // namespace tp::log
