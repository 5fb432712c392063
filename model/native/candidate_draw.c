/* The depth stage's sub-step draw on the CPU, fused: one call per sub-step for every row of the
 * batch, in place of a dozen torch ops that each cost a dispatch (model/sampling/native.py
 * binds it; model/sampling/candidates.py is the same draw in torch ops, and the definition).
 *
 * Per sampling row: the K highest logits, highest first (ties: the lower id first); over them in
 * ascending order (column a holds the (K - a)-th highest) the scores logit / temperature, -inf
 * below the row's own top-k, -inf where the ascending cumulative probability is <= 1 - top_p
 * (never the last column); the pick is the column of the highest score + Gumbel noise (the first
 * on ties), mapped back to its id. A greedy row takes the first maximum of its logits.
 *
 * It promises the torch ops' tokens or none: the scores and picks are float32 operations in the
 * order torch's are, and where an outcome could still differ it returns DRAW_UNSURE and the caller
 * runs the torch ops on the same noise. Unsure: equal logits among or just past the K candidates
 * (torch's topk puts ties in no promised order, and a candidate's place picks its noise), a top-p
 * cut within rounding (scores.h), a NaN logit.
 */
#include <stddef.h>

#include "scores.h"

enum { DRAW_DONE = 0, DRAW_UNSURE = 1, DRAW_REFUSED = -1 };

typedef struct {
    chorus_rows batch;          /* top_k: each row's own, 1..K */
    int64_t candidates;         /* K */
    /* Workspace for one row at a time: keys (vocab), the candidates' keys sorted, ranks, values,
     * ids (K each), and the exps of top-p (K). */
    uint64_t *keys;
    uint64_t *sorted;
    int32_t *ranks;
    float *values;
    int64_t *ids;
    float *scores;
    float *exps;
} chorus_draw_plan;

static int has_nan(const float *x, int64_t n) {
    int nan = 0;
    for (int64_t i = 0; i < n; i++) nan |= x[i] != x[i];
    return nan;
}

/* The K highest of a row's logits, highest first, into plan->values and plan->ids; 0, or -1 when
 * two of them are equal or the K-th equals the next (their places are torch's topk's own). */
static int top_candidates(const chorus_draw_plan *plan, const float *logits) {
    const int64_t vocab = plan->batch.vocab, k = plan->candidates;
    uint64_t *keys = plan->keys, *sorted = plan->sorted;
    for (int64_t i = 0; i < vocab; i++) keys[i] = order_key(logits[i], i);
    select_largest(keys, vocab, k);
    sort_descending(keys, plan->ranks, sorted, k);
    for (int64_t r = 0; r < k; r++) {
        const int64_t id = key_id(sorted[r]);
        plan->ids[r] = id;
        plan->values[r] = logits[id];
    }
    int tied = 0;
    for (int64_t r = 1; r < k; r++) tied |= plan->values[r] == plan->values[r - 1];
    if (k < vocab) {
        uint64_t next = keys[k]; /* the highest of the rest */
        for (int64_t i = k + 1; i < vocab; i++) next = keys[i] > next ? keys[i] : next;
        tied |= logits[key_id(next)] == plan->values[k - 1];
    }
    return tied ? -1 : 0;
}

/* Drops (to -inf) the ascending columns whose cumulative probability is <= cutoff, as torch's
 * softmax then cumsum: exp(s - max) summed in float, scaled by 1 / sum, accumulated in double;
 * 0, or -1 when a drop is unsure. */
static int drop_below_top_p(float *scores, float *exps, int64_t k, float cutoff) {
    const float top = scores[k - 1];
    const float scale = 1.0f / exps_below_top(scores, exps, k);
    double cumulative = 0.0;
    for (int64_t a = 0; a < k - 1; a++) {
        cumulative += (double)(exps[a] * scale);
        if (top_p_unsure(cumulative, cutoff, scores[a] - top)) return -1;
        if ((float)cumulative <= cutoff) scores[a] = -INFINITY;
    }
    return 0;
}

/* One token per row into out [rows]: DRAW_DONE, DRAW_UNSURE (out then holds nothing to use), or
 * DRAW_REFUSED for a plan it cannot run. logits: [rows, vocab] float32 with unit column stride;
 * gumbel: [rows, K] noise in ascending candidate order. */
int chorus_candidate_draw(const chorus_draw_plan *plan, const float *logits, int64_t logits_row_stride,
                          const float *gumbel, int64_t gumbel_row_stride, int64_t *out) {
    const int64_t k = plan->candidates;
    if (k < 1 || k > plan->batch.vocab) return DRAW_REFUSED;
    float *scores = plan->scores;
    for (int64_t r = 0; r < plan->batch.rows; r++) {
        const float *row = logits + r * logits_row_stride;
        if (has_nan(row, plan->batch.vocab)) return DRAW_UNSURE;
        if (plan->batch.greedy != NULL && plan->batch.greedy[r]) {
            out[r] = first_maximum(row, plan->batch.vocab);
            continue;
        }
        if (top_candidates(plan, row) != 0) return DRAW_UNSURE;
        const float temperature = plan->batch.temperature[r];
        const int64_t own = plan->batch.top_k[r];
        for (int64_t a = 0; a < k; a++) {
            const int64_t place = k - 1 - a; /* 0 = the highest */
            scores[a] = place < own ? plan->values[place] / temperature : -INFINITY;
        }
        if (plan->batch.top_p_cutoff != NULL && drop_below_top_p(scores, plan->exps, k, plan->batch.top_p_cutoff[r]) != 0) {
            return DRAW_UNSURE;
        }
        const float *noise = gumbel + r * gumbel_row_stride;
        int64_t best = 0;
        float top = scores[0] + noise[0];
        for (int64_t a = 1; a < k; a++) {
            const float s = scores[a] + noise[a];
            if (s > top) {
                top = s;
                best = a;
            }
        }
        out[r] = plan->ids[k - 1 - best];
    }
    return DRAW_DONE;
}
