#include "git/git_servers.h"

#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/process.h"

namespace tp::testing {
namespace fs = std::filesystem;

GitServers& GitServers::get() {
  static GitServers servers;
  return servers;
}

GitServers::GitServers() {
  const std::string output = run_checked("bash " + shell_quote(source_dir() + "/tests/git/make_fixtures.sh") +
                                         " " + shell_quote(root()));
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (const auto equals = line.find('='); equals != std::string::npos) {
      values_[line.substr(0, equals)] = line.substr(equals + 1);
    }
  }
  start_git_daemon();
  start_https();
  start_sshd();
}

void GitServers::start_git_daemon() {
  git_port_ = free_port();
  git_daemon_ = std::make_unique<BackgroundProcess>(
      "git daemon --reuseaddr --export-all --listen=127.0.0.1 --port=" + std::to_string(git_port_) +
          " --base-path=" + shell_quote(repos()) + " " + shell_quote(repos()),
      root() / "git-daemon.log");
  wait_for_port(git_port_);
}

void GitServers::start_https() {
  const fs::path socket = root() / "fcgiwrap.sock";
  fcgiwrap_ = std::make_unique<BackgroundProcess>("fcgiwrap -c 4 -s unix:" + socket.string(),
                                                  root() / "fcgiwrap.log");
  for (int i = 0; i < 200 && !fs::exists(socket); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  if (!fs::exists(socket)) throw std::runtime_error("fcgiwrap did not start: " + fcgiwrap_->log());

  https_port_ = free_port();
  const std::string r = root().string();
  const std::string port = std::to_string(https_port_);
  fs::create_directories(root() / "nginx");
  // One location per area: LFS batch API first, then git's smart HTTP; /private/ needs basic auth.
  std::string locations;
  for (const std::string area : {"public", "private"}) {
    const std::string auth =
        area == "private" ? "auth_basic git; auth_basic_user_file " + r + "/htpasswd;\n" : "";
    locations += "location ~ ^/" + area + "(/[^/]+\\.git)/info/lfs(/.*)$ {\n" + auth +
                 "  include /etc/nginx/fastcgi_params;\n"
                 "  fastcgi_pass unix:" +
                 socket.string() +
                 ";\n"
                 "  fastcgi_param SCRIPT_FILENAME " +
                 source_dir() +
                 "/tests/git/lfs_server.py;\n"
                 "  fastcgi_param REPOS " +
                 r +
                 "/repos;\n"
                 "  fastcgi_param LFS_REPO $1;\n"
                 "  fastcgi_param LFS_PATH $2;\n"
                 "  fastcgi_param LFS_BASE https://127.0.0.1:" +
                 port + "/" + area +
                 "$1/info/lfs;\n"
                 "}\n"
                 "location ~ ^/" +
                 area + "(/.*)$ {\n" + auth +
                 "  include /etc/nginx/fastcgi_params;\n"
                 "  fastcgi_pass unix:" +
                 socket.string() +
                 ";\n"
                 "  fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;\n"
                 "  fastcgi_param GIT_PROJECT_ROOT " +
                 r +
                 "/repos;\n"
                 "  fastcgi_param GIT_HTTP_EXPORT_ALL \"\";\n"
                 "  fastcgi_param PATH_INFO $1;\n"
                 "  fastcgi_param REMOTE_USER $remote_user;\n"
                 "}\n";
  }
  const std::string config =
      "daemon off;\nuser root;\nworker_processes 1;\npid " + r + "/nginx/nginx.pid;\nerror_log " + r +
      "/nginx/error.log;\nevents { worker_connections 128; }\nhttp {\n  access_log off;\n"
      "  client_body_temp_path " +
      r + "/nginx/body;\n  fastcgi_temp_path " + r +
      "/nginx/fastcgi;\n"
      "  proxy_temp_path " +
      r + "/nginx/proxy;\n  uwsgi_temp_path " + r +
      "/nginx/uwsgi;\n"
      "  scgi_temp_path " +
      r +
      "/nginx/scgi;\n  client_max_body_size 0;\n  fastcgi_buffering off;\n"
      "  server {\n    listen 127.0.0.1:" +
      port + " ssl;\n    ssl_certificate " + r +
      "/tls/server.crt;\n"
      "    ssl_certificate_key " +
      r + "/tls/server.key;\n" + locations + "  }\n}\n";
  write_text(root() / "nginx" / "nginx.conf", config);
  nginx_ = std::make_unique<BackgroundProcess>("nginx -c " + r + "/nginx/nginx.conf", root() / "nginx.log");
  try {
    wait_for_port(https_port_);
  } catch (const std::exception&) {
    throw std::runtime_error("nginx did not start: " + nginx_->log());
  }
}

void GitServers::start_sshd() {
  ssh_port_ = free_port();
  const fs::path ssh = root() / "ssh";
  fs::create_directories("/run/sshd");  // sshd's privilege separation directory
  write_text(
      ssh / "sshd_config",
      "Port " + std::to_string(ssh_port_) + "\nListenAddress 127.0.0.1\nHostKey " + (ssh / "host").string() +
          "\nAuthorizedKeysFile " + (ssh / "authorized_keys").string() +
          "\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
          "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\nPidFile none\nLogLevel VERBOSE\n");
  const std::string host_name = "[127.0.0.1]:" + std::to_string(ssh_port_);
  const auto public_key = [&](const std::string& name) {
    std::string key = run_checked("cat " + shell_quote(ssh / (name + ".pub")));
    return key.substr(0, key.rfind(' '));  // drop the comment
  };
  write_text(ssh / "known_hosts",
             "# test server\nexample.org ssh-ed25519 AAAA\n" + host_name + " " + public_key("host") + "\n");
  write_text(ssh / "known_hosts_wrong", host_name + " " + public_key("impostor") + "\n");
  write_text(ssh / "known_hosts_empty", "");
  sshd_ = std::make_unique<BackgroundProcess>("/usr/sbin/sshd -D -e -f " + (ssh / "sshd_config").string(),
                                              root() / "sshd.log");
  try {
    wait_for_port(ssh_port_);
  } catch (const std::exception&) {
    throw std::runtime_error("sshd did not start: " + sshd_->log());
  }
}

std::string GitServers::git_url(const std::string& repo) const {
  return "git://127.0.0.1:" + std::to_string(git_port_) + "/" + repo;
}

std::string GitServers::https_url(const std::string& repo, bool private_area) const {
  return "https://127.0.0.1:" + std::to_string(https_port_) + (private_area ? "/private/" : "/public/") +
         repo;
}

std::string GitServers::ssh_url(const std::string& repo) const {
  return "ssh://root@127.0.0.1:" + std::to_string(ssh_port_) + (repos() / repo).string();
}

}  // namespace tp::testing
