"""A GPU window in one command: the campaign that each short accelerator window
continues.

``benchmarks/gpu/campaign.sh --out DIR`` (a thin shell over ``python -m
fedfrac_lab.campaign run``) installs the carried wheels, checks the device, runs the
accelerator measurements not yet committed (stage a) and then the next real-data
points of the committed plan (stage b, ``benchmarks/gpu/plan.json``), and stops
starting work when the time left is under its estimate for the next item, so it
ends inside its budget with every finished item written; ``DIR`` gets one
archive of the new item files, the log and the timing table.
``fedfrac-campaign collect ARCHIVE`` verifies and unpacks such an archive into
``results/`` and ``benchmarks/`` and re-renders the tables it touched.

Modules: :mod:`~fedfrac_lab.campaign.plan` (the plan and its items),
:mod:`~fedfrac_lab.campaign.files` (checksummed item files, the archive),
:mod:`~fedfrac_lab.campaign.supervisor` (the budgeted run, no JAX in it),
:mod:`~fedfrac_lab.campaign.worker` (the process that runs the items),
:mod:`~fedfrac_lab.campaign.items` (how each kind of item runs),
:mod:`~fedfrac_lab.campaign.collect` (archive -> results and tables),
:mod:`~fedfrac_lab.campaign.precompile` (the compile-ahead process),
:mod:`~fedfrac_lab.campaign.carried_cache` (the compile cache one window leaves the next),
:mod:`~fedfrac_lab.campaign.processes` (forking the worker and the compile-ahead process),
:mod:`~fedfrac_lab.campaign.window_report` (committed measurements, the timing table),
:mod:`~fedfrac_lab.campaign.environment` (what the GPU image holds and the wheels add).
"""

# The measurements stage a can run (fedfrac_lab.bench.accelerator.MEASUREMENTS, named
# here so that the plan is checked without importing JAX).
MEASUREMENT_NAMES = ("vs_torch", "fibfl_seeds", "conv_forms", "precision",
                     "points_per_hour", "peaks", "step_scaling", "masked_steps",
                     "papers_vs_torch", "profile", "fibfl_pp_replay")
