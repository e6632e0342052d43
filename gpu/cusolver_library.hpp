// NVIDIA's cuSOLVER (and the cuSPARSE matrix descriptors its sparse solver takes), loaded when
// a solver that uses it is first made rather than linked: cuSOLVER needs cuBLAS and cublasLt,
// and loading those is the most of what a process spends starting the CUDA backend, for solvers
// that are options beside the default (pipeline.solver cusolver-dn-chol and cusolver-sp-qr, the
// two-channel cusolver-dn-chol). The backend's own chain links neither.
//
// CUDA host code only: the function types are cuSOLVER's and cuSPARSE's own headers'.
#pragma once

#include <cusolverDn.h>
#include <cusolverSp.h>
#include <cusparse.h>

namespace paq::gpu {

// The entry points used, by their library names.
#define PAQ_CUSOLVER_FUNCTIONS(X)                                                                    \
    X(cusolverDnCreate)                                                                              \
    X(cusolverDnDestroy)                                                                             \
    X(cusolverDnSetStream)                                                                           \
    X(cusolverDnCpotrfBatched)                                                                       \
    X(cusolverDnCpotrsBatched)                                                                       \
    X(cusolverSpCreate)                                                                              \
    X(cusolverSpDestroy)                                                                             \
    X(cusolverSpSetStream)                                                                           \
    X(cusolverSpCreateCsrqrInfo)                                                                     \
    X(cusolverSpDestroyCsrqrInfo)                                                                    \
    X(cusolverSpXcsrqrAnalysisBatched)                                                               \
    X(cusolverSpCcsrqrBufferInfoBatched)                                                             \
    X(cusolverSpCcsrqrsvBatched)
#define PAQ_CUSPARSE_FUNCTIONS(X)                                                                    \
    X(cusparseCreateMatDescr)                                                                        \
    X(cusparseDestroyMatDescr)                                                                       \
    X(cusparseSetMatType)                                                                            \
    X(cusparseSetMatIndexBase)

// The sparse QR solver (the thesis' baseline) is deprecated in CUDA 13: its declarations carry
// [[deprecated]], which naming their types here would report.
#if defined(__NVCC__)
#pragma nv_diag_suppress 1444
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct cusolver_library {
#define PAQ_CUSOLVER_MEMBER(name) decltype(&::name) name = nullptr;
    PAQ_CUSOLVER_FUNCTIONS(PAQ_CUSOLVER_MEMBER)
    PAQ_CUSPARSE_FUNCTIONS(PAQ_CUSOLVER_MEMBER)
#undef PAQ_CUSOLVER_MEMBER
};
#pragma GCC diagnostic pop
#if defined(__NVCC__)
#pragma nv_diag_default 1444
#endif

/// The libraries, loaded on the first call (from any thread; once a process). Throws
/// std::runtime_error naming the library and the loader's reason where one cannot be loaded or
/// lacks an entry point (each later call throws the same).
[[nodiscard]] const cusolver_library& cusolver();

}  // namespace paq::gpu
