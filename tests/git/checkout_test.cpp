// The git source against real servers on loopback: git daemon, nginx + git http-backend over
// HTTPS, OpenSSH sshd; refs, auth, host keys, TLS, cache, retries, full disk, submodules, LFS.
#include "git/checkout.h"

#include <git2.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/error.h"
#include "git/git_servers.h"
#include "git/tcp_proxy.h"
#include "support/process.h"
#include "support/small_disk.h"
#include "support/temp_dir.h"

namespace tp::git {
namespace {

namespace fs = std::filesystem;
using testing::GitServers;

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Failure {
  ExitCode code;
  std::string message;
};

class GitCheckoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::unsetenv("TRAINPOINT_GIT_TOKEN");
    log_sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    spdlog::default_logger()->sinks().push_back(log_sink_);
    spdlog::set_level(spdlog::level::debug);
  }
  void TearDown() override {
    auto& sinks = spdlog::default_logger()->sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log_sink_), sinks.end());
  }

  CheckoutRequest request(const std::string& url, const std::string& ref,
                          const std::string& workdir = "work") {
    CheckoutRequest request;
    request.url = url;
    request.ref = ref;
    request.workdir = temp_ / workdir;
    request.network_timeout = std::chrono::seconds(3);
    return request;
  }

  Failure expect_failure(const CheckoutRequest& request) {
    try {
      const Checkout checkout = git::checkout(request);
      ADD_FAILURE() << "checkout of " << request.url << " at '" << request.ref
                    << "' succeeded: " << checkout.commit;
    } catch (const Error& error) {
      return {error.code(), error.what()};
    }
    return {ExitCode::ok, ""};
  }

  // Names under workdir/checkouts other than the CA bundle file: complete checkouts or leftovers.
  std::vector<std::string> checkout_entries(const std::string& workdir = "work") {
    std::vector<std::string> names;
    if (!fs::exists(temp_ / workdir / "checkouts")) return names;
    for (const auto& entry : fs::directory_iterator(temp_ / workdir / "checkouts")) {
      if (entry.path().filename() != ".ca-bundle.pem") names.push_back(entry.path().filename().string());
    }
    return names;
  }

  fs::path only_mirror(const fs::path& cache) {
    std::vector<fs::path> mirrors;
    for (const auto& entry : fs::directory_iterator(cache / "mirrors")) {
      if (entry.path().extension() == ".git") mirrors.push_back(entry.path());
    }
    EXPECT_EQ(mirrors.size(), 1u);
    return mirrors.empty() ? fs::path() : mirrors.front();
  }

  void expect_fsck_clean(const fs::path& repository) {
    const auto result =
        testing::run_command("git --git-dir=" + testing::shell_quote(repository) + " fsck --strict");
    EXPECT_EQ(result.exit_code, 0) << result.output;
  }

  void expect_no_secret(const Checkout& checkout) {
    EXPECT_EQ(read(checkout.path / ".git" / "config").find(GitServers::token), std::string::npos);
    EXPECT_EQ(log_.str().find(GitServers::token), std::string::npos) << log_.str();
  }

  std::string origin_url(const fs::path& worktree) {
    auto output =
        testing::run_checked("git -C " + testing::shell_quote(worktree) + " config remote.origin.url");
    return output.substr(0, output.find('\n'));
  }

  GitServers& servers_ = GitServers::get();
  testing::TempDir temp_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> log_sink_;
};

std::string file_url(const fs::path& path) {
  return "file://" + path.string();
}

// --- refs -------------------------------------------------------------------------------------

TEST_F(GitCheckoutTest, ResolvesEveryKindOfRef) {
  const std::string c1 = servers_.value("C1"), c2 = servers_.value("C2"), c3 = servers_.value("C3"),
                    c4 = servers_.value("C4");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {c1, c1, "one\n"},
      {c1.substr(0, 9), c1, "one\n"},
      {"main", c2, "two\n"},
      {"", c2, "two\n"},
      {"v1", c1, "one\n"},
      {"light", c1, "one\n"},
      {"feature", c3, "feature\n"},
      {"refs/heads/feature", c3, "feature\n"},
      {"refs/tags/v1", c1, "one\n"},
      {"refs/pull/12/head", c4, "pull\n"}};
  for (const auto& [ref, sha, content] : cases) {
    const Checkout checkout = git::checkout(request(file_url(servers_.repos() / "main.git"), ref));
    EXPECT_EQ(checkout.commit, sha) << ref;
    EXPECT_EQ(checkout.path, temp_ / "work" / "checkouts" / sha) << ref;
    EXPECT_EQ(read(checkout.path / "a.txt"), content) << ref;
  }
  // Only complete checkouts, named by commit, are left: one per distinct commit.
  EXPECT_EQ(checkout_entries().size(), 4u);
}

