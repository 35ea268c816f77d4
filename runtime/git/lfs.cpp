#include "git/lfs.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "common/digest.h"
#include "common/error.h"
#include "common/files.h"
#include "common/retry.h"
#include "git/libgit2.h"
#include "http/transfer.h"

namespace tp::git {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::size_t max_pointer_size = 1024;  // git-lfs never writes larger pointers
constexpr std::size_t batch_size = 100;         // objects per batch request
constexpr const char* lfs_media_type = "application/vnd.git-lfs+json";

struct PointerFile {
  std::string path;  // relative to the working tree
  git_filemode_t mode;
  LfsPointer pointer;
};

struct WalkState {
  git_repository* repo;
  std::vector<PointerFile> files;
};

bool tracked_by_lfs(git_repository* repo, const std::string& path) {
  const char* value = nullptr;
  return git_attr_get(&value, repo, 0, path.c_str(), "filter") == 0 && value != nullptr &&
         std::string_view(value) == "lfs";
}

std::vector<PointerFile> find_pointer_files(git_repository* repo) {
  git_object* tree = nullptr;
  if (git_revparse_single(&tree, repo, "HEAD^{tree}") != 0) {
    fail(ExitCode::internal, "cannot read the checked-out tree: {}", libgit2_error());
  }
  std::unique_ptr<git_object, void (*)(git_object*)> owned(tree, git_object_free);
  WalkState state{repo, {}};
  git_tree_walk(
      reinterpret_cast<git_tree*>(tree), GIT_TREEWALK_PRE,
      [](const char* root, const git_tree_entry* entry, void* payload) {
        auto& state = *static_cast<WalkState*>(payload);
        const git_filemode_t mode = git_tree_entry_filemode(entry);
        if (mode != GIT_FILEMODE_BLOB && mode != GIT_FILEMODE_BLOB_EXECUTABLE) return 0;
        git_odb* odb = nullptr;
        std::size_t size = 0;
        git_object_t type;
        git_repository_odb(&odb, state.repo);
        const int status = git_odb_read_header(&size, &type, odb, git_tree_entry_id(entry));
        git_odb_free(odb);
        if (status != 0 || size > max_pointer_size) return 0;
        git_blob* blob = nullptr;
        if (git_blob_lookup(&blob, state.repo, git_tree_entry_id(entry)) != 0) return 0;
        const std::string_view text(static_cast<const char*>(git_blob_rawcontent(blob)),
                                    git_blob_rawsize(blob));
        std::optional<LfsPointer> pointer = parse_lfs_pointer(text);
        git_blob_free(blob);
        // The attribute lookup last: libgit2 resolves the file's path with realpath() for it, which costs
        // more than reading a small blob (docs/benchmarks.md, "Where the git checkout's time goes").
        const std::string path = std::string(root) + git_tree_entry_name(entry);
        if (pointer && tracked_by_lfs(state.repo, path)) state.files.push_back({path, mode, *pointer});
        return 0;
      },
      &state);
  return std::move(state.files);
}

fs::path object_path(const fs::path& objects_dir, const std::string& oid) {
  return objects_dir / oid.substr(0, 2) / oid.substr(2, 2) / oid;
}

// Throws ExitCode::source unless `file` has the pointer's size and SHA-256.
void verify(const fs::path& file, const LfsPointer& pointer, const std::string& origin) {
  std::error_code error;
  const auto size = fs::file_size(file, error);
  if (error || size != pointer.size) {
    fail(ExitCode::source, "LFS object {} from {} has {} bytes, its pointer says {}: the object is corrupt",
         pointer.oid, origin, error ? 0 : size, pointer.size);
  }
  if (const std::string actual = file_digest_hex(file, HashAlgorithm::sha256, ExitCode::output);
      actual != pointer.oid) {
    fail(ExitCode::source, "LFS object {} from {} has SHA-256 {}: the object is corrupt", pointer.oid, origin,
         actual);
  }
}

// Copies `from` to `to` (a hard link when possible), appearing atomically.
void place(const fs::path& from, const fs::path& to, bool allow_link) {
  std::error_code error;
  fs::create_directories(to.parent_path(), error);
  const fs::path temporary = temporary_sibling(to);
  if (!allow_link || (fs::create_hard_link(from, temporary, error), error)) {
    error.clear();
    fs::copy_file(from, temporary, fs::copy_options::overwrite_existing, error);
  }
  if (error) {
    fs::remove(temporary);
    fail(error.value() == ENOSPC ? ExitCode::storage : ExitCode::output, "cannot write {}: {}", to.string(),
         error.message());
  }
  commit_file(temporary, to);
}

class Downloader {
 public:
  Downloader(std::string endpoint, const RemoteAccess& access, const fs::path& ca_file, fs::path objects_dir)
      : endpoint_(std::move(endpoint)), objects_dir_(std::move(objects_dir)), handle_([&] {
          http::Settings settings;
          settings.ca_bundle = ca_file.string();
          return settings;
        }()) {
    std::string user;
    std::string password;
    if (access.credentials_for(parse_remote_url(endpoint_).host, &user, &password)) {
      credentials_.emplace(std::move(user), std::move(password));
    }
  }

