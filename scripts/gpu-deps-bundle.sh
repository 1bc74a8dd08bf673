#!/usr/bin/env bash
# Bundles bertlab's third-party build dependencies (every one but libtorch) from Debian's
# packages into one folder, for a machine that has a compiler, CMake and Python's torch but none
# of Debian's -dev packages and no network (the GPU machine of scripts/gpu-check.sh).
#
#   scripts/gpu-deps-bundle.sh [OUT_DIR]          make the bundle (default gpu-deps/, ignored by git)
#   scripts/gpu-deps-bundle.sh --check DIR [ENV]  on the target: do its libraries fit this machine?
#
# Making it: `apt-get download` + `dpkg -x` of the packages below (nothing is installed), then
#   - Boost: only the headers the project's sources reach (preprocessed with their flags from
#     ${BUILD_DIR:-build}/compile_commands.json when there, and each alone with g++ and clang++),
#     plus boost/config/ whole, so the choice of compiler does not matter;
#   - no docs, man pages, changelogs, static libraries (but GoogleTest's, which has no other);
#   - .pc files and the one .cmake file that name /usr are made relative to their own location;
#   - the shared libraries those libraries need beyond glibc and the compiler's runtime (libzip's
#     libcrypto, libbz2, libz) in usr/lib/<multiarch>/fallback/, used only where the target lacks
#     them; pkgconf as usr/bin/pkg-config, for targets without one.
# The bundle must stay under 60 MiB (it travels with the working tree); it prints its size.
#
# Checking it (`--check`): the highest GLIBC_/GLIBCXX_/CXXABI_ versions its ELF files need against
# this machine's glibc and the libstdc++ of ${CXX:-g++}, the libraries they need, its pkg-config,
# and the C++ ABI of python's torch. It prints and writes ENV (default DIR/env.sh, to source): the
# CMAKE_PREFIX_PATH, PKG_CONFIG_PATH and LD_LIBRARY_PATH that use the bundle. Exit 1 if it does not fit.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
max_mib=60

# Found with `dpkg -S` on the headers, libraries and CMake/pkg-config files that
# cmake/Dependencies.cmake and tests/CMakeLists.txt find. GoogleTest: gtest only (no test uses gmock).
dev_packages=(
  libtomlplusplus-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libboost1.74-dev libboost-filesystem1.74-dev # Boost.DLL, Boost.Math (headers), Boost.Filesystem
  libutf8proc-dev libleveldb-dev libsnappy-dev libzip-dev libgtest-dev
)
# The shared libraries the -dev packages' lib*.so symlinks point to.
runtime_packages=(
  libtomlplusplus3 libfmt9 libboost-filesystem1.74.0 libutf8proc2 libleveldb1d libsnappy1v5 libzip4
)
# find_package(PkgConfig REQUIRED) needs a pkg-config.
tool_packages=(pkgconf-bin libpkgconf3)
# Always on the target (glibc and the compiler's runtime); never bundled.
base_packages=(libc6 libgcc-s1 libstdc++6)
base_sonames='^(libc|libm|libdl|libpthread|librt|libutil|libresolv|ld-linux-x86-64|ld-linux-aarch64|libstdc\+\+|libgcc_s)\.so'

log() { echo "[gpu-deps] $*"; }
die() {
  echo "[gpu-deps] $*" >&2
  exit 1
}
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }

# ---- making the bundle ---------------------------------------------------------------------

