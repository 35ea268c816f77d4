// trainpoint's jobs on the API server, as `trainpoint submit / list / status / logs / cancel` see them: a
// rendered manifest created (or dry-run on the server), a PyTorchJob's conditions and its pods read back
// (node rank, state, restarts, the last exit translated through docs/exit-codes.md), a rank's log, and the job
// deleted with its pods. PyTorchJob fully; a TrainJob is submitted, listed, described by its conditions and
// cancelled (its pods belong to a JobSet this module does not read).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/api.h"
#include "k8s/manifest.h"

namespace tp::k8s {

// "PyTorchJob" or "TrainJob", as the API server names the kind.
const char* kind_name(Kind kind);

// The collection of `kind` in `name_space`: /apis/GROUP/VERSION/namespaces/NS/PLURAL.
std::string jobs_path(Kind kind, const std::string& name_space);

struct Submitted {
  Kind kind = Kind::pytorchjob;
  std::string name;
  std::string name_space;
  bool dry_run = false;
};

// Creates `manifest` (render()'s YAML) in the connection's namespace; with `dry_run` the server validates it
// (schemas, CEL rules, admission) and stores nothing. A refusal is a tp::Error naming the server's reason.
Submitted submit(Api& api, Kind kind, const std::string& manifest, bool dry_run);

// A tp::Error (usage) when the namespace has no Secret `name`: its keys are optional in the pod spec, so the pods
// would start without S3 or git credentials and fail later. Nothing is checked when the account may not read
// Secrets.
void require_secret(Api& api, const std::string& name);

struct Condition {
  std::string type;  // Created, Running, Restarting, Succeeded, Failed, Suspended
  std::string status;
  std::string reason;
  std::string message;
  std::string since;  // lastTransitionTime
};

// What the operator and the scheduler said about the job (kubectl describe's Events): restarts, failed pods.
struct Event {
  std::string time;
  std::string type;    // Normal, Warning
  std::string reason;  // PyTorchJobRestarting, SuccessfulCreatePod, ...
  std::string message;
  int count = 1;
};

struct PodState {
  std::string name;
  int node_rank = 0;   // master 0, worker i → i + 1
  std::string phase;   // Pending, Running, Succeeded, Failed
  // The container's restarts. A pod the operator recreated after a retryable exit starts again at 0: the
  // job's Restarting condition says that it happened.
  int restarts = 0;
  std::optional<int> exit_code;  // the container's last exit
  std::string reason;            // Completed, Error, OOMKilled...
  // Why a pod does not run yet: the scheduler's (Unschedulable: "0/3 nodes are available: ...") or the
  // container's (ErrImagePull, ImagePullBackOff...), with its message.
  std::string waiting;
  bool deleting = false;
};

struct JobState {
  Kind kind = Kind::pytorchjob;
  std::string name;
  std::string name_space;
  std::string created;
  std::string phase;  // the newest condition whose status is True; "Pending" before any
  std::vector<Condition> conditions;
  std::vector<PodState> pods;  // by node rank
  std::vector<Event> events;   // oldest first
  std::string spec;            // TRAINPOINT_SPEC of the pod template, and its repository and ref
  std::string repo;
  std::string ref;
  std::string queue;       // the Kueue LocalQueue it was submitted to (label kueue.x-k8s.io/queue-name)
  bool suspended = false;  // spec.runPolicy.suspend (PyTorchJob) or spec.suspend (TrainJob)
  std::string output;      // job.output, as render-job announced it
  std::string progress;    // rank 0's newest epoch line (read_progress), such as "epoch 3/12: train_loss ..."
};

// nullopt when the namespace has no PyTorchJob or TrainJob of that name.
std::optional<JobState> job_state(Api& api, const std::string& name);
// The namespace's jobs that trainpoint made (label app.kubernetes.io/managed-by=trainpoint), newest last.
std::vector<JobState> list_jobs(Api& api);
// The newest of list_jobs; a tp::Error (usage) when there is none.
std::string newest_job(Api& api);

// Fills job.progress from the tail of rank 0's log: its newest "epoch N/M: ..." line. Left empty when rank 0
// has not started, logs no epochs (command mode) or its log cannot be read.
void read_progress(Api& api, JobState& job);

// "exit 202 (peer lost: retryable)", "exit 3 (spec error: permanent)", "exit 137 (killed by signal 9: OOMKilled)".
std::string exit_meaning(int code, const std::string& reason = "");
// `trainpoint status`'s text: the job, its phase and conditions, one line per pod, then the events that are not
// routine (restarts, failures, warnings).
std::string describe(const JobState& job);

// The pod of node rank `rank`; a tp::Error (usage) naming the ranks there are.
const PodState& pod_of_rank(const JobState& job, int rank);
// The log of the job's container in `pod`, to `sink` as it comes; `follow` until the container ends,
// `previous` the run before the container's last restart.
void pod_log(Api& api, const std::string& pod, bool follow, bool previous,
             const std::function<bool(std::string_view)>& sink);

// Deletes the job; the garbage collector deletes its pods, each with its grace period (the time trainpoint
// has to write its stop checkpoint). False when there was no such job.
bool cancel(Api& api, Kind kind, const std::string& name);

}  // namespace tp::k8s
