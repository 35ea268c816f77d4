#include "k8s/jobs.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "common/error.h"
#include "common/url.h"

namespace tp::k8s {
namespace {

constexpr const char* kManagedBy = "app.kubernetes.io/managed-by=trainpoint";
constexpr const char* kContainer = "pytorch";  // the PyTorchJob's container (manifest.cpp)
constexpr const char* kJobNameLabel = "training.kubeflow.org/job-name";
constexpr const char* kReplicaTypeLabel = "training.kubeflow.org/replica-type";
constexpr const char* kReplicaIndexLabel = "training.kubeflow.org/replica-index";

std::string text(const nlohmann::json& object, const nlohmann::json::json_pointer& pointer) {
  if (!object.contains(pointer)) return "";
  const nlohmann::json& value = object.at(pointer);
  return value.is_string() ? value.get<std::string>() : value.dump();
}

std::string text(const nlohmann::json& object, const std::string& pointer) {
  return text(object, nlohmann::json::json_pointer(pointer));
}

// A core (v1) collection of the connection's namespace: pods, events, secrets.
std::string core_path(const Api& api, const std::string& resource) {
  return "/api/v1/namespaces/" + api.connection().name_space + "/" + resource;
}

// Api::find of a job path of `kind`. PyTorchJobs are what trainpoint submits by default; TrainJobs may be out of
// reach (nullopt): Trainer's CRD absent (404) or the account without access to them (403).
std::optional<nlohmann::json> find_of_kind(Api& api, Kind kind, const std::string& path) {
  try {
    return api.find(path);
  } catch (const Error&) {
    if (kind == Kind::pytorchjob) throw;
    return std::nullopt;
  }
}

std::vector<Condition> conditions_of(const nlohmann::json& job) {
  std::vector<Condition> conditions;
  if (!job.contains("status") || !job["status"].contains("conditions")) return conditions;
  for (const nlohmann::json& item : job["status"]["conditions"]) {
    conditions.push_back({text(item, "/type"), text(item, "/status"), text(item, "/reason"), text(item, "/message"),
                          text(item, "/lastTransitionTime")});
  }
  return conditions;
}

std::string phase_of(const std::vector<Condition>& conditions) {
  std::string phase = "Pending";
  for (const Condition& condition : conditions) {
    if (condition.status == "True") phase = condition.type;
  }
  return phase;
}

// The pod template's TRAINPOINT_* variables: what the job trains.
void read_source(const nlohmann::json& job, JobState& state) {
  const nlohmann::json::json_pointer containers("/spec/pytorchReplicaSpecs/Master/template/spec/containers");
  const nlohmann::json::json_pointer trainer_env("/spec/trainer/env");
  nlohmann::json env = nlohmann::json::array();
  if (job.contains(containers) && !job.at(containers).empty()) env = job.at(containers)[0].value("env", env);
  if (job.contains(trainer_env)) env = job.at(trainer_env);
  for (const nlohmann::json& variable : env) {
    const std::string name = variable.value("name", "");
    const std::string value = variable.value("value", "");
    if (name == "TRAINPOINT_SPEC") state.spec = value;
    if (name == "TRAINPOINT_REPO") state.repo = value;
    if (name == "TRAINPOINT_REF") state.ref = value;
  }
}

PodState pod_state(const nlohmann::json& pod) {
  PodState state;
  state.name = text(pod, "/metadata/name");
  const nlohmann::json labels = pod["metadata"].value("labels", nlohmann::json::object());
  const std::string type = labels.value(kReplicaTypeLabel, "");
  const std::string index = labels.value(kReplicaIndexLabel, "");
  state.node_rank = (type == "master" ? 0 : 1) + (index.empty() ? 0 : std::stoi(index));
  state.phase = text(pod, "/status/phase");
  state.deleting = pod["metadata"].contains("deletionTimestamp");
  if (!pod.contains("status")) return state;
  for (const nlohmann::json& condition : pod["status"].value("conditions", nlohmann::json::array())) {
    if (condition.value("type", "") == "PodScheduled" && condition.value("status", "") == "False") {
      state.waiting = condition.value("reason", "") + ": " + condition.value("message", "");
    }
  }
  if (!pod["status"].contains("containerStatuses")) return state;
  for (const nlohmann::json& container : pod["status"]["containerStatuses"]) {
    if (container.value("name", "") != kContainer) continue;
    state.restarts = container.value("restartCount", 0);
    if (container.contains("state") && container["state"].contains("waiting")) {
      const nlohmann::json& waiting = container["state"]["waiting"];
      const std::string message = waiting.value("message", "");
      if (waiting.value("reason", "") != "ContainerCreating") {
        state.waiting = waiting.value("reason", "") + (message.empty() ? "" : ": " + message);
      }
    }
    for (const char* which : {"lastState", "state"}) {
      if (container.contains(which) && container[which].contains("terminated")) {
        state.exit_code = container[which]["terminated"].value("exitCode", 0);
        state.reason = container[which]["terminated"].value("reason", "");
      }
    }
  }
  return state;
}

std::vector<PodState> pods_of(Api& api, const std::string& job) {
  const nlohmann::json list =
      api.get(core_path(api, "pods") + "?labelSelector=" + percent_encode(std::string(kJobNameLabel) + "=" + job, false));
  std::vector<PodState> pods;
  for (const nlohmann::json& pod : list["items"]) pods.push_back(pod_state(pod));
  std::sort(pods.begin(), pods.end(), [](const PodState& a, const PodState& b) { return a.node_rank < b.node_rank; });
  return pods;
}

std::vector<Event> events_of(Api& api, const std::string& job, Kind kind) {
  const nlohmann::json list =
      api.get(core_path(api, "events") + "?fieldSelector=" +
              percent_encode("involvedObject.name=" + job + ",involvedObject.kind=" + kind_name(kind), false));
  std::vector<Event> events;
  for (const nlohmann::json& item : list["items"]) {
    const std::string time = text(item, "/lastTimestamp").empty() ? text(item, "/eventTime") : text(item, "/lastTimestamp");
    events.push_back({time, text(item, "/type"), text(item, "/reason"), text(item, "/message"), item.value("count", 1)});
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.time < b.time; });
  return events;
}

// Creating pods and services is what every job does; the rest is worth a line.
bool routine(const Event& event) {
  return event.type == "Normal" && (event.reason == "SuccessfulCreatePod" || event.reason == "SuccessfulCreateService" ||
                                    event.reason == "SuccessfulDeletePod" || event.reason == "SuccessfulDeleteService");
}

JobState state_of(const nlohmann::json& job, Kind kind) {
  JobState state;
  state.kind = kind;
  state.name = text(job, "/metadata/name");
  state.name_space = text(job, "/metadata/namespace");
  state.created = text(job, "/metadata/creationTimestamp");
  state.conditions = conditions_of(job);
  state.phase = phase_of(state.conditions);
  read_source(job, state);
  const nlohmann::json::json_pointer queue("/metadata/labels/kueue.x-k8s.io~1queue-name");
  if (job.contains(queue) && job.at(queue).is_string()) state.queue = job.at(queue).get<std::string>();
  const nlohmann::json::json_pointer suspend(kind == Kind::pytorchjob ? "/spec/runPolicy/suspend" : "/spec/suspend");
  state.suspended = job.contains(suspend) && job.at(suspend).is_boolean() && job.at(suspend).get<bool>();
  state.output = job.value("metadata", nlohmann::json::object())
                     .value("annotations", nlohmann::json::object())
                     .value(kOutputAnnotation, "");
  return state;
}

}  // namespace

