/* Sampler's pick on the CPU, fused: temperature, top-k, top-p, softmax and the exponential race
 * argmax(p / E) of every row in one call (model/sampling/native.py binds it;
 * model/sampling/sampler.py's _Warpers.apply and exponential_race are the definition).
 *
 * It promises the torch ops' token or no token: where a row's outcome could differ from theirs by
 * rounding (torch's vectorised exp and sums round in another order), it returns RACE_UNSURE and
 * the caller runs the torch ops on the same noise. Unsure: a top-p cumulative probability within
 * 1e-5 (relative) of its cut-off, or one that may underflow; top-p's cut passing between equal
 * scores (torch's sort puts ties in no promised order); a runner-up within 1e-5 (relative) of
 * the winner's p / E; a NaN score. A row that keeps more than max_kept ids after top-k is not
 * served either (its sort would cost more than torch's).
 *
 * Per sampling row, as torch: s = score / temperature; top-k keeps every id whose s reaches the
 * k-th highest (ties included); top-p sorts the kept ids ascending and drops those whose
 * cumulative probability is <= 1 - top_p, never the last; p = softmax over what is left; the
 * token is the first argmax of p / max(E, FLT_MIN). A greedy row takes the first maximum of its
 * scores, before temperature.
 */
#include <float.h>
#include <stddef.h>

#include "scores.h"

enum { RACE_DRAWN = 0, RACE_UNSURE = 1 };

/* Within this relative distance of the winner's p / E, torch's rounding may crown the runner-up. */
static const double UNSURE = 1e-5;

typedef struct {
    chorus_rows batch;          /* top_k: vocab where top-k is off */
    int64_t max_kept;           /* a row keeping more ids after top-k is not served */
    /* Workspace for one row at a time: scaled scores and keys (vocab); the kept keys sorted,
     * their ranks, scores ascending and exps (max_kept). */
    float *scaled;
    uint64_t *keys;
    uint64_t *sorted;
    int32_t *ranks;
    float *ascending;
    float *exps;
} chorus_race_plan;

/* The lowest score top-k keeps: the k-th highest (every tie with it is kept too). */
static float top_k_bar(const chorus_race_plan *plan, const float *scaled, int64_t k) {
    uint64_t *keys = plan->keys;
    for (int64_t i = 0; i < plan->batch.vocab; i++) keys[i] = order_key(scaled[i], i);
    select_largest(keys, plan->batch.vocab, k);
    uint64_t kth = keys[0];
    for (int64_t i = 1; i < k; i++) kth = keys[i] < kth ? keys[i] : kth;
    return scaled[key_id(kth)];
}

/* Top-p over the kept scores sorted ascending (value[j] the j-th lowest; exps[j] = exp(value[j] -
 * the highest), summing to `sum`): the index of the first one it keeps, or -1 when the cut is
 * unsure. */
static int64_t top_p_first_kept(const float *value, const float *exps, float sum, int64_t m, float cutoff) {
    const float top = value[m - 1];
    const float scale = 1.0f / sum;
    double cumulative = 0.0;
    int64_t first = m - 1; /* the highest is never dropped */
    for (int64_t j = 0; j < m - 1; j++) {
        cumulative += (double)(exps[j] * scale);
        if (top_p_unsure(cumulative, cutoff, value[j] - top)) return -1;
        if ((float)cumulative > cutoff) {
            first = j;
            break;
        }
    }
    /* The cut between two equal scores: which of them torch's sort dropped is its own choice. */
    if (first > 0 && value[first - 1] == value[first]) return -1;
    return first;
}

/* One sampling row's token, or -1 when unsure or not served. */
static int64_t race_row(const chorus_race_plan *plan, const float *row, const float *noise, int64_t r) {
    const int64_t vocab = plan->batch.vocab;
    float *scaled = plan->scaled;
    const float temperature = plan->batch.temperature[r];
    for (int64_t i = 0; i < vocab; i++) scaled[i] = row[i] / temperature;
    for (int64_t i = 0; i < vocab; i++) {
        if (scaled[i] != scaled[i] || scaled[i] == INFINITY) return -1; /* torch's softmax: NaN */
    }
    const float bar = plan->batch.top_k[r] < vocab ? top_k_bar(plan, scaled, plan->batch.top_k[r]) : -INFINITY;
    uint64_t *kept = plan->keys;
    int64_t m = 0;
    for (int64_t i = 0; i < vocab; i++) {
        if (scaled[i] >= bar && scaled[i] != -INFINITY) {
            if (m == plan->max_kept) return -1;
            kept[m++] = order_key(scaled[i], i);
        }
    }
    if (m == 0) return -1; /* every score -inf: torch's softmax is NaN */
    sort_descending(kept, plan->ranks, plan->sorted, m);
    /* Ascending: j holds the (m - j)-th highest, descending rank m - 1 - j. */
    float *ascending = plan->ascending, *exps = plan->exps;
    for (int64_t j = 0; j < m; j++) ascending[j] = scaled[key_id(plan->sorted[m - 1 - j])];
    float sum = exps_below_top(ascending, exps, m);
    int64_t first = 0;
    if (plan->batch.top_p_cutoff != NULL) {
        first = top_p_first_kept(ascending, exps, sum, m, plan->batch.top_p_cutoff[r]);
        if (first < 0) return -1;
        sum = 0.0f; /* the softmax of what top-p left: [first, m) */
        for (int64_t j = first; j < m; j++) sum += exps[j];
    }
    int64_t best = -1;
    double best_ratio = -1.0, runner_up = -1.0;
    for (int64_t j = first; j < m; j++) {
        const int64_t id = key_id(plan->sorted[m - 1 - j]);
        const float e = noise[id] < FLT_MIN ? FLT_MIN : noise[id];
        const double ratio = (double)((exps[j] / sum) / e);
        if (ratio > best_ratio || (ratio == best_ratio && id < best)) {
            runner_up = best_ratio;
            best_ratio = ratio;
            best = id;
        } else if (ratio > runner_up) {
            runner_up = ratio;
        }
    }
    if (runner_up >= best_ratio * (1.0 - UNSURE)) return -1;
    return best;
}

/* One token per row into out [rows], or RACE_UNSURE (out then holds nothing to use). scores:
 * [rows, vocab] float32 with unit column stride; noise: [rows, vocab] Exp(1) draws. */
int chorus_warped_race(const chorus_race_plan *plan, const float *scores, int64_t scores_row_stride,
                       const float *noise, int64_t noise_row_stride, int64_t *out) {
    for (int64_t r = 0; r < plan->batch.rows; r++) {
        const float *row = scores + r * scores_row_stride;
        if (plan->batch.greedy != NULL && plan->batch.greedy[r]) {
            for (int64_t i = 0; i < plan->batch.vocab; i++) {
                if (row[i] != row[i]) return RACE_UNSURE;
            }
            out[r] = first_maximum(row, plan->batch.vocab);
            continue;
        }
        const int64_t token = race_row(plan, row, noise + r * noise_row_stride, r);
        if (token < 0) return RACE_UNSURE;
        out[r] = token;
    }
    return RACE_DRAWN;
}
