/*
 * Whole-step driver of the training kernels: runs N steps of `zo` or `bp-qas` on a sequential
 * int8 model (conv2d / depthwise / linear / maxpool / avgpool / global avgpool / flatten / relu)
 * with the runtime's inference kernels for every forward pass, and writes after every step the
 * per-sample losses, every trainable weight and bias, and the RNG state, so the test compares
 * them with the Python method bit for bit.
 *
 *   train_step MODEL_AND_DATA OUT
 *
 * MODEL_AND_DATA is a stream of little-endian int32 words (floats as their bits) written by
 * tests/codegen/test_train_kernels.py (`write_step_file` documents the layout). No malloc: all
 * tensors live in one static arena (TS_ARENA_BYTES). On the emulated boards (MT_BOARD) each step
 * is bracketed by the instruction-count markers; file I/O stays outside.
 */
#include <stdio.h>
#include <string.h>

#include "mt_nn.h"
#include "mt_train.h"

#if defined(MT_BOARD)
#include "mt_board.h"
#else
static void mt_mark_begin(void)
{
}

static void mt_mark_end(void)
{
}
#endif /* MT_BOARD */

#ifndef TS_ARENA_BYTES
#define TS_ARENA_BYTES (1024 * 1024)
#endif /* TS_ARENA_BYTES */

#define TS_MAX_NODES 16
#define TS_MAGIC 0x4D545453

enum { OP_CONV = 1, OP_LINEAR = 2, OP_MAXPOOL = 3, OP_AVGPOOL = 4, OP_GAP = 5, OP_FLATTEN = 6, OP_RELU = 7 };
enum { TRAIN_NONE = 0, TRAIN_WP = 1, TRAIN_NP = 2, TRAIN_BP = 3 };
enum { METHOD_ZO = 1, METHOD_BP = 2 };

typedef struct {
    int32_t op, src, ih, iw, ic, oh, ow, oc;
    int32_t kh, kw, sh, sw, pt, pl, groups, zx, zy, act_min, act_max, train;
    int32_t o, k; /* parametric: output channels, entries per channel */
    float s_x, s_y;
    int8_t *w;
    int32_t *b, *mult, *shift;
    float *s_w;
    /* training state */
    int64_t *sum_w, *sum_b; /* ZO integer sums */
    float *coef_w, *coef_b;
    float *grad_w, *grad_b, *vel_w, *vel_b; /* BP-QAS */
} ts_node;

static uint8_t arena[TS_ARENA_BYTES];
static size_t arena_used = 0;

static void *ts_alloc(size_t bytes)
{
    void *p;
    bytes = (bytes + 7u) & ~(size_t)7u;
    if (arena_used + bytes > sizeof(arena)) {
        fprintf(stderr, "arena too small: need more than %lu bytes\n", (unsigned long)sizeof(arena));
        return NULL;
    }
    p = arena + arena_used;
    arena_used += bytes;
    memset(p, 0, bytes);
    return p;
}

static FILE *in_file;
static int read_ok = 1;

static int32_t rd(void)
{
    int32_t v = 0;
    if (fread(&v, 4, 1, in_file) != 1) {
        read_ok = 0;
    }
    return v;
}

static float rdf(void)
{
    int32_t v = rd();
    float f;
    memcpy(&f, &v, 4);
    return f;
}

static int32_t node_in_size(const ts_node *n)
{
    return n->ih * n->iw * n->ic;
}

static int32_t node_out_size(const ts_node *n)
{
    return n->oh * n->ow * n->oc;
}

static int is_param(const ts_node *n)
{
    return n->op == OP_CONV || n->op == OP_LINEAR;
}

static void conv_params(const ts_node *n, mt_conv_params *p)
{
    p->input_zero_point = n->zx;
    p->output_zero_point = n->zy;
    p->stride_h = n->sh;
    p->stride_w = n->sw;
    p->pad_top = n->pt;
    p->pad_left = n->pl;
    p->groups = n->groups;
    p->act_min = n->act_min;
    p->act_max = n->act_max;
}

static mt_context scratch;

