#include "k8s/pod_runner.h"

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/base64.h"
#include "common/child_process.h"
#include "common/url.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;

namespace tp::testing {

struct PodRunner::Process {
  std::string uid;
  std::string name;
  std::string name_space;
  std::string container;
  fs::path log;
  pid_t pid = -1;                // -1: not started (waiting for a service) or already reaped
  std::optional<int> exit_code;  // set once it ended
  bool reported = false;         // its end is in the pod's status
  std::string started_at;
  std::string finished_at;
  std::chrono::steady_clock::time_point kill_at{};  // SIGKILL after SIGTERM's grace; zero: not stopping
  fs::path hosts;                                   // the pod's /etc/hosts
  int sequence = 0;                                 // the order of starts: the newest of a pod name is its log
};

namespace {

std::string now_rfc3339() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

// $(NAME) references to variables defined before, as the kubelet expands them; $$ is a literal $.
std::string expand(const std::string& value, const std::map<std::string, std::string>& defined) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value.compare(i, 2, "$$") == 0) {
      out += '$';
      ++i;
      continue;
    }
    const std::size_t close = value.find(')', i);
    if (value.compare(i, 2, "$(") == 0 && close != std::string::npos) {
      const auto found = defined.find(value.substr(i + 2, close - i - 2));
      if (found != defined.end()) {
        out += found->second;
        i = close;
        continue;
      }
    }
    out += value[i];
  }
  return out;
}

std::string field_of(const nlohmann::json& pod, const std::string& path) {
  if (path == "metadata.name") return pod["metadata"]["name"];
  if (path == "metadata.namespace") return pod["metadata"]["namespace"];
  if (path == "metadata.uid") return pod["metadata"]["uid"];
  if (path == "spec.nodeName") return pod["spec"]["nodeName"];
  if (path == "spec.serviceAccountName") return pod["spec"].value("serviceAccountName", "default");
  if (path == "status.podIP" || path == "status.hostIP") return "127.0.0.1";
  throw std::runtime_error("pod runner: fieldRef " + path + " is not supported");
}

}  // namespace

PodRunner::PodRunner(const k8s::Api& admin, std::string node, fs::path directory, const fs::path& certificate,
                     const fs::path& key, int kubelet_port)
    : api_(std::make_unique<k8s::Api>(admin.connection())), node_(std::move(node)), directory_(std::move(directory)) {
  fs::create_directories(directory_);
  serve_logs(certificate, key, kubelet_port);
  thread_ = std::thread([this] { loop(); });
}

PodRunner::~PodRunner() {
  stopping_ = true;
  thread_.join();
  server_->stop();
  server_thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [uid, process] : processes_) {
    if (process->pid > 0 && !process->exit_code) {
      ::kill(-process->pid, SIGKILL);
      ::waitpid(process->pid, nullptr, 0);
    }
  }
}

int PodRunner::starts(const std::string& pod) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = starts_.find(pod);
  return found == starts_.end() ? 0 : found->second;
}

bool PodRunner::signal(const std::string& pod, int signal) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [uid, process] : processes_) {
    if (process->name == pod && process->pid > 0 && !process->exit_code) return ::kill(-process->pid, signal) == 0;
  }
  return false;
}

std::string PodRunner::log(const std::string& pod) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::shared_ptr<Process> newest = newest_process(pod, "");
  return newest ? read_text(newest->log) : "";
}

std::shared_ptr<PodRunner::Process> PodRunner::newest_process(const std::string& pod,
                                                              const std::string& name_space) const {
  std::shared_ptr<Process> newest;
  for (const auto& [uid, process] : processes_) {
    const bool match = process->name == pod && (name_space.empty() || process->name_space == name_space);
    if (match && (!newest || process->sequence > newest->sequence)) newest = process;
  }
  return newest;
}

std::string PodRunner::summary() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string text;
  for (const auto& [uid, process] : processes_) {
    const std::string log = read_text(process->log);
    text += "--- pod " + process->name_space + "/" + process->name + " " + uid + ": " +
            (process->exit_code ? "exit " + std::to_string(*process->exit_code) : "running") + "\n" +
            log.substr(log.size() > 2500 ? log.size() - 2500 : 0);
  }
  return text;
}

// /etc/hosts of a pod: the namespace's services on loopback, as cluster DNS resolves them to their pods.
std::string PodRunner::hosts_file(const std::string& pod, const std::string& name_space) {
  std::string hosts = "127.0.0.1 localhost " + pod + "\n";
  const nlohmann::json services = api_->get("/api/v1/namespaces/" + name_space + "/services");
  for (const nlohmann::json& service : services["items"]) {
    const std::string name = service["metadata"]["name"];
    const std::string full = name + "." + name_space;
    hosts += "127.0.0.1 " + name + " " + full + " " + full + ".svc " + full + ".svc.cluster.local\n";
  }
  return hosts;
}

