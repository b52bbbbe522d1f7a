mt_status model_save_state(uint8_t *blob, int32_t size)
{
    const uint32_t head[4] = {MODEL_STATE_MAGIC, MODEL_STATE_FINGERPRINT, 0u, 0u};
    size_t off = sizeof(head);
    if (!blob || size < MODEL_STATE_BYTES) {
        return MT_ERR_ARG;
    }
    memcpy(blob, head, sizeof(head));
    memcpy(blob + 8, &model_state.steps, 4);
    memcpy(blob + 12, &model_state.rng, 4);
@save@
    return MT_OK;
}

mt_status model_load_state(const uint8_t *blob, int32_t size)
{
    uint32_t head[4];
    size_t off = sizeof(head);
    if (!blob || size < MODEL_STATE_BYTES) {
        return MT_ERR_ARG;
    }
    memcpy(head, blob, sizeof(head));
    if (head[0] != MODEL_STATE_MAGIC || head[1] != MODEL_STATE_FINGERPRINT) {
        return MT_ERR_ARG;
    }
    model_state.steps = head[2];
    model_state.rng = head[3];
@load@
    return MT_OK;
}
