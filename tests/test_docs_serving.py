"""The serving page of the documentation takes the report and figures ``llmq validate --serving``
wrote: one figure per replayed run, named as the command names it."""

from stability.serving.report import markdown
from stability.serving.score import AGGREGATES, RunScore
from tests.test_paper_map import docs_extension as llmq_docs

SCORES = [
    RunScore("big_run", "h100", None, skipped="no llmq model preset for X"),
    RunScore("small_run", "rtx4090", "llama-3.1-8b", kv_blocks=2641, wall_s=0.5, preemptions=0),
    RunScore("other_run", "rtxpro6000", "llama-3.1-8b", kv_blocks=9000, wall_s=0.4, preemptions=3),
    RunScore("means_run", "h100", "llama-3.1-70b", kv_blocks=28000, wall_s=0.4, preemptions=0,
             available=AGGREGATES),  # no per-request measurement: no figure
]


def test_one_figure_per_replayed_run_in_the_reports_order():
    figures = llmq_docs().serving_report_figures(markdown(SCORES, "vllm_v1"))
    assert figures == ["serving_small_run.png", "serving_other_run.png"]


def test_a_report_of_another_scheduler_is_not_taken():
    assert llmq_docs().serving_report_figures(markdown(SCORES, "vllm")) is None
    assert llmq_docs().serving_report_figures("") is None
