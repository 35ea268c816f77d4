# The fuzz build (-DTRAINPOINT_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++; scripts/fuzz drives it): the
# torch-free code that parses outside input, instrumented for libFuzzer and built with AddressSanitizer
# and UndefinedBehaviorSanitizer, and one fuzzer per parser (tests/fuzz). Only the source files the
# fuzzers need are compiled, so the build stays short enough for CI. See docs/reliability.md, "Fuzzing".
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TRAINPOINT_FUZZ needs clang (libFuzzer): configure with -DCMAKE_CXX_COMPILER=clang++")
endif()

# -O1 with line tables: what libFuzzer recommends, and half the compile time of -O2 -g.
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -gline-tables-only")
set(TRAINPOINT_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
add_compile_options(${TRAINPOINT_SANITIZERS} -fsanitize=fuzzer-no-link)
add_link_options(${TRAINPOINT_SANITIZERS})

find_package(Threads REQUIRED)
find_package(tomlplusplus REQUIRED)
find_package(spdlog REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(pugixml REQUIRED)
find_package(OpenSSL REQUIRED)  # tp_common: base64
find_package(PkgConfig REQUIRED)  # tp_common: crcutil

add_library(trainpoint_warnings INTERFACE)
target_compile_options(trainpoint_warnings INTERFACE -Wall -Wextra -Werror=switch)

# runtime/common and runtime/spec as the normal build defines them (neither needs LibTorch).
add_subdirectory(runtime/common)
add_subdirectory(runtime/spec)

# The parsers only, from modules whose libraries also hold network or LibTorch code.
set(runtime ${PROJECT_SOURCE_DIR}/runtime)
add_library(tp_fuzz_s3 ${runtime}/s3/xml.cpp ${runtime}/s3/paths.cpp ${runtime}/s3/credentials.cpp)
trainpoint_module_headers(tp_fuzz_s3 s3)
target_link_libraries(tp_fuzz_s3 PUBLIC tp_common PRIVATE pugixml::pugixml nlohmann_json::nlohmann_json
                      trainpoint_warnings)
add_library(tp_fuzz_topology ${runtime}/dist/topology.cpp)
trainpoint_module_headers(tp_fuzz_topology dist)
target_link_libraries(tp_fuzz_topology PUBLIC tp_common PRIVATE trainpoint_warnings)
add_library(tp_fuzz_shard_index ${runtime}/data/shard_index.cpp ${runtime}/data/tar.cpp)
trainpoint_module_headers(tp_fuzz_shard_index data)
target_link_libraries(tp_fuzz_shard_index PUBLIC tp_common PRIVATE nlohmann_json::nlohmann_json trainpoint_warnings)
add_library(tp_fuzz_git_url ${runtime}/git/remote_url.cpp)
trainpoint_module_headers(tp_fuzz_git_url git)
target_link_libraries(tp_fuzz_git_url PUBLIC tp_common PRIVATE trainpoint_warnings)

add_subdirectory(tests/fuzz)
