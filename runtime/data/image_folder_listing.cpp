// image_folder's listing: one subdirectory per class holding PNG or JPEG files, or fastai's train/ and valid/
// folders. Torch-free: what `trainpoint pack` packs, and what image_folder.cpp opens.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include "common/error.h"
#include "data/format_helpers.h"
#include "data/image.h"
#include "data/labelled_images.h"

namespace tp::data {

namespace fs = std::filesystem;

namespace {

// `file` relative to `dir`, with '/' between its parts. The files of a listing of `dir` all start with
// `prefix` (`dir` and a separator), so this is a string operation; fs::path's, for every file of a million,
// are slow.
std::string relative_below(const fs::path& file, const fs::path& dir, const std::string& prefix) {
  const std::string& path = file.native();
  if (path.compare(0, prefix.size(), prefix) == 0) return path.substr(prefix.size());
  return file.lexically_relative(dir).generic_string();
}

// One subdirectory per class, `files` the files under `dir`. `known_classes` (validation data) fixes the
// class indices.
LabelledImages list_image_folder(const std::vector<fs::path>& files, const fs::path& dir,
                                 const std::vector<std::string>* known_classes) {
  std::map<std::string, std::vector<fs::path>> images_by_class;  // every class folder, even without images
  std::map<std::string, std::set<std::string>> nested;  // class -> folders holding its deeper images
  bool loose_images = false;
  const std::string prefix = (dir / "").string();
  for (const fs::path& file : files) {
    const std::string relative = relative_below(file, dir, prefix);
    const bool image = has_image_extension(file);
    const std::size_t class_end = relative.find('/');
    if (class_end == std::string::npos) {
      loose_images = loose_images || image;
      continue;
    }
    const std::string class_name = relative.substr(0, class_end);
    auto& images = images_by_class[class_name];
    if (image) images.push_back(file);
    const std::size_t folder_end = relative.find('/', class_end + 1);
    if (image && folder_end != std::string::npos) {
      nested[class_name].insert(relative.substr(class_end + 1, folder_end - class_end - 1));
    }
  }
  if (images_by_class.empty()) {
    fail(ExitCode::data, "{}: no class subdirectories{}", dir.string(),
         loose_images ? " (images must be in one subdirectory per class)" : "");
  }
  // A folder whose images are all in subfolders is no class: most likely it holds the classes themselves
  // (train/circle/...), and training on it would learn the wrong problem.
  for (const auto& [name, folders] : nested) {
    const auto& images = images_by_class[name];
    const bool only_folders = std::none_of(images.begin(), images.end(), [&](const fs::path& file) {
      return std::distance(file.lexically_relative(dir).begin(), file.lexically_relative(dir).end()) == 2;
    });
    if (!only_folders) continue;
    const bool split_name = name == "train" || name == "valid" || name == "val" || name == "test";
    const std::string folder = (dir / name).string();
    fail(ExitCode::data, "{}: the class folder '{}' holds only folders ({}), not images: image_folder wants "
         "one folder of images per class{}", folder, name, fmt::join(folders, ", "),
         split_name ? " (a train/ folder beside a valid/ or val/ one is the training and validation split, "
                      "unless data.valid_source is set; or point data.source at " + folder + ")"
                    : " (if these folders are the classes, point data.source at " + folder + ")");
  }
  LabelledImages result;
  result.root = dir;
  for (const auto& entry : images_by_class) result.classes.push_back(entry.first);
  if (known_classes) result.classes = *known_classes;
  for (const auto& [name, files] : images_by_class) {
    const std::int64_t label = index_of(result.classes, name);
    if (label < 0) {
      fail(ExitCode::data, "{}: class '{}' is not among the training classes ({})", (dir / name).string(),
           name, fmt::join(result.classes, ", "));
    }
    if (files.empty())
      fail(ExitCode::data, "{}: class '{}' has no PNG or JPEG images", (dir / name).string(), name);
    result.files.insert(result.files.end(), files.begin(), files.end());
    result.targets.insert(result.targets.end(), files.size(), static_cast<float>(label));
  }
  return result;
}

// fastai's layout: `dir` holds train/ and valid/ (or val/), each with one folder per class; they are the
// training and validation split. Returns the two folders when `files` (those under `dir`) are laid out so.
std::optional<std::pair<fs::path, fs::path>> split_folders(const std::vector<fs::path>& files,
                                                           const fs::path& dir) {
  std::set<std::string> top;  // folders directly under `dir` with files two levels below them
  const std::string prefix = (dir / "").string();
  for (const fs::path& file : files) {
    const std::string relative = relative_below(file, dir, prefix);
    const std::size_t top_end = relative.find('/');
    if (top_end != std::string::npos && relative.find('/', top_end + 1) != std::string::npos) {
      top.insert(relative.substr(0, top_end));
    }
  }
  if (top.count("train") == 0) return std::nullopt;
  for (const char* valid : {"valid", "val"}) {
    if (top.count(valid) > 0) return std::make_pair(dir / "train", dir / valid);
  }
  return std::nullopt;
}

// The files of `files` under `dir`.
std::vector<fs::path> files_under(const std::vector<fs::path>& files, const fs::path& dir) {
  std::vector<fs::path> under;
  const std::string prefix = (dir / "").string();
  for (const fs::path& file : files) {
    if (file.string().rfind(prefix, 0) == 0) under.push_back(file);
  }
  return under;
}

}  // namespace

std::pair<LabelledImages, LabelledImages> image_folder_split(const spec::DataSpec& spec, const fs::path& root,
                                                             std::uint64_t seed, const FileStore& store) {
  const fs::path source = resolve(root, spec.source);
  const fs::path valid_source = spec.valid_source.empty() ? fs::path() : resolve(root, spec.valid_source);
  const std::vector<fs::path> files = store.list(source);
  if (!valid_source.empty()) {
    LabelledImages train = list_image_folder(files, source, nullptr);
    LabelledImages valid = list_image_folder(store.list(valid_source), valid_source, &train.classes);
    return {std::move(train), std::move(valid)};
  }
  if (const auto split = split_folders(files, source)) {
    const auto& [train_dir, valid_dir] = *split;
    spdlog::info("{}: {}/ and {}/ are the training and validation split (data.valid is not used)",
                 source.string(), train_dir.filename().string(), valid_dir.filename().string());
    LabelledImages train = list_image_folder(files_under(files, train_dir), train_dir, nullptr);
    LabelledImages valid = list_image_folder(files_under(files, valid_dir), valid_dir, &train.classes);
    train.root = valid.root = source;  // samples named as valid/<class>/<file>
    return {std::move(train), std::move(valid)};
  }
  return hold_out(list_image_folder(files, source, nullptr), spec.valid, seed);
}

}  // namespace tp::data
