// Where the Kubernetes API server is and who trainpoint is to it, found as kubectl finds them: --kubeconfig,
// else $KUBECONFIG (its first file), else ~/.kube/config, else the pod's own service account (in a notebook
// pod: /var/run/secrets/kubernetes.io/serviceaccount and KUBERNETES_SERVICE_HOST/PORT). The token is kept
// here and sent as a header only: it is never logged, printed or written anywhere.
#pragma once

#include <string>

namespace tp::k8s {

struct ConnectOptions {
  std::string kubeconfig;  // empty: $KUBECONFIG, ~/.kube/config, then in-cluster
  std::string context;     // empty: the kubeconfig's current-context
  std::string name_space;  // empty: the context's namespace, the service account's, else "default"
  // In-cluster credentials (the token, ca.crt and namespace files); a test may point it elsewhere.
  std::string service_account_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
};

struct Connection {
  std::string server;      // https://host:port, without a trailing slash
  std::string token;       // bearer token; never printed
  std::string ca_pem;      // the server's CA as PEM; empty: the system's trust store
  std::string name_space;  // the namespace commands act in
  std::string origin;      // where the settings came from, for messages: "kubeconfig FILE, context C"
};

// Throws tp::Error (usage) naming the file and the entry that is missing or that trainpoint cannot use.
Connection connect(const ConnectOptions& options);

}  // namespace tp::k8s
