// Choosing the local address a rank's Gloo sockets bind to (GLOO_SOCKET_IFNAME, the route to
// MASTER_ADDR, the hostname's address) and saying which it chose.

#include "comm/gloo_binding.h"

#include <arpa/inet.h>
#include <bertlab/error.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

namespace bertlab {
namespace {

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// The numeric form of a socket address ("198.18.0.2", "fd00::2").
std::string numeric_host(const sockaddr* addr, socklen_t length) {
  std::array<char, NI_MAXHOST> host{};
  if (getnameinfo(addr, length, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "";
  }
  return host.data();
}

/// This machine's interfaces: name -> its numeric addresses.
std::vector<std::pair<std::string, std::string>> interface_addresses() {
  std::vector<std::pair<std::string, std::string>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    const socklen_t length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    out.emplace_back(i->ifa_name, numeric_host(i->ifa_addr, length));
  }
  freeifaddrs(list);
  return out;
}

std::string interface_of(const std::string& address) {
  for (const auto& [name, addr] : interface_addresses()) {
    if (addr == address) return name;
  }
  return "";
}

/// The local address the kernel would send from to reach `host` (a UDP socket's connect sends
/// nothing): IPv4 results first, as the TCP store's client tries them. nullopt when `host` does
/// not resolve or no route leads to it.
std::optional<std::string> route_source_to(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0) return std::nullopt;
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> owner(found, freeaddrinfo);
  for (const int family : {AF_INET, AF_INET6}) {
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
      if (a->ai_family != family) continue;
      const int fd = socket(a->ai_family, SOCK_DGRAM, 0);
      if (fd < 0) continue;
      sockaddr_storage local{};
      socklen_t length = sizeof(local);
      const bool ok = connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
                      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
      close(fd);
      if (ok) {
        std::string address = numeric_host(reinterpret_cast<sockaddr*>(&local), length);
        if (!address.empty()) return address;
      }
    }
  }
  return std::nullopt;
}

std::string this_host_name() {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

}  // namespace

std::string GlooBinding::describe() const {
  if (!interfaces.empty()) {
    return fmt::format("interface{} {} (GLOO_SOCKET_IFNAME)", interfaces.size() == 1 ? "" : "s",
                       fmt::join(interfaces, ", "));
  }
  if (interface.empty()) return fmt::format("{} ({})", address, reason);
  return fmt::format("{} (interface {}; {})", address, interface, reason);
}

GlooBinding choose_gloo_binding(const std::string& master_addr) {
  GlooBinding out;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    out.interfaces = split_commas(ifname);
    std::vector<std::string> names;
    for (const auto& [name, addr] : interface_addresses()) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (const auto& name : out.interfaces) {
      BERTLAB_CHECK_AS(ConfigError, if_nametoindex(name.c_str()) != 0,
                       "environment GLOO_SOCKET_IFNAME={}: this machine has no interface '{}' "
                       "(it has {}); name the interface of the network the ranks share",
                       ifname, name, fmt::join(names, ", "));
    }
    out.reason = "GLOO_SOCKET_IFNAME";
    return out;
  }
  if (auto source = route_source_to(master_addr)) {
    out.address = *source;
    out.interface = interface_of(*source);
    out.reason = fmt::format("the route to MASTER_ADDR {}", master_addr);
    return out;
  }
  // No route (or no resolution): the host name's address, PyTorch's default device.
  out.address = this_host_name();
  out.reason =
      fmt::format("this machine's host name; no route to MASTER_ADDR {} was found", master_addr);
  return out;
}

}  // namespace bertlab
