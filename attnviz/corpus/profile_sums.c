/* The head profile's sums over every attention cell, each row read once: `window_sums` (the statistics) and
   `pair_sums` (the head distances). attnviz.corpus.native builds and calls them.

   window_sums: every row sum a head profile takes from a window of attention weights.

   attnviz.corpus.rows.TextSums computes the same sums with PyTorch: a batched product of the rows with the cell
   features, the same for the value-weighted rows, a pass of logarithms and a few reductions, each a pass over every
   cell from memory. Here each row is read once into the core's cache and every sum is taken from there.

   w      [G, H, Q, K] float32: the weights, G groups (layers, or layers x texts) of H heads, Q queries, K keys.
   f      [Gf, Q, F, K] float32: each cell's F features; group g reads features g % Gf (1, texts or G of them).
   norms  [G, H, K] float32 or NULL: ||v W_O[h]|| per key (value-weighted rows u = w x norms).
   nlogn  [G, H, K] float32 (with norms): norms log norms.
   sums   [G, H, Q, F]: sum over keys of w x f.        usums [G, H, Q, F] (with norms): of u x f.
   wlogw  [G, H, Q]: sum over keys of w log w (0 log 0 = 0: a weight below the smallest normal float counts as it).
   ulogu  [G, H, Q] (with norms): sum of u log u = norms (w log w) + w (norms log norms).
   top    [G, H, Q]: the row's largest weight.

   Each row's sums are float32, as PyTorch's are there. Built with -ffast-math (compiled, not linked with it: linking
   would add a constructor that flushes denormals for the whole process), so the sums are vectorised and logf is
   glibc's vector logf. */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define TINY 1.17549435e-38f

static float dot(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t k = 0; k < n; k++) s += a[k] * b[k];
    return s;
}

/* How a feature row of K keys is read: its n non-zero keys listed (idx[at], ...) where they are at most K / 8 of
   them (a neighbour, the first key, special tokens, a pattern's cells), else (n < 0) the keys from its first
   non-zero value to its last, [lo, hi). */
typedef struct {
    int64_t lo, hi, at, n;
} Layout;

static void layouts(const float *f, int64_t rows, int64_t K, Layout *out, int32_t *idx) {
    int64_t used = 0;
    for (int64_t i = 0; i < rows; i++) {
        const float *r = f + i * K;
        int64_t a = 0, b = K, n = 0;
        while (a < K && r[a] == 0.0f) a++;
        while (b > a && r[b - 1] == 0.0f) b--;
        for (int64_t k = a; k < b; k++) n += r[k] != 0.0f;
        out[i] = (Layout){a, b, used, n * 8 <= K ? n : -1};
        if (out[i].n < 0) continue;
        for (int64_t k = a; k < b; k++)
            if (r[k] != 0.0f) idx[used++] = (int32_t)k;
    }
}

static float sum_of(const float *x, const float *r, const Layout *l, const int32_t *idx) {
    if (l->n < 0) return dot(x + l->lo, r + l->lo, l->hi - l->lo);
    float s = 0.0f;
    for (int64_t i = 0; i < l->n; i++) s += x[idx[l->at + i]] * r[idx[l->at + i]];
    return s;
}

int window_sums(const float *w, int64_t G, int64_t H, int64_t Q, int64_t K, const float *f, int64_t Gf, int64_t F,
                const float *norms, const float *nlogn, float *sums, float *usums, float *wlogw, float *ulogu,
                float *top) {
    int64_t n = K > 0 ? K : 1, nf = Gf * Q * F > 0 ? Gf * Q * F : 1;
    float *terms = malloc(sizeof(float) * n), *u = malloc(sizeof(float) * n); /* a row's w log w, u */
    Layout *lay = malloc(sizeof(Layout) * nf);
    int32_t *idx = malloc(sizeof(int32_t) * nf * (n / 8 + 1));
    if (!terms || !u || !lay || !idx) {
        free(terms), free(u), free(lay), free(idx);
        return 1;
    }
    layouts(f, Gf * Q * F, K, lay, idx);
    for (int64_t g = 0; g < G; g++) {
        for (int64_t h = 0; h < H; h++) {
            const float *nv = norms ? norms + (g * H + h) * K : NULL;
            const float *nl = norms ? nlogn + (g * H + h) * K : NULL;
            for (int64_t q = 0; q < Q; q++) {
                int64_t row = (g * H + h) * Q + q;
                const float *x = w + row * K;
                int64_t at = ((g % Gf) * Q + q) * F;  /* this row's features: rows at .. at + F - 1 of f */
                const float *fr = f + at * K;
                float e = 0.0f, m = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    float v = x[k];
                    float l = v * logf(v > TINY ? v : TINY);
                    terms[k] = l;
                    e += l;
                    m = v > m ? v : m;
                }
                wlogw[row] = e;
                top[row] = m;
                for (int64_t j = 0; j < F; j++) sums[row * F + j] = sum_of(x, fr + j * K, lay + at + j, idx);
                if (!nv) continue;
                float o = 0.0f;
                for (int64_t k = 0; k < K; k++) {
                    o += terms[k] * nv[k] + x[k] * nl[k];
                    u[k] = x[k] * nv[k];
                }
                ulogu[row] = o;
                for (int64_t j = 0; j < F; j++) usums[row * F + j] = sum_of(u, fr + j * K, lay + at + j, idx);
            }
        }
    }
    free(terms), free(u), free(lay), free(idx);
    return 0;
}

/* pair_sums: for every pair of heads a < b of p [N, R, K] (N heads' R rows of K weights), the sum over rows of the
   sum over keys of s log s, s = p[a] + p[b] (0 log 0 = 0), into out [N, N] (b > a; the rest is left as it is). Each
   cell's s log s is float32, their sum float64 (PyTorch's form sums a row in float32, the rows in float64): one loop
   over a pair's cells whatever the rows' length, and a sum that does not depend on how rows are laid out (texts read
   together or alone give the same sums to float64 rounding). */
void pair_sums(const float *p, int64_t N, int64_t R, int64_t K, double *out) {
    int64_t cells = R * K;
    for (int64_t a = 0; a < N; a++) {
        for (int64_t b = a + 1; b < N; b++) {
            const float *x = p + a * cells, *y = p + b * cells;
            double total = 0.0;
            for (int64_t k = 0; k < cells; k++) {
                float s = x[k] + y[k];
                total += (double)(s * logf(s > TINY ? s : TINY));
            }
            out[a * N + b] = total;
        }
    }
}
