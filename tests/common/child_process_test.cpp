// Starting a child process: what the child gets, and a program that cannot be started told apart from one that
// ran and failed.
#include "common/child_process.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

// Everything the child writes to its piped output, and its exit code once it has ended.
struct Ended {
  std::string output;
  int code = -1;
};

Ended read_until_ended(const StartedChild& child) {
  Ended ended;
  std::FILE* output = ::fdopen(child.output, "r");
  char buffer[4096];
  for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, output)) > 0;) ended.output.append(buffer, got);
  std::fclose(output);
  ended.code = wait_for_exit(child.pid);
  return ended;
}

ChildRequest shell(const std::string& script) {
  ChildRequest request;
  request.program = "/bin/sh";
  request.arguments = {"-c", script};
  request.output = ChildOutput::stdout_and_stderr_piped;
  return request;
}

TEST(ChildProcess, GetsItsArgumentsEnvironmentDirectoryAndAnEmptyStdinWithItsOutputPiped) {
  testing::TempDir dir;
  ::setenv("TP_CHILD_TEST_REMOVED", "still here", 1);
  ChildRequest request = shell(
      "echo \"$(head -c 5 /proc/$$/cmdline) $1 $TP_CHILD_TEST_SET ${TP_CHILD_TEST_REMOVED-removed} $(pwd)\"; "
      "if read line; then echo stdin had input; else echo stdin empty; fi; echo on stderr >&2; exit 3");
  request.arguments.insert(request.arguments.end(), {"zero", "first"});  // the script's $0 and $1
  request.argv0 = "named";  // the shell's own argv[0]
  request.environment = {{"TP_CHILD_TEST_SET", "set"}, {"TP_CHILD_TEST_REMOVED", std::nullopt}};
  request.working_directory = dir.path().string();
  request.stdin_from_null = true;
  const StartedChild child = start_child(request);
  ::unsetenv("TP_CHILD_TEST_REMOVED");
  ASSERT_GT(child.pid, 0) << child.failure;
  const Ended ended = read_until_ended(child);
  EXPECT_EQ(ended.code, 3);
  EXPECT_EQ(ended.output, "named first set removed " + fs::canonical(dir.path()).string() +
                              "\nstdin empty\non stderr\n");
}

TEST(ChildProcess, AProgramThatCannotBeExecutedIsOneFailureNamingItAndTheCause) {
  ChildRequest missing;
  missing.program = "no-such-program-xyz";
  const StartedChild not_found = start_child(missing);
  EXPECT_EQ(not_found.pid, -1);
  EXPECT_EQ(not_found.output, -1);
  EXPECT_EQ(not_found.failure, "cannot execute 'no-such-program-xyz': No such file or directory");

  testing::TempDir dir;
  testing::write_text(dir / "script.sh", "#!/bin/sh\necho ran\n");
  ChildRequest not_executable = shell("");
  not_executable.program = (dir / "script.sh").string();
  not_executable.arguments.clear();
  const StartedChild denied = start_child(not_executable);
  EXPECT_EQ(denied.pid, -1);
  EXPECT_EQ(denied.output, -1) << "the pipe is closed";
  EXPECT_EQ(denied.failure, "cannot execute '" + (dir / "script.sh").string() + "': Permission denied");
}

TEST(ChildProcess, AWorkingDirectoryThatCannotBeEnteredIsAFailureNamingIt) {
  ChildRequest request = shell("echo ran");
  request.working_directory = "/no/such/directory";
  const StartedChild child = start_child(request);
  EXPECT_EQ(child.pid, -1);
  EXPECT_EQ(child.failure, "cannot enter '/no/such/directory': No such file or directory");
}

// The signals the child ignores, from /proc (SigIgn: a hexadecimal mask, bit n-1 for signal n).
std::uint64_t ignored_signals(const std::string& status) {
  std::istringstream lines(status);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("SigIgn:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  ADD_FAILURE() << "no SigIgn in " << status;
  return 0;
}

TEST(ChildProcess, StartsWithSigtermSigintAndSigpipeAtTheirDefaultsThoughTheParentIgnoresThem) {
  const int signals[] = {SIGTERM, SIGINT, SIGPIPE};
  for (const int signal_number : signals) std::signal(signal_number, SIG_IGN);
  ChildRequest request = shell("");
  request.program = "/bin/cat";
  request.arguments = {"/proc/self/status"};
  const StartedChild child = start_child(request);
  for (const int signal_number : signals) std::signal(signal_number, SIG_DFL);
  ASSERT_GT(child.pid, 0) << child.failure;
  const Ended ended = read_until_ended(child);
  ASSERT_EQ(ended.code, 0) << ended.output;
  const std::uint64_t ignored = ignored_signals(ended.output);
  for (const int signal_number : signals) {
    EXPECT_EQ(ignored & (std::uint64_t{1} << (signal_number - 1)), 0u) << "signal " << signal_number;
  }
}

TEST(ChildProcess, ASignalThatEndsTheChildIs128PlusItsNumber) {
  const Ended ended = read_until_ended(start_child(shell("kill -KILL $$")));
  EXPECT_EQ(ended.code, 128 + SIGKILL);
}

}  // namespace
}  // namespace tp
