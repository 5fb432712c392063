/* What both sampling kernels (candidate_draw.c, warped_race.c) do to a row of float scores: a key
 * per (score, id) that one unsigned compare orders, a quickselect of the largest keys, a sort of a
 * few keys that vectorises, the first maximum as torch's argmax takes it, exp of a score less the
 * row's maximum, and where a top-p cut may fall otherwise in torch's rounding; and the columns of
 * a batch both take. */
#ifndef CHORUS_SCORES_H
#define CHORUS_SCORES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A batch's sampling columns, as both kernels take them (at the head of their plans). */
typedef struct {
    int64_t rows;
    int64_t vocab;
    const float *temperature;   /* [rows], 1 for greedy rows */
    const int64_t *top_k;       /* [rows], in the terms of the kernel's plan */
    const float *top_p_cutoff;  /* [rows] 1 - top_p; NULL when no row uses top-p */
    const uint8_t *greedy;      /* [rows]; NULL when no row is greedy */
} chorus_rows;

/* Both kernels leave a row with a NaN to torch before ordering it; NaN still ranks (as +inf, as in
 * torch's topk) so that the keys stay a total order whatever comes: a rank that two keys shared
 * would leave a sorted slot unwritten, and its id would index outside the row. */
static inline float ranked_value(float x) { return x != x ? INFINITY : x; }

/* A key per logit, larger for a higher logit and, on equal logits, for a lower id: one unsigned
 * compare is the whole order. The float's bits made monotone above, the id reversed below. */
static inline uint64_t order_key(float logit, int64_t id) {
    const float value = ranked_value(logit);
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    const uint32_t flip = (uint32_t)((int32_t)bits >> 31) | 0x80000000u; /* negative: all bits */
    return ((uint64_t)(bits ^ flip) << 32) | (uint32_t)~(uint32_t)id;
}

static inline int64_t key_id(uint64_t key) { return (int64_t)(uint32_t)~(uint32_t)key; }

static inline void swap_keys(uint64_t *a, uint64_t *b) {
    const uint64_t t = *a;
    *a = *b;
    *b = t;
}

/* Moves the k largest of keys [0, n) to [0, k), in no order: quickselect around a median of
 * three, partitioning without a branch on the (random) comparisons. */
static inline void select_largest(uint64_t *keys, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n; /* the k-th largest is in [lo, hi) */
    while (hi - lo > 1 && lo < k && k < hi) {
        const int64_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (keys[mid] > keys[lo]) swap_keys(&keys[mid], &keys[lo]);
        if (keys[last] > keys[lo]) swap_keys(&keys[last], &keys[lo]);
        if (keys[mid] > keys[last]) swap_keys(&keys[mid], &keys[last]);
        const uint64_t pivot = keys[last]; /* the median, parked at the end */
        int64_t above = lo;
        for (int64_t i = lo; i < last; i++) {
            const uint64_t key = keys[i];
            keys[i] = keys[above];
            keys[above] = key;
            above += key > pivot;
        }
        swap_keys(&keys[above], &keys[last]); /* [lo, above) > pivot = keys[above] > (above, hi) */
        if (above >= k) {
            hi = above;
        } else {
            lo = above + 1;
        }
    }
}

/* Sorts keys [0, k) descending into `sorted`: each key's rank is how many keys exceed it (the
 * keys are distinct), counted for all keys at once so that the loop vectorises. */
static inline void sort_descending(const uint64_t *restrict keys, int32_t *restrict ranks,
                                   uint64_t *restrict sorted, int64_t k) {
    for (int64_t a = 0; a < k; a++) ranks[a] = 0;
    for (int64_t b = 0; b < k; b++) {
        const uint64_t kb = keys[b];
        for (int64_t a = 0; a < k; a++) ranks[a] += kb > keys[a];
    }
    for (int64_t a = 0; a < k; a++) sorted[ranks[a]] = keys[a];
}

static inline int64_t first_maximum(const float *x, int64_t n) {
    int64_t best = 0;
    float top = ranked_value(x[0]);
    for (int64_t i = 1; i < n; i++) {
        const float v = ranked_value(x[i]);
        if (v > top) {
            top = v;
            best = i;
        }
    }
    return best;
}

/* exp(x) for x <= 0 (a score less its row's maximum), within 1.5 ulp of the exact value, and 0
 * below -87 (near where exp turns subnormal; top_p_unsure treats that band as unsure). Branch-free, so
 * a loop of it vectorises (with -fno-trapping-math, build.py): libm's expf is a call per value.
 * exp(r) on the reduced range |r| <= ln(2) / 2 is the minimax polynomial of Cephes' expf; ln 2
 * is split in two so that x - n ln 2 loses nothing. */
static inline float exp_nonpositive(float x) {
    const float clamped = x < -87.0f ? -87.0f : x;
    const float n = floorf(clamped * 1.44269504088896341f + 0.5f);
    const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const int32_t exponent = ((int32_t)n + 127) << 23; /* 2^n, n in [-126, 0] */
    float scale;
    memcpy(&scale, &exponent, sizeof scale);
    return x < -87.0f ? 0.0f : (p * r * r + r + 1.0f) * scale;
}

/* exps[j] = exp(ascending[j] - the highest, ascending[n - 1]); returns their sum, added in order
 * (a loop of its own: the exps vectorise, a float sum would not). */
static inline float exps_below_top(const float *restrict ascending, float *restrict exps, int64_t n) {
    const float top = ascending[n - 1];
    for (int64_t j = 0; j < n; j++) exps[j] = exp_nonpositive(ascending[j] - top);
    float sum = 0.0f;
    for (int64_t j = 0; j < n; j++) sum += exps[j];
    return sum;
}

/* Whether `cumulative <= cutoff`, top-p's drop, may decide otherwise in torch's rounding (its
 * vectorised exp and sums round in another order): within 1e-5 (relative) of the cut-off; for a
 * cut-off of 0 (a row without top-p beside one with it, which drops exactly the ids of
 * probability 0), where exp(gap), gap = score - max, may or may not be 0: below -120 it is 0 in
 * any float32 exp, above -80 a normal float in any. */
static inline int top_p_unsure(double cumulative, float cutoff, float gap) {
    if (cutoff == 0.0f) return gap > -120.0f && gap <= -80.0f;
    return fabs(cumulative - (double)cutoff) <= 1e-5 * (double)cutoff;
}

#endif
