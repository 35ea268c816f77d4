// render-job's manifests: they parse as YAML, every field is one their release's schema has (PyTorchJob of
// training-operator v1.9.0, TrainJob of Trainer v2.2.0: the field lists written by crd_fields.py from those
// releases' CRDs), the values Kubernetes types strictly are typed right, and the output matches the golden
// files.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "common/error.h"
#include "k8s/manifest.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

const fs::path kTestDir = TP_K8S_TEST_DIR;

std::string read_file(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::set<std::string> schema_fields(const std::string& list) {
  std::set<std::string> fields;
  std::istringstream in(read_file(kTestDir / list));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') fields.insert(line);
  }
  return fields;
}

// Every leaf's path, with map keys under a `*` field and list indices written as `[]`.
void collect(const YAML::Node& node, const std::string& path, const std::set<std::string>& schema,
             std::vector<std::string>& unknown) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      const std::string key = entry.first.as<std::string>();
      const std::string named = path.empty() ? key : path + "." + key;
      const std::string any = path + ".*";
      if (schema.count(any) > 0) continue;  // a free-form map: labels, annotations, quantities
      bool prefix_of_any = false;           // a map keyed by name: pytorchReplicaSpecs.<type>
      for (const auto& field : schema) prefix_of_any |= field.rfind(any + ".", 0) == 0;
      collect(entry.second, prefix_of_any ? any : named, schema, unknown);
    }
  } else if (node.IsSequence()) {
    for (const auto& element : node) collect(element, path + "[]", schema, unknown);
  } else if (schema.count(path) == 0) {
    unknown.push_back(path);
  }
}

k8s::JobRequest cpu_job() {
  k8s::JobRequest request;
  request.name = "shapes";
  request.image = "registry.example.org/trainpoint:0.1.0-cpu";
  request.workers = 2;
  request.nproc_per_node = 2;
  request.cpu = "4";
  request.memory = "8Gi";
  request.repo = "https://git.example.org/team/shapes.git";
  request.ref = "3f1c2a9";
  request.spec = "train.toml";
  request.overrides = {"train.epochs=3"};
  request.secret = "shapes-credentials";
  return request;
}

k8s::JobRequest gpu_job() {
  k8s::JobRequest request;
  request.name = "construction-starts";
  request.name_space = "team-a";
  request.image = "registry.example.org/trainpoint:0.1.0";
  request.workers = 4;
  request.gpus_per_worker = 8;
  request.nproc_per_node = 8;
  request.cpu = "62";
  request.memory = "480Gi";
  request.shm_size = "64Gi";
  request.scratch = "/mnt/local-ssd/trainpoint";
  request.repo = "https://git.example.org/team/construction-starts.git";
  request.ref = "0123456789abcdef0123456789abcdef01234567";
  request.spec = "configs/resnet.toml";
  request.vault_role = "team-a";
  request.vault_tenant = "standard";
  request.vault_path = "minio_standard/keys/profile-team-a";
  return request;
}

k8s::JobRequest trainjob() {
  k8s::JobRequest request = cpu_job();
  request.kind = k8s::Kind::trainjob;
  request.gpus_per_worker = 1;
  request.nproc_per_node = 1;
  return request;
}

void expect_golden(const std::string& name, const std::string& manifest) {
  const fs::path golden = kTestDir / "golden" / name;
  if (std::getenv("UPDATE_GOLDEN") != nullptr) std::ofstream(golden) << manifest;
  EXPECT_EQ(manifest, read_file(golden))
      << "run with UPDATE_GOLDEN=1 to accept the new output into " << golden;
}

// The rendered fields its schema does not have.
std::vector<std::string> unknown_fields(const YAML::Node& job, const std::set<std::string>& schema) {
  std::vector<std::string> unknown;
  collect(job, "", schema, unknown);
  return unknown;
}

