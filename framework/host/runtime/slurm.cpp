// Slurm host lists expanded as Slurm does, and the rendezvous port derived from the job id.

#include "runtime/slurm.h"

#include <bertlab/error.h>
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <memory>

namespace bertlab {
namespace {

/// The entries of a host list: split at commas outside brackets.
std::vector<std::string> split_entries(const std::string& list) {
  std::vector<std::string> out;
  std::string current;
  int depth = 0;
  for (const char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) throw ConfigError(fmt::format("Slurm host list '{}': a ']' with no '['", list));
    if (c == ',' && depth == 0) {
      out.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) throw ConfigError(fmt::format("Slurm host list '{}': a '[' is not closed", list));
  out.push_back(current);
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

/// The names of one bracket's ranges ("01-04,07" -> 01 02 03 04 07); the width of a range's
/// first number is the width of every number it expands to (as Slurm's hostlist.c).
std::vector<std::string> expand_ranges(const std::string& ranges, const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= ranges.size()) {
    size_t end = ranges.find(',', start);
    if (end == std::string::npos) end = ranges.size();
    const std::string range = ranges.substr(start, end - start);
    const size_t dash = range.find('-');
    const std::string lo = range.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : range.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9) {
      throw ConfigError(
          fmt::format("Slurm host list '{}': '{}' is not a number or a range of numbers (as 01-04)",
                      list, range));
    }
    const long first = std::stol(lo);
    const long last = std::stol(hi);
    if (last < first) {
      throw ConfigError(
          fmt::format("Slurm host list '{}': the range '{}' ends before it starts", list, range));
    }
    for (long n = first; n <= last; ++n) {
      out.push_back(fmt::format("{:0{}}", n, static_cast<int>(lo.size())));
    }
    start = end + 1;
  }
  return out;
}

/// Every name of one entry: the text before the first bracket, times that bracket's numbers,
/// times the expansion of the rest.
std::vector<std::string> expand_entry(const std::string& entry, const std::string& list) {
  const size_t open = entry.find('[');
  if (open == std::string::npos) return {entry};
  const size_t close = entry.find(']', open);
  const std::string prefix = entry.substr(0, open);
  const auto numbers = expand_ranges(entry.substr(open + 1, close - open - 1), list);
  const auto rests = expand_entry(entry.substr(close + 1), list);
  std::vector<std::string> out;
  out.reserve(numbers.size() * rests.size());
  for (const auto& n : numbers) {
    for (const auto& rest : rests) out.push_back(prefix + n + rest);
  }
  return out;
}

/// `scontrol show hostnames LIST`'s first line, or "" when scontrol is missing or fails. The
/// list is passed only when it holds the characters of host names and ranges (no quoting issue).
std::string scontrol_first_host(const std::string& list) {
  for (const char c : list) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 &&
        std::string("-_.,[]").find(c) == std::string::npos) {
      return "";
    }
  }
  const std::string command = "scontrol show hostnames '" + list + "' 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 256> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe.get()) != nullptr) out += buffer.data();
  const int status = pclose(pipe.release());
  if (status != 0) return "";
  const size_t newline = out.find('\n');
  return out.substr(0, newline);
}

}  // namespace

std::vector<std::string> expand_slurm_hostlist(const std::string& list) {
  std::vector<std::string> out;
  for (const auto& entry : split_entries(list)) {
    if (entry.empty()) continue;
    for (auto& name : expand_entry(entry, list)) out.push_back(std::move(name));
  }
  if (out.empty()) throw ConfigError(fmt::format("Slurm host list '{}' names no host", list));
  return out;
}

std::string first_slurm_host(const std::string& list) {
  std::string host = scontrol_first_host(list);
  if (host.empty()) host = expand_slurm_hostlist(list).front();
  return host;
}

int slurm_master_port(const std::string& job_id) {
  if (!all_digits(job_id)) {
    throw ConfigError(fmt::format(
        "environment SLURM_JOB_ID={}: not a job number; set MASTER_PORT to a free port", job_id));
  }
  const std::string last4 = job_id.size() > 4 ? job_id.substr(job_id.size() - 4) : job_id;
  return 15000 + std::stoi(last4);
}

int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id) {
  int node = 0;
  size_t start = 0;
  while (start < tasks_per_node.size()) {
    size_t end = tasks_per_node.find(',', start);
    if (end == std::string::npos) end = tasks_per_node.size();
    const std::string item = tasks_per_node.substr(start, end - start);
    const size_t paren = item.find("(x");
    const std::string count = item.substr(0, paren);
    std::string repeat = "1";
    if (paren != std::string::npos) {
      if (item.back() != ')') return 0;
      repeat = item.substr(paren + 2, item.size() - paren - 3);
    }
    if (!all_digits(count) || !all_digits(repeat) || count.size() > 6 || repeat.size() > 6) {
      return 0;
    }
    node += std::stoi(repeat);
    if (node_id < node) return std::stoi(count);
    start = end + 1;
  }
  return 0;
}

}  // namespace bertlab
