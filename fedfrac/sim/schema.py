"""The engine's config sections, ``engine``, ``churn``, ``system``, ``clock`` and
``attack``:
every key once, with its default, meaning and check (:mod:`fedfrac.config_schema`).
Where the engine enforces a rule on an :class:`EngineConfig` itself, the field's
check is that rule (:class:`fedfrac.config_schema.Rule`). Rules that relate
several keys are in :mod:`fedfrac.sim.validate`."""
from __future__ import annotations

from fedfrac._validation import is_num
from fedfrac.config_schema import (BOOLEAN, Check, Field, Rule, Section, integer, number,
                                   one_of)
from fedfrac.sim import churn, clock, devices, execution, precision

POSITIVE_OR_INF = Check(lambda v, node: v == float("inf") or (is_num(v) and v > 0),
                        "must be a number > 0 (inf: none)")

ENGINE = Section("engine", "How the engine runs a round; none of these changes which "
                 "steps train (vmap and map agree to float rounding and differ in the "
                 "executed_steps cost measure, fedfrac.sim.execution).", [
    Field("client_parallelism", "auto", "vmap | map | auto (map for conv models on "
          "CPU, else vmap)", Rule(execution.check_parallelism, "engine")),
    Field("unroll", 0, "local steps per loop iteration (0 = auto)", integer(0)),
    Field("eval_batch_size", 1024, "rows per evaluation batch", integer(1)),
    Field("dynamic_steps", True, "local-step loops stop at each client's own step "
          "count", BOOLEAN),
    Field("step_buckets", 0, "vmapped groups of the step-sorted cohort (0 = auto)",
          Rule(execution.check_step_buckets, "engine")),
    Field("shard_clients", "auto", "shard the cohort over all devices with shard_map "
          "(auto = when there are several)", Rule(devices.check_shard_clients, "engine"),
          any_type=True),
    Field("shard_client_state", False, "shard the clients' persistent state, tables "
          "and train rows over the same devices (about K/D clients each) instead of "
          "replicating them (needs shard_clients True or auto; fedfrac.sim.client_rows)"),
    Field("device_invariant", False, "vmapped groups formed over the whole cohort, as on "
          "one device, and dealt whole to devices: 1, 2 or 4 devices give the same bits "
          "(parallel only with >= as many step_buckets as devices; not with "
          "shard_client_state; fedfrac.sim.placement.ShardedGroups)", BOOLEAN),
    Field("cpu_devices", 0, "split the CPU into this many devices, one per core (0 = "
          "leave JAX's default; only takes effect before JAX first runs, e.g. from the "
          "CLI)", integer(0)),
    Field("matmul_precision", "highest", "highest | tensorfloat32 | bfloat16 "
          "(fedfrac.sim.precision)", Rule(precision.check_matmul_precision, "engine")),
])

CHURN = Section("churn", "Clients leaving and joining between rounds.", [
    Field("p_leave", 0.0, "probability an available client leaves",
          number(0, 1)),
    Field("p_join", 1.0, "probability an unavailable client comes back", number(0, 1)),
    Field("cohort_rule", "available", "|S_t| under churn: 'available' = "
          "max(ceil(C·|A_t|), 1) of the available clients (FO-RI-FedAvg §IV-N) or "
          "'slots' = ceil(C·K) slots filled from the available ones",
          Rule(churn.check_cohort_rule, "churn")),
    Section("per_class", "Asymmetric churn: client group (BEV: vehicle class) -> "
            "(p_leave, p_join); groups not listed use p_leave/p_join above.",
            free=True),
])

SYSTEM = Section("system", "Heterogeneous client speed (fedfrac.ops.system; the "
                 "guide's 'Running experiments', Stragglers); its keys are checked "
                 "together by fedfrac.ops.system.validate_system.", [
    Field("speed", "equal", "equal | lognormal (s_k = exp(sigma·z), z ~ N(0, 1), fixed "
          "per seed) | groups (group_speeds[groups[k]])"),
    Field("sigma", 0.0, "lognormal speed spread"),
    Field("group_speeds", (), "speed of each group (speed='groups')"),
    Field("groups", (), "client k's group (empty = client k in group k mod G)"),
    Field("deadline", float("inf"), "T per round in time units (one local step at "
          "speed 1 = 1 unit; inf = none)"),
    Field("policy", "none", "none (every client runs its E epochs) | drop (clients "
          "that cannot finish by T send nothing) | partial (each client runs the "
          "steps that fit before T)"),
])

CLOCK = Section("clock", "The simulated clock (fedfrac.sim.clock; the guide's "
                "'Asynchronous runs'): client k runs s_k local steps and moves b_k bytes "
                "per time unit; the distributions, the trace and the server's options are "
                "checked together by fedfrac.sim.validate.validate_clock.", [
    Field("server", "none", "none (no clock: today's rounds) | sync (rounds, each as "
          "long as its slowest participant) | fedbuff | fedasync (buffered "
          "asynchronous aggregation, fedfrac.sim.asynchronous)",
          one_of("none", *clock.SERVERS)),
    Field("speed", "constant", "constant (the mean) | lognormal (mean·exp(spread·z)), "
          "fixed per seed", one_of(*clock.DISTRIBUTIONS)),
    Field("speed_mean", 1.0, "local steps per time unit"),
    Field("speed_spread", 0.0, "lognormal spread of the speeds"),
    Field("bandwidth", "constant", "constant | lognormal, as speed",
          one_of(*clock.DISTRIBUTIONS)),
    Field("bandwidth_mean", float("inf"), "bytes per time unit (inf: communication "
          "takes no time)"),
    Field("bandwidth_spread", 0.0, "lognormal spread of the bandwidths"),
    Field("trace", "", "a CSV file client,speed,bandwidth (one row per client; an "
          "optional fourth column windows, e.g. 0-100;250-inf: when the client can "
          "start training, read by fedbuff / fedasync) instead of the distributions"),
    Field("deadline", float("inf"), "server='sync' only: T per round in time units "
          "(inf = none); a sampled client arriving after T is dropped and the round "
          "lasts min(T, its slowest client)", POSITIVE_OR_INF),
    Section("options", "The asynchronous server's options (see --list), checked "
            "against its schema.", free=True),
])

ATTACK = Section("attack", "Byzantine clients, fixed per seed (the kind is checked "
                 "with the task: fedfrac.sim.validate.validate_attack).", [
    Field("kind", "none", "none | sign_flip (send −scale·Δ) | gaussian (send N(0, "
          "std²) noise) | scaled (send scale·Δ) | label_flip (train on C−1−y)"),
    Field("fraction", 0.0, "fraction of the K clients", number(0, 1)),
    Field("scale", 1.0, "sign_flip / scaled factor", number()),
    Field("std", 1.0, "gaussian noise std", number(0)),
    Field("seed", -1, "-1 = the run's seed",
          integer(-1, allowed="must be an integer >= 0, or -1 for the run's seed")),
])