  // Downloads `pointers` into the objects directory, verified.
  void download(const std::vector<LfsPointer>& pointers) {
    json request = {{"operation", "download"}, {"transfers", {"basic"}}, {"objects", json::array()}};
    for (const auto& pointer : pointers)
      request["objects"].push_back({{"oid", pointer.oid}, {"size", pointer.size}});
    http::Request batch;
    batch.method = "POST";
    batch.url = endpoint_ + "/objects/batch";
    batch.headers = {{"Accept", lfs_media_type}, {"Content-Type", lfs_media_type}};
    const std::string text = request.dump();
    batch.body = http::text_body(text);
    batch.body_size = text.size();
    batch.basic_auth = credentials_;
    batch.follow_redirects = true;
    const http::Response answer = perform(batch);
    check_status(answer, batch.url);
    json response;
    try {
      response = json::parse(answer.body);
    } catch (const json::exception&) {
      rethrow_as(ExitCode::source, "the LFS server {} answered with invalid JSON", endpoint_);
    }
    if (!response.is_object() || !response.contains("objects") || !response["objects"].is_array()) {
      fail(ExitCode::source, "the LFS server {} answered without an objects list", endpoint_);
    }
    for (const json& object : response["objects"]) {
      std::string oid;
      auto pointer = pointers.end();
      std::string href;
      http::Headers headers;
      // at() and typed reads throw on a missing key or a wrong type; const operator[] would be undefined.
      try {
        oid = object.value("oid", "");
        pointer = std::find_if(pointers.begin(), pointers.end(), [&](auto& p) { return p.oid == oid; });
        if (pointer == pointers.end()) continue;
        if (object.contains("error")) {
          const json& error = object.at("error");
          fail(ExitCode::source, "LFS object {} is not available from {}: {} {}", oid, endpoint_,
               error.value("code", json()).dump(), error.value("message", ""));
        }
        const json& action = object.at("actions").at("download");
        href = action.at("href").get<std::string>();
        if (action.contains("header")) {
          for (const auto& [name, value] : action.at("header").items())
            headers.emplace_back(name, value.get<std::string>());
        }
      } catch (const json::exception&) {
        rethrow_as(ExitCode::source, "the LFS server {} answered for object '{}' without a download action",
                   endpoint_, oid);
      }
      fetch_object(*pointer, href, headers);
    }
  }

 private:
  void fetch_object(const LfsPointer& pointer, const std::string& href, const http::Headers& headers) {
    const fs::path target = object_path(objects_dir_, pointer.oid);
    if (fs::exists(target)) return;  // fetched by an earlier attempt
    fs::create_directories(target.parent_path());
    const fs::path temporary = temporary_sibling(target);
    try {
      {
        std::unique_ptr<FILE, int (*)(FILE*)> out(std::fopen(temporary.c_str(), "wb"), std::fclose);
        if (!out) fail(ExitCode::output, "cannot write {}", temporary.string());
        http::Request get;
        get.url = href;
        get.headers = headers;
        get.follow_redirects = true;
        // Credentials go with the href only when it is on the LFS server's own host.
        const bool same_host = parse_remote_url(href).host == parse_remote_url(endpoint_).host;
        if (same_host && headers.empty()) get.basic_auth = credentials_;
        get.sink = [&](const http::Response&, const char* data, std::size_t size) {
          if (std::fwrite(data, 1, size, out.get()) == size) return true;
          write_error_ = errno;
          return false;
        };
        check_status(perform(get), parse_remote_url(href).url);
        if (std::fflush(out.get()) != 0) {
          fail(errno == ENOSPC ? ExitCode::storage : ExitCode::output, "cannot write {}: disk full?",
               temporary.string());
        }
      }
      verify(temporary, pointer, endpoint_);
    } catch (...) {
      fs::remove(temporary);
      throw;
    }
    commit_file(temporary, target);
  }