# Downloads PACKAGES into DIR and unpacks them into TREE; appends "package version" to MANIFEST.
fetch_packages() {
  local dir=$1 tree=$2 manifest=$3
  shift 3
  (cd "$dir" && apt-get download -q "$@" > /dev/null) ||
    die "apt-get download $* failed; run 'apt-get update' (and check the names with apt-cache policy)"
  local deb
  for deb in "$dir"/*.deb; do
    # shellcheck disable=SC2016  # dpkg-deb's fields
    dpkg-deb --show --showformat='${Package} ${Version}\n' "$deb" >> "$manifest"
    dpkg -x "$deb" "$tree"
    rm "$deb"
  done
}

# The project's own files that include a Boost header, by absolute path.
boost_including_sources() {
  local list
  if git -C "$root" rev-parse --git-dir > /dev/null 2>&1; then
    list=$(git -C "$root" ls-files --cached --others --exclude-standard \
      '*.cpp' '*.cc' '*.h' '*.hpp' '*.inl')
  else
    list=$(cd "$root" && find . -path './build*' -prune -o -type f \
      \( -name '*.cpp' -o -name '*.cc' -o -name '*.h' -o -name '*.hpp' -o -name '*.inl' \) -print)
  fi
  (cd "$root" && printf '%s\n' "$list" | xargs -r grep -lE '^\s*#\s*include\s*[<"]boost/' |
    while read -r f; do realpath "$f"; done)
}

# `cd DIR && COMPILER ARGS -M -MG` lines, one per compile_commands.json entry for FILES, with
# INCLUDE first on the include path (so Boost comes from the unpacked package).
compile_command_lines() {
  local database=$1 include=$2
  shift 2
  python3 - "$database" "$include" "$@" << 'EOF'
import json, os, shlex, sys
database, include, files = sys.argv[1], sys.argv[2], set(sys.argv[3:])
for entry in json.load(open(database)):
    source = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    args = entry.get("arguments") or shlex.split(entry["command"])
    if source not in files or "nvcc" in os.path.basename(args[0]):
        continue
    out, skip = [args[0], "-isystem", include], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif a not in ("-c", "-M", "-MM", "-MD", "-MMD"):
            out.append(a)
    print("cd " + shlex.quote(entry["directory"]) + " && " + shlex.join(out + ["-M", "-MG"]))
EOF
}

# The boost/... headers (relative to INCLUDE) that a make-style dependency list on stdin names.
boost_headers_in_deps() {
  local include=$1
  sed 's/\\$//' | tr -s ' ' '\n' | grep "^$include/boost/" | xargs -r realpath -m |
    sed -n "s#^$include/##p" | grep '^boost/' || true
}

# Every boost/... header (relative to INCLUDE) that the project's sources reach.
boost_headers_reached() {
  local include=$1 tmp=$2 files=() line
  mapfile -t files < <(boost_including_sources)
  ((${#files[@]})) || return 0
  log "Boost is included by ${files[*]#"$root/"}" >&2
  local database=${BERTLAB_COMPILE_COMMANDS:-$root/${BUILD_DIR:-build}/compile_commands.json}
  if [[ -f $database ]] && command -v python3 > /dev/null; then
    log "preprocessing them with their flags from $database" >&2
    compile_command_lines "$database" "$include" "${files[@]}" | while read -r line; do
      bash -c "$line" 2> "$tmp/cpp.err" | boost_headers_in_deps "$include" ||
        die "preprocessing failed: $line: $(head -5 "$tmp/cpp.err")"
    done
  else
    log "no $database (or no python3): only their #include lines are preprocessed" >&2
  fi
  # Each file's Boost #include lines alone, with and without the BOOST_ macros the CMake files
  # define, by every compiler here: this covers headers and files outside the database.
  local defines=() f cxx flags
  mapfile -t defines < <(cd "$root" &&
    grep -rhoE --include=CMakeLists.txt --include='*.cmake' '\bBOOST_[A-Z0-9_]+\b' \
      framework plugins cmake tests 2> /dev/null | sort -u | sed 's/^/-D/')
  for f in "${files[@]}"; do
    grep -E '^\s*#\s*include\s*[<"]boost/' "$f" > "$tmp/boost_includes.cpp"
    for cxx in g++ clang++; do
      command -v "$cxx" > /dev/null || continue
      for flags in "" "${defines[*]}"; do
        # shellcheck disable=SC2086  # flags: zero or more -D words
        "$cxx" -std=c++17 -isystem "$include" $flags -M -MG -x c++ "$tmp/boost_includes.cpp" \
          2> "$tmp/cpp.err" | boost_headers_in_deps "$include" ||
          die "$cxx could not preprocess the Boost includes of $f: $(head -5 "$tmp/cpp.err")"
      done
    done
  done
}

# Replaces TREE/usr/include/boost by the headers the project reaches, and boost/config/ whole.
prune_boost() {
  local tree=$1 tmp=$2 include=$1/usr/include
  boost_headers_reached "$include" "$tmp" | sort -u > "$tmp/boost_headers.txt"
  (cd "$include" && find boost/config -type f) >> "$tmp/boost_headers.txt"
  echo boost/version.hpp >> "$tmp/boost_headers.txt"
  log "Boost: $(sort -u "$tmp/boost_headers.txt" | wc -l) headers of $(find "$include/boost" -type f | wc -l) kept"
  mv "$include/boost" "$tmp/boost-all"
  mkdir -p "$include/boost"
  (cd "$tmp/boost-all" && sort -u "$tmp/boost_headers.txt" | sed 's#^boost/##' |
    xargs cp --parents -t "$include/boost")
}

# Drops what a build does not read: docs, man pages, changelogs, static libraries but gtest's,
# Boost's static variants, programs but pkgconf.
prune_tree() {
  local tree=$1 multiarch=$2
  rm -rf "$tree"/usr/share/{doc,doc-base,man,info,lintian,bug,bash-completion} "$tree/usr/src"
  find "$tree/usr/lib/$multiarch" -name '*.a' ! -name 'libgtest*.a' -delete
  find "$tree/usr/lib/$multiarch/cmake" -name '*-variant-static.cmake' -delete
  find "$tree/usr/bin" -mindepth 1 ! -name pkgconf -delete 2> /dev/null || true
}

# Makes .pc files relocatable: prefix=/usr becomes prefix=${pcfiledir}/<path to usr> (added
# where a file has none, as gtest.pc), and every other /usr, ${prefix}.
relocate_pc_files() {
  local tree=$1 pc rel
  while read -r pc; do
    rel=$(realpath -m --relative-to="$(dirname "$pc")" "$tree/usr")
    grep -q '^prefix=' "$pc" || sed -i '1i prefix=/usr' "$pc"
    # shellcheck disable=SC2016  # ${prefix} is pkg-config's
    sed -i -e "s#^prefix=/usr\$#prefix=\${pcfiledir}/$rel#" \
      -e '/^prefix=/!s#\([= ]\|-[IL]\)/usr\(/\|$\| \)#\1${prefix}\2#g' "$pc"
  done < <(find "$tree/usr" -name '*.pc')
}

# Makes the exported-target files that hard-code /usr (Snappy's) relative to their location.
relocate_cmake_files() {
  local tree=$1 file rel
  while read -r file; do
    rel=$(realpath -m --relative-to="$(dirname "$file")" "$tree/usr")
    sed -i "s#^set(_IMPORT_PREFIX \"/usr\")#get_filename_component(_IMPORT_PREFIX \"\${CMAKE_CURRENT_LIST_DIR}/$rel\" ABSOLUTE)#" "$file"
  done < <(grep -rl '^set(_IMPORT_PREFIX "/usr")' "$tree/usr" --include='*.cmake' || true)
  # Per-configuration files, included while _IMPORT_PREFIX is set.
  while read -r file; do
    sed -i 's#"/usr/#"${_IMPORT_PREFIX}/#g' "$file"
  done < <(grep -rlE '(IMPORTED_LOCATION|_import_check_files).*"/usr/' "$tree/usr" --include='*.cmake' || true)
}

# Lines of .cmake/.pc files that still name /usr, outside comments and outside CMake's
# "/usr move" blocks (if(_realCurr STREQUAL _realOrig) ... endif()), which only apply when the
# file is found at its original place.
absolute_paths_left() {
  # shellcheck disable=SC2016  # an awk program
  find "$1/usr" \( -name '*.cmake' -o -name '*.pc' \) -print0 | xargs -0 -r awk '
    FNR == 1 {block = 0}
    /^[ \t]*if\(_realCurr STREQUAL _realOrig\)/ {block = 1}
    !block && !/^[ \t]*#/ && !/_realOrig/ && /(^|[^A-Za-z0-9_.])\/usr($|[\/" ;)])/ {print FILENAME ":" FNR ": " $0}
    block && /^[ \t]*endif\(\)/ {block = 0}'
}

# pkgconf in usr/libexec, and usr/bin/pkg-config running it with the bundle's libpkgconf:
# find_program() looks in <prefix>/bin of CMAKE_PREFIX_PATH before the system's folders.
install_pkg_config() {
  local tree=$1 multiarch=$2
  mkdir -p "$tree/usr/libexec"
  mv "$tree/usr/bin/pkgconf" "$tree/usr/libexec/pkgconf"
  cat > "$tree/usr/bin/pkg-config" << EOF
#!/bin/sh
# pkgconf from the bertlab GPU dependency bundle (scripts/gpu-deps-bundle.sh).
here=\$(cd "\$(dirname "\$0")" && pwd)
LD_LIBRARY_PATH="\$here/../lib/$multiarch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/../libexec/pkgconf" "\$@"
EOF
  chmod +x "$tree/usr/bin/pkg-config"
}

# The sonames that the ELF files under DIR need, one a line.
needed_sonames() {
  find "$1" -type f \( -name '*.so*' -o -path '*/libexec/*' \) -print0 |
    xargs -0 -r objdump -p 2> /dev/null | awk '$1 == "NEEDED" {print $2}' | sort -u
}

# Puts into LIBDIR/fallback the libraries that the bundled ones need beyond glibc, the
# compiler's runtime and the bundle itself, from the packages the runtime packages depend on.
add_fallback_libraries() {
  local tree=$1 libdir=$2 tmp=$3 manifest=$4
  local missing=() soname
  while read -r soname; do
    [[ -e $libdir/$soname ]] || [[ $soname =~ $base_sonames ]] || missing+=("$soname")
  done < <(needed_sonames "$tree")
  ((${#missing[@]})) || return 0
  local exclude depends
  exclude=$(printf '%s\n' "${base_packages[@]}" "${runtime_packages[@]}" "${tool_packages[@]}")
  depends=$(apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "${runtime_packages[@]}" "${tool_packages[@]}" |
    awk '$1 ~ /^(Pre)?Depends:$/ {print $2}' | sed 's/:.*//' | sort -u | grep -vxF "$exclude" || true)
  mkdir -p "$tmp/fallback-debs" "$tmp/fallback" "$libdir/fallback"
  chmod a+rwx "$tmp/fallback-debs"
  echo "# fallback (used where the target lacks them):" >> "$manifest"
  # shellcheck disable=SC2086  # one package a word
  fetch_packages "$tmp/fallback-debs" "$tmp/fallback" "$manifest" $depends
  local found
  for soname in "${missing[@]}"; do
    found=$(find "$tmp/fallback" -name "$soname" | head -1)
    [[ -n $found ]] || die "no package gives $soname (needed by the bundled libraries)"
    cp -L "$found" "$libdir/fallback/$soname"
  done
  log "fallback libraries: ${missing[*]}"
}

