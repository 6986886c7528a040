"""Paper reproductions: one module per paper, each with its scenario grid, its
published values (``published/<paper>.json``) and its table writer.

    import fedfrac as ff
    ff.reproduce.firma.table(all_results["paper"])

Command line: ``fedfrac-reproduce <paper> [flags]`` or
``python -m fedfrac_lab.reproduce <paper> [flags]`` with <paper> one of ``PAPERS``.
``jobs`` runs a reproduction's ``ff.run_many`` calls as ``fedfrac.sweep`` points;
``verdicts`` is the rule every comparison with a paper is judged by; ``docs``
renders the figures README.md, REPRODUCTION.md and the guide quote from the results
files.
"""
from fedfrac_lab.reproduce import (asynchronous, common, docs, firma, firma_adam_ablation,
                               firma_authors,
                               firma_files, firma_start_rounds, firma_tables, fo_ri_fedavg,
                               fofedavg, fofedavg_mnist, jobs, kuramoto, kuramoto_authors,
                               published_tables, robust, stragglers, tuned, verdicts)

# Command name -> module; ``bev`` names the FO-RI-FedAvg BEV suite as well.
PAPERS = {"asynchronous": asynchronous, "firma": firma, "firma_files": firma_files,
          "firma_authors": firma_authors,
          "firma_start_rounds": firma_start_rounds, "firma_adam_ablation": firma_adam_ablation,
          "fofedavg": fofedavg, "fofedavg_mnist": fofedavg_mnist,
          "fo_ri_fedavg": fo_ri_fedavg, "bev": fo_ri_fedavg, "kuramoto": kuramoto,
          "kuramoto_authors": kuramoto_authors,
          "robust": robust, "tuned": tuned,
          "published": published_tables, "stragglers": stragglers, "docs": docs}