  // Performs one request; transport failures throw: network for a transient one, to be retried.
  http::Response perform(const http::Request& request) {
    write_error_ = 0;
    const http::Response response = handle_.perform(request);
    const std::string where = parse_remote_url(request.url).url;
    switch (response.transport) {
      case http::Transport::ok:
        return response;
      case http::Transport::untrusted:
        fail(ExitCode::source, "TLS certificate not trusted for LFS server {}: {}", where,
             response.transport_error);
      case http::Transport::bad_url:
        fail(ExitCode::source, "invalid LFS URL {}: {}", where, response.transport_error);
      case http::Transport::sink_refused:
        fail(ExitCode::storage, "cannot store LFS object from {}: {}", where, std::strerror(write_error_));
      case http::Transport::transient:
      case http::Transport::cancelled:
      case http::Transport::source_failed:
        break;
    }
    fail(ExitCode::network, "LFS request to {} failed: {}", where, response.transport_error);
  }

  void check_status(const http::Response& response, const std::string& url) const {
    const long status = response.status;
    if (status >= 200 && status < 300) return;
    const std::string excerpt = response.body.substr(0, 200);
    if (status == 401 || status == 403) {
      fail(ExitCode::source, "authentication failed for LFS server {} (HTTP {}){}", url, status,
           credentials_ ? "" : ": no credentials were given");
    }
    if (status == 404) fail(ExitCode::source, "LFS not found at {} (HTTP 404): {}", url, excerpt);
    if (http::transient_status(status))
      fail(ExitCode::network, "LFS server {} answered HTTP {}", url, status);
    fail(ExitCode::source, "LFS server {} answered HTTP {}: {}", url, status, excerpt);
  }

  std::string endpoint_;
  fs::path objects_dir_;
  http::Handle handle_;
  std::optional<std::pair<std::string, std::string>> credentials_;  // user, password for the LFS host
  int write_error_ = 0;  // errno of a failed write of the object being fetched
};

// The repository directory of a local remote (where git-lfs keeps lfs/objects).
std::vector<fs::path> local_object_dirs(const RemoteUrl& remote) {
  return {remote.local_path / ".git" / "lfs" / "objects", remote.local_path / "lfs" / "objects"};
}

}  // namespace