TEST_F(GitCheckoutTest, PlainLocalPathIsCheckedOutDetachedWithOriginSet) {
  const Checkout checkout = git::checkout(request((servers_.repos() / "main.git").string(), "feature"));
  EXPECT_EQ(checkout.commit, servers_.value("C3"));
  EXPECT_EQ(origin_url(checkout.path), (servers_.repos() / "main.git").string());
  const std::string head =
      testing::run_checked("git -C " + testing::shell_quote(checkout.path) + " rev-parse HEAD");
  EXPECT_EQ(head.substr(0, 40), servers_.value("C3"));
  const auto status =
      testing::run_checked("git -C " + testing::shell_quote(checkout.path) + " status --porcelain");
  EXPECT_EQ(status, "");
}

TEST_F(GitCheckoutTest, ExpectShaAcceptsTheResolvedCommitOrItsPrefix) {
  auto req = request(file_url(servers_.repos() / "main.git"), "main");
  req.expect_sha = servers_.value("C2");
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C2"));
  req.expect_sha = servers_.value("C2").substr(0, 10);
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C2"));
}

TEST_F(GitCheckoutTest, ExpectShaMismatchFails) {
  auto req = request(file_url(servers_.repos() / "main.git"), "main");
  req.expect_sha = servers_.value("C1");
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("resolved to " + servers_.value("C2")), std::string::npos)
      << failure.message;
  EXPECT_NE(failure.message.find(servers_.value("C1")), std::string::npos) << failure.message;
  EXPECT_TRUE(checkout_entries().empty());
}

// The server hangs up on the request by SHA: this also checks that SIGPIPE does not kill the process.
TEST_F(GitCheckoutTest, MissingShaFails) {
  const Failure failure =
      expect_failure(request(servers_.git_url("main.git"), "0123456789abcdef0123456789abcdef01234567"));
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("ref '0123456789abcdef0123456789abcdef01234567' not found in git://"),
            std::string::npos)
      << failure.message;
  EXPECT_TRUE(checkout_entries().empty());
}

TEST_F(GitCheckoutTest, ShaOnNoBranchIsFetchedBySha) {
  // C4 is reachable only from refs/pull/12/head, which a branch-and-tag fetch does not bring.
  const Checkout checkout = git::checkout(request(servers_.git_url("main.git"), servers_.value("C4")));
  EXPECT_EQ(checkout.commit, servers_.value("C4"));
  EXPECT_EQ(read(checkout.path / "a.txt"), "pull\n");
}

TEST_F(GitCheckoutTest, MissingBranchFails) {
  const Failure failure = expect_failure(request(servers_.git_url("main.git"), "no-such-branch"));
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("ref 'no-such-branch' not found"), std::string::npos) << failure.message;
  EXPECT_TRUE(checkout_entries().empty());
}

TEST_F(GitCheckoutTest, MissingLocalRepositoryFails) {
  const Failure failure = expect_failure(request((temp_ / "nowhere.git").string(), "main"));
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("repository not found"), std::string::npos) << failure.message;
}

// --- resolving a ref on the remote without fetching (preflight) ---------------------------------

TEST_F(GitCheckoutTest, RemoteRefResolvesEveryKindOfRefWithoutFetching) {
  const std::string c1 = servers_.value("C1"), c2 = servers_.value("C2"), c3 = servers_.value("C3"),
                    c4 = servers_.value("C4");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"main", c2}, {"", c2}, {"v1", c1}, {"light", c1}, {"feature", c3}, {"refs/heads/feature", c3},
      {"refs/pull/12/head", c4}, {c1.substr(0, 9), c1}, {c4, c4}};
  for (const auto& [ref, sha] : cases) {
    EXPECT_EQ(git::resolve_remote_ref(request(servers_.git_url("main.git"), ref)).sha, sha) << ref;
  }
  EXPECT_EQ(git::resolve_remote_ref(request(servers_.git_url("main.git"), "v1")).name, "refs/tags/v1^{}");
  EXPECT_TRUE(checkout_entries().empty()) << "nothing is fetched or checked out";
}

