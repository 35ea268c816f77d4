// A Kubernetes control plane on loopback for the tests of trainpoint's job commands (tests/k8s): etcd,
// kube-apiserver with token authentication and RBAC, kube-controller-manager, kube-scheduler, the Kubeflow
// training operator (PyTorchJob) and kwok, which keeps one node Ready and runs nothing. The pods the
// scheduler puts on that node are run by a PodRunner (k8s/pod_runner.h) as local processes. Built by
// `scripts/install-go-tools kubernetes` into $TRAINPOINT_CACHE/go-tools/bin, as MinIO is.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "k8s/api.h"
#include "support/background_process.h"
#include "support/temp_dir.h"

namespace tp::testing {

class PodRunner;

class KubernetesCluster {
 public:
  static constexpr const char* kNode = "kwok-node-0";

  KubernetesCluster();
  ~KubernetesCluster();
  KubernetesCluster(const KubernetesCluster&) = delete;
  KubernetesCluster& operator=(const KubernetesCluster&) = delete;

  // The cluster administrator's kubeconfig (system:masters): tests set up with it, users never get it.
  std::filesystem::path admin_kubeconfig() const { return directory_ / "admin.kubeconfig"; }
  // A shell command running kubectl (v1.34, built with the control plane) as the administrator.
  std::string kubectl(const std::string& arguments) const;
  // The administrator's client.
  k8s::Api& admin() { return *admin_; }

  // Creates namespace `name` with the service account `notebook` that a Kubeflow notebook pod of that namespace
  // has: it may create and read jobs, read pods and their logs and services, only there. Returns the
  // kubeconfig of that service account's token.
  std::filesystem::path add_namespace(const std::string& name);
  // The directory of the files a pod's service account would find in /var/run/secrets/kubernetes.io/serviceaccount
  // (token, ca.crt, namespace), for in-cluster tests.
  std::filesystem::path service_account_dir(const std::string& name_space) const;

  std::string server() const { return "https://127.0.0.1:" + std::to_string(api_port_); }
  PodRunner& pods() { return *pods_; }
  // The processes' logs, for a failed test's messages.
  std::string logs() const;

 private:
  void make_certificates();
  void start_control_plane();
  void install_operator();
  void start_kwok();

  TempDir directory_;
  std::filesystem::path bin_;
  int api_port_ = 0;
  int kubelet_port_ = 0;
  std::vector<std::unique_ptr<BackgroundProcess>> processes_;
  std::vector<std::string> process_names_;
  std::unique_ptr<k8s::Api> admin_;
  std::unique_ptr<PodRunner> pods_;
};

// The Go tools' binaries ($TRAINPOINT_CACHE/go-tools/bin); empty when the control plane was not built.
std::filesystem::path kubernetes_bin();

}  // namespace tp::testing