TEST(Manifest, PyTorchJobHasOnlySchemaFieldsAndStrictTypes) {
  const auto schema = schema_fields("pytorchjob-v1.9.0-fields.txt");
  for (const auto& request : {cpu_job(), gpu_job()}) {
    const YAML::Node job = YAML::Load(k8s::render(request));
    const std::vector<std::string> unknown = unknown_fields(job, schema);
    EXPECT_TRUE(unknown.empty()) << "not in the PyTorchJob schema of training-operator v1.9.0: " << unknown.front();

    EXPECT_EQ(job["apiVersion"].as<std::string>(), "kubeflow.org/v1");
    EXPECT_EQ(job["kind"].as<std::string>(), "PyTorchJob");
    // nprocPerNode is a string in the CRD: "8", never 8.
    EXPECT_EQ(job["spec"]["nprocPerNode"].Tag(), "!");
    EXPECT_EQ(job["spec"]["nprocPerNode"].as<std::string>(), std::to_string(request.nproc_per_node));
    const YAML::Node replicas = job["spec"]["pytorchReplicaSpecs"];
    EXPECT_EQ(replicas["Master"]["replicas"].as<int>(), 1);
    EXPECT_EQ(replicas["Worker"]["replicas"].as<int>(), request.workers - 1);
    for (const auto& type : {"Master", "Worker"}) {
      EXPECT_EQ(replicas[type]["restartPolicy"].as<std::string>(), "ExitCode");
      const YAML::Node container = replicas[type]["template"]["spec"]["containers"][0];
      EXPECT_EQ(container["name"].as<std::string>(), "pytorch")
          << "the operator looks for this container name";
      EXPECT_EQ(container["image"].as<std::string>(), request.image);
      std::map<std::string, std::string> env;
      for (const auto& variable : container["env"]) {
        if (variable["value"]) env[variable["name"].as<std::string>()] = variable["value"].as<std::string>();
      }
      EXPECT_EQ(env["TRAINPOINT_REPO"], request.repo);
      EXPECT_EQ(env["TRAINPOINT_REF"], request.ref);
      EXPECT_EQ(env["TRAINPOINT_SPEC"], request.spec);
      EXPECT_EQ(env["TRAINPOINT_GIT_CACHE"], "/scratch/git-cache");
      const YAML::Node shm = replicas[type]["template"]["spec"]["volumes"][0];
      EXPECT_EQ(shm["emptyDir"]["medium"].as<std::string>(), "Memory");
    }
  }
}

TEST(Manifest, SecretsAreReferencedNeverEmbedded) {
  const YAML::Node job = YAML::Load(k8s::render(cpu_job()));
  const YAML::Node env =
      job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"];
  int from_secret = 0;
  for (const auto& variable : env) {
    if (variable["valueFrom"] && variable["valueFrom"]["secretKeyRef"]) {
      EXPECT_EQ(variable["valueFrom"]["secretKeyRef"]["name"].as<std::string>(), "shapes-credentials");
      EXPECT_FALSE(variable["value"]);
      ++from_secret;
    }
  }
  EXPECT_EQ(from_secret, 4);  // the git token, the S3 key pair and the notification webhook
  const YAML::Node pod =
      YAML::Load(k8s::render(gpu_job()))["spec"]["pytorchReplicaSpecs"]["Worker"]["template"];
  const YAML::Node annotations = pod["metadata"]["annotations"];
  EXPECT_EQ(annotations["vault.hashicorp.com/agent-inject"].as<std::string>(), "true");
  EXPECT_EQ(annotations["vault.hashicorp.com/agent-pre-populate-only"].as<std::string>(), "true");
  EXPECT_NE(annotations["vault.hashicorp.com/agent-inject-template-minio-standard"].as<std::string>().find(
                "with secret \"minio_standard/keys/profile-team-a\""),
            std::string::npos);
}

// A prediction job: every pod runs `trainpoint predict` with its options, in both kinds, within their schemas.
TEST(Manifest, APredictionJobsPodsRunPredictWithItsOptions) {
  const std::vector<std::string> arguments{"predict", "--model", "s3://m/model.pt", "--data", "s3://d/new",
                                           "--out", "s3://p/new.csv"};
  k8s::JobRequest request = cpu_job();
  request.arguments = arguments;
  const YAML::Node job = YAML::Load(k8s::render(request));
  EXPECT_TRUE(unknown_fields(job, schema_fields("pytorchjob-v1.9.0-fields.txt")).empty());
  for (const auto& type : {"Master", "Worker"}) {
    const YAML::Node container = job["spec"]["pytorchReplicaSpecs"][type]["template"]["spec"]["containers"][0];
    EXPECT_EQ(container["args"].as<std::vector<std::string>>(), arguments) << type;
  }
  request.kind = k8s::Kind::trainjob;
  const YAML::Node trainjob = YAML::Load(k8s::render(request));
  EXPECT_TRUE(unknown_fields(trainjob, schema_fields("trainjob-v2.2.0-fields.txt")).empty());
  std::vector<std::string> command{"trainpoint"};
  command.insert(command.end(), arguments.begin(), arguments.end());
  EXPECT_EQ(trainjob["spec"]["trainer"]["command"].as<std::vector<std::string>>(), command);
  EXPECT_EQ(YAML::Load(k8s::render(cpu_job()))["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
                ["containers"][0]["args"].as<std::vector<std::string>>(),
            std::vector<std::string>{"run"});
}

TEST(Manifest, OneWorkerHasOnlyAMaster) {
  k8s::JobRequest request = cpu_job();
  request.workers = 1;
  const YAML::Node job = YAML::Load(k8s::render(request));
  EXPECT_TRUE(job["spec"]["pytorchReplicaSpecs"]["Master"]);
  EXPECT_FALSE(job["spec"]["pytorchReplicaSpecs"]["Worker"]);
}

// The pod template a TrainJob's runtime patch sets for the runtime's "node" job.
YAML::Node node_pod_patch(const YAML::Node& job) {
  const YAML::Node patch = job["spec"]["runtimePatches"][0];
  const YAML::Node replicated = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0];
  EXPECT_EQ(replicated["name"].as<std::string>(), "node") << "the torch-distributed runtime's job";
  return replicated["template"]["spec"]["template"];
}