TEST_F(GitCheckoutTest, RemoteRefAcceptsAShaNoRefPointsAtAndRejectsAMissingBranch) {
  const std::string unknown = "0123456789abcdef0123456789abcdef01234567";
  const git::RemoteRef sha = git::resolve_remote_ref(request(servers_.git_url("main.git"), unknown));
  EXPECT_EQ(sha.sha, unknown);
  EXPECT_TRUE(sha.name.empty());
  try {
    git::resolve_remote_ref(request(servers_.git_url("main.git"), "no-such-branch"));
    ADD_FAILURE() << "a missing branch resolved";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::source);
    EXPECT_NE(std::string(error.what()).find("ref 'no-such-branch' not found in " + servers_.git_url("main.git")),
              std::string::npos)
        << error.what();
  }
}

TEST_F(GitCheckoutTest, RemoteRefOverHttpsAndSshUsesTheCheckoutsCredentials) {
  testing::write_text(temp_ / "token", std::string(GitServers::token) + "\n");
  auto https = request(servers_.https_url("main.git", true), "main");
  https.ca_bundle = servers_.ca_file();
  https.token_file = temp_ / "token";
  https.username = GitServers::token_user;
  EXPECT_EQ(git::resolve_remote_ref(https).sha, servers_.value("C2"));
  EXPECT_EQ(log_.str().find(GitServers::token), std::string::npos) << log_.str();

  testing::write_text(temp_ / "token", "wrong-token-value");
  try {
    git::resolve_remote_ref(https);
    ADD_FAILURE() << "a wrong token was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::source);
    EXPECT_NE(std::string(error.what()).find("authentication failed for " + servers_.https_url("main.git", true)),
              std::string::npos)
        << error.what();
  }

  auto ssh = request(servers_.ssh_url("main.git"), "feature");
  ssh.ssh_key = servers_.client_key();
  ssh.known_hosts = servers_.known_hosts();
  EXPECT_EQ(git::resolve_remote_ref(ssh).sha, servers_.value("C3"));
}

TEST_F(GitCheckoutTest, RemoteRefChecksExpectSha) {
  auto req = request(servers_.git_url("main.git"), "main");
  req.expect_sha = servers_.value("C1");
  try {
    git::resolve_remote_ref(req);
    ADD_FAILURE() << "main resolved although the job expects C1";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::source);
    EXPECT_NE(std::string(error.what()).find("resolved to " + servers_.value("C2")), std::string::npos) << error.what();
  }
}

// --- transports, TLS, credentials ---------------------------------------------------------------

TEST_F(GitCheckoutTest, GitDaemon) {
  const Checkout checkout = git::checkout(request(servers_.git_url("main.git"), "v1"));
  EXPECT_EQ(checkout.commit, servers_.value("C1"));
  EXPECT_EQ(read(checkout.path / "a.txt"), "one\n");
  EXPECT_EQ(origin_url(checkout.path), servers_.git_url("main.git"));
}

TEST_F(GitCheckoutTest, GitDaemonRepositoryNotFound) {
  const Failure failure = expect_failure(request(servers_.git_url("nope.git"), "main"));
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("repository not found: " + servers_.git_url("nope.git")), std::string::npos)
      << failure.message;
}

TEST_F(GitCheckoutTest, HttpsWithCustomCa) {
  auto req = request(servers_.https_url("main.git"), "refs/pull/12/head");
  req.ca_bundle = servers_.ca_file();
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(checkout.commit, servers_.value("C4"));
  EXPECT_EQ(read(checkout.path / "a.txt"), "pull\n");
}

TEST_F(GitCheckoutTest, HttpsCertificateFromUnknownCaIsRejected) {
  for (const fs::path& bundle : {fs::path(), servers_.other_ca_file()}) {
    auto req = request(servers_.https_url("main.git"), "main");
    req.ca_bundle = bundle;
    const Failure failure = expect_failure(req);
    EXPECT_EQ(failure.code, ExitCode::source);
    EXPECT_NE(failure.message.find("TLS certificate not trusted for " + servers_.https_url("main.git")),
              std::string::npos)
        << failure.message;
  }
}

