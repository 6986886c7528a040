"""The lab above the fedfrac library: the paper reproductions (``reproduce``), the
generated documentation (``reproduce.docs``, ``equations``), the benchmarks
(``bench``) and the GPU-window campaign (``campaign``).

It imports :mod:`fedfrac` and is never imported by it; its commands
(``fedfrac-reproduce``, ``fedfrac-bench``, ``fedfrac-campaign``) work from a clone
of the repository, whose ``configs/`` and ``results/`` they read and write.
"""