/* One node's int8 forward pass on a batch; w/b override the node's own (perturbed copies). */
static mt_status run_node(const ts_node *n, int32_t batch, const int8_t *x, int8_t *y, const int8_t *w,
                          const int32_t *b)
{
    const mt_dims in_dims = {batch, n->ih, n->iw, n->ic};
    const mt_dims out_dims = {batch, n->oh, n->ow, n->oc};
    switch (n->op) {
    case OP_CONV: {
        const mt_dims f_dims = {n->o, n->kh, n->kw, n->k / (n->kh * n->kw)};
        const mt_per_channel_quant q = {n->mult, n->shift};
        mt_conv_params p;
        conv_params(n, &p);
        if (n->groups == n->ic && f_dims.c == 1 && n->ic > 1) {
            return mt_depthwise_conv2d_fwd_s8(&p, &q, &in_dims, x, &f_dims, w, b, &out_dims, y);
        }
        return mt_conv2d_fwd_s8(&scratch, &p, &q, &in_dims, x, &f_dims, w, b, &out_dims, y);
    }
    case OP_LINEAR: {
        const mt_linear_params p = {n->zx, n->zy, n->act_min, n->act_max};
        const mt_per_channel_quant q = {n->mult, n->shift};
        return mt_linear_fwd_s8(&scratch, &p, &q, batch, x, n->k, w, b, n->o, y);
    }
    case OP_MAXPOOL:
    case OP_AVGPOOL: {
        const mt_pool_params p = {n->kh, n->kw, n->sh, n->sw};
        return n->op == OP_MAXPOOL ? mt_maxpool_fwd_s8(&p, &in_dims, x, &out_dims, y)
                                   : mt_avgpool_fwd_s8(&p, &in_dims, x, &out_dims, y);
    }
    case OP_GAP:
        return mt_global_avgpool_fwd_s8(&in_dims, x, y);
    case OP_FLATTEN:
        memcpy(y, x, (size_t)batch * (size_t)node_in_size(n));
        return MT_OK;
    case OP_RELU:
        return mt_relu_fwd_s8(n->act_min, n->act_max, batch * node_in_size(n), x, y);
    default:
        return MT_ERR_ARG;
    }
}

static ts_node nodes[TS_MAX_NODES];
static int32_t n_nodes, batch, classes, in_size;
static int8_t *base_t[TS_MAX_NODES + 1]; /* base tensors: [0] input, [i + 1] node i */
static int8_t *query_t[TS_MAX_NODES];    /* a query's tensors of the re-run nodes */

static const int8_t *src_tensor(int32_t j, int32_t first_rerun)
{
    const int32_t s = nodes[j].src;
    return (s >= first_rerun) ? query_t[s] : base_t[s + 1];
}

/* Re-run nodes from..last reading query tensors of re-run nodes, base tensors of the others. */
static mt_status run_tail(int32_t from, int32_t first_rerun, const int8_t *w_pert, const int32_t *b_pert)
{
    int32_t j;
    for (j = from; j < n_nodes; ++j) {
        const ts_node *n = &nodes[j];
        const int8_t *w = (j == first_rerun && w_pert != NULL) ? w_pert : n->w;
        const int32_t *b = (j == first_rerun && b_pert != NULL) ? b_pert : n->b;
        mt_status st = run_node(n, batch, src_tensor(j, first_rerun), query_t[j], w, b);
        if (st != MT_OK) {
            return st;
        }
    }
    return MT_OK;
}

static int32_t zo_max_step = 254; /* the header's ZO weight-step limit (254: none) */