TEST(Manifest, TrainJobHasOnlySchemaFieldsOfTrainerV22) {
  const auto schema = schema_fields("trainjob-v2.2.0-fields.txt");
  k8s::JobRequest with_vault = gpu_job();
  with_vault.kind = k8s::Kind::trainjob;
  for (const auto& request : {trainjob(), with_vault}) {
    const YAML::Node job = YAML::Load(k8s::render(request));
    const std::vector<std::string> unknown = unknown_fields(job, schema);
    EXPECT_TRUE(unknown.empty()) << "not in the TrainJob schema of Trainer v2.2.0: " << unknown.front();
    EXPECT_EQ(job["apiVersion"].as<std::string>(), "trainer.kubeflow.org/v1alpha1");
    EXPECT_EQ(job["kind"].as<std::string>(), "TrainJob");
    EXPECT_EQ(job["spec"]["runtimeRef"]["name"].as<std::string>(), "torch-distributed");
    EXPECT_EQ(job["spec"]["trainer"]["numNodes"].as<int>(), request.workers);
    // Trainer's webhook wants a domain-prefixed path as the patch's manager (IsDomainPrefixedPath).
    static const std::regex domain_prefixed_path(R"(^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[-A-Za-z0-9_.~/%]+$)");
    EXPECT_TRUE(std::regex_match(job["spec"]["runtimePatches"][0]["manager"].as<std::string>(), domain_prefixed_path));
    // What podSpecOverrides carried in v2.0 and the API server now drops when it is there: /dev/shm and scratch.
    const YAML::Node pod = node_pod_patch(job);
    EXPECT_EQ(pod["spec"]["volumes"][0]["emptyDir"]["medium"].as<std::string>(), "Memory");
    const YAML::Node container = pod["spec"]["containers"][0];
    EXPECT_EQ(container["name"].as<std::string>(), "node");
    EXPECT_EQ(container["volumeMounts"][0]["mountPath"].as<std::string>(), "/dev/shm");
    EXPECT_EQ(container["volumeMounts"][1]["mountPath"].as<std::string>(), "/scratch");
    EXPECT_FALSE(container["env"]) << "Trainer refuses env in a patch of the node container";
  }
  EXPECT_EQ(YAML::Load(k8s::render(trainjob()))["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"]
                .as<int>(),
            1);
  const YAML::Node annotations = node_pod_patch(YAML::Load(k8s::render(with_vault)))["metadata"]["annotations"];
  EXPECT_EQ(annotations["vault.hashicorp.com/agent-inject"].as<std::string>(), "true");
}

TEST(Manifest, MetricsPortIsServedAndAnnouncedForPrometheus) {
  for (k8s::Kind kind : {k8s::Kind::pytorchjob, k8s::Kind::trainjob}) {
    k8s::JobRequest request = cpu_job();
    request.kind = kind;
    request.metrics_port = 9400;
    const YAML::Node job = YAML::Load(k8s::render(request));
    const bool pytorchjob = kind == k8s::Kind::pytorchjob;
    const YAML::Node pod =
        pytorchjob ? job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"] : node_pod_patch(job);
    const YAML::Node annotations = pod["metadata"]["annotations"];
    EXPECT_EQ(annotations["prometheus.io/scrape"].as<std::string>(), "true");
    EXPECT_EQ(annotations["prometheus.io/port"].Tag(), "!") << "annotations are strings";
    EXPECT_EQ(annotations["prometheus.io/port"].as<std::string>(), "9400");
    EXPECT_EQ(annotations["prometheus.io/path"].as<std::string>(), "/metrics");
    const YAML::Node env = pytorchjob ? pod["spec"]["containers"][0]["env"] : job["spec"]["trainer"]["env"];
    std::string set;
    for (const auto& variable : env) {
      if (variable["name"].as<std::string>() == "TRAINPOINT_SET") set = variable["value"].as<std::string>();
    }
    EXPECT_EQ(set, "train.epochs=3;job.metrics_port=9400") << "the pods serve on the announced port";
    if (pytorchjob) {
      const YAML::Node port = pod["spec"]["containers"][0]["ports"][0];
      EXPECT_EQ(port["name"].as<std::string>(), "metrics");
      EXPECT_EQ(port["containerPort"].as<int>(), 9400);
    }
    const auto schema = schema_fields(pytorchjob ? "pytorchjob-v1.9.0-fields.txt" : "trainjob-v2.2.0-fields.txt");
    const std::vector<std::string> unknown = unknown_fields(job, schema);
    EXPECT_TRUE(unknown.empty()) << unknown.front();
  }
  k8s::JobRequest off = cpu_job();
  EXPECT_EQ(k8s::render(off).find("prometheus.io"), std::string::npos);
}

