/*
 * The argument checks of the BP-QAS float32 adjoints and of the QAS update (train/qas/), always
 * inline: the reference kernels and their ARMv6-M twins (m0/) refuse the same calls with the same
 * status, from one definition.
 */
#ifndef MT_QAS_F32_ARGS_REF_H
#define MT_QAS_F32_ARGS_REF_H

#include <stddef.h>

#include "mt_arch.h"
#include "mt_train.h"

/* mt_conv2d_bwd_in_s8_f32's shapes: MT_OK or MT_ERR_ARG. */
MT_INLINE mt_status mt_conv2d_bwd_in_s8_f32_args(const mt_conv_params *params,
                                                 const mt_dims *output_dims,
                                                 const float *e_acc,
                                                 const mt_dims *filter_dims,
                                                 const int8_t *filter,
                                                 const mt_dims *input_dims,
                                                 const float *e_x)
{
    if (params == NULL || output_dims == NULL || e_acc == NULL || filter_dims == NULL || filter == NULL ||
        input_dims == NULL || e_x == NULL || params->groups < 1 || params->stride_h < 1 || params->stride_w < 1 ||
        input_dims->c % params->groups != 0 || filter_dims->n % params->groups != 0 ||
        filter_dims->c != input_dims->c / params->groups || output_dims->c != filter_dims->n) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* mt_conv2d_bwd_w_row_s8_f32's shapes and channel: MT_OK or MT_ERR_ARG. */
MT_INLINE mt_status mt_conv2d_bwd_w_row_s8_f32_args(const mt_conv_params *params,
                                                    const mt_dims *input_dims,
                                                    const int8_t *input,
                                                    const mt_dims *output_dims,
                                                    const float *e_acc,
                                                    const mt_dims *filter_dims,
                                                    int32_t channel,
                                                    const float *grad_row)
{
    if (params == NULL || input_dims == NULL || input == NULL || output_dims == NULL || e_acc == NULL ||
        filter_dims == NULL || grad_row == NULL || params->groups < 1 || params->stride_h < 1 ||
        params->stride_w < 1 || input_dims->c % params->groups != 0 || filter_dims->n % params->groups != 0 ||
        filter_dims->c != input_dims->c / params->groups || output_dims->c != filter_dims->n ||
        output_dims->n != input_dims->n || channel < 0 || channel >= filter_dims->n) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* mt_linear_bwd_w_row_s8_f32's sizes and channel: MT_OK or MT_ERR_ARG. */
MT_INLINE mt_status mt_linear_bwd_w_row_s8_f32_args(int32_t batch,
                                                    const int8_t *input,
                                                    int32_t in_features,
                                                    const float *e_acc,
                                                    int32_t out_features,
                                                    int32_t channel,
                                                    const float *grad_row)
{
    if (input == NULL || e_acc == NULL || grad_row == NULL || batch < 1 || out_features < 1 || in_features < 1 ||
        channel < 0 || channel >= out_features) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* mt_linear_bwd_in_s8_f32's sizes: MT_OK or MT_ERR_ARG. */
MT_INLINE mt_status mt_linear_bwd_in_s8_f32_args(int32_t batch,
                                                 int32_t out_features,
                                                 const float *e_acc,
                                                 const int8_t *weight,
                                                 int32_t in_features,
                                                 const float *e_x)
{
    if (e_acc == NULL || weight == NULL || e_x == NULL || batch < 1 || out_features < 1 || in_features < 1) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

/* mt_qas_upd_s8_f32's sizes: MT_OK or MT_ERR_ARG. */
MT_INLINE mt_status mt_qas_upd_s8_f32_args(int32_t channels,
                                           int32_t per_channel,
                                           const float *grad,
                                           const float *k,
                                           const int8_t *w)
{
    if (grad == NULL || k == NULL || w == NULL || channels < 1 || per_channel < 1) {
        return MT_ERR_ARG;
    }
    return MT_OK;
}

#endif /* MT_QAS_F32_ARGS_REF_H */