TEST_F(GitCheckoutTest, HttpsTokenFromFile) {
  testing::write_text(temp_ / "token", std::string(GitServers::token) + "\n");
  auto req = request(servers_.https_url("main.git", true), "main");
  req.ca_bundle = servers_.ca_file();
  req.token_file = temp_ / "token";
  req.username = GitServers::token_user;
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(checkout.commit, servers_.value("C2"));
  EXPECT_EQ(origin_url(checkout.path), servers_.https_url("main.git", true));
  expect_no_secret(checkout);
}

TEST_F(GitCheckoutTest, HttpsTokenFromEnvironment) {
  ::setenv("TRAINPOINT_GIT_TOKEN", GitServers::token, 1);
  auto req = request(servers_.https_url("main.git", true), "feature");
  req.ca_bundle = servers_.ca_file();
  req.username = GitServers::token_user;
  const Checkout checkout = git::checkout(req);
  ::unsetenv("TRAINPOINT_GIT_TOKEN");
  EXPECT_EQ(checkout.commit, servers_.value("C3"));
  expect_no_secret(checkout);
}

TEST_F(GitCheckoutTest, HttpsCredentialsInUrlAreNeitherStoredNorLogged) {
  const std::string plain = servers_.https_url("main.git", true);
  auto req = request("https://" + std::string(GitServers::token_user) + ":" + GitServers::token + "@" +
                         plain.substr(std::string("https://").size()),
                     "main");
  req.ca_bundle = servers_.ca_file();
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(checkout.commit, servers_.value("C2"));
  EXPECT_EQ(origin_url(checkout.path), plain);
  expect_no_secret(checkout);
}

TEST_F(GitCheckoutTest, HttpsWrongTokenFails) {
  testing::write_text(temp_ / "token", "wrong-token-value");
  auto req = request(servers_.https_url("main.git", true), "main");
  req.ca_bundle = servers_.ca_file();
  req.token_file = temp_ / "token";
  req.username = GitServers::token_user;
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("authentication failed for " + servers_.https_url("main.git", true)),
            std::string::npos)
      << failure.message;
  EXPECT_NE(failure.message.find("token file"), std::string::npos) << failure.message;
  EXPECT_EQ(failure.message.find("wrong-token-value"), std::string::npos);
  EXPECT_EQ(log_.str().find("wrong-token-value"), std::string::npos);
  EXPECT_TRUE(checkout_entries().empty());
}

TEST_F(GitCheckoutTest, HttpsMissingTokenFails) {
  auto req = request(servers_.https_url("main.git", true), "main");
  req.ca_bundle = servers_.ca_file();
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("authentication failed"), std::string::npos) << failure.message;
  EXPECT_NE(failure.message.find("none were given"), std::string::npos) << failure.message;
}

TEST_F(GitCheckoutTest, HttpsRepositoryNotFound) {
  auto req = request(servers_.https_url("nope.git"), "main");
  req.ca_bundle = servers_.ca_file();
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("repository not found: " + servers_.https_url("nope.git")),
            std::string::npos)
      << failure.message;
}

TEST_F(GitCheckoutTest, SshWithKeyAndKnownHosts) {
  auto req = request(servers_.ssh_url("main.git"), "feature");
  req.ssh_key = servers_.client_key();
  req.known_hosts = servers_.known_hosts();
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(checkout.commit, servers_.value("C3"));
  EXPECT_EQ(read(checkout.path / "a.txt"), "feature\n");
}

TEST_F(GitCheckoutTest, SshWrongKeyFails) {
  auto req = request(servers_.ssh_url("main.git"), "main");
  req.ssh_key = servers_.stranger_key();
  req.known_hosts = servers_.known_hosts();
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("authentication failed for " + servers_.ssh_url("main.git")),
            std::string::npos)
      << failure.message;
  EXPECT_NE(failure.message.find(servers_.stranger_key().string()), std::string::npos) << failure.message;
}

TEST_F(GitCheckoutTest, SshUnknownHostFails) {
  auto req = request(servers_.ssh_url("main.git"), "main");
  req.ssh_key = servers_.client_key();
  req.known_hosts = servers_.empty_known_hosts();
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("unknown SSH host key"), std::string::npos) << failure.message;
  EXPECT_NE(failure.message.find("SHA256:"), std::string::npos) << failure.message;
}

