#include "k8s/manifest.h"

#include <yaml-cpp/yaml.h>

#include <regex>

#include "common/error.h"

namespace tp::k8s {
namespace {

// PyTorchJob v1 requires this container name; the operator adds MASTER_ADDR, RANK and the rest to it.
constexpr const char* kPyTorchContainer = "pytorch";
// Trainer v2's torch-distributed runtime names its trainer job and container "node".
constexpr const char* kTrainJobNode = "node";
constexpr const char* kTrainJobRuntime = "torch-distributed";
// Who owns the runtime patch: Trainer requires a domain-prefixed path.
constexpr const char* kRuntimePatchManager = "trainpoint/render-job";
// Keys read from the Secret when they exist in it: git token, S3 credentials (docs/s3.md) and the webhook that
// hears of the job's end (telemetry/notify.h).
const std::vector<std::string> kSecretKeys{"TRAINPOINT_GIT_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                           "TRAINPOINT_NOTIFY_WEBHOOK"};

// Strings Kubernetes types as strings are quoted when YAML would read them as another type.
YAML::Emitter& text(YAML::Emitter& out, const std::string& value) {
  static const std::regex not_a_plain_string(R"(^([-+]?[0-9.].*|true|false|yes|no|on|off|null|~|)$)",
                                             std::regex::icase);
  if (std::regex_match(value, not_a_plain_string)) out << YAML::DoubleQuoted;
  return out << value;
}

void key_text(YAML::Emitter& out, const std::string& key, const std::string& value) {
  out << YAML::Key << key << YAML::Value;
  text(out, value);
}

void env_value(YAML::Emitter& out, const std::string& name, const std::string& value) {
  out << YAML::BeginMap;
  key_text(out, "name", name);
  key_text(out, "value", value);
  out << YAML::EndMap;
}

void environment(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::Key << "env" << YAML::Value << YAML::BeginSeq;
  env_value(out, "TRAINPOINT_REPO", request.repo);
  env_value(out, "TRAINPOINT_REF", request.ref);
  env_value(out, "TRAINPOINT_SPEC", request.spec);
  std::vector<std::string> overrides = request.overrides;
  if (request.metrics_port > 0) overrides.push_back("job.metrics_port=" + std::to_string(request.metrics_port));
  if (!overrides.empty()) {
    std::string joined;
    for (const auto& item : overrides) joined += (joined.empty() ? "" : ";") + item;
    env_value(out, "TRAINPOINT_SET", joined);
  }
  // One working directory per pod (two pods of a job may share a node and its scratch directory);
  // the git mirrors are shared by all of them.
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "POD_NAME" << YAML::Key << "valueFrom"
      << YAML::Value << YAML::BeginMap << YAML::Key << "fieldRef" << YAML::Value << YAML::BeginMap
      << YAML::Key << "fieldPath" << YAML::Value << "metadata.name" << YAML::EndMap << YAML::EndMap
      << YAML::EndMap;
  env_value(out, "TRAINPOINT_WORKDIR", std::string(kScratchMount) + "/work/$(POD_NAME)");
  env_value(out, "TRAINPOINT_GIT_CACHE", std::string(kScratchMount) + "/git-cache");
  if (!request.vault_tenant.empty()) env_value(out, "TRAINPOINT_S3_TENANT", request.vault_tenant);
  if (!request.secret.empty()) {
    for (const auto& key : kSecretKeys) {
      out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << key << YAML::Key << "valueFrom"
          << YAML::Value << YAML::BeginMap << YAML::Key << "secretKeyRef" << YAML::Value << YAML::BeginMap
          << YAML::Key << "name" << YAML::Value << request.secret << YAML::Key << "key" << YAML::Value << key
          << YAML::Key << "optional" << YAML::Value << true << YAML::EndMap << YAML::EndMap << YAML::EndMap;
    }
  }
  out << YAML::EndSeq;
}

void quantities(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::BeginMap;
  if (!request.cpu.empty()) key_text(out, "cpu", request.cpu);
  if (!request.memory.empty()) key_text(out, "memory", request.memory);
  if (request.gpus_per_worker > 0)
    out << YAML::Key << "nvidia.com/gpu" << YAML::Value << request.gpus_per_worker;
  out << YAML::EndMap;
}

bool has_resources(const JobRequest& request) {
  return !request.cpu.empty() || !request.memory.empty() || request.gpus_per_worker > 0;
}

void resources(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::BeginMap << YAML::Key << "requests" << YAML::Value;
  quantities(out, request);
  out << YAML::Key << "limits" << YAML::Value;
  quantities(out, request);
  out << YAML::EndMap;
}

// The pod's name of the k8s.volumes claim at `index` (in the claims' order).
std::string claim_volume(std::size_t index) { return "claim-" + std::to_string(index); }

void mount(YAML::Emitter& out, const std::string& name, const std::string& path) {
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << name << YAML::Key << "mountPath" << YAML::Value
      << path << YAML::EndMap;
}

void volume_mounts(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::Key << "volumeMounts" << YAML::Value << YAML::BeginSeq;
  mount(out, "dshm", "/dev/shm");
  mount(out, "scratch", kScratchMount);
  std::size_t index = 0;
  for (const auto& [claim, path] : request.volumes) mount(out, claim_volume(index++), path);
  out << YAML::EndSeq;
}

// /dev/shm in RAM (the container default of 64 MiB is too small for data loaders and NCCL), and
// the scratch directory for checkouts and caches: on the node when `scratch` is set, so that
// restarted pods find the git mirrors and staged data.
void volumes(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::Key << "volumes" << YAML::Value << YAML::BeginSeq;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "dshm" << YAML::Key << "emptyDir"
      << YAML::Value << YAML::BeginMap << YAML::Key << "medium" << YAML::Value << "Memory";
  if (!request.shm_size.empty()) key_text(out, "sizeLimit", request.shm_size);
  out << YAML::EndMap << YAML::EndMap;
  out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "scratch";
  if (request.scratch.empty()) {
    out << YAML::Key << "emptyDir" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::EndMap;
  } else {
    out << YAML::Key << "hostPath" << YAML::Value << YAML::BeginMap << YAML::Key << "path" << YAML::Value
        << request.scratch << YAML::Key << "type" << YAML::Value << "DirectoryOrCreate" << YAML::EndMap;
  }
  out << YAML::EndMap;
  std::size_t index = 0;
  for (const auto& [claim, path] : request.volumes) {
    out << YAML::BeginMap << YAML::Key << "name" << YAML::Value << claim_volume(index++) << YAML::Key
        << "persistentVolumeClaim" << YAML::Value << YAML::BeginMap << YAML::Key << "claimName" << YAML::Value
        << claim << YAML::EndMap << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

// A toleration in kubectl taint's words: KEY=VALUE:EFFECT (Equal), KEY:EFFECT or KEY (Exists); without an
// effect it tolerates every effect of the taint.
struct Toleration {
  std::string key;
  std::string value;  // empty: Exists
  std::string effect;
};

Toleration parse_toleration(const std::string& words) {
  static const std::regex form(R"(^([^=:]+)(=([^=:]*))?(:(NoSchedule|PreferNoSchedule|NoExecute))?$)");
  std::smatch match;
  if (!std::regex_match(words, match, form)) {
    fail(ExitCode::usage, "k8s.tolerations: '{}' is not KEY=VALUE:EFFECT, KEY:EFFECT or KEY (EFFECT: NoSchedule, "
         "PreferNoSchedule or NoExecute), such as \"nvidia.com/gpu:NoSchedule\"", words);
  }
  return {match[1], match[3], match[5]};
}

// Where the pods run and as whom: node selector, tolerations, service account, pull secret (both kinds).
void placement(YAML::Emitter& out, const JobRequest& request) {
  if (!request.node_selector.empty()) {
    out << YAML::Key << "nodeSelector" << YAML::Value << YAML::BeginMap;
    for (const auto& [label, value] : request.node_selector) key_text(out, label, value);
    out << YAML::EndMap;
  }
  if (!request.tolerations.empty()) {
    out << YAML::Key << "tolerations" << YAML::Value << YAML::BeginSeq;
    for (const auto& words : request.tolerations) {
      const Toleration toleration = parse_toleration(words);
      out << YAML::BeginMap;
      key_text(out, "key", toleration.key);
      out << YAML::Key << "operator" << YAML::Value << (toleration.value.empty() ? "Exists" : "Equal");
      if (!toleration.value.empty()) key_text(out, "value", toleration.value);
      if (!toleration.effect.empty()) out << YAML::Key << "effect" << YAML::Value << toleration.effect;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (!request.service_account.empty()) key_text(out, "serviceAccountName", request.service_account);
  if (!request.image_pull_secret.empty()) {
    out << YAML::Key << "imagePullSecrets" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
    key_text(out, "name", request.image_pull_secret);
    out << YAML::EndMap << YAML::EndSeq;
  }
}

// The platform's Vault agent writes the MinIO keys to /vault/secrets/minio-<tenant> as export
// lines, which trainpoint's S3 credential chain reads. Pre-populate only: a sidecar that keeps
// running would keep the pod from completing.
void vault_annotations(YAML::Emitter& out, const JobRequest& request) {
  const std::string file = "minio-" + request.vault_tenant;
  key_text(out, "vault.hashicorp.com/agent-inject", "true");
  key_text(out, "vault.hashicorp.com/agent-pre-populate-only", "true");
  key_text(out, "vault.hashicorp.com/role", request.vault_role);
  key_text(out, "vault.hashicorp.com/agent-inject-secret-" + file, request.vault_path);
  out << YAML::Key << "vault.hashicorp.com/agent-inject-template-" + file << YAML::Value << YAML::Literal
      << "{{- with secret \"" + request.vault_path +
             "\" }}\n"
             "export MINIO_ACCESS_KEY=\"{{ .Data.accessKeyId }}\"\n"
             "export MINIO_SECRET_KEY=\"{{ .Data.secretAccessKey }}\"\n"
             "{{- end }}\n";
}

// The annotations Prometheus's pod discovery is usually configured to follow (the prometheus.io/*
// relabelling of the community Helm chart): scrape this pod, on this port and path.
void scrape_annotations(YAML::Emitter& out, const JobRequest& request) {
  key_text(out, "prometheus.io/scrape", "true");
  key_text(out, "prometheus.io/port", std::to_string(request.metrics_port));
  key_text(out, "prometheus.io/path", "/metrics");
}

// The pod template's metadata, when it has annotations.
void pod_metadata(YAML::Emitter& out, const JobRequest& request) {
  if (request.vault_role.empty() && request.metrics_port == 0) return;
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "annotations" << YAML::Value << YAML::BeginMap;
  if (!request.vault_role.empty()) vault_annotations(out, request);
  if (request.metrics_port > 0) scrape_annotations(out, request);
  out << YAML::EndMap << YAML::EndMap;
}

void pod_template(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::BeginMap;
  pod_metadata(out, request);
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "terminationGracePeriodSeconds" << YAML::Value << request.grace_s;
  placement(out, request);
  if (!request.priority_class.empty()) key_text(out, "priorityClassName", request.priority_class);
  out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << kPyTorchContainer;
  out << YAML::Key << "image" << YAML::Value << request.image;
  out << YAML::Key << "args" << YAML::Value << YAML::Flow << request.arguments;
  environment(out, request);
  if (has_resources(request)) {
    out << YAML::Key << "resources" << YAML::Value;
    resources(out, request);
  }
  if (request.metrics_port > 0) {
    out << YAML::Key << "ports" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key << "name"
        << YAML::Value << "metrics" << YAML::Key << "containerPort" << YAML::Value << request.metrics_port
        << YAML::EndMap << YAML::EndSeq;
  }
  volume_mounts(out, request);
  out << YAML::EndMap << YAML::EndSeq;
  volumes(out, request);
  out << YAML::EndMap << YAML::EndMap;
}

void metadata(YAML::Emitter& out, const JobRequest& request) {
  out << YAML::Key << "metadata" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << request.name;
  if (!request.name_space.empty()) out << YAML::Key << "namespace" << YAML::Value << request.name_space;
  out << YAML::Key << "labels" << YAML::Value << YAML::BeginMap << YAML::Key << "app.kubernetes.io/managed-by"
      << YAML::Value << "trainpoint";
  if (!request.queue.empty()) key_text(out, "kueue.x-k8s.io/queue-name", request.queue);
  out << YAML::EndMap;
  if (!request.output.empty()) {
    out << YAML::Key << "annotations" << YAML::Value << YAML::BeginMap;
    key_text(out, kOutputAnnotation, request.output);
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
}

// A job for a Kueue queue is created suspended: Kueue unsuspends it once the queue admits it.
void suspend_for_queue(YAML::Emitter& out, const JobRequest& request) {
  if (!request.queue.empty()) out << YAML::Key << "suspend" << YAML::Value << true;
}

void replica(YAML::Emitter& out, const char* type, int replicas, const JobRequest& request) {
  out << YAML::Key << type << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "replicas" << YAML::Value << replicas;
  // Exit codes 1-127 are permanent (a bad spec stays bad), 128-255 retryable (docs/exit-codes.md):
  // the operator restarts the pod only for the latter.
  out << YAML::Key << "restartPolicy" << YAML::Value << "ExitCode";
  out << YAML::Key << "template" << YAML::Value;
  pod_template(out, request);
  out << YAML::EndMap;
}

std::string render_pytorchjob(const JobRequest& request) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "kubeflow.org/v1";
  out << YAML::Key << "kind" << YAML::Value << "PyTorchJob";
  metadata(out, request);
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  key_text(out, "nprocPerNode", std::to_string(request.nproc_per_node));
  // cleanPodPolicy Running: once the job has succeeded or failed, pods still running are deleted. With None, a
  // worker whose master failed for good would hold its CPUs or GPUs until dist.timeout_s.
  out << YAML::Key << "runPolicy" << YAML::Value << YAML::BeginMap << YAML::Key << "backoffLimit"
      << YAML::Value << request.backoff_limit << YAML::Key << "cleanPodPolicy" << YAML::Value << "Running";
  if (request.active_deadline_s > 0) {
    out << YAML::Key << "activeDeadlineSeconds" << YAML::Value << request.active_deadline_s;
  }
  if (request.ttl_s > 0) out << YAML::Key << "ttlSecondsAfterFinished" << YAML::Value << request.ttl_s;
  suspend_for_queue(out, request);
  out << YAML::EndMap;
  // The master is the pod of node rank 0, whose address the operator gives every pod as MASTER_ADDR.
  out << YAML::Key << "pytorchReplicaSpecs" << YAML::Value << YAML::BeginMap;
  replica(out, "Master", 1, request);
  if (request.workers > 1) replica(out, "Worker", request.workers - 1, request);
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string render_trainjob(const JobRequest& request) {
  YAML::Emitter out;
  out << YAML::Comment(
      "Trainer v2 restarts failed nodes by its runtime's failure policy; it has no per-exit-code "
      "policy like PyTorchJob's restartPolicy: ExitCode.");
  out << YAML::BeginMap;
  out << YAML::Key << "apiVersion" << YAML::Value << "trainer.kubeflow.org/v1alpha1";
  out << YAML::Key << "kind" << YAML::Value << "TrainJob";
  metadata(out, request);
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "runtimeRef" << YAML::Value << YAML::BeginMap << YAML::Key << "name" << YAML::Value
      << kTrainJobRuntime << YAML::EndMap;
  if (request.active_deadline_s > 0) {
    out << YAML::Key << "activeDeadlineSeconds" << YAML::Value << request.active_deadline_s;
  }
  suspend_for_queue(out, request);
  out << YAML::Key << "trainer" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "image" << YAML::Value << request.image;
  std::vector<std::string> command{"trainpoint"};
  command.insert(command.end(), request.arguments.begin(), request.arguments.end());
  out << YAML::Key << "command" << YAML::Value << YAML::Flow << command;
  out << YAML::Key << "numNodes" << YAML::Value << request.workers;
  out << YAML::Key << "numProcPerNode" << YAML::Value << request.nproc_per_node;
  if (has_resources(request)) {
    out << YAML::Key << "resourcesPerNode" << YAML::Value;
    resources(out, request);
  }
  environment(out, request);
  out << YAML::EndMap;
  // Trainer v2.2's runtimePatches (v2.0's podSpecOverrides and v2.1's podTemplateOverrides are gone:
  // the API server would drop them silently), down to the pod template of the runtime's "node" job.
  // A container patch may not set the node container's env (that is spec.trainer.env) nor ports, so
  // Prometheus finds the port by the annotation alone.
  out << YAML::Key << "runtimePatches" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "manager" << YAML::Value << kRuntimePatchManager;
  out << YAML::Key << "trainingRuntimeSpec" << YAML::Value << YAML::BeginMap << YAML::Key << "template"
      << YAML::Value << YAML::BeginMap << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "replicatedJobs" << YAML::Value << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << kTrainJobNode;
  out << YAML::Key << "template" << YAML::Value << YAML::BeginMap << YAML::Key << "spec" << YAML::Value
      << YAML::BeginMap << YAML::Key << "template" << YAML::Value << YAML::BeginMap;
  pod_metadata(out, request);
  out << YAML::Key << "spec" << YAML::Value << YAML::BeginMap;
  placement(out, request);
  volumes(out, request);
  out << YAML::Key << "containers" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key << "name"
      << YAML::Value << kTrainJobNode;
  volume_mounts(out, request);
  out << YAML::EndMap << YAML::EndSeq;
  out << YAML::EndMap;                                   // pod spec
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;  // pod template, job spec, job template
  out << YAML::EndMap << YAML::EndSeq;                  // the replicated job
  out << YAML::EndMap << YAML::EndMap << YAML::EndMap;  // JobSet spec, template, trainingRuntimeSpec
  out << YAML::EndMap << YAML::EndSeq;                  // the patch
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void check_quantity(const char* what, const std::string& value) {
  static const std::regex quantity(R"(^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$)");
  if (!value.empty() && !std::regex_match(value, quantity)) {
    fail(ExitCode::usage, "{} '{}' is not a Kubernetes quantity (for example 4, 500m, 16Gi)", what, value);
  }
}

}  // namespace

void validate(const JobRequest& request) {
  // Pods are named <job>-worker-<index>, which must stay a 63-character DNS label.
  static const std::regex dns_label(R"(^[a-z]([-a-z0-9]{0,48}[a-z0-9])?$)");
  if (!std::regex_match(request.name, dns_label)) {
    fail(ExitCode::usage,
         "job name '{}' cannot name Kubernetes pods: use lowercase letters, digits and '-', starting with a "
         "letter, "
         "at most 50 characters (--name or k8s.name, else job.name)",
         request.name);
  }
  if (request.image.empty()) fail(ExitCode::usage, "the image is missing: --image or k8s.image");
  if (request.repo.empty() || request.ref.empty() || request.spec.empty()) {
    fail(ExitCode::usage, "the job needs --repo, --ref and --spec: what every pod clones and runs");
  }
  if (request.workers < 1) fail(ExitCode::usage, "workers must be at least 1, not {}", request.workers);
  if (request.nproc_per_node < 1) fail(ExitCode::usage, "processes per node must be at least 1");
  if (request.metrics_port < 0 || request.metrics_port > 65535) {
    fail(ExitCode::usage, "metrics port {} is not a TCP port (1-65535, or 0 for none)", request.metrics_port);
  }
  check_quantity("cpu", request.cpu);
  check_quantity("memory", request.memory);
  check_quantity("shm size", request.shm_size);
  if (!request.scratch.empty() && request.scratch.front() != '/') {
    fail(ExitCode::usage, "scratch '{}' must be an absolute directory on the node", request.scratch);
  }
  for (const auto& words : request.tolerations) parse_toleration(words);
  for (const auto& [claim, path] : request.volumes) {
    if (path.empty() || path.front() != '/' || path == "/dev/shm" || path == kScratchMount) {
      fail(ExitCode::usage, "k8s.volumes: claim {} is mounted at '{}': give an absolute path other than /dev/shm "
           "and {} (such as \"/data\")", claim, path, kScratchMount);
    }
  }
  if (request.kind == Kind::trainjob && !request.priority_class.empty()) {
    fail(ExitCode::usage, "k8s.priority_class: a TrainJob (Trainer v2.2) cannot set its pods' priority class: its "
         "runtimePatches take no priorityClassName. Set it in the TrainingRuntime, or use k8s.kind = \"pytorchjob\"");
  }
  if (request.kind == Kind::trainjob && request.ttl_s > 0) {
    fail(ExitCode::usage, "k8s.ttl_s: a TrainJob (Trainer v2.2) has no ttlSecondsAfterFinished: delete it with "
         "`trainpoint cancel`, or use k8s.kind = \"pytorchjob\"");
  }
  const bool any_vault =
      !request.vault_role.empty() || !request.vault_tenant.empty() || !request.vault_path.empty();
  if (any_vault &&
      (request.vault_role.empty() || request.vault_tenant.empty() || request.vault_path.empty())) {
    fail(ExitCode::usage,
         "Vault credentials need all of k8s.vault_role, k8s.vault_tenant and k8s.vault_path");
  }
}

std::string render(const JobRequest& request) {
  validate(request);
  return request.kind == Kind::pytorchjob ? render_pytorchjob(request) : render_trainjob(request);
}

}  // namespace tp::k8s
