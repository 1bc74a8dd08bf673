// Loading plugin libraries with Boost.DLL and checking their ABI version before registering them.

#include "runtime/plugin_host.h"

#include <bertlab/error.h>
#include <bertlab/log.h>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

namespace bertlab {

namespace fs = std::filesystem;

const char* host_abi_tag() { return BERTLAB_SDK_ABI_TAG; }

namespace {

/// The dynamic loader's own words for why `file` does not load (Boost.DLL wraps them in a
/// longer message).
std::string loader_reason(const fs::path& file, const std::string& fallback) {
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) {
    ::dlclose(handle);
    return fallback;
  }
  const char* reason = ::dlerror();
  return reason != nullptr ? reason : fallback;
}

// Refuses a library anyone may write, or one in a folder where anyone may add or replace files:
// it could be someone else's code, and loading it runs that code with this user's rights.
void check_not_world_writable(const fs::path& file) {
  fs::path folder = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  for (const auto& [path, what] : {std::pair{file, "the file"}, std::pair{folder, "its folder"}}) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && (st.st_mode & S_IWOTH) != 0) {
      throw PluginError(fmt::format(
          "{}: refused: {} ({}) is writable by every user, so anyone could have replaced the "
          "plugin; fix it with chmod o-w {}, or pass --allow-insecure-plugins",
          file.string(), what, path.string(), path.string()));
    }
  }
}

// Calls the library's entry point; returns its plugin description once checked against this
// host's API version and ABI tag.
const PluginEntry& checked_entry(const boost::dll::shared_library& lib, const std::string& where) {
  if (!lib.has(BERTLAB_PLUGIN_ENTRY_SYMBOL)) {
    throw PluginError(fmt::format(
        "{}: not a bertlab plugin: it has no '{}' entry point (define it with BERTLAB_PLUGIN in "
        "one source file of the plugin)",
        where, BERTLAB_PLUGIN_ENTRY_SYMBOL));
  }
  auto entry_fn = lib.get<const PluginEntry*()>(BERTLAB_PLUGIN_ENTRY_SYMBOL);
  const PluginEntry* entry = nullptr;
  try {
    entry = entry_fn();
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("{}: the entry point threw: {}", where, e.what()));
  }
  if (entry == nullptr) {
    throw PluginError(fmt::format("{}: the entry point returned no plugin description", where));
  }
  if (entry->api_version != kPluginApiVersion) {
    throw PluginError(fmt::format(
        "{}: plugin API version mismatch: got {}, supported version is {}; rebuild the plugin "
        "against this bertlab's SDK",
        where, entry->api_version, kPluginApiVersion));
  }
  const char* tag = entry->abi_tag != nullptr ? entry->abi_tag : "(none)";
  if (std::strcmp(tag, host_abi_tag()) != 0) {
    throw PluginError(fmt::format(
        "{}: plugin ABI tag mismatch: got '{}', expected '{}'; rebuild the plugin with the same "
        "compiler major version, C++ ABI and libtorch as bertlab",
        where, tag, host_abi_tag()));
  }
  if (entry->name == nullptr || *entry->name == '\0' || entry->register_components == nullptr) {
    throw PluginError(
        fmt::format("{}: the plugin description has no name or no register "
                    "function",
                    where));
  }
  return *entry;
}

// Runs the plugin's register function; any failure but a PluginError is rethrown as one naming
// the plugin.
void register_plugin(const PluginEntry& entry, Registry& registry, const std::string& where) {
  try {
    entry.register_components(registry);
  } catch (const PluginError&) {
    throw;
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("{}: plugin '{}' failed to register its components: {}", where,
                                  entry.name, e.what()));
  } catch (...) {
    throw PluginError(
        fmt::format("{}: plugin '{}' failed to register its components: unknown "
                    "exception",
                    where, entry.name));
  }
}

}  // namespace

PluginHost::PluginHost() = default;
PluginHost::~PluginHost() = default;

fs::path PluginHost::builtin_plugin_dir() {
  boost::dll::fs::error_code ec;
  fs::path exe = boost::dll::program_location(ec);
  if (ec) return {};
  return exe.parent_path().parent_path() / "lib" / "bertlab" / "plugins";
}

std::vector<fs::path> PluginHost::search_path(const std::vector<fs::path>& extra_dirs,
                                              bool include_builtin) {
  std::vector<fs::path> dirs;
  if (include_builtin) {
    fs::path builtin = builtin_plugin_dir();
    if (!builtin.empty() && fs::is_directory(builtin)) dirs.push_back(builtin);
  }
  if (const char* env = std::getenv("BERTLAB_PLUGIN_PATH"); env != nullptr) {
    std::string value(env);
    size_t start = 0;
    while (start <= value.size()) {
      size_t end = value.find(':', start);
      if (end == std::string::npos) end = value.size();
      if (end > start) dirs.emplace_back(value.substr(start, end - start));
      start = end + 1;
    }
  }
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());
  return dirs;
}

void PluginHost::load_directories(const std::vector<fs::path>& dirs) {
  std::vector<std::string> errors;
  std::set<fs::path> seen;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      errors.push_back(
          fmt::format("{}: plugin folder does not exist (from --plugin-dir or BERTLAB_PLUGIN_PATH)",
                      dir.string()));
      continue;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".so" && !entry.is_directory()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      fs::path canonical = fs::weakly_canonical(file, ec);
      if (!seen.insert(ec ? file : canonical).second) continue;  // same folder listed twice
      try {
        load_file(file);
      } catch (const PluginError& e) {
        errors.emplace_back(e.what());
      }
    }
  }
  if (!errors.empty()) {
    std::string message;
    for (const auto& e : errors) message += (message.empty() ? "" : "\n") + e;
    throw PluginError(message);
  }
}

void PluginHost::load_file(const fs::path& file) {
  const std::string where = file.string();
  if (!allow_insecure_) check_not_world_writable(file);
  auto library = std::make_unique<boost::dll::shared_library>();
  try {
    library->load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("{}: cannot be loaded as a shared library: {}", where,
                                  loader_reason(file, e.what())));
  }
  // Kept loaded even when the checks below fail: a register function that threw may already have
  // registered factories that point into the library.
  boost::dll::shared_library* lib = library.get();
  libraries_.push_back(std::move(library));
  const PluginEntry& entry = checked_entry(*lib, where);
  const std::string name = entry.name;
  const std::string version = entry.version != nullptr ? entry.version : "";
  registry_.set_current_origin(PluginOrigin{name, version, file});
  register_plugin(entry, registry_, where);
  plugins_.push_back(LoadedPlugin{name, version, file});
  log_debug("plugin", "loaded {} {} from {}", name, version, where);
}

}  // namespace bertlab