TEST_F(GitCheckoutTest, SshUnknownHostAcceptedOnlyWhenAskedWithWarning) {
  auto req = request(servers_.ssh_url("main.git"), "main");
  req.ssh_key = servers_.client_key();
  req.known_hosts = servers_.empty_known_hosts();
  req.accept_unknown_host = true;
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C2"));
  EXPECT_NE(log_.str().find("accepting the unknown SSH host key"), std::string::npos) << log_.str();
}

TEST_F(GitCheckoutTest, SshHostKeyMismatchFailsEvenWhenUnknownHostsAreAccepted) {
  for (const bool accept_unknown : {false, true}) {
    auto req = request(servers_.ssh_url("main.git"), "main");
    req.ssh_key = servers_.client_key();
    req.known_hosts = servers_.wrong_known_hosts();
    req.accept_unknown_host = accept_unknown;
    const Failure failure = expect_failure(req);
    EXPECT_EQ(failure.code, ExitCode::source);
    EXPECT_NE(failure.message.find("host key mismatch for " + servers_.ssh_url("main.git")),
              std::string::npos)
        << failure.message;
  }
}

// --- network faults -----------------------------------------------------------------------------

TEST_F(GitCheckoutTest, ServerDownIsNetworkClass) {
  auto req = request("git://127.0.0.1:" + std::to_string(testing::free_port()) + "/main.git", "main");
  req.network_timeout = std::chrono::seconds(2);
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::network);
  EXPECT_NE(failure.message.find("cannot fetch git://127.0.0.1"), std::string::npos) << failure.message;
  EXPECT_NE(failure.message.find("(gave up after"), std::string::npos) << failure.message;
}

TEST_F(GitCheckoutTest, ConnectionDroppedMidFetchIsRetried) {
  testing::DroppingProxy proxy(servers_.git_port(), /*drops=*/1, /*byte_limit=*/256 * 1024);
  auto req = request("git://127.0.0.1:" + std::to_string(proxy.port()) + "/big.git", "main");
  req.network_timeout = std::chrono::seconds(30);
  req.cache_dir = temp_ / "cache";
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(proxy.dropped(), 1);
  EXPECT_GE(proxy.connections(), 2);
  EXPECT_EQ(fs::file_size(checkout.path / "blob.bin"), 3145728u);
  expect_fsck_clean(only_mirror(temp_ / "cache"));
}

TEST_F(GitCheckoutTest, ConnectionAlwaysDroppedFailsAsNetworkAndLeavesCacheUsable) {
  testing::DroppingProxy proxy(servers_.git_port(), /*drops=*/1000, /*byte_limit=*/256 * 1024);
  auto req = request("git://127.0.0.1:" + std::to_string(proxy.port()) + "/big.git", "main");
  req.network_timeout = std::chrono::seconds(2);
  req.cache_dir = temp_ / "cache";
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::network);
  EXPECT_NE(failure.message.find("(gave up after"), std::string::npos) << failure.message;
  EXPECT_GE(proxy.dropped(), 1);
  EXPECT_TRUE(checkout_entries().empty());
  expect_fsck_clean(only_mirror(temp_ / "cache"));
  // The same cache entry then serves a good fetch.
  req.url = servers_.git_url("big.git");
  req.network_timeout = std::chrono::seconds(30);
  EXPECT_EQ(fs::file_size(git::checkout(req).path / "blob.bin"), 3145728u);
}

// --- cache -----------------------------------------------------------------------------------

TEST_F(GitCheckoutTest, WarmCacheNeedsNoConnectionForAKnownSha) {
  testing::DroppingProxy proxy(servers_.git_port(), /*drops=*/0, /*byte_limit=*/0);
  auto req = request("git://127.0.0.1:" + std::to_string(proxy.port()) + "/main.git", servers_.value("C1"));
  req.cache_dir = temp_ / "cache";
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C1"));
  const int after_cold = proxy.connections();
  EXPECT_GE(after_cold, 1);
  req.workdir = temp_ / "second-pod";
  const Checkout warm = git::checkout(req);
  EXPECT_EQ(proxy.connections(), after_cold);
  EXPECT_EQ(read(warm.path / "a.txt"), "one\n");
}

