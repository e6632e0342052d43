// The two cuSOLVER baselines of gpu/equalizers.hpp. Both build R (float) on the device from h.
#include "gpu/equalizers.hpp"

#include "gpu/cusolver_library.hpp"
#include "gpu/resources.cuh"

#include <cuComplex.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace paq::gpu {

namespace {

constexpr int n_eq = dsp::chain::L_eq;
constexpr int n_ch = dsp::chain::L_ch;
constexpr int n1 = dsp::chain::N1;
constexpr int l1 = dsp::chain::L1;
constexpr int band = n_ch - 1;

/// r_h(k) (+ load at 0) and the right-hand side h_n0 per packet, one block per packet.
__global__ void autocorr_rhs_kernel(const cuFloatComplex* __restrict__ h_all, const double* __restrict__ load,
                                    cuFloatComplex* __restrict__ t_all, cuFloatComplex* __restrict__ rhs)
{
    const int p = blockIdx.x;
    const cuFloatComplex* h = h_all + static_cast<std::size_t>(p) * n_ch;
    for (int k = threadIdx.x; k < n_ch; k += blockDim.x) {
        cuFloatComplex s = make_cuFloatComplex(0.0f, 0.0f);
        for (int n = k; n < n_ch; ++n) s = cuCaddf(s, cuCmulf(h[n], cuConjf(h[n - k])));
        if (k == 0) s.x += static_cast<float>(load[p]);
        t_all[static_cast<std::size_t>(p) * n_ch + k] = s;
    }
    for (int i = threadIdx.x; i < n_eq; i += blockDim.x) {
        const int m = -(i - l1);
        rhs[static_cast<std::size_t>(p) * n_eq + i] =
            (m >= -n1 && m < n_ch - n1) ? cuConjf(h[m + n1]) : make_cuFloatComplex(0.0f, 0.0f);
    }
}

__device__ inline cuFloatComplex toeplitz(const cuFloatComplex* t, int d)  // R[i][j], d = i - j
{
    if (d > band || d < -band) return make_cuFloatComplex(0.0f, 0.0f);
    return d >= 0 ? t[d] : cuConjf(t[-d]);
}

/// Dense column-major 186 x 186 R per packet.
__global__ void build_dense_kernel(const cuFloatComplex* __restrict__ t_all, cuFloatComplex* __restrict__ a_all)
{
    const int p = blockIdx.y;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_eq * n_eq) return;
    const int i = idx % n_eq, j = idx / n_eq;
    a_all[static_cast<std::size_t>(p) * n_eq * n_eq + idx] = toeplitz(t_all + static_cast<std::size_t>(p) * n_ch, i - j);
}

/// CSR values of the band pattern (row by row, columns ascending) per packet.
__global__ void build_csr_kernel(const cuFloatComplex* __restrict__ t_all, const int* __restrict__ row_of,
                                 const int* __restrict__ col_ind, int nnz, cuFloatComplex* __restrict__ vals)
{
    const int p = blockIdx.y;
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nnz) return;
    vals[static_cast<std::size_t>(p) * nnz + k] = toeplitz(t_all + static_cast<std::size_t>(p) * n_ch, row_of[k] - col_ind[k]);
}

/// ok[p] = 1 when potrfBatched factored matrix p (info 0).
__global__ void info_to_ok_kernel(const int* __restrict__ info, std::uint8_t* __restrict__ ok, int np)
{
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p < np) ok[p] = info[p] == 0 ? 1 : 0;
}

/// ok[p] = 1 when all 186 taps of packet p are finite (QR reports no per-matrix status).
__global__ void finite_taps_kernel(const cuFloatComplex* __restrict__ c, std::uint8_t* __restrict__ ok)
{
    const int p = blockIdx.x;
    __shared__ int bad;
    if (threadIdx.x == 0) bad = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n_eq; i += blockDim.x) {
        const cuFloatComplex v = c[static_cast<std::size_t>(p) * n_eq + i];
        if (!isfinite(v.x) || !isfinite(v.y)) bad = 1;
    }
    __syncthreads();
    if (threadIdx.x == 0) ok[p] = bad ? 0 : 1;
}

struct common {
    int device;
    std::size_t max_packets;
    stream st;
    event t0, t1;
    device_buffer<cuFloatComplex> h, t, rhs;
    device_buffer<double> load;
    float last_ms = 0.0f;

    common(int dev, std::size_t mp)
        : device(select_device(dev)), max_packets(mp), h(mp * n_ch), t(mp * n_ch), rhs(mp * n_eq), load(mp)
    {
    }