const char* kind_name(Kind kind) { return kind == Kind::pytorchjob ? "PyTorchJob" : "TrainJob"; }

std::string jobs_path(Kind kind, const std::string& name_space) {
  return kind == Kind::pytorchjob ? "/apis/kubeflow.org/v1/namespaces/" + name_space + "/pytorchjobs"
                                  : "/apis/trainer.kubeflow.org/v1alpha1/namespaces/" + name_space + "/trainjobs";
}

Submitted submit(Api& api, Kind kind, const std::string& manifest, bool dry_run) {
  const std::string& name_space = api.connection().name_space;
  // Strict: a field the server does not know (a CRD of another version) is refused, not silently dropped.
  const nlohmann::json created = api.create(
      jobs_path(kind, name_space) + "?fieldValidation=Strict" + (dry_run ? "&dryRun=All" : ""), manifest,
      "application/yaml");
  return {kind, text(created, "/metadata/name"), name_space, dry_run};
}

void require_secret(Api& api, const std::string& name) {
  std::optional<nlohmann::json> secret;
  try {
    secret = api.find(core_path(api, "secrets/" + name));
  } catch (const Error&) {
    return;  // not allowed to look (403): the pods will tell
  }
  if (!secret) {
    fail(ExitCode::usage, "Secret {} (k8s.secret, --secret) is not in namespace {}: the pods would start without its "
         "S3 and git credentials; create it, or name the one that holds them", name, api.connection().name_space);
  }
}

std::optional<JobState> job_state(Api& api, const std::string& name) {
  for (Kind kind : {Kind::pytorchjob, Kind::trainjob}) {
    const std::optional<nlohmann::json> job =
        find_of_kind(api, kind, jobs_path(kind, api.connection().name_space) + "/" + name);
    if (!job) continue;
    JobState state = state_of(*job, kind);
    if (kind == Kind::pytorchjob) state.pods = pods_of(api, name);
    state.events = events_of(api, name, kind);
    return state;
  }
  return std::nullopt;
}

std::vector<JobState> list_jobs(Api& api) {
  std::vector<JobState> jobs;
  for (Kind kind : {Kind::pytorchjob, Kind::trainjob}) {
    const std::optional<nlohmann::json> list = find_of_kind(
        api, kind, jobs_path(kind, api.connection().name_space) + "?labelSelector=" + percent_encode(kManagedBy, false));
    if (!list) continue;
    for (const nlohmann::json& job : (*list)["items"]) jobs.push_back(state_of(job, kind));
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const JobState& a, const JobState& b) { return a.created < b.created; });
  return jobs;
}

