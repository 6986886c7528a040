"""The reproduction figures each paper's page shows, registered for
``fedfrac-reproduce docs`` (:mod:`fedfrac_lab.reproduce.figure_files` draws and checks
them): FIRMA's judged tables and its per-round curves beside the authors' code
(:mod:`fedfrac_lab.reproduce.figure_data_firma`), and the stand-in tables of FOFedAvg,
FO-RI-FedAvg and Kuramoto-FedAvg (:mod:`fedfrac_lab.reproduce.figure_data`)."""
from __future__ import annotations

from fedfrac_lab.reproduce import figure_data, figure_data_firma
from fedfrac_lab.reproduce import published_ours
from fedfrac_lab.reproduce.doc_blocks import FIRMA_JSON, FMNIST_JSONS, MNIST_JSONS
from fedfrac_lab.reproduce.doc_registry import figures

FOFEDAVG_SOURCES = ("results/fofedavg_methods_digits.json",) + tuple(
    path for path, _ in published_ours.ALPHA_SOURCES)


@figures("firma", FIRMA_JSON, *FMNIST_JSONS, *MNIST_JSONS, figure_data_firma.AUTHORS_JSON)
def firma():
  return figure_data_firma.figures()


@figures("fofedavg", "fedfrac_lab/reproduce/published/fofedavg.json", *FOFEDAVG_SOURCES)
def fofedavg():
  return figure_data.standin_figures("fofedavg")


@figures("fo_ri_fedavg", "fedfrac_lab/reproduce/published/fo_ri_fedavg.json",
         published_ours.BEV_JSON)
def fo_ri_fedavg():
  return figure_data.standin_figures("fo_ri_fedavg")


@figures("kuramoto", "fedfrac_lab/reproduce/published/kuramoto.json", published_ours.KURAMOTO_MD)
def kuramoto():
  return figure_data.standin_figures("kuramoto")