// DNS answers with the services of now, not of the pod's start: each running pod's /etc/hosts is rewritten in
// place (the same file, which its mount namespace has bound) when the services change.
void PodRunner::update_hosts() {
  std::vector<std::shared_ptr<Process>> running;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [uid, process] : processes_) {
      if (process->pid > 0 && !process->exit_code) running.push_back(process);
    }
  }
  for (const auto& process : running) {
    const std::string hosts = hosts_file(process->name, process->name_space);
    if (read_text(process->hosts) == hosts) continue;
    std::ofstream out(process->hosts, std::ios::trunc);
    out << hosts;
  }
}

void PodRunner::loop() {
  while (!stopping_) {
    try {
      step();
    } catch (const std::exception& error) {
      // The API server may be briefly unavailable; the next step tries again.
      std::ofstream(directory_ / "runner-errors.log", std::ios::app) << error.what() << "\n";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void PodRunner::step() {
  const nlohmann::json pods = api_->get("/api/v1/pods?fieldSelector=" + percent_encode("spec.nodeName=" + node_, false));
  std::map<std::string, bool> present;
  for (const nlohmann::json& pod : pods["items"]) {
    const std::string uid = pod["metadata"]["uid"];
    present[uid] = true;
    std::shared_ptr<Process> process;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (processes_.count(uid)) process = processes_[uid];
    }
    const bool deleting = pod["metadata"].contains("deletionTimestamp");
    const std::string phase = pod["status"].value("phase", "");
    if (!process && !deleting && phase != "Succeeded" && phase != "Failed") {
      start(pod);
      continue;
    }
    if (process && process->pid > 0 && !process->exit_code) {
      int status = 0;
      if (::waitpid(process->pid, &status, WNOHANG) == process->pid) {
        std::lock_guard<std::mutex> lock(mutex_);
        process->exit_code = exit_code_of(status);
        process->finished_at = now_rfc3339();
      }
    }
    if (process && process->exit_code && !process->reported && !deleting) report(*process);
    if (!deleting) continue;
    // Deleted: SIGTERM, SIGKILL after the grace period, and once nothing runs, the pod removed as a kubelet does.
    const bool running = process && process->pid > 0 && !process->exit_code;
    if (running && process->kill_at == std::chrono::steady_clock::time_point{}) {
      const int grace = pod["metadata"].value("deletionGracePeriodSeconds", 30);
      process->kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(grace);
      ::kill(-process->pid, SIGTERM);
    } else if (running && std::chrono::steady_clock::now() > process->kill_at) {
      ::kill(-process->pid, SIGKILL);
    } else if (!running) {
      const nlohmann::json options = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"gracePeriodSeconds", 0},
                                      {"preconditions", {{"uid", uid}}}};
      api_->remove("/api/v1/namespaces/" + pod["metadata"]["namespace"].get<std::string>() + "/pods/" +
                       pod["metadata"]["name"].get<std::string>(),
                   options);
    }
  }
  update_hosts();
  // A pod removed without grace (force deletion): its process goes too.
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [uid, process] : processes_) {
    if (!present.count(uid) && process->pid > 0 && !process->exit_code) ::kill(-process->pid, SIGKILL);
  }
}

