"""optax GradientTransformations and schedules used by fedfrac clients."""
from fedfrac.optim.fractional import (FractionalState, fractional, fractional_factor,
                                      fractional_mean_factor, fractional_set_gate,
                                      fractional_set_reference)
from fedfrac.optim.proximal import ProximalState, proximal, proximal_set_reference
from fedfrac.optim.schedules import OPTIMIZERS, SCHEDULES, client_optimizer, lr_schedule