std::string newest_job(Api& api) {
  const std::vector<JobState> jobs = list_jobs(api);
  if (jobs.empty()) {
    fail(ExitCode::usage, "namespace {} has no job that trainpoint submitted: name one (trainpoint list shows them)",
         api.connection().name_space);
  }
  return jobs.back().name;
}

std::string exit_meaning(int code, const std::string& reason) {
  const std::string_view name = exit_class_name(static_cast<ExitCode>(code));
  if (name != "unknown") {
    return fmt::format("exit {} ({}: {})", code, name,
                       code == 0 ? "done" : is_retryable(static_cast<ExitCode>(code)) ? "retryable" : "permanent");
  }
  if (code > 128 && code < 160) {
    return fmt::format("exit {} (killed by signal {}{})", code, code - 128, reason.empty() ? "" : ": " + reason);
  }
  return fmt::format("exit {} ({}{})", code, code >= 128 ? "retryable" : "permanent",
                     reason.empty() ? "" : ", " + reason);
}

std::string describe(const JobState& job) {
  std::string out = fmt::format("{} {}/{}: {}\n", kind_name(job.kind), job.name_space, job.name, job.phase);
  if (!job.repo.empty()) out += fmt::format("  trains {} of {} at {}\n", job.spec, job.repo, job.ref);
  if (!job.output.empty()) out += fmt::format("  outputs in {} (model.pt, report.html, metrics.jsonl)\n", job.output);
  if (!job.progress.empty()) out += fmt::format("  progress (rank 0's log): {}\n", job.progress);
  if (job.suspended) {
    out += job.queue.empty() ? "  suspended: no pods run until it is resumed\n"
                             : fmt::format("  suspended in Kueue's queue {}: its pods start when the queue admits it\n",
                                           job.queue);
  }
  for (const Condition& condition : job.conditions) {
    out += fmt::format("  {} {} {}{}\n", condition.since, condition.type, condition.status,
                       condition.message.empty() ? "" : ": " + condition.message);
  }
  for (const PodState& pod : job.pods) {
    out += fmt::format("  rank {} pod {}: {}{}", pod.node_rank, pod.name, pod.deleting ? "Terminating" : pod.phase,
                       pod.restarts > 0 ? fmt::format(", {} restart(s)", pod.restarts) : "");
    if (pod.exit_code) out += ", last " + exit_meaning(*pod.exit_code, pod.reason);
    if (!pod.waiting.empty()) out += " (" + pod.waiting + ")";
    out += "\n";
  }
  for (const Event& event : job.events) {
    if (routine(event)) continue;
    out += fmt::format("  {} {} {}{}: {}\n", event.time, event.type, event.reason,
                       event.count > 1 ? fmt::format(" (x{})", event.count) : "", event.message);
  }
  return out;
}

const PodState& pod_of_rank(const JobState& job, int rank) {
  for (const PodState& pod : job.pods) {
    if (pod.node_rank == rank) return pod;
  }
  fail(ExitCode::usage, "{} has no pod of node rank {} (it has {} pod(s){})", job.name, rank, job.pods.size(),
       job.pods.empty() ? ": not created yet, or already deleted" : "");
}

void pod_log(Api& api, const std::string& pod, bool follow, bool previous,
             const std::function<bool(std::string_view)>& sink) {
  std::string path = core_path(api, "pods/" + pod + "/log?container=" + kContainer);
  if (follow) path += "&follow=true";
  if (previous) path += "&previous=true";
  api.stream(path, sink);
}

void read_progress(Api& api, JobState& job) {
  const auto rank0 = std::find_if(job.pods.begin(), job.pods.end(), [](const PodState& pod) {
    return pod.node_rank == 0 && pod.phase != "Pending";
  });
  if (rank0 == job.pods.end()) return;
  std::string tail;
  try {
    api.stream(core_path(api, "pods/" + rank0->name + "/log?container=" + kContainer + "&tailLines=200"),
               [&](std::string_view bytes) {
                 tail.append(bytes);
                 return true;
               });
  } catch (const Error&) {
    return;  // the container is gone or not started: status shows the rest
  }
  static const std::regex epoch_line(R"((epoch [0-9]+/[0-9]+: [^\n]*))");
  for (std::sregex_iterator it(tail.begin(), tail.end(), epoch_line), end; it != end; ++it) job.progress = (*it)[1];
}

bool cancel(Api& api, Kind kind, const std::string& name) {
  // Background: the job goes now, its pods after their grace period (Foreground would keep the job listed).
  const nlohmann::json options = {{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Background"}};
  return api.remove(jobs_path(kind, api.connection().name_space) + "/" + name, options).has_value();
}

}  // namespace tp::k8s