// The container's environment as the kubelet gives it; nullopt, or a reason to wait (a service not there yet).
std::optional<std::string> PodRunner::resolve_environment(const nlohmann::json& pod,
                                                          std::vector<std::string>& environment) {
  const std::string name_space = pod["metadata"]["namespace"];
  const nlohmann::json& container = pod["spec"]["containers"][0];
  std::map<std::string, std::string> defined{{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
                                             {"HOME", "/root"},
                                             {"HOSTNAME", pod["metadata"]["name"]}};
  const auto secret_data = [&](const std::string& secret) {
    return api_->get("/api/v1/namespaces/" + name_space + "/secrets/" + secret).value("data", nlohmann::json::object());
  };
  for (const nlohmann::json& source : container.value("envFrom", nlohmann::json::array())) {
    if (!source.contains("secretRef")) continue;
    for (const auto& [key, value] : secret_data(source["secretRef"]["name"]).items()) {
      defined[key] = base64_decode(value.get<std::string>());
    }
  }
  for (const nlohmann::json& variable : container.value("env", nlohmann::json::array())) {
    const std::string name = variable["name"];
    if (variable.contains("value")) {
      defined[name] = expand(variable["value"], defined);
    } else if (variable.contains("valueFrom") && variable["valueFrom"].contains("fieldRef")) {
      defined[name] = field_of(pod, variable["valueFrom"]["fieldRef"]["fieldPath"]);
    } else if (variable.contains("valueFrom") && variable["valueFrom"].contains("secretKeyRef")) {
      const nlohmann::json& reference = variable["valueFrom"]["secretKeyRef"];
      const nlohmann::json data = secret_data(reference["name"]);
      if (data.contains(reference["key"].get<std::string>())) {
        defined[name] = base64_decode(data[reference["key"].get<std::string>()].get<std::string>());
      }
    }
  }
  // The operator's init container waits until the master's service name resolves.
  const auto master = defined.find("MASTER_ADDR");
  if (pod["spec"].contains("initContainers") && master != defined.end() &&
      !api_->find("/api/v1/namespaces/" + name_space + "/services/" + master->second)) {
    return "waiting for service " + master->second;
  }
  for (const auto& [name, value] : defined) environment.push_back(name + "=" + value);
  return std::nullopt;
}

void PodRunner::start(const nlohmann::json& pod) {
  std::vector<std::string> environment;
  if (resolve_environment(pod, environment)) return;  // tried again at the next step
  auto process = std::make_shared<Process>();
  process->uid = pod["metadata"]["uid"];
  process->name = pod["metadata"]["name"];
  process->name_space = pod["metadata"]["namespace"];
  const nlohmann::json& container = pod["spec"]["containers"][0];
  process->container = container["name"];
  const fs::path pod_dir = directory_ / (process->name_space + "_" + process->name + "_" + process->uid);
  fs::create_directories(pod_dir);
  process->log = pod_dir / (process->container + ".log");

  process->hosts = pod_dir / "hosts";
  write_text(process->hosts, hosts_file(process->name, process->name_space));
  // The pod's own name as its host name (its own UTS namespace), in its /etc/hosts, as a kubelet gives it.
  std::string mounts = "hostname " + shell_quote(process->name) + " && mount --bind " +
                       shell_quote((pod_dir / "hosts").string()) + " /etc/hosts";
  std::map<std::string, fs::path> volumes;
  for (const nlohmann::json& volume : pod["spec"].value("volumes", nlohmann::json::array())) {
    if (volume.contains("hostPath")) volumes[volume["name"]] = volume["hostPath"]["path"].get<std::string>();
    const bool in_memory = volume.contains("emptyDir") && volume["emptyDir"].value("medium", "") == "Memory";
    if (volume.contains("emptyDir") && !in_memory) volumes[volume["name"]] = pod_dir / volume["name"].get<std::string>();
  }
  for (const nlohmann::json& mount : container.value("volumeMounts", nlohmann::json::array())) {
    const auto found = volumes.find(mount["name"]);
    if (found == volumes.end()) continue;  // /dev/shm in memory, the API token: the host's own
    fs::create_directories(found->second);
    // The mount point exists on the host too (an empty directory): a mount namespace shares the filesystem.
    fs::create_directories(mount["mountPath"].get<std::string>());
    mounts += " && mount --bind " + shell_quote(found->second.string()) + " " + shell_quote(mount["mountPath"]);
  }

  std::vector<std::string> words{"unshare", "--mount", "--uts", "--propagation", "private", "/bin/sh", "-c", mounts + " && exec \"$@\"",
                                 "sh"};
  std::vector<std::string> command = container.value("command", std::vector<std::string>{"trainpoint"});
  if (!command.empty() && command[0] == "trainpoint") command[0] = trainpoint_binary();
  words.insert(words.end(), command.begin(), command.end());
  for (const std::string& argument : container.value("args", std::vector<std::string>{})) words.push_back(argument);

  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& variable : environment) envp.push_back(variable.data());
  envp.push_back(nullptr);
  const int output = ::open(process->log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const std::string working_directory = pod_dir.string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed without its destructors leaves no pod running
    ::dup2(output, 1);
    ::dup2(output, 2);
    if (::chdir(working_directory.c_str()) != 0) ::_exit(127);
    ::execve("/usr/bin/unshare", argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(output);
  process->pid = pid;
  process->started_at = now_rfc3339();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    process->sequence = static_cast<int>(processes_.size());
    processes_[process->uid] = process;
    ++starts_[process->name];
  }
  nlohmann::json init_statuses = nlohmann::json::array();
  for (const nlohmann::json& init : pod["spec"].value("initContainers", nlohmann::json::array())) {
    init_statuses.push_back({{"name", init["name"]}, {"image", init["image"]}, {"imageID", ""}, {"ready", true},
                             {"restartCount", 0},
                             {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"},
                                                        {"startedAt", process->started_at},
                                                        {"finishedAt", process->started_at}}}}}});
  }
  const nlohmann::json conditions = nlohmann::json::array(
      {{{"type", "PodScheduled"}, {"status", "True"}}, {{"type", "Initialized"}, {"status", "True"}},
       {{"type", "ContainersReady"}, {"status", "True"}}, {{"type", "Ready"}, {"status", "True"}}});
  api_->merge_patch(
      "/api/v1/namespaces/" + process->name_space + "/pods/" + process->name + "/status",
      {{"status",
        {{"phase", "Running"}, {"hostIP", "127.0.0.1"}, {"podIP", "127.0.0.1"},
         {"podIPs", nlohmann::json::array({{{"ip", "127.0.0.1"}}})}, {"startTime", process->started_at},
         {"conditions", conditions}, {"initContainerStatuses", init_statuses},
         {"containerStatuses",
          nlohmann::json::array({{{"name", process->container}, {"image", container["image"]}, {"imageID", ""},
                                  {"ready", true}, {"started", true}, {"restartCount", 0},
                                  {"state", {{"running", {{"startedAt", process->started_at}}}}}}})}}}});
}