TEST(Manifest, PyTorchJobPodsGetTheGracePeriodToWriteTheirStopCheckpoint) {
  k8s::JobRequest request = cpu_job();
  request.grace_s = 240;
  const YAML::Node job = YAML::Load(k8s::render(request));
  for (const char* type : {"Master", "Worker"}) {
    const YAML::Node pod = job["spec"]["pytorchReplicaSpecs"][type]["template"]["spec"];
    EXPECT_EQ(pod["terminationGracePeriodSeconds"].Tag(), "?") << type << ": an integer, not a string";
    EXPECT_EQ(pod["terminationGracePeriodSeconds"].as<int>(), 240) << type;
  }
  const std::vector<std::string> unknown = unknown_fields(job, schema_fields("pytorchjob-v1.9.0-fields.txt"));
  EXPECT_TRUE(unknown.empty()) << unknown.front();
}

TEST(Manifest, MatchesGoldenFiles) {
  expect_golden("cpu-pytorchjob.yaml", k8s::render(cpu_job()));
  expect_golden("gpu-pytorchjob.yaml", k8s::render(gpu_job()));
  expect_golden("cpu-trainjob.yaml", k8s::render(trainjob()));
}

// Every placement setting the platform needs (k8s.node_selector ... k8s.volumes).
k8s::JobRequest placed(k8s::JobRequest request) {
  request.node_selector = {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"pool", "training"}};
  request.tolerations = {"nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute", "spot"};
  request.queue = "team-a-queue";
  request.active_deadline_s = 86400;
  request.service_account = "trainer";
  request.image_pull_secret = "registry-pull";
  request.volumes = {{"team-data", "/data"}, {"shared.models", "/models"}};
  if (request.kind == k8s::Kind::pytorchjob) {
    request.priority_class = "high";
    request.ttl_s = 3600;
  }
  return request;
}

