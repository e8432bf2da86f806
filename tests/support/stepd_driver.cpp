// Loads libgpubind_stepd.so as the plugin does in slurmstepd (a process without protobuf) and
// plans the request on stdin: the answer's bytes on stdout, the library's result as exit code.
// Usage: gpubind_stepd_driver LIBRARY POLICY < PlanRequest > PlanResponse-or-reason
#include <dlfcn.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#define GPUBIND_STEPD_LOADER
#include "gpubind/fallback/stepd_abi.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gpubind_stepd_driver LIBRARY POLICY < request\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  gpubind_stepd_api api{};
  if (gpubind_stepd_resolve(lib, &api) != 0) {
    std::fprintf(stderr, "%s is not a matching gpubind step library\n", argv[1]);
    return 2;
  }
  const std::string request((std::istreambuf_iterator<char>(std::cin)),
                            std::istreambuf_iterator<char>());
  void* answer = nullptr;
  size_t size = 0;
  const int rc = api.plan(request.data(), request.size(), argv[2], &answer, &size);
  if (answer) std::fwrite(answer, 1, size, stdout);
  api.free(answer);
  return rc;
}