TEST_F(GitCheckoutTest, CacheFetchesNewCommitsOfABranch) {
  const fs::path remote = temp_ / "remote.git";
  testing::run_checked("cp -r " + testing::shell_quote(servers_.repos() / "main.git") + " " +
                       testing::shell_quote(remote));
  auto req = request(file_url(remote), "main");
  req.cache_dir = temp_ / "cache";
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C2"));
  // Move main to C3 on the remote (as a push would).
  testing::run_checked("git --git-dir=" + testing::shell_quote(remote) + " update-ref refs/heads/main " +
                       servers_.value("C3"));
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C3"));
}

TEST_F(GitCheckoutTest, ConcurrentProcessesShareTheCacheSafely) {
  constexpr int processes = 4;
  std::vector<pid_t> children;
  for (int i = 0; i < processes; ++i) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        auto req = request(servers_.git_url("big.git"), "main", "rank" + std::to_string(i));
        req.cache_dir = temp_ / "cache";
        req.network_timeout = std::chrono::seconds(30);
        code = fs::file_size(git::checkout(req).path / "blob.bin") == 3145728u ? 0 : 2;
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  for (const pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  expect_fsck_clean(only_mirror(temp_ / "cache"));
}

TEST_F(GitCheckoutTest, UnreadableCacheEntryIsRebuilt) {
  auto req = request(servers_.git_url("main.git"), "main");
  req.cache_dir = temp_ / "cache";
  git::checkout(req);
  const fs::path mirror = only_mirror(temp_ / "cache");
  fs::remove_all(mirror);
  testing::write_text(mirror / "garbage", "not a repository");
  req.workdir = temp_ / "other";
  EXPECT_EQ(git::checkout(req).commit, servers_.value("C2"));
  expect_fsck_clean(mirror);
}

// --- full disk ---------------------------------------------------------------------------------

TEST_F(GitCheckoutTest, FullWorkdirDiskIsStorageClassAndLeavesNoPartialCheckout) {
  testing::SmallDisk disk(temp_ / "small");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)";
  auto req = request(servers_.git_url("big.git"), "main", "small");
  req.cache_dir = temp_ / "cache";
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::storage);
  EXPECT_NE(failure.message.find("disk is full"), std::string::npos) << failure.message;
  EXPECT_TRUE(checkout_entries("small").empty());
  expect_fsck_clean(only_mirror(temp_ / "cache"));
  req.workdir = temp_ / "large";
  EXPECT_EQ(fs::file_size(git::checkout(req).path / "blob.bin"), 3145728u);
}

TEST_F(GitCheckoutTest, DiskFullWhileWritingTheFilesIsStorageClassAndLeavesNoPartialCheckout) {
  // Cache and work directory on one 5 MiB disk: the 3 MiB pack fits and is hard-linked into the checkout,
  // then writing the 3 MiB file does not fit.
  testing::SmallDisk disk(temp_ / "one", "5m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)";
  auto req = request(servers_.git_url("big.git"), "main", "one/work");
  req.cache_dir = temp_ / "one" / "cache";
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::storage);
  EXPECT_NE(failure.message.find("cannot write"), std::string::npos) << failure.message;
  EXPECT_NE(failure.message.find("disk is full"), std::string::npos) << failure.message;
  EXPECT_TRUE(checkout_entries("one/work").empty());
  expect_fsck_clean(only_mirror(temp_ / "one" / "cache"));
}

TEST_F(GitCheckoutTest, FullCacheDiskIsStorageClass) {
  testing::SmallDisk disk(temp_ / "small-cache");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN)";
  auto req = request(servers_.git_url("big.git"), "main");
  req.cache_dir = temp_ / "small-cache";
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::storage);
  EXPECT_NE(failure.message.find("disk full while fetching " + servers_.git_url("big.git")),
            std::string::npos)
      << failure.message;
  EXPECT_TRUE(checkout_entries().empty());
}

// --- what checkout writes ----------------------------------------------------------------------

