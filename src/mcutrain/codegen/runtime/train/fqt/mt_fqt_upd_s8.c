/*
 * The FQT int8 in-place update of one layer with the scalar passes over every row: the kernel is
 * mt_fqt_upd_s8_ref.h (shared with the Helium twin, mve/mt_fqt_upd_s8.c).
 */
#include "mt_fqt_upd_s8_ref.h"
