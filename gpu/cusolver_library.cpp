#include "gpu/cusolver_library.hpp"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

struct loaded {
    cusolver_library api;
    std::string error;  ///< empty: every entry point found
};

/// dlopen's handle for `soname` (NVIDIA's library `what`), or null with the reason in `error`.
void* open_library(const std::string& soname, const char* what, std::string& error)
{
    // Never closed: the solvers made from it live until the process ends.
    void* lib = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* why = dlerror();
        error = "cannot load " + soname + " (NVIDIA's " + what +
                ", which the cusolver solvers need; install the CUDA toolkit's library or choose another solver): " +
                (why != nullptr ? why : "unknown error");
    }
    return lib;
}

loaded load()
{
    loaded l;
    const std::string solver_so = "libcusolver.so." + std::to_string(CUSOLVER_VER_MAJOR);
    const std::string sparse_so = "libcusparse.so." + std::to_string(CUSPARSE_VER_MAJOR);
    void* solver = open_library(solver_so, "cuSOLVER", l.error);
    if (solver == nullptr) return l;
    void* sparse = open_library(sparse_so, "cuSPARSE", l.error);
    if (sparse == nullptr) return l;
    const auto find = [&](void* lib, const std::string& soname, const char* name) -> void* {
        void* f = dlsym(lib, name);
        if (f == nullptr && l.error.empty()) l.error = soname + " has no " + name + " (a library older than this build's CUDA)";
        return f;
    };
#define PAQ_CUSOLVER_FIND(name) l.api.name = reinterpret_cast<decltype(l.api.name)>(find(solver, solver_so, #name));
#define PAQ_CUSPARSE_FIND(name) l.api.name = reinterpret_cast<decltype(l.api.name)>(find(sparse, sparse_so, #name));
    PAQ_CUSOLVER_FUNCTIONS(PAQ_CUSOLVER_FIND)
    PAQ_CUSPARSE_FUNCTIONS(PAQ_CUSPARSE_FIND)
#undef PAQ_CUSOLVER_FIND
#undef PAQ_CUSPARSE_FIND
    return l;
}

}  // namespace

const cusolver_library& cusolver()
{
    // Never destroyed: a solver destroyed at the process's exit may still call through it.
    static const loaded& l = *new loaded(load());
    if (!l.error.empty()) throw std::runtime_error(l.error);
    return l.api;
}

}  // namespace paq::gpu
