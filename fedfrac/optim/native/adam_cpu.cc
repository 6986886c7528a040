// One-pass Adam step for XLA:CPU (fedfrac.optim.fused_adam), an XLA FFI handler.
//
// For every element, optax.adam's step followed by p + lr u, in the arithmetic
// XLA:CPU compiles it to (float32, no FMA contraction, IEEE division and square
// root; XLA's simplifier turns (m/bc1)/(s + eps) into m/(bc1 (s + eps)), drops
// the + 0 of eps_root and folds the -1 of the unit learning rate into lr), so
// the results equal the optax path's bit for bit:
//   m' = (1 - b1) g + b1 m,   v' = (1 - b2) g^2 + b2 v,
//   p' = p + (m' / (bc1 (sqrt(v' / bc2) + eps))) (-lr),
// and (p', m', v') = (p, m, v) where `active` is 0 (a masked local step).
// XLA:CPU makes three loops of this (one per output, each recomputing m' and
// v'); here the parameter, both moments and the gradient are read once.
//
// Buffers p, m, v, g hold n elements; lr, bc1, bc2, active hold G >= 1 values
// with n = G * inner: value k serves elements [k * inner, (k + 1) * inner), the
// layout vmap's "broadcast_all" gives (batch dimensions leading).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using F32 = ffi::Buffer<ffi::F32>;
using F32Out = ffi::ResultBuffer<ffi::F32>;

static void Step(const float* p, const float* m, const float* v, const float* g,
                 float lr, float bc1, float bc2, float b1, float c1, float b2,
                 float c2, float eps, std::size_t n, float* po, float* mo,
                 float* vo) {
  const float neg_lr = lr * -1.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = std::fma(gi, c1, b1 * m[i]);
    const float vi = std::fma(gi * gi, c2, b2 * v[i]);
    const float q = mi / (bc1 * (std::sqrt(vi / bc2) + eps));
    mo[i] = mi;
    vo[i] = vi;
    po[i] = std::fma(q, neg_lr, p[i]);
  }
}

static void Copy(const float* src, std::size_t n, float* dst) {
  if (src != dst) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

static ffi::Error AdamStep(F32 p, F32 m, F32 v, F32 g, F32 lr, F32 bc1, F32 bc2,
                           F32 active, float b1, float c1, float b2, float c2,
                           float eps, F32Out po, F32Out mo, F32Out vo) {
  const std::size_t n = p.element_count();
  const std::size_t groups = lr.element_count();
  if (m.element_count() != n || v.element_count() != n || g.element_count() != n ||
      po->element_count() != n || mo->element_count() != n ||
      vo->element_count() != n) {
    return ffi::Error::InvalidArgument("fedfrac_adam_step: p, m, v, g and the "
                                       "outputs must have the same size");
  }
  if (groups == 0 || n % groups != 0 || bc1.element_count() != groups ||
      bc2.element_count() != groups || active.element_count() != groups) {
    return ffi::Error::InvalidArgument("fedfrac_adam_step: lr, bc1, bc2 and active "
                                       "must have one size G dividing p's size");
  }
  const std::size_t inner = n / groups;
  for (std::size_t k = 0; k < groups; ++k) {
    const std::size_t o = k * inner;
    if (active.typed_data()[k] != 0.0f) {
      Step(p.typed_data() + o, m.typed_data() + o, v.typed_data() + o,
           g.typed_data() + o, lr.typed_data()[k], bc1.typed_data()[k],
           bc2.typed_data()[k], b1, c1, b2, c2, eps, inner,
           po->typed_data() + o, mo->typed_data() + o, vo->typed_data() + o);
    } else {
      Copy(p.typed_data() + o, inner, po->typed_data() + o);
      Copy(m.typed_data() + o, inner, mo->typed_data() + o);
      Copy(v.typed_data() + o, inner, vo->typed_data() + o);
    }
  }
  return ffi::Error::Success();
}

XLA_FFI_DEFINE_HANDLER_SYMBOL(FedfracAdamStep, AdamStep,
                              ffi::Ffi::Bind()
                                  .Arg<F32>()  // p
                                  .Arg<F32>()  // m
                                  .Arg<F32>()  // v
                                  .Arg<F32>()  // g
                                  .Arg<F32>()  // lr
                                  .Arg<F32>()  // bc1
                                  .Arg<F32>()  // bc2
                                  .Arg<F32>()  // active
                                  .Attr<float>("b1")
                                  .Attr<float>("c1")
                                  .Attr<float>("b2")
                                  .Attr<float>("c2")
                                  .Attr<float>("eps")
                                  .Ret<F32>()   // p'
                                  .Ret<F32>()   // m'
                                  .Ret<F32>()); // v'