static int zo_step(uint32_t *rng, const int32_t *labels, float logit_scale, int32_t queries, int32_t sigma_w,
                   int32_t sigma_b, int32_t sigma_node, int32_t gns, int32_t qas, float lr, int32_t *l0,
                   int32_t *li, int32_t *dl, int8_t *wbuf, int32_t *bbuf, int32_t *gbuf, float *fbuf)
{
    int64_t loss0 = 0;
    int32_t j;
    int32_t b;
    for (j = 0; j < n_nodes; ++j) {
        if (run_node(&nodes[j], batch, base_t[nodes[j].src + 1], base_t[j + 1], nodes[j].w, nodes[j].b) != MT_OK) {
            return 10;
        }
    }
    if (mt_softmax_ce_s8(batch, classes, base_t[n_nodes], logit_scale, labels, l0, NULL) != MT_OK) {
        return 11;
    }
    for (b = 0; b < batch; ++b) {
        loss0 += l0[b];
    }
    for (j = 0; j < n_nodes; ++j) {
        ts_node *n = &nodes[j];
        int32_t q;
        if (n->train == TRAIN_WP) {
            const int32_t nw = n->o * n->k;
            for (q = 0; q < queries; ++q) {
                uint32_t replay = *rng;
                int64_t lq = 0;
                mt_zo_perturb_wp_s8(rng, sigma_w, sigma_b, nw, n->w, n->o, n->b, wbuf, bbuf);
                if (run_tail(j, j, wbuf, bbuf) != MT_OK ||
                    mt_softmax_ce_s8(batch, classes, query_t[n_nodes - 1], logit_scale, labels, li, NULL) != MT_OK) {
                    return 12;
                }
                for (b = 0; b < batch; ++b) {
                    lq += li[b];
                }
                /* weights then biases in one sign stream (sum_b follows sum_w) */
                mt_zo_accumulate_wp_s64(&replay, lq - loss0, nw + n->o, n->sum_w);
            }
            {
                const float gamma = mt_zo_gns_gamma_f32(queries, (int64_t)nw + n->o - 1, gns);
                const float cw = mt_zo_coef_f32(gamma, queries, sigma_w, batch);
                const float cb = mt_zo_coef_f32(gamma, queries, sigma_b, batch);
                int32_t c;
                for (c = 0; c < n->o; ++c) {
                    n->coef_w[c] = cw;
                    n->coef_b[c] = cb;
                }
            }
        } else if (n->train == TRAIN_NP) {
            const int32_t d_out = node_out_size(n);
            const int8_t *y = base_t[j + 1];
            if (queries > MT_ZO_MAX_QUERIES_S32) {
                return 13;
            }
            memset(gbuf, 0, sizeof(int32_t) * (size_t)batch * (size_t)d_out);
            for (q = 0; q < queries; ++q) {
                uint32_t replay = *rng;
                mt_zo_perturb_np_s8(rng, sigma_node, n->act_min, n->act_max, batch * d_out, y, query_t[j]);
                if (run_tail(j + 1, j, NULL, NULL) != MT_OK ||
                    mt_softmax_ce_s8(batch, classes, query_t[n_nodes - 1], logit_scale, labels, li, NULL) != MT_OK) {
                    return 14;
                }
                for (b = 0; b < batch; ++b) {
                    dl[b] = li[b] - l0[b];
                }
                mt_zo_accumulate_np_s32(&replay, batch, d_out, dl, y, n->act_min, n->act_max, gbuf);
            }
            if (n->op == OP_CONV) {
                const mt_dims in_dims = {batch, n->ih, n->iw, n->ic};
                const mt_dims out_dims = {batch, n->oh, n->ow, n->oc};
                const mt_dims f_dims = {n->o, n->kh, n->kw, n->k / (n->kh * n->kw)};
                mt_conv_params p;
                conv_params(n, &p);
                mt_conv2d_bwd_w_s8_s32(&p, &in_dims, base_t[n->src + 1], &out_dims, gbuf, &f_dims, n->sum_w, n->sum_b);
            } else {
                mt_linear_bwd_w_s8_s32(n->zx, batch, base_t[n->src + 1], n->k, gbuf, n->o, n->sum_w, n->sum_b);
            }
            {
                const float gamma = mt_zo_gns_gamma_f32((int64_t)batch * queries, d_out - 1, gns);
                const float c0 = mt_zo_coef_f32(gamma, queries, sigma_node, batch);
                mt_zo_np_coef_f32(c0, n->s_x, n->s_w, n->s_y, n->o, n->coef_w);
                memcpy(n->coef_b, n->coef_w, sizeof(float) * (size_t)n->o);
            }
        }
    }
    /* the QAS update of every estimated layer, in graph order, after all estimates */
    for (j = 0; j < n_nodes; ++j) {
        ts_node *n = &nodes[j];
        float *k = fbuf;
        float *sb = fbuf + n->o;
        if (n->train != TRAIN_WP && n->train != TRAIN_NP) {
            continue;
        }
        mt_qas_factor_f32(lr, n->o, n->coef_w, qas ? n->s_w : NULL, k);
        mt_qas_upd_s8_s64(n->o, n->k, n->sum_w, k, NULL, zo_max_step, n->w);
        mt_qas_bias_scale_f32(n->s_x, n->s_w, n->o, sb);
        mt_qas_factor_f32(lr, n->o, n->coef_b, qas ? sb : NULL, k);
        mt_qas_upd_s32_s64(n->o, n->sum_b, k, n->b);
        memset(n->sum_w, 0, sizeof(int64_t) * (size_t)n->o * (size_t)n->k);
        memset(n->sum_b, 0, sizeof(int64_t) * (size_t)n->o);
    }
    return 0;
}

