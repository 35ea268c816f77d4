// A kubelet for the tests' kwok node (k8s/k8s_cluster.h): kwok keeps the node Ready and runs nothing, so this runs each
// pod the scheduler binds to the node as a local process, from the pod spec as the operator wrote it: the container's
// args after the trainpoint binary under test (the image's entrypoint), its env with $(VAR) references, fieldRefs,
// secretKeyRefs and envFrom resolved, its emptyDir and hostPath volumes bind-mounted at their mount paths, and the
// namespace's services resolving to 127.0.0.1 through the pod's own /etc/hosts, kept current as services come and go
// (each pod in a private mount namespace: `unshare --mount`, so the tests run as root; its own host name, the pod's, in
// a UTS namespace). Pods share the loopback: two pods of a test may not listen on one port. A pod with init containers
// (the operator's wait for the master's name) starts once MASTER_ADDR's service exists. The process's state goes back
// to the pod's status (Running, then Succeeded or Failed with the container's exit code), so the operator sees what a
// kubelet would report; a pod being deleted gets SIGTERM, SIGKILL after its grace period, and is then removed. Pod logs
// are served on the node's kubelet port (HTTPS, /containerLogs), where the API server's pods/log reads them.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "k8s/api.h"

namespace httplib {
class SSLServer;
}

namespace tp::testing {

class PodRunner {
 public:
  PodRunner(const k8s::Api& admin, std::string node, std::filesystem::path directory,
            const std::filesystem::path& certificate, const std::filesystem::path& key, int kubelet_port);
  ~PodRunner();
  PodRunner(const PodRunner&) = delete;
  PodRunner& operator=(const PodRunner&) = delete;

  // How many processes ran for pods of this name (the operator recreates a pod under the same name).
  int starts(const std::string& pod) const;
  // Sends `signal` to the running process of the pod (SIGKILL: the pod's node or memory gone); false if none runs.
  bool signal(const std::string& pod, int signal);
  // The output of the newest process of the pod.
  std::string log(const std::string& pod) const;
  // Every process so far: its pod, how it ended, the end of its output (a failed test's message).
  std::string summary() const;

 private:
  struct Process;
  void loop();
  void step();
  void start(const nlohmann::json& pod);
  void report(Process& process);
  std::string hosts_file(const std::string& pod, const std::string& name_space);
  void update_hosts();
  // The newest process of the pod (mutex_ held); any namespace when `name_space` is empty.
  std::shared_ptr<Process> newest_process(const std::string& pod, const std::string& name_space) const;
  std::optional<std::string> resolve_environment(const nlohmann::json& pod, std::vector<std::string>& environment);
  void serve_logs(const std::filesystem::path& certificate, const std::filesystem::path& key, int port);

  std::unique_ptr<k8s::Api> api_;
  std::string node_;
  std::filesystem::path directory_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Process>> processes_;  // by pod uid
  std::map<std::string, int> starts_;                           // by pod name
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread server_thread_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace tp::testing
