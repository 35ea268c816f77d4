#include "cluster_commands.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "common/error.h"
#include "k8s/api.h"
#include "k8s/connection.h"
#include "k8s/jobs.h"

namespace tp::cluster {
namespace {

k8s::Connection connection_for(const cli::ClusterOptions& options, const std::string& name_space) {
  k8s::ConnectOptions connect;
  connect.kubeconfig = options.kubeconfig;
  connect.context = options.context;
  connect.name_space = name_space.empty() ? options.name_space : name_space;
  return k8s::connect(connect);
}

std::string job_or_newest(k8s::Api& api, const cli::ClusterOptions& options) {
  return options.job.empty() ? k8s::newest_job(api) : options.job;
}

k8s::JobState existing_job(k8s::Api& api, const std::string& name) {
  std::optional<k8s::JobState> job = k8s::job_state(api, name);
  if (!job) {
    fail(ExitCode::usage, "namespace {} has no PyTorchJob or TrainJob named {} (trainpoint list shows its jobs)",
         api.connection().name_space, name);
  }
  return *job;
}

bool ended(const k8s::JobState& job) { return job.phase == "Succeeded" || job.phase == "Failed"; }

// Why the pod of `rank` cannot be followed yet, or "" when its container has started (or never will: the job
// ended, or it has no such rank). A TrainJob's pods are not read (k8s/jobs.h): nothing to wait for.
std::string not_started(const k8s::JobState& job, int rank) {
  if (job.kind != k8s::Kind::pytorchjob || ended(job)) return "";
  if (job.suspended) return job.name + " is suspended" + (job.queue.empty() ? "" : " in Kueue's queue " + job.queue);
  for (const k8s::PodState& pod : job.pods) {
    if (pod.node_rank != rank) continue;
    if (pod.phase != "Pending") return "";
    return "pod " + pod.name + " is Pending" + (pod.waiting.empty() ? "" : " (" + pod.waiting + ")");
  }
  // No pods yet: the operator has not made them. Pods but none of that rank: pod_of_rank names the ranks there are.
  return job.pods.empty() ? job.name + " has no pods yet" : "";
}

// `logs --follow` right after submit: the pod to follow, once its container has started. Waits as long as the
// job lives, saying each new reason once; what kubectl logs -f would refuse at once.
k8s::PodState pod_to_follow(k8s::Api& api, const std::string& name, int rank) {
  std::string said;
  for (;;) {
    const k8s::JobState job = existing_job(api, name);
    const std::string reason = not_started(job, rank);
    if (reason.empty()) return k8s::pod_of_rank(job, rank);
    if (reason != said) spdlog::info("waiting: {}", reason);
    said = reason;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

}  // namespace

int submit(const cli::ClusterOptions& options, const k8s::JobRequest& request, const std::string& manifest) {
  k8s::Api api(connection_for(options, request.name_space));
  if (!request.secret.empty()) k8s::require_secret(api, request.secret);
  const k8s::Submitted job = k8s::submit(api, request.kind, manifest, options.dry_run);
  const char* kind_name = k8s::kind_name(request.kind);
  if (job.dry_run) {
    spdlog::info("{} {}/{} passed the server's checks (dry run: nothing created)", kind_name, job.name_space, job.name);
  } else {
    spdlog::info("created {} {}/{}: follow it with `trainpoint status {}` and `trainpoint logs {} --follow`", kind_name,
                 job.name_space, job.name, job.name, job.name);
  }
  std::cout << job.name << "\n";
  return 0;
}

int list(const cli::ClusterOptions& options) {
  k8s::Api api(connection_for(options, ""));
  for (const k8s::JobState& job : k8s::list_jobs(api)) {
    std::cout << job.name << "\t" << k8s::kind_name(job.kind) << "\t"
              << job.phase << "\t" << job.created << "\n";
  }
  return 0;
}

int status(const cli::ClusterOptions& options) {
  k8s::Api api(connection_for(options, ""));
  k8s::JobState job = existing_job(api, job_or_newest(api, options));
  k8s::read_progress(api, job);
  std::cout << k8s::describe(job);
  return 0;
}

int logs(const cli::ClusterOptions& options) {
  k8s::Api api(connection_for(options, ""));
  const std::string name = job_or_newest(api, options);
  const k8s::PodState pod =
      options.follow ? pod_to_follow(api, name, options.rank) : k8s::pod_of_rank(existing_job(api, name), options.rank);
  k8s::pod_log(api, pod.name, options.follow, options.previous, [](std::string_view text) {
    std::cout.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::cout.flush();
    return true;
  });
  return 0;
}

int cancel(const cli::ClusterOptions& options) {
  k8s::Api api(connection_for(options, ""));
  const k8s::JobState job = existing_job(api, options.job);
  k8s::cancel(api, job.kind, job.name);
  spdlog::info("deleted {}/{}: its {} pod(s) stop within their grace period", job.name_space, job.name,
               job.pods.size());
  return 0;
}

}  // namespace tp::cluster