TEST(Manifest, PlacementReachesThePodsOfBothKindsWithinTheirSchemas) {
  k8s::JobRequest trainjob_request = placed(trainjob());
  for (const auto& request : {placed(cpu_job()), trainjob_request}) {
    const bool pytorchjob = request.kind == k8s::Kind::pytorchjob;
    const YAML::Node job = YAML::Load(k8s::render(request));
    const auto schema = schema_fields(pytorchjob ? "pytorchjob-v1.9.0-fields.txt" : "trainjob-v2.2.0-fields.txt");
    const std::vector<std::string> unknown = unknown_fields(job, schema);
    EXPECT_TRUE(unknown.empty()) << "not in the schema: " << unknown.front();
    EXPECT_EQ(job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"].as<std::string>(), "team-a-queue");
    const YAML::Node policy = pytorchjob ? job["spec"]["runPolicy"] : job["spec"];
    EXPECT_TRUE(policy["suspend"].as<bool>()) << "Kueue starts a queued job by unsuspending it";
    EXPECT_EQ(policy["activeDeadlineSeconds"].as<int>(), 86400);
    const YAML::Node pod = pytorchjob ? job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
                                      : node_pod_patch(job)["spec"];
    EXPECT_EQ(pod["nodeSelector"]["nvidia.com/gpu.product"].as<std::string>(), "NVIDIA-H100-80GB-HBM3");
    EXPECT_EQ(pod["nodeSelector"]["pool"].as<std::string>(), "training");
    const YAML::Node tolerations = pod["tolerations"];
    ASSERT_EQ(tolerations.size(), 3u);
    EXPECT_EQ(tolerations[0]["key"].as<std::string>(), "nvidia.com/gpu");
    EXPECT_EQ(tolerations[0]["operator"].as<std::string>(), "Exists");
    EXPECT_EQ(tolerations[0]["effect"].as<std::string>(), "NoSchedule");
    EXPECT_EQ(tolerations[1]["operator"].as<std::string>(), "Equal");
    EXPECT_EQ(tolerations[1]["value"].as<std::string>(), "ml");
    EXPECT_EQ(tolerations[1]["effect"].as<std::string>(), "NoExecute");
    EXPECT_EQ(tolerations[2]["operator"].as<std::string>(), "Exists");
    EXPECT_FALSE(tolerations[2]["effect"]) << "no effect: every effect of the taint";
    EXPECT_EQ(pod["serviceAccountName"].as<std::string>(), "trainer");
    EXPECT_EQ(pod["imagePullSecrets"][0]["name"].as<std::string>(), "registry-pull");
    // The claims after /dev/shm and scratch, each mounted where k8s.volumes says.
    const YAML::Node volumes = pod["volumes"];
    ASSERT_EQ(volumes.size(), 4u);
    EXPECT_EQ(volumes[2]["persistentVolumeClaim"]["claimName"].as<std::string>(), "shared.models");
    EXPECT_EQ(volumes[3]["persistentVolumeClaim"]["claimName"].as<std::string>(), "team-data");
    const YAML::Node mounts = pod["containers"][0]["volumeMounts"];
    ASSERT_EQ(mounts.size(), 4u);
    EXPECT_EQ(mounts[2]["name"].as<std::string>(), volumes[2]["name"].as<std::string>());
    EXPECT_EQ(mounts[2]["mountPath"].as<std::string>(), "/models");
    EXPECT_EQ(mounts[3]["mountPath"].as<std::string>(), "/data");
    if (pytorchjob) {
      EXPECT_EQ(pod["priorityClassName"].as<std::string>(), "high");
      EXPECT_EQ(policy["ttlSecondsAfterFinished"].as<int>(), 3600);
      const YAML::Node worker = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"];
      EXPECT_EQ(worker["nodeSelector"]["pool"].as<std::string>(), "training") << "every pod, not the master's alone";
    }
  }
  // Unset, nothing of it is written: the golden files stay as they were.
  const YAML::Node plain = YAML::Load(k8s::render(cpu_job()));
  EXPECT_FALSE(plain["spec"]["runPolicy"]["suspend"]);
  EXPECT_FALSE(plain["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["nodeSelector"]);
}

TEST(Manifest, BadRequestsNameWhatIsWrong) {
  auto message_of = [](const k8s::JobRequest& request) {
    try {
      k8s::render(request);
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::usage);
      return std::string(error.what());
    }
    return std::string("no error");
  };
  k8s::JobRequest request = cpu_job();
  request.name = "My_Job";
  EXPECT_NE(message_of(request).find("job name 'My_Job'"), std::string::npos);
  request = cpu_job();
  request.image.clear();
  EXPECT_NE(message_of(request).find("--image or k8s.image"), std::string::npos);
  request = cpu_job();
  request.memory = "8 GB";
  EXPECT_NE(message_of(request).find("memory '8 GB' is not a Kubernetes quantity"), std::string::npos);
  request = gpu_job();
  request.vault_path.clear();
  EXPECT_NE(message_of(request).find("k8s.vault_path"), std::string::npos);
  request = cpu_job();
  request.metrics_port = 70000;
  EXPECT_NE(message_of(request).find("metrics port 70000"), std::string::npos);
  request = cpu_job();
  request.tolerations = {"gpu:NoWhere"};
  EXPECT_NE(message_of(request).find("k8s.tolerations: 'gpu:NoWhere' is not KEY=VALUE:EFFECT"), std::string::npos);
  request = cpu_job();
  request.volumes = {{"team-data", "data"}};
  EXPECT_NE(message_of(request).find("k8s.volumes: claim team-data is mounted at 'data'"), std::string::npos);
  request = cpu_job();
  request.volumes = {{"team-data", "/scratch"}};
  EXPECT_NE(message_of(request).find("other than /dev/shm and /scratch"), std::string::npos);
  request = trainjob();
  request.priority_class = "high";
  EXPECT_NE(message_of(request).find("k8s.priority_class: a TrainJob (Trainer v2.2) cannot set"), std::string::npos);
  request = trainjob();
  request.ttl_s = 60;
  EXPECT_NE(message_of(request).find("k8s.ttl_s: a TrainJob (Trainer v2.2) has no ttlSecondsAfterFinished"),
            std::string::npos);
}

}  // namespace
}  // namespace tp