make_bundle() {
  local out=${1:-$root/gpu-deps}
  local multiarch
  multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2> /dev/null || gcc -print-multiarch)
  if [[ -e $out && ! -f $out/MANIFEST && -n $(ls -A "$out" 2> /dev/null) ]]; then
    die "$out exists and is not a bundle (no MANIFEST); give another OUT_DIR or remove it"
  fi
  tmp=$(mktemp -d) # global: the EXIT trap runs after this function returns
  trap 'rm -rf "$tmp"' EXIT
  chmod 755 "$tmp"
  mkdir -p "$tmp/debs" "$tmp/tree"
  chmod a+rwx "$tmp/debs" # apt-get download writes as _apt
  local manifest=$tmp/tree/MANIFEST
  {
    echo "# bertlab GPU dependency bundle: scripts/gpu-deps-bundle.sh, $(date -u +%F)"
    echo "# made on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"'), $multiarch"
  } > "$manifest"
  log "downloading ${#dev_packages[@]} -dev, ${#runtime_packages[@]} runtime and ${#tool_packages[@]} tool packages"
  fetch_packages "$tmp/debs" "$tmp/tree" "$manifest" \
    "${dev_packages[@]}" "${runtime_packages[@]}" "${tool_packages[@]}"

  prune_boost "$tmp/tree" "$tmp"
  prune_tree "$tmp/tree" "$multiarch"
  relocate_pc_files "$tmp/tree"
  relocate_cmake_files "$tmp/tree"
  install_pkg_config "$tmp/tree" "$multiarch"
  add_fallback_libraries "$tmp/tree" "$tmp/tree/usr/lib/$multiarch" "$tmp" "$manifest"
  local left
  left=$(absolute_paths_left "$tmp/tree")
  [[ -z $left ]] || die "files in the bundle still name /usr; relocate them:"$'\n'"$left"

  # Only the bundle's own leftovers are removed (it has a MANIFEST, checked above).
  rm -rf "$out"
  mkdir -p "$(dirname "$out")"
  cp -a "$tmp/tree" "$out"
  local bytes mib
  bytes=$(du -sb "$out" | cut -f1)
  mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
  log "largest parts:"
  (cd "$out" && du -sh usr/include/* usr/lib/"$multiarch"/* 2> /dev/null | sort -h | tail -6 |
    sed 's/^/  /')
  if ((bytes > max_mib * 1048576)); then
    die "the bundle in $out is $mib MiB, over the $max_mib MiB it may take; prune it further"
  fi
  log "bundle in $out: $mib MiB, $(grep -vc '^#' "$out/MANIFEST") packages (MANIFEST)"
  log "on the target: scripts/gpu-deps-bundle.sh --check $out"
}

# ---- checking it on the target -------------------------------------------------------------

# "file version" for every symbol version (GLIBC_2.34, ...) that the ELF files under DIR need,
# files relative to DIR.
needed_versions() {
  local dir=$1
  find "$dir" -type f \( -name '*.so*' -o -path '*/libexec/*' \) -print0 |
    xargs -0 -r objdump -p 2> /dev/null | awk -v dir="$dir/" '
      / file format / {file = $1; sub(":$", "", file); sub("^" dir, "", file)}
      /^Version References:/ {refs = 1; next}
      /^[^ ]/ {refs = 0}
      refs && NF == 4 && $4 ~ /^[A-Z]/ {print file, $4}' | sort -u
}

# The highest version of family PREFIX (GLIBC_, GLIBCXX_, CXXABI_) in needed_versions' lines on
# stdin, without the prefix.
highest() { awk '{print $2}' | grep -oE "^$1[0-9][0-9.]*\$" | sed "s/^$1//" | sort -V | tail -1; }

# The bundled files that need VERSION, from needed_versions' lines on stdin.
needed_by() { awk -v v="$1" '$2 == v {n = split($1, p, "/"); print p[n]}' | paste -sd, | sed 's/,/, /g'; }

# True if version $1 <= $2.
version_le() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1) == "$1" ]]; }

# True if this machine's dynamic linker finds SONAME ($1); $2: the multiarch folder name.
machine_has() {
  local ldconfig d
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  "$ldconfig" -p 2> /dev/null | awk -v s="$1" '$1 == s {found = 1} END {exit !found}' && return 0
  for d in /lib64 /usr/lib64 "/lib/$2" "/usr/lib/$2" /lib /usr/lib; do
    [[ -e $d/$1 ]] && return 0
  done
  return 1
}

# The checks below append what does not fit, with what to do, to `problems`.
problems=()

check_arch() {
  local bundle_arch=${1%%-*} machine_arch
  machine_arch=$(uname -m)
  [[ $bundle_arch == "$machine_arch" ]] ||
    problems+=("the bundle is for $bundle_arch, this machine is $machine_arch: make it on a $machine_arch Debian")
}

# Each library the bundled ones need is in the bundle, on this machine, or in fallback/. Sets
# use_fallback to 1 if fallback/ is needed.
use_fallback=0
check_sonames() {
  local dir=$1 libdir=$2 multiarch=$3 soname
  while read -r soname; do
    if [[ -e $libdir/$soname ]] || [[ $soname =~ $base_sonames ]] ||
      machine_has "$soname" "$multiarch"; then
      continue
    elif [[ -e $libdir/fallback/$soname ]]; then
      log "$soname: not on this machine, the bundle's fallback/ copy is used"
      use_fallback=1
    else
      problems+=("$soname, needed by the bundle, is neither on this machine nor in the bundle")
    fi
  done < <(needed_sonames "$dir")
}

# glibc against this machine's, GLIBCXX_/CXXABI_ against the libstdc++ of ${CXX:-g++}.
check_versions() {
  local versions=$1 need have cxx libstdcxx family
  need=$(highest GLIBC_ <<< "$versions")
  have=$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{print $2}')
  [[ -n $have ]] || have=$(ldd --version 2> /dev/null | head -1 | awk '{print $NF}')
  log "glibc: the bundle needs GLIBC_$need ($(needed_by "GLIBC_$need" <<< "$versions")), this machine has $have"
  version_le "$need" "$have" || problems+=("glibc $have is older than the bundle's GLIBC_$need: \
make the bundle on a Debian/Ubuntu with glibc <= $have that packages these libraries (see MANIFEST), \
or install them with this machine's package manager and use no bundle")
  cxx=${CXX:-g++}
  command -v "$cxx" > /dev/null || cxx=c++
  libstdcxx=$("$cxx" -print-file-name=libstdc++.so.6 2> /dev/null || true)
  if [[ ! -f $libstdcxx ]]; then
    problems+=("no libstdc++.so.6 for $cxx (-print-file-name): set CXX to the compiler that builds bertlab")
    return
  fi
  for family in GLIBCXX_ CXXABI_; do
    need=$(highest "$family" <<< "$versions")
    have=$(strings "$libstdcxx" | sed 's/^/- /' | highest "$family")
    log "libstdc++: the bundle needs $family$need ($(needed_by "$family$need" <<< "$versions")), $cxx's has $family$have ($(realpath "$libstdcxx"))"
    version_le "$need" "$have" || problems+=("$cxx's libstdc++ has $family$have, older than the \
bundle's $family$need: build with a newer g++ (CXX=...), or make the bundle on an older Debian")
  done
}

# The bundle's pkg-config runs here and finds the bundle's .pc files.
check_pkg_config() {
  local dir=$1 pc_path=$2 flags
  if flags=$(PKG_CONFIG_PATH=$pc_path "$dir/usr/bin/pkg-config" --cflags --libs libzip libutf8proc 2>&1); then
    log "pkg-config: libzip libutf8proc -> $flags"
  else
    problems+=("the bundle's usr/bin/pkg-config fails here: $flags")
  fi
}

# Debian's libraries use the C++11 std::string ABI; a libtorch without it cannot link with them.
check_torch_abi() {
  local py=${BERTLAB_PYTHON:-python3} abi
  if abi=$("$py" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))' 2> /dev/null); then
    log "$py's torch: _GLIBCXX_USE_CXX11_ABI=$abi"
    [[ $abi == 1 ]] || problems+=("$py's torch is built with the old C++ ABI (_GLIBCXX_USE_CXX11_ABI=0), \
which Debian's libraries cannot link with: use a torch wheel built with the C++11 ABI (2.7 or later)")
  else
    log "no torch in $py: its C++ ABI is not checked"
  fi
}

check_bundle() {
  [[ -d ${1:-} ]] || die "--check needs the bundle's folder (got '${1:-}')"
  local dir env_file libdir multiarch
  dir=$(cd "$1" && pwd)
  env_file=${2:-$dir/env.sh}
  [[ -f $dir/MANIFEST ]] || die "$dir has no MANIFEST: not a bundle of scripts/gpu-deps-bundle.sh"
  rm -f "$env_file"
  libdir=$(find "$dir/usr/lib" -mindepth 1 -maxdepth 1 -type d -name '*-linux-gnu*' | head -1)
  multiarch=${libdir##*/}
  log "bundle $dir: $(grep -vc '^#' "$dir/MANIFEST") packages," \
    "$(du -sh --apparent-size "$dir" | cut -f1), $multiarch"

  check_arch "$multiarch"
  check_sonames "$dir" "$libdir" "$multiarch"
  local versions ld_path=$libdir pc_path="$libdir/pkgconfig:$dir/usr/share/pkgconfig"
  versions=$(needed_versions "$dir")
  if ((use_fallback)); then
    ld_path+=":$libdir/fallback"
  else # fallback/ is not loaded: its needs do not count
    versions=$(grep -v '/fallback/' <<< "$versions" || true)
  fi
  check_versions "$versions"
  check_pkg_config "$dir" "$pc_path"
  check_torch_abi

  if ((${#problems[@]})); then
    local p
    for p in "${problems[@]}"; do echo "[gpu-deps] DOES NOT FIT: $p" >&2; done
    exit 1
  fi
  cat > "$env_file" << EOF
# The bertlab GPU dependency bundle $dir, checked on $(uname -n) $(date -u +%FT%TZ).
# Source it; cmake: -DCMAKE_PREFIX_PATH=$dir/usr (the environment variable works too).
export BERTLAB_GPU_DEPS_PREFIX="$dir/usr"
export CMAKE_PREFIX_PATH="$dir/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$pc_path\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$ld_path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
EOF
  log "the bundle fits this machine; use it with (written to $env_file):"
  grep '^export' "$env_file"
}

case "${1:-}" in
  -h | --help) usage ;;
  --check)
    shift
    check_bundle "$@"
    ;;
  -*) die "unknown option '$1'; usage: scripts/gpu-deps-bundle.sh [OUT_DIR] | --check DIR [ENV_FILE]" ;;
  *) make_bundle "$@" ;;
esac
