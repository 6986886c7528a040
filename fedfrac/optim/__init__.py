"""optax GradientTransformations and schedules used by fedfrac clients."""
from fedfrac.optim.schedules import OPTIMIZERS, SCHEDULES, client_optimizer, lr_schedule
