"""What each planned scheduler promises about its batches and memory: token budget, decode
cap and KV fraction (:func:`scheduler_caps`), the inputs of the certified bound
(:mod:`theory.capacity`)."""

from __future__ import annotations

from dataclasses import dataclass

from theory.errors import UnknownNameError

PLAN_SCHEDULERS = ("rad", "sarathi", "vllm", "slai")
KV_UTILIZATION_UNMODELLED = 0.9  # vLLM's default gpu_memory_utilization, for schedulers without one


@dataclass(frozen=True)
class Caps:
    """What a scheduler configuration promises about every batch and its memory.

    Attributes
    ----------
    b_max : int or None
        Tokens per batch at most (None: no budget).
    max_decodes : int or None
        Decodes per batch at most.
    kv_utilization : float
        Fraction of GPU memory for weights and KV cache (the KV bound's ``M``).
    memory_modelled : bool
        Whether the simulator models this scheduler's KV memory (else only the bound accounts
        for it).
    """

    b_max: int | None
    max_decodes: int | None
    kv_utilization: float
    memory_modelled: bool


def scheduler_caps(name: str, options: dict) -> Caps:
    """The token budget, decode cap and KV fraction of a scheduler configuration, with the
    defaults of the schedulers' ``make_params`` (checked against them in tests/test_plan.py).

    * ``rad``: no budget (whole prefills), memory not modelled (Assumption 4);
    * ``sarathi``: budget ``chunk_size`` (512), at most ``max_num_seqs`` (128) sequences, 80 %;
    * ``vllm``: a prefill batch holds at most ``max_num_batched_tokens`` (``max(max_model_len,
      2048)``) tokens, a decode batch at most ``max_num_seqs`` (256) decodes, 90 %;
    * ``slai``: budget ``token_budget`` (512), ``max_num_seqs`` (128), 90 %.

    Options the planner does not read (``order``, ``delta``) leave the caps unchanged.
    """
    o = dict(options)
    if name == "rad":
        return Caps(None, None, KV_UTILIZATION_UNMODELLED, False)
    if name == "sarathi":
        return Caps(int(o.get("chunk_size", 512)), int(o.get("max_num_seqs", 128)),
                    float(o.get("gpu_memory_utilization", 0.8)), bool(o.get("memory", True)))
    if name == "vllm":
        seqs = int(o.get("max_num_seqs", 256))
        budget = int(o.get("max_num_batched_tokens") or max(int(o.get("max_model_len", 8192)), 2048))
        return Caps(max(budget, seqs), seqs, float(o.get("gpu_memory_utilization", 0.9)),
                    bool(o.get("memory", True)))
    if name == "slai":
        return Caps(int(o.get("token_budget", 512)), int(o.get("max_num_seqs", 128)),
                    float(o.get("gpu_memory_utilization", 0.9)), bool(o.get("memory", True)))
    raise UnknownNameError("scheduler of llmq plan", name, PLAN_SCHEDULERS)


__all__ = [
    "KV_UTILIZATION_UNMODELLED",
    "PLAN_SCHEDULERS",
    "Caps",
    "scheduler_caps",
]
