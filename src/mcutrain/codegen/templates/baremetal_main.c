/* main.c: the smallest firmware around this library on the @board@: one @what@, then sleep.
 * Replace the blank sample by the sensor's (int8, quantized as model.h says). The results stay
 * in `demo_status` and `demo_logits` for a debugger to read. */
#include "model.h"

static int8_t demo_logits[@logits_size@];
@train_buffers@volatile int32_t demo_status;

int main(void)
{
    int32_t i;
    int8_t *x = @input_buffer@;
    demo_status = model_init();
    if (demo_status != MT_OK) {
        for (;;) {
        }
    }
    for (i = 0; i < @input_bytes@; ++i) {
        x[i] = (int8_t)MODEL_INPUT_ZERO_POINT; /* a blank sample */
    }
    demo_status = @call@;
    for (;;) {
        __asm__ volatile("wfi");
    }
}
