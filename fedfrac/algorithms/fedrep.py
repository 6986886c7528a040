"""FedRep (Collins et al. 2021): a shared extractor averaged by a server, private
heads — the personalised, server-based baseline of FIRMA.

Each round the server sends the global extractor φ; every sampled client trains
its private head for E_h epochs with φ frozen, then φ for E_e epochs with its head
frozen (FIRMA Table 4: E_h = E_e = 2, SGD momentum 0.9, lr 0.01), each phase with
the client's persistent optimizer state (never reset, never sent), and uploads
its extractor; the server sets φ ← Σ_k p_k φ_k with p_k = n_k / Σ_j n_j over the
cohort. Clients are evaluated with (φ, their own head). Traffic: N uploads and N
downloads of the extractor, 2·N·p_e bytes per round (FIRMA Table 2).

``compat="reference_code"`` (or ``init="per_client"``) gives every client its own
random initial head, matching the per-client initialisation of the authors' code.
"""
from __future__ import annotations

from fedfrac.algorithms import contract, firma, schema, trees
from fedfrac.ops import aggregate as agg

HPARAMS = schema.HParamSchema({
    "head_epochs": schema.HParam(2, lambda v: isinstance(v, int) and v >= 1,
                                 "E_h; must be an integer >= 1"),
    "extractor_epochs": schema.HParam(2, lambda v: isinstance(v, int) and v >= 1,
                                      "E_e; must be an integer >= 1"),
    **firma.COMPAT_HPARAMS,
})


def build(ctx: contract.BuildContext, hp: dict) -> contract.FedAlgorithm:
  training, model, task = ctx.training, ctx.model, ctx.task
  firma.check_epoch_mode(training, "fedrep")
  per_client = firma.per_client_init(hp)
  opt = training.optimizer
  e_h, e_e = hp["head_epochs"], hp["extractor_epochs"]

  def init(key, params0, n, data_info):
    del data_info
    heads = firma.initial_models(model, key, params0, n, per_client)["head"]
    clients = {"head": heads,
               "opt_head": firma.stacked_init(opt, heads),
               "opt_ext": firma.stacked_init(
                   opt, trees.stack_for_clients(params0["extractor"], n))}
    return {"extractor": params0["extractor"]}, clients

  def broadcast(server_state):
    return server_state["extractor"]

  def client_update(payload, cs, view, key, round_index):
    lr = training.lr_schedule(round_index)
    params, opt_h, opt_e, metrics = firma.two_phase_train(
        {"extractor": payload, "head": cs["head"]}, cs["opt_head"], cs["opt_ext"],
        view, key, lr, model, task, training, e_h, e_e)
    return params["extractor"], {"head": params["head"], "opt_head": opt_h,
                                 "opt_ext": opt_e}, metrics

  def aggregate(server_state, client_states, messages, weights, mask, key):
    del key
    return contract.ServerUpdate({"extractor": agg.weighted_mean(messages, weights, mask)},
                                 client_states)

  def eval_params(server_state, client_state):
    return {"extractor": server_state["extractor"], "head": client_state["head"]}

  return contract.FedAlgorithm("fedrep", init, broadcast, client_update, aggregate,
                               eval_params, personalized=True)


ENTRIES = (
    contract.AlgorithmEntry(
        "fedrep", build, HPARAMS,
        "FedRep: shared extractor, private heads", needs_head=True),
)