void PodRunner::report(Process& process) {
  const int code = *process.exit_code;
  const nlohmann::json terminated = {{"exitCode", code}, {"reason", code == 0 ? "Completed" : "Error"},
                                     {"startedAt", process.started_at}, {"finishedAt", process.finished_at}};
  const nlohmann::json conditions = nlohmann::json::array(
      {{{"type", "PodScheduled"}, {"status", "True"}}, {{"type", "Initialized"}, {"status", "True"}},
       {{"type", "ContainersReady"}, {"status", "False"}}, {{"type", "Ready"}, {"status", "False"}}});
  api_->merge_patch("/api/v1/namespaces/" + process.name_space + "/pods/" + process.name + "/status",
                    {{"status",
                      {{"phase", code == 0 ? "Succeeded" : "Failed"}, {"conditions", conditions},
                       {"containerStatuses",
                        nlohmann::json::array({{{"name", process.container}, {"image", "trainpoint"}, {"imageID", ""},
                                                {"ready", false}, {"started", false}, {"restartCount", 0},
                                                {"state", {{"terminated", terminated}}}}})}}}});
  std::lock_guard<std::mutex> lock(mutex_);
  process.reported = true;
}

void PodRunner::serve_logs(const fs::path& certificate, const fs::path& key, int port) {
  server_ = std::make_unique<httplib::SSLServer>(certificate.c_str(), key.c_str());
  server_->Get(R"(/containerLogs/([^/]+)/([^/]+)/([^/]+))", [this](const httplib::Request& request,
                                                                    httplib::Response& response) {
    const std::string name_space = request.matches[1], pod = request.matches[2];
    if (request.get_param_value("previous") == "true") {
      response.status = 400;
      response.set_content("previous terminated container \"pytorch\" in pod \"" + pod + "\" not found", "text/plain");
      return;
    }
    std::shared_ptr<Process> newest;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      newest = newest_process(pod, name_space);
    }
    if (!newest) {
      response.status = 404;
      response.set_content("pod " + pod + " has not started", "text/plain");
      return;
    }
    if (request.get_param_value("follow") != "true") {
      response.set_content(read_text(newest->log), "text/plain");
      return;
    }
    auto offset = std::make_shared<std::size_t>(0);
    // Not text/plain: cpp-httplib would gzip a text stream for the API server (which accepts gzip), holding each
    // line back until the compressor's buffer fills.
    response.set_chunked_content_provider("application/octet-stream", [this, newest, offset](std::size_t,
                                                                                            httplib::DataSink& sink) {
      while (!stopping_) {
        bool ended = false;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ended = newest->exit_code.has_value();
        }
        const std::string text = read_text(newest->log);  // after `ended`: nothing written after the end is missed
        if (text.size() > *offset) {
          sink.write(text.data() + *offset, text.size() - *offset);
          *offset = text.size();
          return true;
        }
        if (ended) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      sink.done();
      return true;
    });
  });
  if (!server_->bind_to_port("127.0.0.1", port)) throw std::runtime_error("pod runner: cannot listen on port " + std::to_string(port));
  server_thread_ = std::thread([this] { server_->listen_after_bind(); });
}

}  // namespace tp::testing