TEST_F(GitCheckoutTest, ParallelCheckoutWritesEveryKindOfEntryAsGitDoes) {
  const Checkout checkout = git::checkout(request(file_url(servers_.repos() / "kinds.git"), "main"));
  EXPECT_EQ(read(checkout.path / "a.txt"), "one\ntwo\n");
  EXPECT_EQ(read(checkout.path / "deep" / "er" / "still" / "empty"), "");
  EXPECT_EQ(read(checkout.path / "many" / "200.txt"), "file 200\n");
  EXPECT_TRUE(fs::is_symlink(checkout.path / "deep" / "link"));
  EXPECT_EQ(fs::read_symlink(checkout.path / "deep" / "link"), "../a.txt");
  const auto exec = fs::perms::owner_exec;
  EXPECT_NE(fs::status(checkout.path / "deep" / "run.sh").permissions() & exec, fs::perms::none);
  EXPECT_EQ(fs::status(checkout.path / "a.txt").permissions() & exec, fs::perms::none);
  // The same tree as git's own checkout, and an index that matches it: nothing modified, nothing untracked.
  const fs::path reference = temp_ / "reference";
  testing::run_checked("git clone -q " + testing::shell_quote(servers_.repos() / "kinds.git") + " " +
                       testing::shell_quote(reference));
  const auto diff = testing::run_command("diff -r --no-dereference --exclude=.git " +
                                         testing::shell_quote(reference) + " " + testing::shell_quote(checkout.path));
  EXPECT_EQ(diff.exit_code, 0) << diff.output;
  EXPECT_EQ(testing::run_checked("git -C " + testing::shell_quote(checkout.path) + " status --porcelain"), "");
  EXPECT_EQ(testing::run_checked("git -C " + testing::shell_quote(checkout.path) + " diff --stat HEAD"), "");
  EXPECT_NE(log_.str().find("204 files written by"), std::string::npos) << log_.str();
}

TEST_F(GitCheckoutTest, GitattributesLineEndingsAreApplied) {
  const Checkout checkout = git::checkout(request(file_url(servers_.repos() / "crlf.git"), "main"));
  EXPECT_EQ(read(checkout.path / "a.txt"), "one\r\ntwo\r\n");
  EXPECT_EQ(log_.str().find("files written by"), std::string::npos) << log_.str();  // libgit2's own checkout
  EXPECT_EQ(testing::run_checked("git -C " + testing::shell_quote(checkout.path) + " status --porcelain"), "");
}

TEST_F(GitCheckoutTest, AttributesFileOutsideTheTreeKeepsLibgit2sCheckout) {
  // The user's attributes file (~/.config/git/attributes), through libgit2's search path for it.
  git_libgit2_init();
  git_buf saved = GIT_BUF_INIT;
  ASSERT_EQ(git_libgit2_opts(GIT_OPT_GET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, &saved), 0);
  const std::string original = saved.ptr ? saved.ptr : "";
  git_buf_dispose(&saved);
  const fs::path xdg = temp_ / "xdg";
  fs::create_directories(xdg);
  std::ofstream(xdg / "attributes") << "*.txt eol=crlf\n";
  ASSERT_EQ(git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, xdg.c_str()), 0);
  const Checkout checkout = git::checkout(request(file_url(servers_.repos() / "kinds.git"), "main"));
  git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, GIT_CONFIG_LEVEL_XDG, original.c_str());
  git_libgit2_shutdown();
  EXPECT_EQ(read(checkout.path / "a.txt"), "one\r\ntwo\r\n");
  EXPECT_EQ(log_.str().find("files written by"), std::string::npos) << log_.str();
}

// --- submodules --------------------------------------------------------------------------------

TEST_F(GitCheckoutTest, SubmodulesAreCheckedOutRecursively) {
  const Checkout checkout = git::checkout(request(file_url(servers_.repos() / "super.git"), "main"));
  EXPECT_EQ(checkout.commit, servers_.value("SUPER_COMMIT"));
  EXPECT_EQ(read(checkout.path / "super.txt"), "super\n");
  EXPECT_EQ(read(checkout.path / "lib" / "lib.txt"), "lib\n");
  EXPECT_EQ(read(checkout.path / "lib" / "leaf" / "leaf.txt"), "leaf\n");
  EXPECT_EQ(origin_url(checkout.path / "lib" / "leaf"), file_url(servers_.repos() / "leaf.git"));
  const auto status = testing::run_checked("git -C " + testing::shell_quote(checkout.path) +
                                           " status --porcelain --ignore-submodules=none");
  EXPECT_EQ(status, "");
}