    /// Uploads h and the loads, starts the timing and builds r_h and h_n0 on the device.
    /// Returns the number of packets (0: nothing to do).
    int begin(std::span<const channel32> hh, std::span<const double> ld, std::size_t nc, std::size_t nok)
    {
        upload(hh, ld, nc, nok);
        const int np = static_cast<int>(hh.size());
        if (np == 0) return 0;
        t0.record(st.get());
        autocorr_rhs_kernel<<<np, 64, 0, st.get()>>>(h.data(), load.data(), t.data(), rhs.data());
        PAQ_CUDA_CHECK_LAUNCH();
        return np;
    }

    /// The device path's start (solve_on_device): checks np against Create and builds r_h
    /// and h_n0 from the device's h and loads on `stream`. Returns np.
    int begin_device(const cf32* hh, const double* ld, std::size_t n, cudaStream_t stream, const char* who)
    {
        if (n > max_packets) throw std::invalid_argument(std::string(who) + ": more systems than created for");
        const int np = static_cast<int>(n);
        if (np == 0) return 0;
        autocorr_rhs_kernel<<<np, 64, 0, stream>>>(reinterpret_cast<const cuFloatComplex*>(hh), ld, t.data(), rhs.data());
        PAQ_CUDA_CHECK_LAUNCH();
        return np;
    }

    void upload(std::span<const channel32> hh, std::span<const double> ld, std::size_t nc, std::size_t nok)
    {
        const std::size_t np = hh.size();
        if (np > max_packets || ld.size() != np || nc != np || nok != np) {
            throw std::invalid_argument("cusolver solver: sizes differ or exceed max_packets");
        }
        PAQ_CUDA_CHECK(cudaSetDevice(device));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(h.data(), hh.data(), np * sizeof(channel32), cudaMemcpyHostToDevice, st.get()));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(load.data(), ld.data(), np * sizeof(double), cudaMemcpyHostToDevice, st.get()));
    }
};

class dn_chol_solver final : public batched_solver {
public:
    dn_chol_solver(int dev, std::size_t mp) : c_(dev, mp), a_(mp * n_eq * n_eq), info_(mp), potrs_info_(1)
    {
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCreate(&handle_));
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnSetStream(handle_, c_.st.get()));
        std::vector<cuFloatComplex*> pa(mp), pb(mp);
        for (std::size_t p = 0; p < mp; ++p) {
            pa[p] = a_.data() + p * n_eq * n_eq;
            pb[p] = c_.rhs.data() + p * n_eq;
        }
        a_ptrs_ = device_buffer<cuFloatComplex*>(mp);
        b_ptrs_ = device_buffer<cuFloatComplex*>(mp);
        PAQ_CUDA_CHECK(cudaMemcpy(a_ptrs_.data(), pa.data(), mp * sizeof(void*), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(b_ptrs_.data(), pb.data(), mp * sizeof(void*), cudaMemcpyHostToDevice));
    }
    ~dn_chol_solver() override
    {
        if (handle_) static_cast<void>(cusolver().cusolverDnDestroy(handle_));
    }

    void solve(std::span<const channel32> h, std::span<const double> load, std::span<eq_taps32> c,
               std::span<std::uint8_t> ok) override
    {
        const int np = c_.begin(h, load, c.size(), ok.size());
        if (np == 0) return;
        const auto s = c_.st.get();
        build_dense_kernel<<<dim3((n_eq * n_eq + 255) / 256, np), 256, 0, s>>>(c_.t.data(), a_.data());
        PAQ_CUDA_CHECK_LAUNCH();
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCpotrfBatched(handle_, CUBLAS_FILL_MODE_LOWER, n_eq, a_ptrs_.data(), n_eq, info_.data(), np));
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCpotrsBatched(handle_, CUBLAS_FILL_MODE_LOWER, n_eq, 1, a_ptrs_.data(), n_eq,
                                                   b_ptrs_.data(), n_eq, potrs_info_.data(), np));
        c_.t1.record(s);
        std::vector<int> info(static_cast<std::size_t>(np));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), c_.rhs.data(), static_cast<std::size_t>(np) * sizeof(eq_taps32), cudaMemcpyDeviceToHost, s));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(info.data(), info_.data(), static_cast<std::size_t>(np) * sizeof(int), cudaMemcpyDeviceToHost, s));
        c_.st.synchronize();
        // potrfBatched reports per matrix (info > 0: not positive definite at that minor).
        for (int p = 0; p < np; ++p) ok[static_cast<std::size_t>(p)] = info[static_cast<std::size_t>(p)] == 0 ? 1 : 0;
        c_.last_ms = c_.t1.elapsed_ms_since(c_.t0);
    }
    void solve_on_device(const cf32* h, const double* load, cf32* c, std::uint8_t* ok, std::size_t n,
                         cuda_stream_t stream) override
    {
        const int np = c_.begin_device(h, load, n, stream, name());
        if (np == 0) return;
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnSetStream(handle_, stream));
        build_dense_kernel<<<dim3((n_eq * n_eq + 255) / 256, np), 256, 0, stream>>>(c_.t.data(), a_.data());
        PAQ_CUDA_CHECK_LAUNCH();
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCpotrfBatched(handle_, CUBLAS_FILL_MODE_LOWER, n_eq, a_ptrs_.data(), n_eq, info_.data(), np));
        // potrsBatched reports one status for the call (its own int, so that it does not
        // overwrite potrf's status of packet 0).
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnCpotrsBatched(handle_, CUBLAS_FILL_MODE_LOWER, n_eq, 1, a_ptrs_.data(), n_eq,
                                                   b_ptrs_.data(), n_eq, potrs_info_.data(), np));
        PAQ_CUDA_CHECK(cudaMemcpyAsync(c, c_.rhs.data(), static_cast<std::size_t>(np) * sizeof(eq_taps32), cudaMemcpyDeviceToDevice, stream));
        info_to_ok_kernel<<<(np + 127) / 128, 128, 0, stream>>>(info_.data(), ok, np);
        PAQ_CUDA_CHECK_LAUNCH();
        PAQ_CUSOLVER_CHECK(cusolver().cusolverDnSetStream(handle_, c_.st.get()));
    }
    [[nodiscard]] float last_kernel_ms() const noexcept override { return c_.last_ms; }
    [[nodiscard]] const char* name() const noexcept override { return "cusolver-dn-chol"; }

