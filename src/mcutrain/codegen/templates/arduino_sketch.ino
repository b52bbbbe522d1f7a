// @lib@: one @what@ on a blank sample, printed over Serial. Replace the blank sample by the
// sensor's (int8, quantized as model.h says).
#include "model.h"

static int8_t demo_logits[@logits_size@];
@train_buffers@
void setup() {
  Serial.begin(115200);
  int8_t *x = @input_buffer@;
  if (model_init() != MT_OK) {
    Serial.println("model_init failed");
    return;
  }
  for (int32_t i = 0; i < @input_bytes@; ++i) {
    x[i] = (int8_t)MODEL_INPUT_ZERO_POINT;
  }
  mt_status status = @call@;
  Serial.print("status ");
  Serial.println((int)status);
  for (int32_t k = 0; k < @logits_size@; ++k) {
    Serial.print((int)demo_logits[k]);
    Serial.print(k + 1 < @logits_size@ ? ' ' : '\n');
  }
}

void loop() {
}
