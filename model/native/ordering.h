/* Orders of float scores for the sampling kernels (candidate_draw.c, warped_race.c): a key per
 * (score, id) that one unsigned compare orders, a quickselect of the largest keys, a sort of a few
 * keys that vectorises, the first maximum of a row as torch's argmax takes it, and where a top-p
 * cut may fall otherwise in torch's rounding. */
#ifndef CHORUS_ORDERING_H
#define CHORUS_ORDERING_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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
static inline void sort_descending(const uint64_t *restrict keys, int32_t *restrict ranks, uint64_t *restrict sorted,
                            int64_t k) {
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

/* Whether `cumulative <= cutoff`, top-p's drop, may decide otherwise in torch's rounding (its
 * vectorised exp and sums round in another order): within 1e-5 (relative) of the cut-off; for a
 * cut-off of 0 (a row without top-p beside one with it, which drops exactly the ids of
 * probability 0), where exp(gap), gap = score - max, may or may not underflow to 0: below -120
 * it is 0 in any float32 exp, above -80 a normal float. */
static inline int top_p_unsure(double cumulative, float cutoff, float gap) {
    if (cutoff == 0.0f) return gap > -120.0f && gap <= -80.0f;
    return fabs(cumulative - (double)cutoff) <= 1e-5 * (double)cutoff;
}

#endif
