#include "k8s/k8s_cluster.h"

#include <chrono>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "k8s/pod_runner.h"
#include "support/process.h"

namespace fs = std::filesystem;

namespace tp::testing {
namespace {

std::string random_token() {
  std::random_device device;
  std::ostringstream token;
  for (int i = 0; i < 4; ++i) token << std::hex << device();
  return token.str();
}

fs::path tool(const fs::path& bin, const std::string& name) {
  const fs::path path = bin / name;
  if (!fs::exists(path)) {
    throw std::runtime_error(path.string() + " was not found: the Kubernetes tests need the control plane that "
                             "`scripts/install-go-tools kubernetes` builds (scripts/test runs it)");
  }
  return path;
}

void write_kubeconfig(const fs::path& file, const std::string& server, const fs::path& ca, const std::string& token,
                      const std::string& name_space) {
  write_text(file, "apiVersion: v1\nkind: Config\n"
                   "clusters:\n- name: test\n  cluster:\n    server: " + server +
                   "\n    certificate-authority: " + ca.string() +
                   "\n"
                   "users:\n- name: user\n  user:\n    token: " + token +
                   "\n"
                   "contexts:\n- name: test\n  context:\n    cluster: test\n    user: user\n" +
                   (name_space.empty() ? "" : "    namespace: " + name_space + "\n") + "current-context: test\n");
}

// Polls `ready` every 100 ms until it is true; throws with `what` and the logs after `timeout`.
void wait_until(const std::function<bool()>& ready, const std::string& what, const std::function<std::string()>& logs,
                std::chrono::seconds timeout = std::chrono::seconds(90)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("the control plane did not come up: " + what + "\n" + logs());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// What a Kubeflow profile gives a notebook's service account in its own namespace (kubeflow-edit, narrowed to
// what trainpoint's commands use: jobs; reading pods, logs, services, events and Secrets).
std::string notebook_role(const std::string& name_space) {
  return "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: notebook\n  namespace: " + name_space +
         "\nrules:\n"
         "- apiGroups: [kubeflow.org]\n  resources: [pytorchjobs, pytorchjobs/status]\n"
         "  verbs: [get, list, watch, create, update, patch, delete]\n"
         "- apiGroups: [trainer.kubeflow.org]\n  resources: [trainjobs, trainjobs/status]\n"
         "  verbs: [get, list, watch, create, update, patch, delete]\n"
         "- apiGroups: ['']\n  resources: [pods, pods/log, services, events, secrets]\n  verbs: [get, list, watch]\n"
         "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: notebook\n"
         "  namespace: " + name_space +
         "\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: notebook\n"
         "subjects:\n- kind: ServiceAccount\n  name: notebook\n  namespace: " + name_space + "\n";
}

}  // namespace

fs::path kubernetes_bin() {
  const char* cache = std::getenv("TRAINPOINT_CACHE");
  const fs::path bin = fs::path(cache != nullptr ? cache : "/var/cache/trainpoint") / "go-tools" / "bin";
  return fs::exists(bin / "kubernetes") ? bin : fs::path();
}

KubernetesCluster::KubernetesCluster() : bin_(kubernetes_bin()) {
  if (bin_.empty()) {
    throw std::runtime_error("no Kubernetes control plane in $TRAINPOINT_CACHE/go-tools/bin: "
                             "run scripts/install-go-tools kubernetes (scripts/test does)");
  }
  make_certificates();
  start_control_plane();
  install_operator();
  start_kwok();
}

KubernetesCluster::~KubernetesCluster() {
  pods_.reset();  // the pods' processes first, while the API server still answers
  while (!processes_.empty()) processes_.pop_back();  // the newest first: the operator before the API server
}

std::string KubernetesCluster::kubectl(const std::string& arguments) const {
  return shell_quote(tool(bin_, "kubectl").string()) + " --kubeconfig " + shell_quote(admin_kubeconfig().string()) +
         " " + arguments;
}

std::string KubernetesCluster::logs() const {
  std::string text = "--- pod runner errors\n" + read_text(directory_ / "pods" / "runner-errors.log");
  text += "--- pods\n" + run_command(kubectl("get pods -A -o wide --show-labels")).output;
  if (pods_) text += pods_->summary();
  for (std::size_t i = 0; i < processes_.size(); ++i) {
    const std::string log = processes_[i]->log();
    text += "--- " + process_names_[i] + " (last 3000 bytes)\n" + log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
  }
  return text;
}

void KubernetesCluster::make_certificates() {
  const std::string dir = shell_quote(directory_.path().string());
  // The CA of the API server's clients and serving certificate; the serving certificates of the API server, the
  // operator's webhook and the node's kubelet endpoint; the service accounts' signing key.
  write_text(directory_ / "apiserver.ext", "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n");
  write_text(directory_ / "webhook.ext", "subjectAltName=DNS:training-operator.kubeflow.svc\n");
  write_text(directory_ / "kubelet.ext", "subjectAltName=IP:127.0.0.1\n");
  std::string script = "cd " + dir + " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca "
                       "-keyout ca.key -out ca.crt";
  for (const char* name : {"apiserver", "webhook", "kubelet"}) {
    const std::string n = name;
    script += " && openssl req -newkey rsa:2048 -nodes -subj /CN=" + n + " -keyout " + n + ".key -out " + n +
              ".csr && openssl x509 -req -in " + n + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile " +
              n + ".ext -out " + n + ".crt";
  }
  script += " && openssl genrsa -out sa.key 2048 && openssl rsa -in sa.key -pubout -out sa.pub";
  run_checked("(" + script + ") 2>&1");
  fs::create_directories(directory_ / "webhook-certs");
  for (const auto& [from, to] : {std::pair{"ca.crt", "ca.crt"}, {"ca.key", "ca.key"}, {"webhook.crt", "tls.crt"},
                                 {"webhook.key", "tls.key"}}) {
    fs::copy_file(directory_ / from, directory_ / "webhook-certs" / to);
  }
}

void KubernetesCluster::start_control_plane() {
  const std::string admin_token = random_token();
  write_text(directory_ / "tokens.csv", admin_token + ",admin,admin,system:masters\n");
  api_port_ = free_port();
  write_kubeconfig(admin_kubeconfig(), server(), directory_ / "ca.crt", admin_token, "");
  const auto start = [&](const std::string& name, const std::string& command) {
    processes_.push_back(std::make_unique<BackgroundProcess>(command, directory_ / (name + ".log")));
    process_names_.push_back(name);
  };
  const std::string dir = directory_.path().string();
  const int etcd_port = free_port();
  const int peer_port = free_port();
  const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port);
  start("etcd", shell_quote(tool(bin_, "etcd").string()) + " --name test --data-dir " + dir + "/etcd" +
                    " --listen-client-urls http://127.0.0.1:" + std::to_string(etcd_port) +
                    " --advertise-client-urls http://127.0.0.1:" + std::to_string(etcd_port) +
                    " --listen-peer-urls " + peer + " --initial-advertise-peer-urls " + peer +
                    " --initial-cluster test=" + peer + " --log-level warn");
  start("kube-apiserver",
        shell_quote(tool(bin_, "kube-apiserver").string()) + " --etcd-servers=http://127.0.0.1:" +
            std::to_string(etcd_port) + " --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=" +
            std::to_string(api_port_) + " --tls-cert-file=" + dir + "/apiserver.crt --tls-private-key-file=" + dir +
            "/apiserver.key --client-ca-file=" + dir + "/ca.crt --token-auth-file=" + dir +
            "/tokens.csv --authorization-mode=Node,RBAC --service-account-key-file=" + dir +
            "/sa.pub --service-account-signing-key-file=" + dir +
            "/sa.key --service-account-issuer=https://kubernetes.default.svc.cluster.local"
            " --service-cluster-ip-range=10.96.0.0/16 --endpoint-reconciler-type=none"
            " --kubelet-preferred-address-types=InternalIP --cert-dir=" + dir + "/apiserver-certs");
  admin_ = std::make_unique<k8s::Api>(k8s::Connection{server(), admin_token, read_text(directory_ / "ca.crt"),
                                                      "default", "the test cluster's administrator"});
  wait_until([&] { return run_command(kubectl("get --raw /readyz")).output == "ok"; }, "kube-apiserver /readyz",
             [&] { return logs(); });
  start("kube-controller-manager",
        shell_quote(tool(bin_, "kube-controller-manager").string()) + " --kubeconfig=" + admin_kubeconfig().string() +
            " --bind-address=127.0.0.1 --secure-port=" + std::to_string(free_port()) +
            " --leader-elect=false --use-service-account-credentials=false --service-account-private-key-file=" + dir +
            "/sa.key --root-ca-file=" + dir + "/ca.crt");
  start("kube-scheduler", shell_quote(tool(bin_, "kube-scheduler").string()) + " --kubeconfig=" +
                              admin_kubeconfig().string() + " --bind-address=127.0.0.1 --secure-port=" +
                              std::to_string(free_port()) + " --leader-elect=false");
}

void KubernetesCluster::install_operator() {
  const std::string dir = directory_.path().string();
  run_checked(kubectl("create -f " + shell_quote((bin_ / "crds").string()) + " 2>&1"));
  run_checked(kubectl("create namespace kubeflow 2>&1"));
  run_checked(kubectl("-n kubeflow create secret generic training-operator-webhook-cert --from-file=" + dir +
                      "/webhook-certs 2>&1"));
  // The operator reads its webhook's certificate from a path it hard-codes: a private mount namespace puts
  // this cluster's there.
  const std::string certs = "/tmp/k8s-webhook-server/serving-certs";
  const std::string operator_command =
      "mkdir -p " + certs + " && mount --bind " + shell_quote(dir + "/webhook-certs") + " " + certs +
      " && TMPDIR=/tmp MY_POD_NAMESPACE=kubeflow exec " + shell_quote(tool(bin_, "training-operator").string()) +
      " --kubeconfig=" + admin_kubeconfig().string() +
      " --enable-scheme=pytorchjob --metrics-bind-address=0 --health-probe-bind-address=0 --webhook-server-port=" +
      std::to_string(free_port());
  processes_.push_back(std::make_unique<BackgroundProcess>(
      "unshare --mount --propagation private /bin/sh -c " + shell_quote(operator_command),
      directory_ / "training-operator.log"));
  process_names_.push_back("training-operator");
  run_checked(kubectl("wait --for condition=established --timeout=60s crd --all 2>&1"));
}

void KubernetesCluster::start_kwok() {
  kubelet_port_ = free_port();
  fs::copy_file(fs::path(source_dir()) / "tests" / "k8s" / "kwok-stages.yaml", directory_ / "kwok.yaml");
  processes_.push_back(std::make_unique<BackgroundProcess>(
      shell_quote(tool(bin_, "kwok").string()) + " --kubeconfig=" + admin_kubeconfig().string() +
          " --config=" + (directory_ / "kwok.yaml").string() +
          " --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake"
          " --node-ip=127.0.0.1 --node-port=" + std::to_string(kubelet_port_) +
          " --server-address=127.0.0.1:" + std::to_string(free_port()),
      directory_ / "kwok.log"));
  process_names_.push_back("kwok");
  write_text(directory_ / "node.yaml",
             std::string("apiVersion: v1\nkind: Node\nmetadata:\n  name: ") + kNode +
                 "\n  annotations:\n    kwok.x-k8s.io/node: fake\n  labels:\n    kubernetes.io/hostname: " + kNode +
                 "\n    type: kwok\nstatus:\n  allocatable: {cpu: '32', memory: 256Gi, pods: '110'}\n"
                 "  capacity: {cpu: '32', memory: 256Gi, pods: '110'}\n");
  run_checked(kubectl("create -f " + (directory_ / "node.yaml").string() + " 2>&1"));
  wait_until([&] {
    return run_command(kubectl(std::string("get node ") + kNode +
                               " -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}{.spec.taints}'"))
               .output == "True";
  }, "node " + std::string(kNode) + " Ready without taints", [&] { return logs(); });
  pods_ = std::make_unique<PodRunner>(*admin_, kNode, directory_ / "pods", directory_ / "kubelet.crt",
                                      directory_ / "kubelet.key", kubelet_port_);
}

fs::path KubernetesCluster::add_namespace(const std::string& name) {
  run_checked(kubectl("create namespace " + name + " 2>&1"));
  run_checked(kubectl("-n " + name + " create serviceaccount notebook 2>&1"));
  write_text(directory_ / ("role-" + name + ".yaml"), notebook_role(name));
  run_checked(kubectl("create -f " + (directory_ / ("role-" + name + ".yaml")).string() + " 2>&1"));
  std::string token = run_checked(kubectl("-n " + name + " create token notebook --duration=2h"));
  while (!token.empty() && token.back() == '\n') token.pop_back();
  const fs::path account = service_account_dir(name);
  fs::create_directories(account);
  write_text(account / "token", token);
  fs::copy_file(directory_ / "ca.crt", account / "ca.crt");
  write_text(account / "namespace", name);
  const fs::path kubeconfig = directory_ / ("notebook-" + name + ".kubeconfig");
  write_kubeconfig(kubeconfig, server(), directory_ / "ca.crt", token, name);
  // The `default` service account, which the controller-manager makes, is what the job's pods run as.
  wait_until([&] { return run_command(kubectl("-n " + name + " get serviceaccount default")).exit_code == 0; },
             "the default service account of " + name, [&] { return logs(); });
  return kubeconfig;
}

fs::path KubernetesCluster::service_account_dir(const std::string& name_space) const {
  return directory_ / ("serviceaccount-" + name_space);
}

}  // namespace tp::testing