private:
    common c_;
    device_buffer<cuFloatComplex> a_;
    device_buffer<int> info_, potrs_info_;
    device_buffer<cuFloatComplex*> a_ptrs_, b_ptrs_;
    cusolverDnHandle_t handle_ = nullptr;
};

// The thesis' solver, deprecated in CUDA 13 (called through cusolver_library's table).
class sp_qr_solver final : public batched_solver {
public:
    sp_qr_solver(int dev, std::size_t mp) : c_(dev, mp)
    {
        std::vector<int> row_ptr(n_eq + 1), cols, rows;
        for (int i = 0; i < n_eq; ++i) {
            row_ptr[static_cast<std::size_t>(i)] = static_cast<int>(cols.size());
            for (int j = std::max(0, i - band); j <= std::min(n_eq - 1, i + band); ++j) {
                cols.push_back(j);
                rows.push_back(i);
            }
        }
        row_ptr[n_eq] = static_cast<int>(cols.size());
        nnz_ = static_cast<int>(cols.size());  // 12,544 for 186 x 186 with 37 off-diagonals
        row_ptr_ = device_buffer<int>(row_ptr.size());
        col_ind_ = device_buffer<int>(cols.size());
        row_of_ = device_buffer<int>(rows.size());
        vals_ = device_buffer<cuFloatComplex>(mp * static_cast<std::size_t>(nnz_));
        PAQ_CUDA_CHECK(cudaMemcpy(row_ptr_.data(), row_ptr.data(), row_ptr.size() * sizeof(int), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(col_ind_.data(), cols.data(), cols.size() * sizeof(int), cudaMemcpyHostToDevice));
        PAQ_CUDA_CHECK(cudaMemcpy(row_of_.data(), rows.data(), rows.size() * sizeof(int), cudaMemcpyHostToDevice));
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpCreate(&handle_));
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpSetStream(handle_, c_.st.get()));
        if (cusolver().cusparseCreateMatDescr(&descr_) != CUSPARSE_STATUS_SUCCESS) throw std::runtime_error("cusparseCreateMatDescr failed");
        cusolver().cusparseSetMatType(descr_, CUSPARSE_MATRIX_TYPE_GENERAL);
        cusolver().cusparseSetMatIndexBase(descr_, CUSPARSE_INDEX_BASE_ZERO);
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpCreateCsrqrInfo(&info_));
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpXcsrqrAnalysisBatched(handle_, n_eq, n_eq, nnz_, descr_, row_ptr_.data(), col_ind_.data(), info_));
        // Workspace for the largest batch, planned once (Create), not per call.
        std::size_t internal = 0, work = 0;
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpCcsrqrBufferInfoBatched(handle_, n_eq, n_eq, nnz_, descr_, vals_.data(), row_ptr_.data(),
                                                             col_ind_.data(), static_cast<int>(mp), info_, &internal, &work));
        buffer_ = device_buffer<unsigned char>(work);
        x_ = device_buffer<cuFloatComplex>(mp * n_eq);
    }
    ~sp_qr_solver() override
    {
        if (info_) static_cast<void>(cusolver().cusolverSpDestroyCsrqrInfo(info_));
        if (descr_) static_cast<void>(cusolver().cusparseDestroyMatDescr(descr_));
        if (handle_) static_cast<void>(cusolver().cusolverSpDestroy(handle_));
    }

    void solve(std::span<const channel32> h, std::span<const double> load, std::span<eq_taps32> c,
               std::span<std::uint8_t> ok) override
    {
        const int np = c_.begin(h, load, c.size(), ok.size());
        if (np == 0) return;
        const auto s = c_.st.get();
        build_csr_kernel<<<dim3((nnz_ + 255) / 256, np), 256, 0, s>>>(c_.t.data(), row_of_.data(), col_ind_.data(), nnz_, vals_.data());
        PAQ_CUDA_CHECK_LAUNCH();
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpCcsrqrsvBatched(handle_, n_eq, n_eq, nnz_, descr_, vals_.data(), row_ptr_.data(),
                                                     col_ind_.data(), c_.rhs.data(), x_.data(), np, info_, buffer_.data()));
        c_.t1.record(s);
        PAQ_CUDA_CHECK(cudaMemcpyAsync(c.data(), x_.data(), static_cast<std::size_t>(np) * sizeof(eq_taps32), cudaMemcpyDeviceToHost, s));
        c_.st.synchronize();
        // QR reports no per-matrix status: a singular system shows up as non-finite taps.
        for (int p = 0; p < np; ++p) {
            bool finite = true;
            for (const auto& v : c[static_cast<std::size_t>(p)]) finite = finite && std::isfinite(v.real()) && std::isfinite(v.imag());
            ok[static_cast<std::size_t>(p)] = finite ? 1 : 0;
        }
        c_.last_ms = c_.t1.elapsed_ms_since(c_.t0);
    }
    void solve_on_device(const cf32* h, const double* load, cf32* c, std::uint8_t* ok, std::size_t n,
                         cuda_stream_t stream) override
    {
        const int np = c_.begin_device(h, load, n, stream, name());
        if (np == 0) return;
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpSetStream(handle_, stream));
        build_csr_kernel<<<dim3((nnz_ + 255) / 256, np), 256, 0, stream>>>(c_.t.data(), row_of_.data(), col_ind_.data(), nnz_, vals_.data());
        PAQ_CUDA_CHECK_LAUNCH();
        auto* out = reinterpret_cast<cuFloatComplex*>(c);
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpCcsrqrsvBatched(handle_, n_eq, n_eq, nnz_, descr_, vals_.data(), row_ptr_.data(),
                                                     col_ind_.data(), c_.rhs.data(), out, np, info_, buffer_.data()));
        finite_taps_kernel<<<np, 64, 0, stream>>>(out, ok);
        PAQ_CUDA_CHECK_LAUNCH();
        PAQ_CUSOLVER_CHECK(cusolver().cusolverSpSetStream(handle_, c_.st.get()));
    }
    [[nodiscard]] float last_kernel_ms() const noexcept override { return c_.last_ms; }
    [[nodiscard]] const char* name() const noexcept override { return "cusolver-sp-qr"; }

private:
    common c_;
    int nnz_ = 0;
    device_buffer<int> row_ptr_, col_ind_, row_of_;
    device_buffer<cuFloatComplex> vals_, x_;
    device_buffer<unsigned char> buffer_;
    cusolverSpHandle_t handle_ = nullptr;
    cusparseMatDescr_t descr_ = nullptr;
    csrqrInfo_t info_ = nullptr;
};

}  // namespace

std::unique_ptr<batched_solver> make_batched_solver(std::string_view name, int device_id, std::size_t max_packets)
{
    if (name == "levinson") return std::make_unique<levinson_solver>(device_id, max_packets);
    if (name == "cusolver-dn-chol") return std::make_unique<dn_chol_solver>(device_id, max_packets);
    if (name == "cusolver-sp-qr") return std::make_unique<sp_qr_solver>(device_id, max_packets);
    throw std::invalid_argument("unknown solver '" + std::string(name) + "' (allowed: levinson, cusolver-dn-chol, cusolver-sp-qr)");
}

}  // namespace paq::gpu