static float *err_t[TS_MAX_NODES + 1]; /* float errors of the base tensors */

static int bp_step(const int32_t *labels, float logit_scale, int32_t qas, float lr, float momentum, int32_t *loss,
                   int32_t *err, float *eacc, float *fbuf)
{
    int32_t needs[TS_MAX_NODES];
    int32_t j;
    for (j = 0; j < n_nodes; ++j) {
        if (run_node(&nodes[j], batch, base_t[nodes[j].src + 1], base_t[j + 1], nodes[j].w, nodes[j].b) != MT_OK) {
            return 20;
        }
        needs[j] = nodes[j].train == TRAIN_BP || (nodes[j].src >= 0 && needs[nodes[j].src]);
    }
    if (mt_softmax_ce_s8(batch, classes, base_t[n_nodes], logit_scale, labels, loss, err) != MT_OK) {
        return 21;
    }
    mt_softmax_ce_bwd_s32_f32(batch, classes, err, logit_scale, err_t[n_nodes]);
    for (j = n_nodes - 1; j >= 0; --j) {
        ts_node *n = &nodes[j];
        const int32_t s = n->src;
        const int need_in = s >= 0 && needs[s];
        const mt_dims in_dims = {batch, n->ih, n->iw, n->ic};
        const mt_dims out_dims = {batch, n->oh, n->ow, n->oc};
        const float *e = err_t[j + 1];
        float *ex = err_t[s + 1];
        if (!needs[j]) {
            continue;
        }
        if (is_param(n)) {
            const int32_t rows = batch * n->oh * n->ow;
            int32_t c;
            for (c = 0; c < n->o; ++c) {
                fbuf[c] = (n->s_x * n->s_w[c]) / n->s_y; /* M_c */
            }
            mt_requant_bwd_s8_f32(rows, n->o, e, base_t[j + 1], fbuf, n->act_min, n->act_max, eacc);
            if (n->train == TRAIN_BP) {
                mt_bias_bwd_f32(rows, n->o, eacc, n->grad_b);
            }
            if (n->op == OP_LINEAR) {
                if (n->train == TRAIN_BP) {
                    mt_linear_bwd_w_s8_f32(n->zx, batch, base_t[s + 1], n->k, eacc, n->o, n->grad_w);
                }
                if (need_in) {
                    mt_linear_bwd_in_s8_f32(batch, n->o, eacc, n->w, n->k, ex);
                }
            } else {
                const mt_dims f_dims = {n->o, n->kh, n->kw, n->k / (n->kh * n->kw)};
                mt_conv_params p;
                conv_params(n, &p);
                if (n->train == TRAIN_BP) {
                    mt_conv2d_bwd_w_s8_f32(&p, &in_dims, base_t[s + 1], &out_dims, eacc, &f_dims, n->grad_w);
                }
                if (need_in) {
                    mt_conv2d_bwd_in_s8_f32(&p, &out_dims, eacc, &f_dims, n->w, &in_dims, ex);
                }
            }
        } else if (need_in) {
            const mt_pool_params pp = {n->kh, n->kw, n->sh, n->sw};
            switch (n->op) {
            case OP_MAXPOOL:
                mt_maxpool_bwd_s8_f32(&pp, &in_dims, base_t[s + 1], &out_dims, base_t[j + 1], e, ex);
                break;
            case OP_AVGPOOL:
                mt_avgpool_bwd_f32(&pp, &in_dims, &out_dims, e, ex);
                break;
            case OP_GAP:
                mt_global_avgpool_bwd_f32(&in_dims, e, ex);
                break;
            case OP_FLATTEN:
                memcpy(ex, e, sizeof(float) * (size_t)batch * (size_t)node_in_size(n));
                break;
            case OP_RELU:
                mt_relu_bwd_s8_f32(n->act_min, n->act_max, batch * node_in_size(n), base_t[j + 1], e, ex);
                break;
            default:
                return 22;
            }
        }
    }
    for (j = 0; j < n_nodes; ++j) {
        ts_node *n = &nodes[j];
        const float *gw = n->grad_w;
        const float *gb = n->grad_b;
        float *k = fbuf;
        float *sb = fbuf + n->o;
        float *ones = fbuf + 2 * n->o;
        int32_t c;
        if (n->train != TRAIN_BP) {
            continue;
        }
        if (momentum != 0.0f) {
            mt_sgd_momentum_f32(n->o * n->k, momentum, n->grad_w, n->vel_w);
            mt_sgd_momentum_f32(n->o, momentum, n->grad_b, n->vel_b);
            gw = n->vel_w;
            gb = n->vel_b;
        }
        for (c = 0; c < n->o; ++c) {
            ones[c] = 1.0f;
        }
        mt_qas_factor_f32(lr, n->o, ones, qas ? n->s_w : NULL, k);
        mt_qas_upd_s8_f32(n->o, n->k, gw, k, NULL, n->w);
        mt_qas_bias_scale_f32(n->s_x, n->s_w, n->o, sb);
        mt_qas_factor_f32(lr, n->o, ones, qas ? sb : NULL, k);
        mt_qas_upd_s32_f32(n->o, gb, k, n->b);
    }
    return 0;
}

