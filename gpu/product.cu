#include "gpu/product.hpp"

#include "gpu/cuda_check.hpp"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace paq::gpu {

namespace {

// A block computes a tile of C, 16 steps of k at a time through shared memory; its 256 threads
// as 16 x 16, each rows ty + 16 r (r < pm) by columns tx + 16 q (q < pn) of the tile, so that a
// warp's reads of a step's B row are 16 consecutive elements and its A reads two broadcasts.
// The tile (16 pm x 16 pn) is the largest that still gives the GPU enough blocks: the stacked
// estimators' product (1064 x 779, depth 330) takes 32 x 64, the pilot's (38 x 779) 16 x 16.
// Whatever the tile, an output is one thread's sum over k in order: the same value in any shape.
constexpr int depth = 16;
constexpr int side = 16;  // threads a side

template <int pm, int pn>
__global__ void __launch_bounds__(side * side) product_tn_kernel(int m, int n, int k, const float2* __restrict__ a, int lda,
                                                              const float2* __restrict__ b, int ldb, float2* __restrict__ c, int ldc)
{
    constexpr int tm = side * pm, tn = side * pn;
    // Rows of the tile one longer than the tile: the loads write 16 consecutive k of one
    // column, a row apart, which then fall in different bank pairs.
    __shared__ float2 as[depth][tm + 1];
    __shared__ float2 bs[depth][tn + 1];
    const int tx = static_cast<int>(threadIdx.x) % side, ty = static_cast<int>(threadIdx.x) / side;
    const int i0 = static_cast<int>(blockIdx.y) * tm, j0 = static_cast<int>(blockIdx.x) * tn;
    // The loads: thread t brings k step t % 16 of columns t / 16 + 16 q of A's and B's tiles.
    const int ll = static_cast<int>(threadIdx.x) % depth, lc = static_cast<int>(threadIdx.x) / depth;
    float2 acc[pm][pn];
#pragma unroll
    for (int r = 0; r < pm; ++r) {
#pragma unroll
        for (int q = 0; q < pn; ++q) acc[r][q] = make_float2(0.0f, 0.0f);
    }
    for (int l0 = 0; l0 < k; l0 += depth) {
        const int l = l0 + ll;
#pragma unroll
        for (int q = 0; q < pm; ++q) {
            const int i = i0 + lc + side * q;
            as[ll][lc + side * q] = l < k && i < m ? a[static_cast<long long>(i) * lda + l] : make_float2(0.0f, 0.0f);
        }
#pragma unroll
        for (int q = 0; q < pn; ++q) {
            const int j = j0 + lc + side * q;
            bs[ll][lc + side * q] = l < k && j < n ? b[static_cast<long long>(j) * ldb + l] : make_float2(0.0f, 0.0f);
        }
        __syncthreads();
        const int steps = k - l0 < depth ? k - l0 : depth;  // the zeros past k would add nothing but time
        for (int s = 0; s < steps; ++s) {
            float2 x[pm], y[pn];
#pragma unroll
            for (int r = 0; r < pm; ++r) x[r] = as[s][ty + side * r];
#pragma unroll
            for (int q = 0; q < pn; ++q) y[q] = bs[s][tx + side * q];
#pragma unroll
            for (int r = 0; r < pm; ++r) {
#pragma unroll
                for (int q = 0; q < pn; ++q) {
                    acc[r][q].x = fmaf(x[r].x, y[q].x, fmaf(-x[r].y, y[q].y, acc[r][q].x));
                    acc[r][q].y = fmaf(x[r].x, y[q].y, fmaf(x[r].y, y[q].x, acc[r][q].y));
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < pm; ++r) {
        const int i = i0 + ty + side * r;
#pragma unroll
        for (int q = 0; q < pn; ++q) {
            const int j = j0 + tx + side * q;
            if (i < m && j < n) c[static_cast<long long>(j) * ldc + i] = acc[r][q];
        }
    }
}

/// Tiles of `width` that cover `len`.
constexpr int tiles(int len, int width) { return (len + width - 1) / width; }

template <int pm, int pn>
void launch(int m, int n, int k, const float2* a, int lda, const float2* b, int ldb, float2* c, int ldc, cudaStream_t s)
{
    const dim3 grid(static_cast<unsigned>(tiles(n, side * pn)), static_cast<unsigned>(tiles(m, side * pm)));
    product_tn_kernel<pm, pn><<<grid, side * side, 0, s>>>(m, n, k, a, lda, b, ldb, c, ldc);
}

/// Blocks a product of m x n outputs takes in tiles of 16 pm x 16 pn.
long long blocks(int m, int n, int pm, int pn) { return static_cast<long long>(tiles(m, side * pm)) * tiles(n, side * pn); }

/// About two blocks an SM of an H100 or H200 (132 SMs): fewer leave SMs idle through the whole
/// depth of the product.
constexpr long long enough_blocks = 256;

}  // namespace

void product_tn(int m, int n, int k, const cf32* a, int lda, const cf32* b, int ldb, cf32* c, int ldc, cuda_stream_t s)
{
    // m / 16 tiles at most down the grid's y (65,535); sizes far from int's end in the tiles'
    // index arithmetic.
    constexpr int max_m = 65535 * side, max_size = 1 << 30;
    if (m < 0 || n < 0 || k < 0 || lda < k || ldb < k || ldc < m || m > max_m || n > max_size || k > max_size) {
        throw std::invalid_argument("gpu product_tn: bad shape (m " + std::to_string(m) + ", n " + std::to_string(n) + ", k " +
                                    std::to_string(k) + ", lda " + std::to_string(lda) + ", ldb " + std::to_string(ldb) + ", ldc " +
                                    std::to_string(ldc) + ")");
    }
    if (m == 0 || n == 0) return;
    const auto* fa = reinterpret_cast<const float2*>(a);
    const auto* fb = reinterpret_cast<const float2*>(b);
    auto* fc = reinterpret_cast<float2*>(c);
    // The largest tile that gives enough blocks, halving the longer side of the tile in turn.
    if (blocks(m, n, 4, 4) >= enough_blocks) {
        launch<4, 4>(m, n, k, fa, lda, fb, ldb, fc, ldc, s);
    } else if (blocks(m, n, 2, 4) >= enough_blocks) {
        launch<2, 4>(m, n, k, fa, lda, fb, ldb, fc, ldc, s);
    } else if (blocks(m, n, 2, 2) >= enough_blocks) {
        launch<2, 2>(m, n, k, fa, lda, fb, ldb, fc, ldc, s);
    } else if (blocks(m, n, 1, 2) >= enough_blocks) {
        launch<1, 2>(m, n, k, fa, lda, fb, ldb, fc, ldc, s);
    } else {
        launch<1, 1>(m, n, k, fa, lda, fb, ldb, fc, ldc, s);
    }
    PAQ_CUDA_CHECK_LAUNCH();
}

}  // namespace paq::gpu
