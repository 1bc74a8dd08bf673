# Sanitized builds, for every target of the tree (the library, the plugins, the tests):
#   -DBERTLAB_SANITIZE=address,undefined   AddressSanitizer + UndefinedBehaviorSanitizer
#   -DBERTLAB_SANITIZE=thread              ThreadSanitizer
#   -DBERTLAB_FUZZ=ON                      the libFuzzer targets of tests/fuzz (Clang only;
#                                          implies address,undefined and coverage feedback)
# libtorch itself is not instrumented: its reports are suppressed by scripts/sanitizers/*.supp.
set(BERTLAB_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread")
option(BERTLAB_FUZZ "Build the libFuzzer targets (Clang; implies address,undefined)" OFF)

if(BERTLAB_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "BERTLAB_FUZZ needs Clang's libFuzzer; configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14 (found ${CMAKE_CXX_COMPILER_ID})")
  endif()
  if(NOT BERTLAB_SANITIZE)
    set(BERTLAB_SANITIZE "address,undefined")
  endif()
  # Coverage feedback in every library the targets call; the targets add -fsanitize=fuzzer.
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(BERTLAB_SANITIZE)
  if(NOT BERTLAB_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "BERTLAB_SANITIZE='${BERTLAB_SANITIZE}': use address,undefined or thread")
  endif()
  # -O1 -g1 (after the build type's flags, so they win): line tables for the reports at a
  # fraction of the compile time of -O2 -g.
  add_compile_options(-fsanitize=${BERTLAB_SANITIZE} -fno-omit-frame-pointer -O1 -g1)
  add_link_options(-fsanitize=${BERTLAB_SANITIZE})
  if(BERTLAB_SANITIZE MATCHES "undefined")
    # A report is a failure, not a line in a log; vptr needs RTTI of every class it sees,
    # which libtorch's uninstrumented objects have, so it stays on.
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  message(STATUS "[bertlab] sanitizers: ${BERTLAB_SANITIZE}, fuzz targets: ${BERTLAB_FUZZ}")
endif()
