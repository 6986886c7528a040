"""The tables of a tuned study: the learning rate each method chose on the
validation split (and whether it sits at the grid's edge), the tuned methods'
final test accuracy over seeds, and the verdict against FedAvg."""
from __future__ import annotations



import numpy as np

from fedfrac_lab.reproduce import common
from fedfrac_lab.reproduce.tuned_studies import STUDIES, study_config



METRIC_TEXT = {"accuracy": "accuracy on the whole evaluated split",
               "client_accuracy_mean": "accuracy averaged over clients, each on its own "
                                       "split (the paper's metric)"}


def grid_edge(lrs, lr):
  """``"top"`` / ``"bottom"`` when ``lr`` is the largest / smallest rate of the
  grid ``lrs`` (its best rate may lie outside the grid), else ``None``."""
  lrs = [float(x) for x in lrs]
  if np.isclose(lr, max(lrs)):
    return "top"
  if np.isclose(lr, min(lrs)):
    return "bottom"
  return None


def ms(values):
  mean, std = common.seed_mean_std(values)
  if mean is None:
    return "diverged"
  bad = sum(1 for v in values if v is None or not np.isfinite(v))
  return f"{mean:.4f} ± {std:.4f}" + (f" ({bad}/{len(values)} diverged)" if bad else "")


def val_cell(v):
  v = np.asarray(v, np.float64)
  ok = np.isfinite(v)
  if not ok.any():
    return "diverged"
  return f"{v[ok].mean():.3f}" + (f" ({int((~ok).sum())} div.)" if not ok.all() else "")



def tuned_rows(result) -> list:
  """The methods of a tuned-study ``result``, best tuned test mean first:
  ``[(tuned mean or -1, label, entry, paper-lr mean)]``."""
  rows = []
  for label, e in result["methods"].items():
    paper_mean = common.seed_mean_std(e["paper_test"])[0]
    tuned_mean = common.seed_mean_std(e["tuned_test"])[0]
    rows.append((tuned_mean if tuned_mean is not None else -1, label, e, paper_mean))
  rows.sort(key=lambda r: -r[0])
  return rows

def markdown(result, command):
  """The side-by-side table of ``run_study`` output, best tuned method first, and a
  plain verdict (which names every rate chosen at the edge of the grid). An
  optional ``result["note"]`` (a paragraph about how the JSON was made, e.g. a
  row rerun and merged into it) is printed under the provenance line."""
  study = result["study"]
  st = STUDIES[study]
  metric = result.get("metric", "accuracy")
  rows = tuned_rows(result)
  lines = [f"# Learning-rate-tuned comparison: {study} ({st.data_text})", "",
           f"Produced by `{result.get('command', command)}`; "
           f"{result['wall_s']:.0f} s wall" +
           (f"; rendered by `{command}`." if result.get("command", command) != command
            else "."), "",
           *([result["note"], ""] if result.get("note") else []),
           f"Protocol: each client's train rows are split {1 - result['validation_fraction']:.0%}"
           f" / {result['validation_fraction']:.0%} into train / validation with the "
           "data seed (`data.validation_fraction`); every method runs the same "
           f"learning-rate grid {result['lrs']} for {result['rounds']} rounds on seeds "
           f"{result['seeds']}; its rate is the one with the best mean final "
           "VALIDATION score (a rate where a seed diverged loses to one where none "
           "did; ties: the smaller rate). The table reports the TEST score "
           "(mean ± std over seeds) of the paper setting and of the chosen rate, "
           "both trained on the same train rows (one run, evaluated on both splits). "
           f"Score: `{metric}`, {METRIC_TEXT.get(metric, metric)}. Paper setting: "
           f"{st.paper_text}.", "",
           "| method | paper-setting lr | test score, paper setting | chosen lr | "
           "test score, own best lr | Δ tuned − paper (pp) | val score per lr |",
           "|---|---|---|---|---|---|---|"]
  for _, label, e, paper_mean in rows:
    tuned_mean = common.seed_mean_std(e["tuned_test"])[0]
    d = ("–" if tuned_mean is None or paper_mean is None
         else f"{100 * (tuned_mean - paper_mean):+.1f}")
    val = ", ".join(f"{lr}: {val_cell(v)}" for lr, v in e["val"].items())
    edge = grid_edge(result["lrs"], e["chosen_lr"])
    chosen = f"{e['chosen_lr']:g}" + (f" ({edge} edge)" if edge else "")
    lines.append(f"| {label} | {e['paper_lr']:g} | {ms(e['paper_test'])} | "
                 f"{chosen} | {ms(e['tuned_test'])} | {d} | {val} |")
  missing = [m for m in study_config(study).methods.keys()
             if m not in result["methods"]]
  lines += ["", "## Verdict", ""]
  if missing:
    lines += [f"**Partial**: not run yet: {', '.join(missing)} (the verdict covers "
              "only the methods above).", ""]
  lines += [verdict_text(rows), "", edge_text(result), ""]
  return "\n".join(lines)


def edge_text(result):
  """One sentence naming every method whose chosen rate is at the edge of the
  grid (its best rate may lie beyond it), or saying that none is."""
  lrs = result["lrs"]
  edges = [(label, e["chosen_lr"], grid_edge(lrs, e["chosen_lr"]))
           for label, e in result["methods"].items()]
  edges = [(label, lr, where) for label, lr, where in edges if where]
  if not edges:
    return (f"No method's rate was chosen at the edge of the grid "
            f"({min(lrs):g} … {max(lrs):g}): every chosen rate has grid rates on both "
            "sides that score no better.")
  named = ", ".join(f"{label} ({lr:g}, {where})" for label, lr, where in edges)
  return (f"Chosen at the edge of the grid ({min(lrs):g} … {max(lrs):g}): {named}; "
          "for these the best rate may lie outside the grid, so their tuned score is "
          "a lower bound.")


def verdict_text(rows):
  """Who wins at the paper setting and who wins when every method is tuned."""
  def best(key):
    scored = [(common.seed_mean_std(e[key]), label) for _, label, e, _ in rows]
    scored = [((m, s), label) for (m, s), label in scored if m is not None]
    scored.sort(key=lambda x: -x[0][0])
    return scored
  paper, tuned = best("paper_test"), best("tuned_test")
  if not paper or not tuned:
    return "No method finished."
  (pm, ps), pl = paper[0]
  (tm, ts), tl = tuned[0]
  ties = [label for (m, s), label in tuned[1:] if tm - m <= max(0.005, ts, s)]
  text = (f"At the paper setting the best is **{pl}** ({pm:.4f}). With every method "
          f"at its own best learning rate the best is **{tl}** ({tm:.4f} ± {ts:.4f})")
  text += (f"; within one std (or 0.5 pp) of it: {', '.join(ties)}." if ties else
           "; no other method is within one std (or 0.5 pp) of it.")
  return text