TEST_F(GitCheckoutTest, SubmodulesOverHttpsWithRelativeUrls) {
  auto req = request(servers_.https_url("super.git"), "main");
  req.ca_bundle = servers_.ca_file();
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(read(checkout.path / "lib" / "leaf" / "leaf.txt"), "leaf\n");
  EXPECT_EQ(origin_url(checkout.path / "lib"), servers_.https_url("lib.git"));
}

TEST_F(GitCheckoutTest, SubmodulesCanBeSwitchedOff) {
  auto req = request(file_url(servers_.repos() / "super.git"), "main");
  req.submodules = false;
  const Checkout checkout = git::checkout(req);
  EXPECT_TRUE(fs::exists(checkout.path / "super.txt"));
  EXPECT_FALSE(fs::exists(checkout.path / "lib" / "lib.txt"));
}

// --- LFS ---------------------------------------------------------------------------------------

std::string sha256_of(const fs::path& file) {
  return testing::run_checked("sha256sum " + testing::shell_quote(file)).substr(0, 64);
}

TEST_F(GitCheckoutTest, LfsFromALocalWorkingRepository) {
  const Checkout checkout = git::checkout(request((servers_.root() / "work" / "lfs").string(), "main"));
  EXPECT_EQ(fs::file_size(checkout.path / "model.bin"), 200000u);
  EXPECT_EQ(sha256_of(checkout.path / "model.bin"), servers_.value("LFS_OID"));
  EXPECT_EQ(read(checkout.path / "notes.txt"), "plain\n");
}

TEST_F(GitCheckoutTest, LfsFromABareFileUrl) {
  const Checkout checkout = git::checkout(request(file_url(servers_.repos() / "lfs.git"), "main"));
  EXPECT_EQ(sha256_of(checkout.path / "model.bin"), servers_.value("LFS_OID"));
}

TEST_F(GitCheckoutTest, LfsOverHttpsBatchApiWithAuthAndCache) {
  testing::write_text(temp_ / "token", GitServers::token);
  auto req = request(servers_.https_url("lfs.git", true), "main");
  req.ca_bundle = servers_.ca_file();
  req.token_file = temp_ / "token";
  req.username = GitServers::token_user;
  req.cache_dir = temp_ / "cache";
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(sha256_of(checkout.path / "model.bin"), servers_.value("LFS_OID"));
  const std::string oid = servers_.value("LFS_OID");
  EXPECT_TRUE(fs::exists(temp_ / "cache" / "lfs" / "objects" / oid.substr(0, 2) / oid.substr(2, 2) / oid));
  expect_no_secret(checkout);
}

TEST_F(GitCheckoutTest, LfsCorruptObjectFails) {
  auto req = request(servers_.https_url("lfsbad.git"), "main");
  req.ca_bundle = servers_.ca_file();
  const Failure failure = expect_failure(req);
  EXPECT_EQ(failure.code, ExitCode::source);
  EXPECT_NE(failure.message.find("the object is corrupt"), std::string::npos) << failure.message;
  EXPECT_TRUE(checkout_entries().empty());
}

TEST_F(GitCheckoutTest, AnLfsObjectTheServerLacksOrOffersNoDownloadForIsNamed) {
  const std::string oid = servers_.value("LFS_OID");
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"lfsgone.git", {"LFS object " + oid + " is not available from ", ": 404 Object does not exist"}},
      {"lfsodd.git", {"answered for object '" + oid + "' without a download action"}}};
  for (const auto& [repo, expected] : cases) {
    auto req = request(servers_.https_url(repo), "main");
    req.ca_bundle = servers_.ca_file();
    const Failure failure = expect_failure(req);
    EXPECT_EQ(failure.code, ExitCode::source) << repo;
    for (const std::string& part : expected) {
      EXPECT_NE(failure.message.find(part), std::string::npos) << failure.message;
    }
    EXPECT_TRUE(checkout_entries().empty()) << repo;
  }
}

TEST_F(GitCheckoutTest, LfsCanBeSwitchedOff) {
  auto req = request(file_url(servers_.repos() / "lfs.git"), "main");
  req.lfs = false;
  const Checkout checkout = git::checkout(req);
  EXPECT_EQ(read(checkout.path / "model.bin").rfind("version https://git-lfs.github.com/spec/v1", 0), 0u);
}

}  // namespace
}  // namespace tp::git
