#pragma once
// Finds, loads and checks plugin libraries; keeps them loaded for the life of the host.

#include "runtime/registry.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace boost::dll {
class shared_library;
}

namespace bertlab {

struct LoadedPlugin {
  std::string name;
  std::string version;
  std::filesystem::path file;
};

class PluginHost {
 public:
  PluginHost();
  ~PluginHost();
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;

  /// The in-tree plugin folder beside the running executable (<prefix>/lib/bertlab/plugins).
  static std::filesystem::path builtin_plugin_dir();
  /// Folders to search, in order: the in-tree folder (when `include_builtin`), every folder in
  /// BERTLAB_PLUGIN_PATH (colon-separated), then `extra_dirs` (--plugin-dir).
  static std::vector<std::filesystem::path> search_path(
      const std::vector<std::filesystem::path>& extra_dirs, bool include_builtin = true);

  /// Loads every `*.so` in each folder. Collects every failure and throws one PluginError
  /// listing them all (each line names its file).
  void load_directories(const std::vector<std::filesystem::path>& dirs);
  /// Loads one plugin library; throws PluginError naming `file` on any failure.
  /// Refuses (PluginError) a file that it, or its folder, lets every user write, unless
  /// allow_insecure() was set (--allow-insecure-plugins): anyone could have replaced it.
  void load_file(const std::filesystem::path& file);
  /// Loads world-writable plugin files and folders too.
  void allow_insecure(bool allow) { allow_insecure_ = allow; }

  const ComponentRegistry& registry() const { return registry_; }
  const std::vector<LoadedPlugin>& plugins() const { return plugins_; }

 private:
  bool allow_insecure_ = false;
  // Declared before registry_, so the libraries outlive every factory and tool that points
  // into them (members are destroyed in reverse order).
  std::vector<std::unique_ptr<boost::dll::shared_library>> libraries_;
  ComponentRegistry registry_;
  std::vector<LoadedPlugin> plugins_;
};

}  // namespace bertlab
