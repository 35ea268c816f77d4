#include <gtest/gtest.h>

#include "common/error.h"
#include "git/auth.h"
#include "git/lfs.h"
#include "git/remote_url.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace tp::git {
namespace {

TEST(GitRemoteUrl, HttpsCredentialsAreSplitOff) {
  const RemoteUrl remote = parse_remote_url("https://user:secret@example.com:8443/org/repo.git");
  EXPECT_EQ(remote.transport, Transport::https);
  EXPECT_EQ(remote.url, "https://example.com:8443/org/repo.git");
  EXPECT_EQ(remote.user, "user");
  EXPECT_EQ(remote.password, "secret");
  EXPECT_EQ(remote.host, "example.com");
  EXPECT_EQ(remote.port, 8443);
}

TEST(GitRemoteUrl, SshKeepsItsUserName) {
  const RemoteUrl url = parse_remote_url("ssh://git@example.com:2222/org/repo.git");
  EXPECT_EQ(url.transport, Transport::ssh);
  EXPECT_EQ(url.url, "ssh://git@example.com:2222/org/repo.git");
  EXPECT_EQ(url.port, 2222);
  const RemoteUrl scp = parse_remote_url("git@github.com:org/repo.git");
  EXPECT_EQ(scp.transport, Transport::ssh);
  EXPECT_EQ(scp.host, "github.com");
  EXPECT_EQ(scp.url, "git@github.com:org/repo.git");
}

TEST(GitRemoteUrl, LocalPathsAndFileUrls) {
  EXPECT_EQ(parse_remote_url("/srv/repo.git").transport, Transport::local);
  EXPECT_EQ(parse_remote_url("/srv/repo.git").local_path, "/srv/repo.git");
  EXPECT_EQ(parse_remote_url("file:///srv/repo.git").local_path, "/srv/repo.git");
  EXPECT_EQ(parse_remote_url("git://h/r.git").transport, Transport::git);
}

TEST(GitRemoteUrl, ResolvesRelativeSubmoduleUrls) {
  EXPECT_EQ(resolve_submodule_url("file:///srv/repos/super.git", "../lib.git"), "file:///srv/repos/lib.git");
  EXPECT_EQ(resolve_submodule_url("https://h/org/super.git/", "../../other/lib.git"),
            "https://h/other/lib.git");
  EXPECT_EQ(resolve_submodule_url("git@h:org/super.git", "./../lib.git"), "git@h:org/lib.git");
  EXPECT_EQ(resolve_submodule_url("git@h:super.git", "../lib.git"), "git@h:lib.git");
  EXPECT_EQ(resolve_submodule_url("https://h/super.git", "https://x/abs.git"), "https://x/abs.git");
  EXPECT_THROW(resolve_submodule_url("https://h/super.git", "../../lib.git"), Error);
}

// Found by tests/fuzz (git_url): an empty URL threw std::filesystem_error (not tp::Error), and a
// file:// URL kept a password in `url`, which is logged and stored.
TEST(GitRemoteUrl, EmptyUrlIsASourceError) {
  try {
    parse_remote_url("");
    FAIL() << "accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::source);
    EXPECT_STREQ(error.what(), "the git URL is empty: give a repository URL or path");
  }
}

TEST(GitRemoteUrl, FileUrlDropsAPassword) {
  EXPECT_EQ(parse_remote_url("file://u:secret@h/srv/repo.git").url, "file://u:***@h/srv/repo.git");
  EXPECT_EQ(parse_remote_url("file:///srv/repo.git").url, "file:///srv/repo.git");
}

// Found by tests/fuzz (git_url): going above a URL's root cut it at a ':' of its authority, which
// mangled the URL and, with a password holding '@', left part of the password unredacted.
TEST(GitRemoteUrl, SubmoduleAboveAUrlRootFails) {
  EXPECT_THROW(resolve_submodule_url("https://u:p@ss:word@h.example.org", "../other.git"), Error);
  EXPECT_THROW(resolve_submodule_url("https://h.example.org:8443/super.git", "../../other.git"), Error);
  EXPECT_EQ(resolve_submodule_url("https://h.example.org:8443/super.git", "../other.git"),
            "https://h.example.org:8443/other.git");
}

TEST(GitRemoteUrl, UnsupportedSchemeFails) {
  EXPECT_THROW(parse_remote_url("ftp://h/r.git"), Error);
}

TEST(GitKnownHosts, PlainHashedChangedAndUnknown) {
  testing::TempDir temp;
  testing::run_checked("ssh-keygen -q -t ed25519 -N '' -f " + (temp / "a").string() +
                       " && ssh-keygen -q -t ed25519 -N '' -f " + (temp / "b").string());
  const auto blob_of = [&](const std::string& name) {
    const std::string line = testing::run_checked("cut -d' ' -f2 " + (temp / (name + ".pub")).string());
    return testing::run_checked("printf %s " + line.substr(0, line.find('\n')) + " | base64 -d");
  };
  const std::string key_a = testing::run_checked("cut -d' ' -f1,2 " + (temp / "a.pub").string());
  testing::write_text(temp / "known_hosts", "[10.0.0.1]:2222 " + key_a + "plain.example " + key_a);
  testing::run_checked("ssh-keygen -q -H -f " + (temp / "known_hosts").string() + " 2>/dev/null");
  const auto hosts = temp / "known_hosts";
  EXPECT_EQ(check_known_hosts(hosts, "10.0.0.1", 2222, blob_of("a")), HostKeyStatus::known);
  EXPECT_EQ(check_known_hosts(hosts, "plain.example", 22, blob_of("a")), HostKeyStatus::known);
  EXPECT_EQ(check_known_hosts(hosts, "plain.example", 22, blob_of("b")), HostKeyStatus::changed);
  EXPECT_EQ(check_known_hosts(hosts, "10.0.0.1", 22, blob_of("a")), HostKeyStatus::unknown_host);
  EXPECT_EQ(check_known_hosts(hosts, "other.example", 22, blob_of("a")), HostKeyStatus::unknown_host);
}

TEST(GitLfs, ParsesPointers) {
  const std::string oid(64, 'a');
  const auto pointer =
      parse_lfs_pointer("version https://git-lfs.github.com/spec/v1\noid sha256:" + oid + "\nsize 12345\n");
  ASSERT_TRUE(pointer.has_value());
  EXPECT_EQ(pointer->oid, oid);
  EXPECT_EQ(pointer->size, 12345u);
  EXPECT_FALSE(parse_lfs_pointer("hello\n").has_value());
  EXPECT_FALSE(
      parse_lfs_pointer("version https://git-lfs.github.com/spec/v1\noid sha256:xyz\nsize 1\n").has_value());
}

TEST(GitLfs, EndpointFollowsGitLfsRules) {
  testing::TempDir worktree;
  EXPECT_EQ(lfs_endpoint(parse_remote_url("https://h/org/repo.git"), worktree.path()),
            "https://h/org/repo.git/info/lfs");
  EXPECT_EQ(lfs_endpoint(parse_remote_url("https://h/org/repo"), worktree.path()),
            "https://h/org/repo.git/info/lfs");
  EXPECT_EQ(lfs_endpoint(parse_remote_url("git@h:org/repo.git"), worktree.path()),
            "https://h/org/repo.git/info/lfs");
  EXPECT_EQ(lfs_endpoint(parse_remote_url("ssh://git@h:2222/org/repo.git"), worktree.path()),
            "https://h/org/repo.git/info/lfs");
  testing::write_text(worktree / ".lfsconfig", "[lfs]\n\turl = https://lfs.example/repo\n");
  EXPECT_EQ(lfs_endpoint(parse_remote_url("https://h/org/repo.git"), worktree.path()),
            "https://lfs.example/repo");
}

}  // namespace
}  // namespace tp::git
