/* A C program calling kernels that dslc compiled ahead of time.
 *
 *   sh examples/c/build_and_run.sh [BUILD_DIR]
 *
 * builds saxpy.so and matmul_index.so (with their headers) from the examples,
 * compiles this file against them and runs it. Every tensor is passed as a
 * pointer, its sizes and its element strides, so a view (here: every other
 * element of a buffer, a transposed matrix) needs no copy. A kernel returns 0,
 * or the number of the check that failed (listed in its header).
 */
#include <math.h>
#include <stdio.h>

#include "matmul_index.h"
#include "saxpy.h"

#define N 1000
#define M 3
#define K 4
#define P 2

static int check_saxpy(void) {
    static float x[N], y[N], out[2 * N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 1.0f;
    }
    for (int i = 0; i < 2 * N; i++) out[i] = -1.0f;
    /* out[::2]: N elements, stride 2; the odd elements must stay untouched. */
    int32_t status = saxpy(2.0f, x, N, 1, y, N, 1, out, N, 2);
    if (status != 0) {
        fprintf(stderr, "saxpy failed check %d\n", status);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        if (out[2 * i] != 2.0f * (float)i + 1.0f || out[2 * i + 1] != -1.0f) {
            fprintf(stderr, "saxpy: wrong value at %d\n", i);
            return 1;
        }
    }
    /* Sizes that disagree are refused before anything is touched: check 1 (y's size). */
    status = saxpy(2.0f, x, N, 1, y, N - 1, 1, out, N, 1);
    printf("saxpy: out[::2] = 2 x + y for %d elements; y too short -> check %d\n", N, status);
    return status == 1 ? 0 : 1;
}

static int check_matmul(void) {
    /* C = A @ B with B given as its transpose Bt[P][K]: B[k][p] is at Bt + p*K + k,
     * so B's strides are (1, K). */
    float a[M][K], bt[P][K], c[M][P];
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++) a[i][k] = (float)(i + k);
    for (int p = 0; p < P; p++)
        for (int k = 0; k < K; k++) bt[p][k] = (float)(p - k);
    int32_t status = matmul_index(&a[0][0], M, K, K, 1, &bt[0][0], K, P, 1, K, &c[0][0], M, P, P, 1);
    if (status != 0) {
        fprintf(stderr, "matmul_index failed check %d\n", status);
        return 1;
    }
    for (int i = 0; i < M; i++) {
        for (int p = 0; p < P; p++) {
            float want = 0.0f;
            for (int k = 0; k < K; k++) want += a[i][k] * bt[p][k];
            if (fabsf(c[i][p] - want) > 1e-5f) {
                fprintf(stderr, "matmul_index: C[%d][%d] = %g, want %g\n", i, p, c[i][p], want);
                return 1;
            }
        }
    }
    printf("matmul_index: C = A @ B with B transposed in memory, %dx%d @ %dx%d ok\n", M, K, K, P);
    return 0;
}

int main(void) {
    int failures = check_saxpy() + check_matmul();
    printf(failures ? "FAILED\n" : "ok\n");
    return failures != 0;
}
