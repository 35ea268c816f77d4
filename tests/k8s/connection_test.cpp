// Where the job commands find the cluster (k8s/connection.h): a kubeconfig's context, cluster and user as kubectl
// reads them, the pod's service account, and what trainpoint cannot use named with the file and the entry; and
// the exit codes of a pod explained as status shows them (k8s/jobs.h).
#include "k8s/connection.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "common/base64.h"
#include "common/error.h"
#include "k8s/jobs.h"
#include "support/temp_dir.h"

namespace tp::k8s {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string kubeconfig(const std::string& user, const std::string& cluster_extra = "",
                       const std::string& context_extra = "") {
  return "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
         "clusters:\n- name: other\n  cluster: {server: 'https://other:6443'}\n"
         "- name: main\n  cluster:\n    server: https://k8s.example.org:6443/\n" + cluster_extra +
         "contexts:\n- name: lab\n  context: {cluster: main, user: me" + context_extra + "}\n"
         "- name: wrong\n  context: {cluster: missing, user: me}\n"
         "users:\n- name: me\n  user:\n" + user;
}

std::string usage_error(const ConnectOptions& options) {
  try {
    connect(options);
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::usage) << error.what();
    return error.what();
  }
  return "";
}

TEST(Kubeconfig, TheCurrentContextsClusterUserAndNamespace) {
  testing::TempDir dir;
  testing::write_text(dir / "ca.pem", kPem);
  testing::write_text(dir / "config", kubeconfig("    token: secret-token\n", "    certificate-authority: ca.pem\n",
                                                 ", namespace: team-a"));
  ConnectOptions options;
  options.kubeconfig = (dir / "config").string();
  const Connection connection = connect(options);
  EXPECT_EQ(connection.server, "https://k8s.example.org:6443");
  EXPECT_EQ(connection.token, "secret-token");
  EXPECT_EQ(connection.ca_pem, kPem);  // the relative path is the kubeconfig's folder's
  EXPECT_EQ(connection.name_space, "team-a");
  EXPECT_EQ(connection.origin, "kubeconfig " + options.kubeconfig + ", context lab");
  options.name_space = "team-b";
  EXPECT_EQ(connect(options).name_space, "team-b");
}

TEST(Kubeconfig, InlineCaDataATokenFileAndTheDefaultNamespace) {
  testing::TempDir dir;
  testing::write_text(dir / "token", "file-token\n");
  testing::write_text(dir / "config", kubeconfig("    tokenFile: " + (dir / "token").string() + "\n",
                                                 "    certificate-authority-data: " + base64(kPem) + "\n"));
  ConnectOptions options;
  options.kubeconfig = (dir / "config").string();
  const Connection connection = connect(options);
  EXPECT_EQ(connection.token, "file-token");
  EXPECT_EQ(connection.ca_pem, kPem);
  EXPECT_EQ(connection.name_space, "default");
}

TEST(Kubeconfig, WhatCannotBeUsedIsNamedWithTheFileAndContext) {
  testing::TempDir dir;
  ConnectOptions options;
  options.kubeconfig = (dir / "config").string();
  testing::write_text(dir / "config", kubeconfig("    client-certificate-data: AAAA\n    client-key-data: AAAA\n"));
  const std::string where = "kubeconfig " + options.kubeconfig + ", context lab";
  EXPECT_EQ(usage_error(options).rfind(where + ": trainpoint signs in with a token", 0), 0u) << usage_error(options);
  testing::write_text(dir / "config", kubeconfig("    token: t\n", "    insecure-skip-tls-verify: true\n"));
  EXPECT_EQ(usage_error(options).rfind(where + ": insecure-skip-tls-verify is not supported", 0), 0u);
  options.context = "wrong";
  EXPECT_EQ(usage_error(options),
            "kubeconfig " + options.kubeconfig + ", context wrong: clusters has no entry named 'missing'");
  options.context = "";
  testing::write_text(dir / "config", "clusters: [\n");
  EXPECT_EQ(usage_error(options).rfind("kubeconfig " + options.kubeconfig + ":", 0), 0u) << usage_error(options);
  options.kubeconfig = (dir / "absent").string();
  EXPECT_EQ(usage_error(options), "cannot read the kubeconfig " + options.kubeconfig);
}

TEST(InCluster, TheServiceAccountsTokenCaAndNamespace) {
  testing::TempDir dir;
  testing::write_text(dir / "token", "pod-token\n");
  testing::write_text(dir / "ca.crt", kPem);
  testing::write_text(dir / "namespace", "team-c");
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  ::unsetenv("KUBECONFIG");
  ::setenv("HOME", dir.path().c_str(), 1);
  ConnectOptions options;
  options.service_account_dir = dir.path().string();
  const Connection connection = connect(options);
  EXPECT_EQ(connection.server, "https://10.96.0.1:443");
  EXPECT_EQ(connection.token, "pod-token");
  EXPECT_EQ(connection.ca_pem, kPem);
  EXPECT_EQ(connection.name_space, "team-c");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(usage_error(options).rfind("no Kubernetes cluster to talk to", 0), 0u);
}

TEST(PodExits, ExplainedByTheirClass) {
  EXPECT_EQ(exit_meaning(0), "exit 0 (ok: done)");
  EXPECT_EQ(exit_meaning(3), "exit 3 (spec error: permanent)");
  EXPECT_EQ(exit_meaning(202), "exit 202 (peer lost: retryable)");
  EXPECT_EQ(exit_meaning(137, "OOMKilled"), "exit 137 (killed by signal 9: OOMKilled)");
  EXPECT_EQ(exit_meaning(42, "Error"), "exit 42 (permanent, Error)");
}

}  // namespace
}  // namespace tp::k8s