static int read_model(int32_t method)
{
    int32_t j;
    int32_t e;
    for (j = 0; j < n_nodes; ++j) {
        ts_node *n = &nodes[j];
        int32_t *fields[] = {&n->op, &n->src, &n->ih, &n->iw, &n->ic, &n->oh, &n->ow, &n->oc, &n->kh, &n->kw,
                             &n->sh, &n->sw, &n->pt, &n->pl, &n->groups, &n->zx, &n->zy, &n->act_min,
                             &n->act_max, &n->train};
        size_t f;
        for (f = 0; f < sizeof(fields) / sizeof(fields[0]); ++f) {
            *fields[f] = rd();
        }
        if (n->src < -1 || n->src >= j) {
            return 0;
        }
        if (!is_param(n)) {
            continue;
        }
        n->o = rd();
        n->k = rd();
        n->s_x = rdf();
        n->s_y = rdf();
        n->w = ts_alloc((size_t)n->o * (size_t)n->k);
        n->b = ts_alloc(4u * (size_t)n->o);
        n->mult = ts_alloc(4u * (size_t)n->o);
        n->shift = ts_alloc(4u * (size_t)n->o);
        n->s_w = ts_alloc(4u * (size_t)n->o);
        n->coef_w = ts_alloc(4u * (size_t)n->o);
        n->coef_b = ts_alloc(4u * (size_t)n->o);
        if (n->s_w == NULL || n->coef_b == NULL) {
            return 0;
        }
        for (e = 0; e < n->o * n->k; ++e) {
            n->w[e] = (int8_t)rd();
        }
        for (e = 0; e < n->o; ++e) {
            n->b[e] = rd();
        }
        for (e = 0; e < n->o; ++e) {
            n->mult[e] = rd();
        }
        for (e = 0; e < n->o; ++e) {
            n->shift[e] = rd();
        }
        for (e = 0; e < n->o; ++e) {
            n->s_w[e] = rdf();
        }
        if (n->train != TRAIN_NONE && method == METHOD_ZO) {
            n->sum_w = ts_alloc(8u * ((size_t)n->o * (size_t)n->k + (size_t)n->o)); /* weights, then biases */
            if (n->sum_w == NULL) {
                return 0;
            }
            n->sum_b = n->sum_w + (size_t)n->o * (size_t)n->k;
        }
        if (n->train != TRAIN_NONE && method == METHOD_BP) {
            n->grad_w = ts_alloc(4u * (size_t)n->o * (size_t)n->k);
            n->grad_b = ts_alloc(4u * (size_t)n->o);
            n->vel_w = ts_alloc(4u * (size_t)n->o * (size_t)n->k);
            n->vel_b = ts_alloc(4u * (size_t)n->o);
            if (n->vel_b == NULL) {
                return 0;
            }
        }
    }
    return read_ok;
}

