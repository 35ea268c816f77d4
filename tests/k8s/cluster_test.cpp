// trainpoint's job commands against a real Kubernetes API server and the real Kubeflow training operator
// (k8s/k8s_cluster.h): what render-job makes is accepted and reconciled into pods and services, the pods run
// trainpoint from the operator's own pod spec (k8s/pod_runner.h), and submit, list, status, logs and cancel
// show and change what happens, as a notebook's service account that may act only in its own namespace.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <regex>
#include <thread>

#include "s3/s3_server.h"
#include "k8s/k8s_cluster.h"
#include "k8s/pod_runner.h"
#include "support/process.h"
#include "support/tables.h"
#include "support/temp_dir.h"

namespace tp {
namespace {

namespace fs = std::filesystem;
using testing::run_checked;
using testing::run_command;
using testing::shell_quote;


std::string spec(const std::string& endpoint, int epochs) {
  return fmt::format(R"([job]
name = "tabular"
seed = 5
output = "s3://test-bucket/unset"
[data]
source = "table.csv"
format = "table_csv"
target = "label"
valid = 0.1
workers = 0
endpoint = "{}"
[model]
arch = "mlp"
hidden = [32]
[train]
epochs = {}
batch_size = 16
lr = 0.01
[dist]
timeout_s = 60
heartbeat_s = 1
stall_s = 10
[checkpoint]
every_epochs = 1
)", endpoint, epochs);
}

// Everything the cases share: one control plane, MinIO, a git repository, the namespaces team-a and team-b.
struct Shared {
  testing::KubernetesCluster cluster;
  testing::S3Server s3;
  testing::TempDir repo;
  fs::path team_a;  // the kubeconfig of team-a's notebook service account
  fs::path team_b;
  std::string commit;
};
Shared* shared = nullptr;

class ClusterEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const auto started = std::chrono::steady_clock::now();
    shared = new Shared();
    shared->team_a = shared->cluster.add_namespace("team-a");
    shared->team_b = shared->cluster.add_namespace("team-b");
    // The platform team's Secret with the MinIO keys, which the job's pods read (k8s.secret).
    run_checked(shared->cluster.kubectl(
        fmt::format("-n team-a create secret generic minio --from-literal=AWS_ACCESS_KEY_ID={} "
                    "--from-literal=AWS_SECRET_ACCESS_KEY={} 2>&1",
                    testing::S3Server::kAccessKey, testing::S3Server::kSecretKey)));
    const fs::path root = shared->repo.path();
    testing::write_text(root / "table.csv", testing::separable_table(600));
    testing::write_text(root / "large.csv", testing::separable_table(6000));
    testing::write_text(root / "train.toml", spec(shared->s3.endpoint(), 2));
    std::string slow = spec(shared->s3.endpoint(), 12);
    slow.replace(slow.find("table.csv"), 9, "large.csv");
    testing::write_text(root / "slow.toml", slow);
    // A spec that the repository has wrong at the commit and right in the working tree: render-job (which reads
    // the working tree) accepts it, the pods (which read the commit) stop with a spec error.
    testing::write_text(root / "broken.toml", spec(shared->s3.endpoint(), 2) + "[train.unknown]\nkey = 1\n");
    run_checked("cd " + shell_quote(root.string()) +
                " && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm data 2>&1");
    testing::write_text(root / "broken.toml", spec(shared->s3.endpoint(), 2));
    shared->commit = run_checked("git -C " + shell_quote(root.string()) + " rev-parse HEAD");
    shared->commit.pop_back();
    std::printf("control plane, MinIO and namespaces up in %.1f s\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  }
  void TearDown() override {
    delete shared;
    shared = nullptr;
  }
};

// `trainpoint ARGUMENTS` as team-a's notebook (its kubeconfig), output and errors together; `environment` holds
// more NAME=value words.
testing::CommandResult trainpoint(const std::string& arguments, const fs::path& kubeconfig = "",
                                  const std::string& environment = "") {
  return run_command("KUBECONFIG=" + shell_quote((kubeconfig.empty() ? shared->team_a : kubeconfig).string()) + " " +
                     environment + " " + testing::trainpoint_binary() + " " + arguments + " 2>&1");
}

// submit's words for `name` training `spec_file` of the repository on `workers` pods into s3://test-bucket/NAME.
std::string submit_words(const std::string& name, const std::string& spec_file = "train.toml", int workers = 2) {
  const std::string root = shared->repo.path().string();
  return fmt::format("submit --repo {0} --ref {1} --spec {2} --checkout {0} --image trainpoint:test --workers {3} "
                     "--secret minio --name {4} --set k8s.metrics_port=0 --set k8s.grace_s=20 "
                     "--set 'job.output=\"s3://test-bucket/{4}\"'",
                     shell_quote(root), shared->commit, spec_file, workers, name);
}

// The job's phase as trainpoint status's first line says it, polled until `phase` or `timeout`.
std::string wait_for_phase(const std::string& job, const std::string& phase,
                           std::chrono::seconds timeout = std::chrono::seconds(240)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string status;
  while (std::chrono::steady_clock::now() < deadline) {
    status = trainpoint("status " + job).output;
    if (status.find(": " + phase + "\n") != std::string::npos) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ADD_FAILURE() << job << " did not reach " << phase << "; last status:\n" << status << shared->cluster.logs();
  return status;
}

bool wait_until(const std::function<bool()>& done, std::chrono::seconds timeout = std::chrono::seconds(180)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return false;
}

bool object_exists(const std::string& key) {
  return run_command(shared->s3.mc("stat tp/test-bucket/" + key) + " >/dev/null 2>&1").exit_code == 0;
}

TEST(Cluster, ATwoPodJobTrainsToSucceededWithItsModelInMinIO) {
  const auto submitted = trainpoint(submit_words("two-pods"));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  EXPECT_NE(submitted.output.find("created PyTorchJob team-a/two-pods"), std::string::npos) << submitted.output;
  // Followed at once, as a user types it after submit (the pods not created or still Pending): it waits for the
  // master's pod, then prints its whole run.
  const auto followed = trainpoint("logs two-pods --follow");
  EXPECT_EQ(followed.exit_code, 0) << followed.output;
  EXPECT_NE(followed.output.find("epoch 2/2: train_loss "), std::string::npos) << followed.output;

  const std::string status = wait_for_phase("two-pods", "Succeeded");
  EXPECT_NE(status.find("rank 0 pod two-pods-master-0: Succeeded, last exit 0 (ok: done)"), std::string::npos)
      << status;
  // The worker may be Succeeded, or already deleted: cleanPodPolicy Running deletes what still runs once the
  // master has succeeded.
  EXPECT_NE(status.find("trains train.toml of " + shared->repo.path().string() + " at " + shared->commit),
            std::string::npos) << status;
  EXPECT_TRUE(object_exists("two-pods/model.pt"));
  // Where the outputs are, and how far training went: rank 0's last epoch line, read from its log.
  EXPECT_NE(status.find("outputs in s3://test-bucket/two-pods (model.pt, report.html, metrics.jsonl)"),
            std::string::npos) << status;
  EXPECT_NE(status.find("progress (rank 0's log): epoch 2/2: train_loss "), std::string::npos) << status;

  // Both ranks trained, each from the operator's variables (RANK from the pod spec, MASTER_ADDR by name).
  const auto master_log = trainpoint("logs two-pods");
  ASSERT_EQ(master_log.exit_code, 0) << master_log.output;
  EXPECT_NE(master_log.output.find("rank 0"), std::string::npos) << master_log.output;
  // The pod's own work directory: $(POD_NAME) expanded in TRAINPOINT_WORKDIR, on the pod's scratch volume.
  const std::string worker_log = shared->cluster.pods().log("two-pods-worker-0");
  EXPECT_NE(worker_log.find("at /scratch/work/two-pods-worker-0/checkouts/" + shared->commit), std::string::npos)
      << worker_log;
  EXPECT_EQ(shared->cluster.pods().starts("two-pods-master-0"), 1);

  const auto listed = trainpoint("list");
  EXPECT_NE(listed.output.find("two-pods\tPyTorchJob\tSucceeded"), std::string::npos) << listed.output;
  const auto no_rank = trainpoint("logs two-pods --rank 2");
  EXPECT_EQ(no_rank.exit_code, 2) << no_rank.output;
  EXPECT_NE(no_rank.output.find("two-pods has no pod of node rank 2"), std::string::npos) << no_rank.output;
}

TEST(Cluster, ARetryableExitRestartsThePodAndTheJobResumesFromItsCheckpoint) {
  const auto submitted = trainpoint(submit_words("retried", "slow.toml"));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  testing::PodRunner& pods = shared->cluster.pods();
  ASSERT_TRUE(wait_until([&] { return pods.log("retried-master-0").find("epoch 3/12") != std::string::npos; }))
      << pods.log("retried-master-0") << shared->cluster.logs();
  const auto worker_log = trainpoint("logs retried --rank 1");
  EXPECT_EQ(worker_log.exit_code, 0) << worker_log.output;
  EXPECT_NE(worker_log.output.find("at /scratch/work/retried-worker-0/checkouts/"), std::string::npos)
      << worker_log.output;
  // The worker's node is lost: SIGKILL, exit 137, retryable. The master loses its peer (exit 202, retryable).
  ASSERT_TRUE(pods.signal("retried-worker-0", SIGKILL));

  const std::string status = wait_for_phase("retried", "Succeeded");
  // The operator's event, which status shows (the Restarting condition is gone once the job runs again).
  EXPECT_NE(status.find("Warning PyTorchJobRestarting"), std::string::npos) << status;
  EXPECT_GE(pods.starts("retried-worker-0"), 2) << status;
  EXPECT_GE(pods.starts("retried-master-0"), 2) << status;
  const std::string master_log = trainpoint("logs retried").output;
  EXPECT_NE(master_log.find("resumed from"), std::string::npos) << master_log;
  EXPECT_EQ(master_log.find("epoch 1/12"), std::string::npos) << "the restarted master trained epoch 1 again:\n"
                                                               << master_log;
  EXPECT_NE(master_log.find("epoch 12/12"), std::string::npos) << master_log;
  EXPECT_TRUE(object_exists("retried/model.pt"));
}

TEST(Cluster, APermanentExitFailsTheJobWithoutRestartsAndStatusSaysWhy) {
  const auto submitted = trainpoint(submit_words("broken", "broken.toml"));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string status = wait_for_phase("broken", "Failed");
  // Both pods stop with the spec error; the first to exit fails the job, and the other, if still running, is
  // deleted (cleanPodPolicy Running).
  std::smatch failed;
  ASSERT_TRUE(std::regex_search(status, failed, std::regex(
      R"(rank ([01]) pod (broken-(master|worker)-0): Failed, last exit 3 \(spec error: permanent\))"))) << status;
  EXPECT_EQ(shared->cluster.pods().starts(failed[2]), 1) << status;
  EXPECT_LE(shared->cluster.pods().starts("broken-master-0") + shared->cluster.pods().starts("broken-worker-0"), 2)
      << "no restarts: " << status;
  const std::string log = trainpoint("logs broken --rank " + failed[1].str()).output;
  EXPECT_NE(log.find("train.unknown"), std::string::npos) << log;
}

TEST(Cluster, CancelStopsEveryPodWithinItsGracePeriodAndLogsFollowEndsWithIt) {
  const auto submitted = trainpoint(submit_words("cancelled", "slow.toml") + " --set train.epochs=100000");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  testing::PodRunner& pods = shared->cluster.pods();
  ASSERT_TRUE(wait_until([&] { return pods.log("cancelled-master-0").find("epoch 2/") != std::string::npos; }))
      << shared->cluster.logs();
  // Following the master's log: started (its first bytes printed) before the job is cancelled.
  testing::TempDir follow_dir;
  const fs::path followed_file = follow_dir / "followed";
  testing::CommandResult followed;
  std::thread follower([&] {
    followed = run_command("KUBECONFIG=" + shell_quote(shared->team_a.string()) + " " + testing::trainpoint_binary() +
                           " logs cancelled --follow > " + shell_quote(followed_file.string()) + " 2>&1");
    followed.output = testing::read_text(followed_file);
  });
  const bool following = wait_until([&] { return !testing::read_text(followed_file).empty(); }, std::chrono::seconds(60));
  if (!following) follower.detach();  // it ends when the job does, with the cluster
  ASSERT_TRUE(following) << "trainpoint logs --follow printed nothing in 60 s";

  const auto cancelled = trainpoint("cancel cancelled");
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  EXPECT_NE(cancelled.output.find("deleted team-a/cancelled: its 2 pod(s) stop within their grace period"),
            std::string::npos) << cancelled.output;
  const bool gone = wait_until([&] {
    return run_command(shared->cluster.kubectl("-n team-a get pods -o name")).output.find("cancelled") ==
           std::string::npos;
  });
  follower.join();
  ASSERT_TRUE(gone) << shared->cluster.logs();
  // SIGTERM: the stop checkpoint, then exit 143 (interrupted) by itself, not SIGKILL at the end of the grace.
  const std::string master = pods.log("cancelled-master-0");
  EXPECT_NE(master.find("exit 143"), std::string::npos) << master;
  EXPECT_EQ(followed.exit_code, 0) << followed.output;
  EXPECT_NE(followed.output.find("exit 143"), std::string::npos) << followed.output;
  const auto status = trainpoint("status cancelled");
  EXPECT_EQ(status.exit_code, 2) << status.output;
  EXPECT_NE(status.output.find("namespace team-a has no PyTorchJob or TrainJob named cancelled"), std::string::npos)
      << status.output;
}

TEST(Cluster, ANotebooksServiceAccountCannotTouchAnotherNamespace) {
  const auto listed = trainpoint("list --namespace team-b");
  EXPECT_EQ(listed.exit_code, 2) << listed.output;
  EXPECT_NE(listed.output.find("HTTP 403"), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("cannot list resource \"pytorchjobs\""), std::string::npos) << listed.output;
  EXPECT_NE(listed.output.find("in the namespace \"team-b\""), std::string::npos) << listed.output;

  const auto submitted = trainpoint(submit_words("elsewhere") + " --namespace team-b");
  EXPECT_EQ(submitted.exit_code, 2) << submitted.output;
  EXPECT_NE(submitted.output.find("cannot create resource \"pytorchjobs\""), std::string::npos) << submitted.output;
  EXPECT_EQ(std::count(submitted.output.begin(), submitted.output.end(), '\n'), 1) << submitted.output;
  // team-b's own account sees its namespace, and nothing of team-a's.
  const auto own = trainpoint("list", shared->team_b);
  EXPECT_EQ(own.exit_code, 0) << own.output;
  EXPECT_EQ(own.output, "");
}

TEST(Cluster, DryRunHasTheServerCheckBothKindsAndCreatesNothing) {
  const auto pytorchjob = trainpoint(submit_words("dry") + " --dry-run=server");
  EXPECT_EQ(pytorchjob.exit_code, 0) << pytorchjob.output;
  EXPECT_NE(pytorchjob.output.find("PyTorchJob team-a/dry passed the server's checks (dry run: nothing created)"),
            std::string::npos) << pytorchjob.output;
  // The TrainJob CRD of Trainer v2.2 (its OpenAPI schema and CEL rules); Trainer's controller is not running.
  const auto trainjob = trainpoint(submit_words("dry-trainjob") + " --kind trainjob --dry-run=server");
  EXPECT_EQ(trainjob.exit_code, 0) << trainjob.output;
  EXPECT_NE(trainjob.output.find("TrainJob team-a/dry-trainjob passed the server's checks"), std::string::npos)
      << trainjob.output;
  const auto listed = trainpoint("list");
  EXPECT_EQ(listed.output.find("dry"), std::string::npos) << listed.output;
  const auto status = trainpoint("status dry");
  EXPECT_EQ(status.exit_code, 2) << status.output;
}

// The platform team's defaults file and every placement setting, for both kinds, through the server's strict
// field validation (a field it does not know is refused, not dropped), its schemas and CEL rules.
TEST(Cluster, PlacementAndThePlatformDefaultsAreAcceptedByTheServerForBothKinds) {
  testing::TempDir platform;
  testing::write_text(platform / "platform.toml", R"([k8s]
queue = "team-a-queue"
service_account = "notebook"
image_pull_secret = "registry-pull"
tolerations = ["nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute", "spot"]
active_deadline_s = 7200
[k8s.node_selector]
"nvidia.com/gpu.product" = "NVIDIA-H100-80GB-HBM3"
[k8s.volumes]
team-data = "/data"
)");
  const std::string defaults = "TRAINPOINT_PLATFORM_DEFAULTS=" + shell_quote((platform / "platform.toml").string());
  const auto pytorchjob = trainpoint(submit_words("placed") + " --set k8s.priority_class=high --set k8s.ttl_s=600 "
                                     "--dry-run=server", "", defaults);
  EXPECT_EQ(pytorchjob.exit_code, 0) << pytorchjob.output;
  EXPECT_NE(pytorchjob.output.find("platform defaults: " + (platform / "platform.toml").string()), std::string::npos)
      << pytorchjob.output;
  EXPECT_NE(pytorchjob.output.find("PyTorchJob team-a/placed passed the server's checks"), std::string::npos)
      << pytorchjob.output;
  const auto trainjob = trainpoint(submit_words("placed-trainjob") + " --kind trainjob --dry-run=server", "", defaults);
  EXPECT_EQ(trainjob.exit_code, 0) << trainjob.output;
  EXPECT_NE(trainjob.output.find("TrainJob team-a/placed-trainjob passed the server's checks"), std::string::npos)
      << trainjob.output;
  // What a TrainJob cannot carry is refused before the server is asked, saying what to do.
  const auto refused = trainpoint(submit_words("placed-trainjob") + " --kind trainjob --set k8s.priority_class=high",
                                  "", defaults);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("k8s.priority_class: a TrainJob (Trainer v2.2) cannot set"), std::string::npos)
      << refused.output;
  // A platform file that names a missing file is an error, not silently no defaults.
  const auto missing = trainpoint(submit_words("placed") + " --dry-run=server", "",
                                  "TRAINPOINT_PLATFORM_DEFAULTS=/nonexistent/platform.toml");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("TRAINPOINT_PLATFORM_DEFAULTS=/nonexistent/platform.toml: no such file"),
            std::string::npos) << missing.output;
}

// A job for a Kueue queue is created suspended and runs nothing until the queue admits it (Kueue clears suspend,
// as the test does here); then the operator's pods carry the placement and the API server's admission resolved
// it (the PriorityClass's value, the service account), and the kwok node that the selector names runs them.
TEST(Cluster, AQueuedJobWaitsSuspendedThenItsPodsRunWhereThePlacementSays) {
  run_checked(shared->cluster.kubectl("create priorityclass trainpoint-high --value=1000 2>&1"));
  const auto submitted = trainpoint(submit_words("queued", "train.toml", 1) +
                                    " --set k8s.queue=team-a-queue --set k8s.priority_class=trainpoint-high "
                                    "--set k8s.service_account=notebook --set k8s.active_deadline_s=600 "
                                    "--set 'k8s.tolerations=[\"dedicated=ml:NoSchedule\"]' "
                                    "--set k8s.node_selector.kubernetes.io/hostname=kwok-node-0");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  const std::string suspended = wait_for_phase("queued", "Suspended", std::chrono::seconds(60));
  EXPECT_NE(suspended.find("suspended in Kueue's queue team-a-queue: its pods start when the queue admits it"),
            std::string::npos) << suspended;
  EXPECT_EQ(suspended.find("pod queued-master-0"), std::string::npos) << suspended;

  run_checked(shared->cluster.kubectl("-n team-a patch pytorchjob queued --type=merge "
                                      "-p '{\"spec\":{\"runPolicy\":{\"suspend\":false}}}' 2>&1"));
  const std::string succeeded = wait_for_phase("queued", "Succeeded");
  EXPECT_EQ(succeeded.find("suspended in"), std::string::npos) << succeeded;
  EXPECT_EQ(run_checked(shared->cluster.kubectl(
                "-n team-a get pod queued-master-0 -o jsonpath='{.spec.nodeName} {.spec.nodeSelector} "
                "{.spec.priorityClassName}={.spec.priority} {.spec.serviceAccountName} {.spec.tolerations[0].key}'")),
            "kwok-node-0 {\"kubernetes.io/hostname\":\"kwok-node-0\"} trainpoint-high=1000 notebook dedicated");
  EXPECT_TRUE(object_exists("queued/model.pt"));
}

// A pod that no node can take says why in status: the scheduler's own reason.
TEST(Cluster, APodNoNodeTakesSaysWhyInStatus) {
  const auto submitted = trainpoint(submit_words("nowhere", "train.toml", 1) +
                                    " --set k8s.node_selector.nvidia.com/gpu.product=NVIDIA-H200");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.output;
  std::string status;
  EXPECT_TRUE(wait_until([&] {
    status = trainpoint("status nowhere").output;
    return status.find("didn't match Pod's node affinity/selector") != std::string::npos;
  }, std::chrono::seconds(60))) << status;
  EXPECT_NE(status.find("rank 0 pod nowhere-master-0: Pending (Unschedulable: 0/1 nodes are available"),
            std::string::npos) << status;
  EXPECT_EQ(trainpoint("cancel nowhere").exit_code, 0);
}

TEST(Cluster, AQuotaRefusalIsOneLineWithTheServersReason) {
  const fs::path quota_team = shared->cluster.add_namespace("team-quota");
  run_checked(shared->cluster.kubectl("-n team-quota create quota jobs --hard=count/pytorchjobs.kubeflow.org=0 2>&1"));
  run_checked(shared->cluster.kubectl("-n team-quota create secret generic minio --from-literal=AWS_ACCESS_KEY_ID=k 2>&1"));
  // Until the quota controller has counted what is used, the server refuses with "status unknown for quota". It
  // counts a custom resource once its discovery (every 30 s) has found it: up to a minute after the start.
  ASSERT_TRUE(wait_until([] {
    return !run_command(shared->cluster.kubectl("-n team-quota get quota jobs -o jsonpath='{.status.used}'")).output.empty();
  }, std::chrono::seconds(150)));
  const auto submitted = trainpoint(submit_words("over-quota"), quota_team);
  EXPECT_EQ(submitted.exit_code, 2) << submitted.output;
  EXPECT_NE(submitted.output.find("exceeded quota: jobs"), std::string::npos) << submitted.output;
  EXPECT_EQ(std::count(submitted.output.begin(), submitted.output.end(), '\n'), 1) << submitted.output;
}

TEST(Cluster, AMissingSecretIsNamedBeforeAnythingIsCreated) {
  std::string words = submit_words("no-keys");
  words.replace(words.find("--secret minio "), 15, "--secret minio-typo ");
  const auto submitted = trainpoint(words);
  EXPECT_EQ(submitted.exit_code, 2) << submitted.output;
  EXPECT_NE(submitted.output.find("Secret minio-typo (k8s.secret, --secret) is not in namespace team-a"),
            std::string::npos) << submitted.output;
  EXPECT_EQ(trainpoint("status no-keys").exit_code, 2);
}

TEST(Cluster, InANotebookPodTheServiceAccountIsFoundWithoutAKubeconfig) {
  // What a pod has: the service account's files at their fixed path, KUBERNETES_SERVICE_HOST/PORT, no kubeconfig.
  const std::string mount = "/var/run/secrets/kubernetes.io/serviceaccount";
  const std::string server = shared->cluster.server();
  const std::string port = server.substr(server.rfind(':') + 1);
  const auto listed = run_command(
      "unshare --mount --propagation private /bin/sh -c " +
      shell_quote("mkdir -p " + mount + " && mount --bind " +
                  shell_quote(shared->cluster.service_account_dir("team-a").string()) + " " + mount +
                  " && exec env -u KUBECONFIG HOME=/nonexistent KUBERNETES_SERVICE_HOST=127.0.0.1 "
                  "KUBERNETES_SERVICE_PORT=" + port + " " + testing::trainpoint_binary() + " list") +
      " 2>&1");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("two-pods\tPyTorchJob"), std::string::npos) << listed.output;
}

TEST(Cluster, WithoutACluster_TheCommandsSayWhatToGive) {
  const auto listed = run_command("env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME=/nonexistent " +
                                  testing::trainpoint_binary() + " list 2>&1");
  EXPECT_EQ(listed.exit_code, 2) << listed.output;
  EXPECT_NE(listed.output.find("no Kubernetes cluster to talk to: give --kubeconfig (or set KUBECONFIG)"),
            std::string::npos) << listed.output;
}

}  // namespace
}  // namespace tp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tp::ClusterEnvironment());
  return RUN_ALL_TESTS();
}
