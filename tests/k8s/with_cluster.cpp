// tp-with-cluster: runs one command against a Kubernetes control plane on loopback (k8s_cluster.h), for tests
// written as shell scripts (docs/guide.md's cluster blocks, tests/docs/run_guide.sh). The command runs as the
// notebook service account of namespace NS would: KUBECONFIG names that account's kubeconfig, and kubectl (v1.34,
// built with the control plane) is first in PATH. The pods the operator makes run as local trainpoint processes
// (pod_runner.h), so a job's --repo may be a local path.
//
// Usage: tp-with-cluster [--namespace NS] [--secret NAME]... -- COMMAND [ARGUMENT...]
// --secret makes an empty Secret NAME in NS: the pods read its keys as optional, so it stands for a Secret whose
// credentials the command's jobs do not use. Exits with the command's status; when that is not 0, the cluster's
// logs (the pods' processes, the servers') go to stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "k8s/k8s_cluster.h"
#include "support/process.h"

namespace {

struct Arguments {
  std::string name_space = "default";
  std::vector<std::string> secrets;
  std::vector<std::string> command;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "tp-with-cluster: %s\nusage: tp-with-cluster [--namespace NS] [--secret NAME]... -- COMMAND "
                       "[ARGUMENT...]\n", problem.c_str());
  std::exit(2);
}

Arguments parse(int argc, char** argv) {
  Arguments parsed;
  int i = 1;
  for (; i < argc && std::string(argv[i]) != "--"; i += 2) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    if (flag == "--namespace") {
      parsed.name_space = argv[i + 1];
    } else if (flag == "--secret") {
      parsed.secrets.emplace_back(argv[i + 1]);
    } else {
      usage("unknown flag " + flag);
    }
  }
  for (++i; i < argc; ++i) parsed.command.emplace_back(argv[i]);
  if (parsed.command.empty()) usage("no command after --");
  return parsed;
}

// The command's exit status (128 + signal when a signal ended it).
int run(const std::vector<std::string>& command) {
  std::vector<char*> words;
  for (const std::string& word : command) words.push_back(const_cast<char*>(word.c_str()));
  words.push_back(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    execvp(words[0], words.data());
    std::perror(words[0]);
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse(argc, argv);
  try {
    tp::testing::KubernetesCluster cluster;
    const std::string kubeconfig = cluster.add_namespace(arguments.name_space).string();
    for (const std::string& secret : arguments.secrets) {
      tp::testing::run_checked(cluster.kubectl("-n " + arguments.name_space + " create secret generic " +
                                               tp::testing::shell_quote(secret) + " 2>&1"));
    }
    setenv("KUBECONFIG", kubeconfig.c_str(), 1);
    const char* inherited = std::getenv("PATH");
    const std::string path = tp::testing::kubernetes_bin().string() + ":" + (inherited ? inherited : "/usr/bin:/bin");
    setenv("PATH", path.c_str(), 1);
    const int status = run(arguments.command);
    if (status != 0) std::fprintf(stderr, "tp-with-cluster: the command exited %d\n%s\n", status, cluster.logs().c_str());
    return status;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tp-with-cluster: %s\n", error.what());
    return 1;
  }
}
