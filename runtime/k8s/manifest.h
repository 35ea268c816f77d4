// Kubernetes manifests that run trainpoint: a Kubeflow PyTorchJob (kubeflow.org/v1, training-operator
// v1.9) or a Kubeflow Trainer v2.2 TrainJob (trainer.kubeflow.org/v1alpha1), so that users get a correct
// job without writing YAML. Secrets are referenced (a Secret's name, Vault paths), never embedded.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace tp::k8s {

enum class Kind { pytorchjob, trainjob };

struct JobRequest {
  Kind kind = Kind::pytorchjob;
  std::string name;        // DNS-1035 label: the job's (and its pods') name
  std::string name_space;  // empty: the namespace kubectl uses
  std::string image;
  int workers = 1;          // pods, one per node
  int gpus_per_worker = 0;  // 0: CPU only
  int nproc_per_node = 1;   // processes per pod: the GPUs, or the spec's dist.nproc_per_node on CPU
  std::string cpu;          // Kubernetes quantity, requested and limited; empty: none
  std::string memory;       // Kubernetes quantity, requested and limited; empty: none
  std::string shm_size;     // sizeLimit of the memory-backed /dev/shm; empty: none
  std::string scratch;    // node directory (hostPath) for caches kept across pods; empty: a per-pod emptyDir
  int backoff_limit = 3;  // restarts of retryable failures before the job fails
  // Seconds between SIGTERM and SIGKILL for a pod (terminationGracePeriodSeconds, k8s.grace_s): the time
  // trainpoint has to write its stop checkpoint. PyTorchJob only: Trainer v2.2's runtimePatches cannot set it.
  int grace_s = 60;
  // The port the pods serve Prometheus metrics on (job.metrics_port in the job), announced with the
  // prometheus.io scrape annotations; 0: none.
  int metrics_port = 0;

  // The container's arguments after `trainpoint`: `run` (what the variables below configure), or `predict` and
  // its options for a prediction job.
  std::vector<std::string> arguments{"run"};
  // What trainpoint runs, passed as TRAINPOINT_* environment variables.
  std::string repo;
  std::string ref;
  std::string spec;
  std::vector<std::string> overrides;  // TRAINPOINT_SET
  std::string output;                  // job.output, announced on the job for `trainpoint status`

  std::string secret;  // a Secret whose keys become environment variables (envFrom)
  std::string vault_role;
  std::string vault_tenant;  // the MinIO tenant: the agent writes /vault/secrets/minio-<tenant>
  std::string vault_path;    // the Vault path holding accessKeyId and secretAccessKey

  // Placement (the k8s settings of the same names, docs/spec.md).
  std::map<std::string, std::string> node_selector;
  std::vector<std::string> tolerations;  // kubectl taint's words: KEY[=VALUE][:EFFECT]
  std::string queue;                     // Kueue LocalQueue: labelled, and created suspended for Kueue to start
  std::string priority_class;            // PyTorchJob only
  int active_deadline_s = 0;             // 0: none
  int ttl_s = 0;                         // ttlSecondsAfterFinished, PyTorchJob only; 0: none
  std::string service_account;
  std::string image_pull_secret;
  std::map<std::string, std::string> volumes;  // PersistentVolumeClaim name -> mount path
};

// Throws tp::Error (ExitCode::usage) naming the setting that is missing or malformed.
void validate(const JobRequest& request);

// The manifest as YAML. Validates first.
std::string render(const JobRequest& request);

// The job's annotation naming where its outputs go (job.output): model, report, metrics, checkpoints.
constexpr const char* kOutputAnnotation = "trainpoint.io/output";

// Where the pod keeps checkouts and caches, and the git mirror cache within it.
constexpr const char* kScratchMount = "/scratch";

}  // namespace tp::k8s