std::optional<LfsPointer> parse_lfs_pointer(std::string_view text) {
  constexpr std::string_view version = "version https://git-lfs.github.com/spec/v1\n";
  if (text.substr(0, version.size()) != version) return std::nullopt;
  LfsPointer pointer;
  std::size_t start = version.size();
  while (start < text.size()) {
    const auto end = text.find('\n', start);
    const std::string_view line = text.substr(start, end == std::string_view::npos ? end : end - start);
    if (line.substr(0, 11) == "oid sha256:") pointer.oid = std::string(line.substr(11));
    if (line.substr(0, 5) == "size ") {
      try {
        pointer.size = std::stoull(std::string(line.substr(5)));
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  const bool valid_oid =
      pointer.oid.size() == 64 && pointer.oid.find_first_not_of("0123456789abcdef") == std::string::npos;
  return valid_oid ? std::optional<LfsPointer>(pointer) : std::nullopt;
}

std::string lfs_endpoint(const RemoteUrl& remote, const fs::path& worktree) {
  init_libgit2();
  git_config* config = nullptr;
  if (fs::exists(worktree / ".lfsconfig") &&
      git_config_open_ondisk(&config, (worktree / ".lfsconfig").c_str()) == 0) {
    git_buf url = GIT_BUF_INIT;
    const bool found = git_config_get_string_buf(&url, config, "lfs.url") == 0;
    std::string configured = found ? url.ptr : "";
    git_buf_dispose(&url);
    git_config_free(config);
    if (found) return configured;
  }
  std::string base = remote.url;
  if (remote.transport == Transport::ssh || remote.transport == Transport::git) {
    // git-lfs's default for ssh and git:// remotes: the same host and path over https.
    const auto scheme = base.find("://");
    std::string path = scheme != std::string::npos ? base.substr(base.find('/', scheme + 3))
                                                   : "/" + base.substr(base.find(':') + 1);
    base = "https://" + remote.host + path;
  }
  while (!base.empty() && base.back() == '/') base.pop_back();
  const bool dot_git = base.size() > 4 && base.compare(base.size() - 4, 4, ".git") == 0;
  return base + (dot_git ? "/info/lfs" : ".git/info/lfs");
}

void fetch_lfs_objects(git_repository* repo, const RemoteUrl& remote, const RemoteAccess& access,
                       const CheckoutRequest& request, const fs::path& ca_file) {
  const std::vector<PointerFile> files = find_pointer_files(repo);
  if (files.empty()) return;
  const fs::path worktree = git_repository_workdir(repo);
  const fs::path objects_dir = fs::path(git_repository_path(repo)) / "lfs" / "objects";
  const fs::path cache_objects =
      request.cache_dir.empty() ? fs::path() : request.cache_dir / "lfs" / "objects";

  std::map<std::string, LfsPointer> missing;
  for (const auto& file : files) {
    const LfsPointer& pointer = file.pointer;
    const fs::path target = object_path(objects_dir, pointer.oid);
    // Cached objects were verified before they were stored (atomically); their size is checked again.
    if (!cache_objects.empty()) {
      const fs::path cached = object_path(cache_objects, pointer.oid);
      if (has_size(cached, pointer.size)) {
        place(cached, target, true);
        continue;
      }
    }
    if (remote.transport == Transport::local) {
      const auto dirs = local_object_dirs(remote);
      const auto source = std::find_if(dirs.begin(), dirs.end(), [&](const fs::path& dir) {
        return fs::exists(object_path(dir, pointer.oid));
      });
      if (source == dirs.end()) {
        fail(ExitCode::source, "LFS object {} of {} is not in {}/.git/lfs/objects: run `git lfs fetch` there",
             pointer.oid, file.path, remote.local_path.string());
      }
      verify(object_path(*source, pointer.oid), pointer, remote.url);
      place(object_path(*source, pointer.oid), target, false);
      continue;
    }
    missing.emplace(pointer.oid, pointer);
  }

  if (!missing.empty()) {
    const std::string endpoint = lfs_endpoint(remote, worktree);
    std::uint64_t bytes = 0;
    for (const auto& [oid, pointer] : missing) bytes += pointer.size;
    spdlog::info("fetching {} LFS objects ({:.1f} MiB) from {}", missing.size(), bytes / 1048576.0,
                 parse_remote_url(endpoint).url);
    Downloader downloader(endpoint, access, ca_file, objects_dir);
    std::vector<LfsPointer> batch;
    for (auto it = missing.begin(); it != missing.end();) {
      batch.clear();
      for (; it != missing.end() && batch.size() < batch_size; ++it) batch.push_back(it->second);
      retry_network_errors(RetryPolicy::within(request.network_timeout),
                                 [&] { downloader.download(batch); });
    }
    for (const auto& [oid, pointer] : missing) {
      if (!fs::exists(object_path(objects_dir, oid))) {
        fail(ExitCode::source, "the LFS server {} did not return object {}", parse_remote_url(endpoint).url,
             oid);
      }
      if (!cache_objects.empty()) place(object_path(objects_dir, oid), object_path(cache_objects, oid), true);
    }
  }

  for (const auto& file : files) {
    const fs::path destination = worktree / file.path;
    place(object_path(objects_dir, file.pointer.oid), destination, false);
    fs::permissions(destination,
                    file.mode == GIT_FILEMODE_BLOB_EXECUTABLE ? fs::perms(0755) : fs::perms(0644));
  }
  spdlog::info("replaced {} LFS pointer files in {}", files.size(), worktree.string());
}

}  // namespace tp::git