int main(int argc, char **argv)
{
    FILE *out;
    int32_t method, steps, step, queries, sigma_w, sigma_b, sigma_node, gns, qas, j, b, max_t = 0, max_o = 1, max_np = 0;
    float logit_scale, lr, momentum;
    uint32_t rng;
    int32_t *labels, *l0, *li, *dl, *gbuf = NULL, *err = NULL, *bbuf;
    int8_t *wbuf;
    float *eacc = NULL, *fbuf;
    if (argc < 3) {
        fprintf(stderr, "usage: train_step MODEL_AND_DATA OUT\n");
        return 2;
    }
    in_file = fopen(argv[1], "rb");
    out = fopen(argv[2], "wb");
    if (in_file == NULL || out == NULL) {
        fprintf(stderr, "cannot open %s or %s\n", argv[1], argv[2]);
        return 2;
    }
    if (rd() != TS_MAGIC) {
        fprintf(stderr, "%s: not a train_step file\n", argv[1]);
        return 3;
    }
    method = rd();
    batch = rd();
    steps = rd();
    classes = rd();
    in_size = rd();
    n_nodes = rd();
    logit_scale = rdf();
    lr = rdf();
    momentum = rdf();
    queries = rd();
    sigma_w = rd();
    sigma_b = rd();
    sigma_node = rd();
    gns = rd();
    qas = rd();
    rng = (uint32_t)rd();
    zo_max_step = rd();
    if (!read_ok || n_nodes < 1 || n_nodes > TS_MAX_NODES || batch < 1 || !read_model(method)) {
        fprintf(stderr, "%s: bad header or model\n", argv[1]);
        return 3;
    }
    for (j = 0; j < n_nodes; ++j) {
        const int32_t sz = batch * node_out_size(&nodes[j]);
        max_t = sz > max_t ? sz : max_t;
        max_o = nodes[j].o > max_o ? nodes[j].o : max_o;
        base_t[j + 1] = ts_alloc((size_t)sz);
        query_t[j] = ts_alloc((size_t)sz);
        if (method == METHOD_BP) {
            err_t[j + 1] = ts_alloc(4u * (size_t)sz);
        }
        if (nodes[j].train == TRAIN_NP) {
            max_np = sz > max_np ? sz : max_np;
        }
    }
    if (max_np > 0) {
        gbuf = ts_alloc(4u * (size_t)max_np); /* NP node-gradient sums of the largest NP layer */
    }
    base_t[0] = ts_alloc((size_t)batch * (size_t)in_size);
    if (method == METHOD_BP) {
        err_t[0] = ts_alloc(4u * (size_t)batch * (size_t)in_size);
        err = ts_alloc(4u * (size_t)batch * (size_t)classes);
        eacc = ts_alloc(4u * (size_t)max_t);
    }
    labels = ts_alloc(4u * (size_t)batch);
    l0 = ts_alloc(4u * (size_t)batch);
    li = ts_alloc(4u * (size_t)batch);
    dl = ts_alloc(4u * (size_t)batch);
    fbuf = ts_alloc(4u * 3u * (size_t)max_o);
    {
        int32_t max_w = 0;
        for (j = 0; j < n_nodes; ++j) {
            const int32_t sz = nodes[j].o * nodes[j].k;
            max_w = sz > max_w ? sz : max_w;
        }
        wbuf = ts_alloc((size_t)max_w);
        bbuf = ts_alloc(4u * (size_t)max_o);
    }
    scratch.size = 4096;
    scratch.buf = ts_alloc(4096);
    if (labels == NULL || fbuf == NULL || wbuf == NULL || bbuf == NULL || scratch.buf == NULL) {
        return 4;
    }
    for (step = 0; step < steps; ++step) {
        int rc;
        for (b = 0; b < batch * in_size; ++b) {
            base_t[0][b] = (int8_t)rd();
        }
        for (b = 0; b < batch; ++b) {
            labels[b] = rd();
        }
        if (!read_ok) {
            fprintf(stderr, "%s: data ends before step %ld\n", argv[1], (long)step);
            return 3;
        }
        mt_mark_begin();
        if (method == METHOD_ZO) {
            rc = zo_step(&rng, labels, logit_scale, queries, sigma_w, sigma_b, sigma_node, gns, qas, lr, l0, li, dl,
                         wbuf, bbuf, gbuf, fbuf);
        } else {
            rc = bp_step(labels, logit_scale, qas, lr, momentum, l0, err, eacc, fbuf);
        }
        mt_mark_end();
        if (rc != 0) {
            fprintf(stderr, "step %ld failed (code %d)\n", (long)step, rc);
            return rc;
        }
        fwrite(l0, 4, (size_t)batch, out);
        for (j = 0; j < n_nodes; ++j) {
            if (nodes[j].train != TRAIN_NONE) {
                fwrite(nodes[j].w, 1, (size_t)nodes[j].o * (size_t)nodes[j].k, out);
                fwrite(nodes[j].b, 4, (size_t)nodes[j].o, out);
            }
        }
        fwrite(&rng, 4, 1, out);
    }
    fclose(out);
    fclose(in_file);
    printf("arena bytes used: %lu\n", (unsigned long)arena_used);
    return 0;
}
