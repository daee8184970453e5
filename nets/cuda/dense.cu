/* PLACEHOLDER (being written). */
#include "nets/cuda/cuda.h"
