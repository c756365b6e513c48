"""Cost terms beyond Eq. 2: switchable options stated in the GPU and model TOML files.

Every term is off by default, so the roofline presets and ``paper`` mode give Eq. 2-7 exactly; a
:class:`theory.cost.CostModel` whose terms are all off takes the unchanged Eq. 4-7 code paths. In
``real`` mode the GPUs with public measurements (A100, H100, A40, RTX 4090, RTX PRO 6000) use
their shipped calibration (``theory/data/calibrated_gpus.toml``, :mod:`theory.validation.presets_fit`), which
switches ``memory_floor``, ``waves``, ``l2_bandwidth_gbs`` and ``gemm_overhead_s`` on and states an
all-reduce law where one was measured; the other presets keep their roofline rates with the terms
that need no fitted number, as the ``[real_mode.<tileset>]`` tables of ``theory/data/gpus.toml``
state them (read by :func:`theory.hardware.real_mode_terms`).

The terms are declared once, with their units, defaults, paper-mode values and sources, in the
table :data:`theory.cost_terms.TERMS`; this module says what each changes and reads them, and the
records' defaults are the table's.

Where each switch lives
-----------------------
*GPU side* (``[gpus.<key>]`` of a ``--gpu-file``; a property of the hardware a replica runs on)::

    [gpus.a100-tp4]
    base = "a100"
    memory_floor = true          # each GeMM: max(Eq. 2 time, bytes / (eta_mem B))
    waves = true                 # each linear GeMM: ceil(output tiles / s) waves, not tiles / s
    attention_waves = false      # the same for Eq. 6's prefill-attention GeMMs (default false)
    l2_bandwidth_gbs = 5300.0    # each GeMM tile: its operand slices stream at <= this (GB/s)
    overhead_s = 0.0             # fixed time per batch (already existed; Eq. 7 + c)
    gemm_overhead_s = 4.2e-6     # fixed time per linear GeMM (the calibrated A100's c_0)
    attention_call_s = 1.4e-5    # fixed time per layer per batch with attention work
    mixed_decode_eta = 0.76      # a decode beside a prefill chunk: Eq. 5 at eta x query width
    gemm_profile = "vidur_gemm"  # measured GeMM times where the shape was profiled (real mode)
    tp = 4                       # tensor-parallel degree of the replica (needs mode = "real")
    allreduce_latency_s = 4.6e-5 # all-reduce law: latency + 2 (tp-1)/tp bytes / bandwidth
    allreduce_bandwidth_gbs = 171.0   # NCCL bus bandwidth, GB/s: fit_allreduce_law on the
                                      # packaged vidur A100 DGX TP=4 all-reduce (>= 1 MiB)

    [gpus.lidaipeng]
    base = "a100"
    overhead_s = 0.0
    [gpus.lidaipeng.linear_law]  # a literature law replacing Eq. 4 and tau / mu_nLin
    kind = "staircase"           # c + a ceil(tau / b0) for a batch of tau >= 1 tokens
    c = 0.004
    a = 0.002
    b0 = 256

    [gpus.rtxpro6000-ep2]
    base = "rtxpro6000"
    ep = 2                       # expert-parallel group of a mixture of experts (theory.expert_parallel)
    all2all_backend = "allgather_reducescatter"   # vLLM's default; or "all_to_all" (DeepEP, pplx)
    allreduce_latency_s = 2e-5   # the interconnect's law, shared with tp
    allreduce_bandwidth_gbs = 16.0

*Model side* (``[models.<key>]`` of a ``--model-file``; a property of the network)::

    [models.no-attn]
    base = "mistral-7b"
    attention = false            # Eq. 5 and Eq. 6 priced at 0
    lm_head = true               # vocab projection on output rows only, plus the embedding gather

The tensor-parallel degree ``tp`` lives in the GPU file: a replica with tensor parallelism is a
group of ``tp`` GPUs joined by one interconnect, and it is the group that Theorem 1's ``r`` counts
as one node; its all-reduce fields (NVLink or PCIe) are meaningless without ``tp``, so the three
fields stay together, and every command already carries ``--gpu-file`` into every run, sweep
point and cache key, so no new option has to be threaded through the runner. The same model file
then runs unchanged on a single GPU or on a TP group.

Booleans must be TOML booleans (``true``/``false``): ``memory_floor = "false"`` is an error naming
the key (:func:`theory.config.read_bool`).

The terms and what they change
------------------------------
``memory_floor`` (GPU, bool)
    A GeMM ``W (d_row x d_red)`` times ``tau`` columns cannot end before its bytes crossed DRAM:
    ``T = max(T_Eq.2, b (d_row d_red + tau (d_red + d_row)) / (eta_mem B))`` with ``b`` bytes per
    element and the profile's achievable bandwidth ``eta_mem B``: a roofline per GeMM (Williams,
    Waterman, Patterson, "Roofline", CACM 52(4), 2009; the GeMM arithmetic intensity
    ``2 M N K / (b (M K + N K + M N))`` of NVIDIA's "Matrix Multiplication Background User's
    Guide"), not per tile. Applied to the linear GeMMs (Eq. 4); attention keeps Eq. 5-6.
``waves`` (GPU, bool)
    Eq. 2's ``tiles / (s mu)`` becomes ``ceil(output tiles / s) ceil(d_red / t_red) / mu``: the
    output tiles are dealt to the ``s`` SMs in waves and the last wave is as long as a full one
    (wave quantization, NVIDIA "Matrix Multiplication Background User's Guide", section "Wave
    Quantization"). Applied to the linear GeMMs (Eq. 4), where the packaged per-GeMM profiles
    measure it; prefill attention has its own switch.
``l2_bandwidth_gbs`` (GPU, float > 0; absent: off)
    A tiled GeMM's output tile ``t_row x t_col`` reads its operand slices, ``t_row x d_red`` of
    the weight and ``d_red x t_col`` of the activations, through the cache hierarchy (the
    threadblock tile's main loop of NVIDIA CUTLASS, ``media/docs/efficient_gemm.md``), so a GeMM
    on tile ``t`` moves at least ``b ceil(d_row/t_row) ceil(d_col/t_col) (t_row + t_col) d_red``
    bytes through L2: each tile's time is at least that over the L2 bandwidth (a roofline at the
    L2 level: Ilic, Pratas, Sousa, "Cache-aware Roofline model", IEEE Computer Architecture
    Letters 13(1), 2014). Unlike the memory floor it depends on the tile and grows with the
    output tiles even inside one wave, which is where the waves term alone predicts no step.
    Applied to the linear GeMMs (Eq. 4), before the minimum over tiles. On in the calibrated
    presets: fitted per GPU (A100 5.2, H100 8.5, A40 2.7 TB/s on the packaged vidur GeMMs), it
    lowers the held-out error on H100 and A40 and reproduces the A100 layer staircase
    (:data:`theory.validation.presets_fit.L2_NOTE`).
``attention_waves`` (GPU, bool)
    The same wave quantization for the two GeMMs of Eq. 6 (prefill attention). Off by default and
    in the calibrated presets: no packaged profile measures attention kernels alone, and on the
    packaged whole prefill batches (splitwise-sim, Llama-2-70B and BLOOM-176B at TP 2-8, prompts
    of 128-8192 tokens) switching it on changes Eq. 7 by far less than the batches' residual, so
    the data neither support nor refute it (``tests/test_validate.py`` computes both). Served
    prefill attention is a fused
    kernel (FlashAttention: Dao et al. 2022, arXiv:2205.14135) whose work is split over query
    blocks and heads, not Eq. 6's two GeMMs over one head, so their wave count is not Eq. 6's.
``overhead_s`` (GPU, float >= 0)
    A fixed time per batch (kernel launches, scheduling); exists since calibration.
``engine_step_s`` (GPU, float >= 0; an added-time term)
    The serving engine's host time per step (scheduling, input preparation, sampling, output
    processing), which a GPU profile of kernels does not hold: a constant per non-empty batch,
    like ``overhead_s`` (:mod:`theory.engine_terms`).
``cudagraph_capture_sizes`` (GPU, list of token counts; absent: off)
    The engine's CUDA-graph sizes: a step of ``tau`` tokens, at most the largest size, runs its
    linear GeMMs at the least size ``>= tau`` (:func:`theory.engine_terms.pad_tokens`, inside
    :func:`theory.cost.T_Lin`), as vLLM v1 pads its steps (:mod:`theory.engine_terms`).
``frontend_s`` (GPU, float >= 0)
    The API front end's time per request (tokenize, detokenize, HTTP), added to each request's
    TTFT and latency and to no batch (:mod:`theory.engine_terms`).
``gemm_overhead_s`` (GPU, float >= 0)
    A fixed time ``c_0`` per linear GeMM: each batch pays ``c_0`` times the model's number of
    linear GeMMs (Eq. 4's sum, ``N`` layers), and each GeMM alone pays ``c_0``
    (:func:`theory.cost.T_GeMM_terms`). It is the per-GeMM intercept that
    :func:`theory.validation.gemm_fit.fit_gemm` fits (kernel prologue and epilogue, launch gaps inside a
    kernel's timed range); a GPU property, so one calibrated profile serves every model.
``attention_call_s`` (GPU, float >= 0)
    A fixed time ``c_A`` per attention kernel call: each layer of a batch with attention work
    calls the attention kernel once, so Eq. 7 gains ``N c_A`` per non-empty batch (every decode
    and every prefill chunk attends, so with ``attention = true`` that is every batch with a token;
    with ``attention = false`` nothing is added), and one measured layer's attention pays ``c_A``
    (:func:`theory.validation.attention.predict_attention`). The attention kernels of a serving
    engine launch a grid and, for split-KV decoding, a reduction, whose cost does not shrink with
    the work (FlashAttention: Dao et al. 2022, arXiv:2205.14135; Flash-Decoding: Dao, Haziza,
    Massa, Sizov 2023, "Flash-Decoding for long-context inference", PyTorch blog); LLMServingSim's
    RTX 4090 profile measures a decode over a few cached tokens at many times what Eq. 5 predicts
    (``llmq validate``'s attention section). It rides on the per-batch fixed time
    (:attr:`theory.cost.CostModel.fixed_s`, which
    the simulator's tables charge per batch exactly as ``overhead_s``). Fitted for the RTX 4090 and
    the RTX PRO 6000 (:mod:`theory.validation.presets_fit`, :func:`theory.validation.attention.call_fit`) on
    the training batches of a prefill chunk alone and of decodes alone; no other GPU has
    attention measurements, so it is off there.
``mixed_decode_eta`` (GPU, float >= 0; 0 or absent: off)
    The decode attention of a batch that also holds a prefill chunk. vLLM runs a batch's
    attention as one FlashAttention varlen call over all its query tokens (vllm-project/vllm @
    0084b783bcda6d7ee15c337b1062cbee9985c954, ``vllm/v1/attention/backends/flash_attn.py``,
    ``FlashAttentionImpl.forward``: ``flash_attn_varlen_func`` with ``max_seqlen_q =
    max_query_len``). FlashAttention shares a KV head's reads among its query heads for a
    decode only when every sequence of the call has one query token: ``mha_varlen_fwd``'s
    ``seqlenq_ngroups_swapped = max_seqlen_q == 1 && num_heads > num_heads_k && ...`` packs the
    query heads of a group into one block per KV head and enables the split-KV (Flash-Decoding)
    path (Dao-AILab/flash-attention @ 00979f57acf503b0b080ff08ada0007080074649,
    ``csrc/flash_attn/flash_api.cpp``; vLLM's ``use_cascade_attention`` states the same
    condition, ``num_queries_per_kv > 1 and np.all(query_lens == 1)``). Beside a prefill chunk
    ``max_seqlen_q > 1``, so each decode runs as a one-token "prefill": one block per *query*
    head, each loading its KV head's cache. The term prices each such decode by Eq. 5 at the
    query heads' width ``d_q = n_heads head_dim / tp`` (the width Eq. 6 uses) times a fitted
    ``eta``::

        T^{D,SA}_mix(i) = eta T^{D,SA}(i; d = d_q)      (a batch with a prefill chunk)
        T^{D,SA}(i; d = d_kv)                           (decodes alone: Eq. 5 as served)

    ``eta`` absorbs how much of the repeated reads the cache hierarchy absorbs and the missing
    split over the SMs. A batch of decodes alone, and a prefill chunk alone, keep Eq. 5-6. Fitted
    by :func:`theory.validation.attention.fit_mixed_eta` on the training batch shapes of the mixed
    batches (LLMServingSim's RTX 4090 and RTX PRO 6000 profiles, every 4th shape held out) and
    shipped where it lowers the held-out error (:mod:`theory.validation.presets_fit`; the fitted
    values are in ``theory/data/calibrated_gpus.toml``, the held-out errors before and after in
    ``llmq validate``'s attention section); one ``eta`` fits both Llama-3.1-8B's 4 and Qwen3-32B's 8
    query heads per KV head, where a factor on Eq. 5 as served would need one per model. In paper mode
    ``d_q = d_kv = d`` (one head of width ``d``), so the term is ``eta`` times Eq. 5. The
    simulator prices it through a second decode prefix table used by the batches that hold a
    chunk (:func:`theory.cost.decode_prefix` with ``law="mixed"``).
``linear_law`` (GPU, table)
    ``kind = "staircase"``: the token-count part of Eq. 7, ``T_Lin(tau) + tau / mu_nLin`` (Eq. 4
    and the non-linear term of Section 3.2.3), is replaced by ``c + a ceil(tau / b0)`` for
    ``tau >= 1`` (0 for an empty batch). Attention (Eq. 5-6, unless ``attention = false``) and
    ``overhead_s`` are still added. The staircase is the empirical batch-time shape of Li, Dai,
    Peng (2025), "Throughput-optimal scheduling algorithms for LLM inference and AI agents",
    arXiv:2504.07347 (Fig. 4), which they fit by an affine law (``b0 = 1`` here). Since it replaces
    the GeMM model, it excludes ``memory_floor``, ``waves``, ``tp > 1`` and ``lm_head``.
``gemm_profile`` (GPU, str; ``gemm_profile_gpu``, str; absent: off)
    The measured-profile law of the linear GeMMs (:mod:`theory.measured`): a shipped profile name
    (:func:`theory.profiles.shipped_profiles`, e.g. ``"vidur_gemm"``) or the path of a CSV in the
    profile schema (:mod:`theory.profiles`), and which of its ``gpu`` rows to use
    (``gemm_profile_gpu``; default: the preset's base key, so ``[gpus.mine] base = "a100"`` reads
    the ``a100`` rows). A linear GeMM ``d_row x d_red`` over ``tau`` tokens takes the measured time
    of the profiled series with the same one-GPU shape (:func:`theory.profiles.gemm_shape`; a match
    by shape, so Mistral-7B's GeMMs take Llama-3-8B's times; several series of one shape are pooled
    by their median per token count), linearly interpolated in ``tau`` between the measured counts.
    This is how vidur predicts from its profiles (microsoft/vidur @
    7d47513363ec447a741ac5e47241580b47724fbf, ``vidur/execution_time_predictor/``; the profile's
    provenance is in ``theory/data/profiles/README.md``). What it replaces: for a covered GeMM, the
    whole tile-model time of that GeMM, i.e. Eq. 2 on the shared tile with ``waves``,
    ``l2_bandwidth_gbs``, ``memory_floor`` and its ``gemm_overhead_s`` (a measured kernel time
    includes them all). What stays: every GeMM whose shape has no series (the LM head, an
    unprofiled model or TP degree) and every GeMM at a ``tau`` outside its table's
    ``[tau_min, tau_max]`` is the tile model with the GPU's other terms (they still share one tile
    among themselves); the all-reduces of ``tp``, the embedding gather and vocab projection of
    ``lm_head``, ``tau / mu_nLin``, attention and ``overhead_s`` are added as without it. The
    tables are built once per cost model (``theory.cost.build_cost_model``) and reach the
    simulator through its linear table (:func:`theory.cost.linear_table`, extended past the last
    measured count), so simulation speed is unchanged. Continuity: at ``tau_max + 1`` a GeMM
    jumps from its last measured time to the tile model, which may lie above or below it there,
    so ``L(tau)`` may step down or up at ``tau_max + 1``; both sides
    are valid per-GeMM estimates, and the bounds below hold across the step. Needs
    ``mode = "real"`` (the profiles time the served layer's GeMMs). A user CSV is named by its
    path: the cached results of ``stability.runner`` key a GPU file by its content, which holds
    the path and not the CSV's bytes, so give an edited CSV a new name (the packaged profiles are
    part of the source digest). ``real_mode_default = true`` in ``theory/data/measured_gpus.toml``
    makes it real mode's default for the presets with public profiles (A100, H100, A40: vidur's;
    RTX 4090, RTX PRO 6000: LLMServingSim's), where it meets the held-out accuracy targets the
    tile model misses (``llmq validate``); ``<gpu>-measured`` names the law explicitly and
    ``<gpu>-tile`` (same file) is the calibrated tile model alone.
``attention`` (model, bool, default true)
    ``false`` prices decode (Eq. 5) and prefill (Eq. 6) self-attention at 0, as cost laws that
    depend on the token count alone assume (e.g. the law above).
``lm_head`` (model, bool, default false)
    Eq. 4 as printed runs the vocab projection ``d_out x d_x`` on every batch token. ``true``
    takes it out of Eq. 4 and runs it on one row per scheduled request, one per decode and one per
    prefill chunk, as vLLM does (``vllm/v1/worker/gpu_model_runner.py``: ``logits_indices =
    query_start_loc[1:] - 1``, partial prefills included); each row costs its share of the GeMM at
    t*, ``ceil(d_out'/t*_row) ceil(d_x/t*_red) / (s mu(t*) t*_col)`` (the engine prices per row,
    so the column ceiling of this small GeMM is not modelled). It adds the embedding gather,
    ``2 b d_x`` bytes per token at ``eta_mem B``, and with ``memory_floor`` the weight read of the
    vocab projection, ``b d_out' d_x / (eta_mem B)``, once per batch (added, not maxed, to the
    per-row compute: an over-statement of at most the smaller of the two).
``tp`` (GPU, int >= 1; ``allreduce_latency_s``, ``allreduce_bandwidth_gbs``)
    Megatron-LM tensor parallelism (Shoeybi et al. 2019, arXiv:1909.08053, Section 3;
    ``megatron/core/tensor_parallel/layers.py``): fused QKV and gate/up column-parallel (rows /
    tp), O and down row-parallel (reduction / tp), heads split over the GPUs (KV heads replicated
    when tp > n_kv_heads, as ``QKVParallelLinear`` in ``vllm/model_executor/layers/linear.py``),
    the vocab projection split over the vocabulary (``ceil(d_out / tp)`` rows). Each layer adds two
    all-reduces of ``tau d_x b`` bytes (after attention and after the MLP), plus one for the
    vocab-parallel embedding when ``lm_head = true``; each takes ``latency + 2 (tp-1)/tp bytes /
    bandwidth``, with ``bandwidth`` the NCCL bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``:
    ``busbw = algbw 2 (n-1)/n``); :func:`fit_allreduce_law` fits the two fields to measured
    times; ``tests/test_cost_terms.py`` scores the law on the packaged vidur NCCL profiles
    (A100/H100 DGX, TP 2-8, >= 1 MiB). ``tp`` must divide ``n_heads`` and ``d_ff``, and divide or be a
    multiple of ``n_kv_heads``; the paper's layer has no output projection to split row-wise, so
    ``tp > 1`` needs ``mode = "real"``. Weights and KV cache are sharded over the group
    (:func:`shard_memory`): the KV bound's ``M`` and the simulator's KV blocks count the tokens
    one GPU of the group has room for, which is the group's capacity.

Theorem 1's inputs
------------------
Write ``L(tau)`` for a batch's linear time (Eq. 4, or Eq. 4 with the terms). Theorem 1's linear
term becomes ``E[L^P + L^D] l*`` with ``l* = inf_tau L(tau) / tau``, the least linear time per
token any batching reaches (:func:`theory.cost.linear_per_token`; ``1 / (mu_Lin(t*) t*_col)`` for
Eq. 4): each batch's linear time is at least ``tau l*``, so the least mean work stays a lower
bound and ``lambda* = r / T_bar^R`` an upper bound. Eq. 13's ``T^max`` prices every token alone in
a batch of one (:func:`theory.cost.linear_single`); each of those ``l = l^{P,max} + l^{D,max}``
batches also pays the per-batch times. Per term:

* ``memory_floor``: ``l* = min_t sum_GeMMs max(compute per column, activation bytes per column /
  (eta_mem B))`` (weights are read once per batch and amortize away), which on the presets is
  Eq. 4's compute rate, so ``T_bar^R`` is unchanged up to rounding; ``T^max`` grows (a one-token
  batch streams every weight: ``sum_GeMMs`` bytes / ``eta_mem B``).
* ``waves``: ``l*`` unchanged (``ceil(x/s)/x -> 1/s``); ``T^max`` grows (a one-token GeMM takes a
  full wave of ``ceil(d_red/t_red)`` steps).
* ``l2_bandwidth_gbs``: ``l*`` becomes ``min_t sum_GeMMs max(compute per column, floor per
  column, ceil(d_row/t_row) (t_row + t_col) d_red b / (t_col B_L2))``: the traffic grows with the
  columns, so unlike the weight read it does not amortize; ``T^max`` grows with it.
* ``attention_waves``: the prefill-attention term of ``T_bar^R`` keeps Eq. 6's unwaved minimum,
  still a lower bound (looser); a prefill chunk's attention grows, and with it RAD's time for a
  request alone, which ``T^max`` (prompt tokens priced as decode GeMVs) need no longer cover.
* ``overhead_s`` ``c``: amortized, so ``T_bar^R`` is unchanged; ``T^max`` gains ``l c``.
* ``gemm_overhead_s`` ``c_0``: as ``overhead_s`` with ``c = c_0`` times the linear GeMMs of a batch.
* ``attention_call_s`` ``c_A``: as ``overhead_s`` with ``c = N c_A`` (with attention priced):
  amortized, so ``T_bar^R`` (and ``lambda*``) is unchanged and stays a lower bound of the mean
  work; each of ``T^max``'s ``l`` one-token batches pays it, so ``T^max`` gains ``l N c_A``
  (:func:`theory.bounds.T_max` adds :attr:`theory.cost.CostModel.fixed_s` per batch).
* ``mixed_decode_eta``: ``T_bar^R`` is a least work per request, and a scheduler may keep every
  decode out of the batches with a chunk, or put it in one, so its decode term takes the smaller of
  the two laws per position, ``N sum_i min(T^{D,SA}(i), T^{D,SA}_mix(i))``
  (:func:`theory.cost.T_D_SA_least`; with ``eta d_q >= d_kv``, as for every shipped value on a GQA
  model, that is Eq. 5 and ``T_bar^R`` and ``lambda*`` are unchanged; below it, Eq. 5 alone would
  over-state the least work and ``lambda*`` would no longer bound). The certified capacity
  (:mod:`theory.capacity`) and the simulator's optimal work take the same minimum. ``T^max`` (Eq.
  13) is the time of one request alone, whose batches never mix a chunk with a decode: unchanged.
* ``linear_law``: linear term ``E[L^P + L^D] a / b0``, non-linear term 0 (the law includes it);
  ``T^max = l (c + a + overhead_s) + N S(l)``.
* ``gemm_profile``: ``l* = min(l*_tile, min_{1 <= tau <= tau_max} L(tau) / tau)`` with
  ``tau_max`` the largest measured count of the batch's GeMMs and ``l*_tile`` the tile model's
  ``l*`` above: past ``tau_max`` every GeMM is the tile model's, whose ``L(tau) / tau`` is at
  least ``l*_tile``, and below it ``L`` is evaluated at every integer, so ``tau l* <= L(tau)``
  for every batch and ``lambda*`` stays an upper bound (the measured law is not monotone in
  ``tau``, so no single point gives the infimum; on the vidur tables ``l*_tile`` binds for
  Mistral-7B on the A100, H100 and A40, whose large measured GeMMs run slower per token than the
  fitted tiles' limit, so ``T_bar^R`` and ``lambda*`` are the tile model's). Eq. 13's ``T^max``
  takes ``L(1)``: the measured one-token times, with the worst tile for the GeMMs no table
  covers (:func:`theory.cost.linear_single`).
* ``attention = false``: the decode- and prefill-attention terms of ``T_bar^R`` and the
  ``N S(l)`` of ``T^max`` are 0.
* ``lm_head``: ``l*`` loses the vocab projection and gains the gather bytes; ``T_bar^R`` gains
  ``(E[L^D] + 1) h`` (a request's decodes and at least one prefill chunk; ``h`` the per-row time)
  and ``T^max`` gains ``l h``.
* ``tp``: every width is one GPU's shard and ``s``, ``mu`` stay per GPU; ``l*`` gains the
  per-token all-reduce bytes ``n_ar 2 (tp-1)/tp b d_x / busbw``, latencies amortize away, and
  ``T^max`` pays ``n_ar`` latencies per token. ``r`` counts TP groups.
* ``ep``: the routed experts' per-token limit keeps its compute (a GPU of a balanced group runs
  ``tau k`` slots per ``tau`` of its tokens) and gains the dispatch and combine bus bytes per token
  of every MoE layer over ``busbw``; latencies amortize away, ``T^max`` pays them; ``r`` counts
  replicas, ``ep`` of which form a group (:mod:`theory.expert_parallel`).
* ``engine_step_s`` ``c``: as ``overhead_s`` (amortized in ``T_bar^R``; ``T^max`` gains ``l c``;
  the certified capacity's ``c_fix`` gains ``c``).
* ``cudagraph_capture_sizes``: ``l*`` unchanged (``T_Lin(pad(tau)) >= l* pad(tau) >= l* tau``);
  ``T^max`` takes ``T_Lin(pad(1))``; the certified capacity's ``G(tau)`` is the padded time.
* ``frontend_s``: no batch, so no bound changes (latency, not work).

``t*`` is unchanged by every term (under ``gemm_profile`` it is the tile model's): Assumption 1 is
a property of the GPU's tiles, and RAD's chunk ``t*_lcm`` and Theorem 2's ``t*_col`` keep using it.
With a floor or waves ``l*`` is a minimum over all tiles (it is reached at t* on the presets);
under a law the linear time no longer depends on the tile, so ``t*`` only shapes RAD's chunks and
the attention terms. With ``l2_bandwidth_gbs`` Assumption 1's t* (a maximal ``mu(t)`` FLOP rate)
ignores the L2 bound, and a fitted tile that is fastest only where its traffic binds has a compute
rate the data do not bound, which could then win t*: the calibration therefore keeps Assumption 1
with the roofline preset's t*, bounding every tile's FLOP rate by t*'s and by the dense peak
(:mod:`theory.validation.calibrate`, "Bounds"), and those bounded compute rates also price Eq. 6's attention
GeMMs, on which the L2 term is not applied.

References
----------
Bari, Hegde, de Veciana (2025), Eq. 2-7, Theorem 1, Eq. 13; the sources named per term above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from theory.config import read_bool
from theory.cost_terms import TERMS, read_added
from theory.engine_terms import check_capture_sizes
from theory.errors import FieldError, require_nonneg
from theory.expert_parallel import DEFAULT_BACKEND, check_backend
from theory.tp_split import allreduce_count, allreduce_time, check_tp, fit_allreduce_law, shard_memory

LAW_KINDS = ("staircase",)
LM_HEAD = "W_out"  # name of the vocab projection in Model.linear_gemms


def ceil_div(a, b):
    """Exact integer ceiling of a / b for non-negative integer arrays."""
    return -(-np.asarray(a, dtype=np.int64) // np.asarray(b, dtype=np.int64))


@dataclass(frozen=True)
class LinearLaw:
    """A literature law replacing ``T_Lin(tau) + tau / mu_nLin`` (see the module docstring).

    Attributes
    ----------
    kind : str
        ``"staircase"``: ``c + a ceil(tau / b0)`` for ``tau >= 1``, 0 for ``tau = 0``.
    c, a : float
        Seconds per (non-empty) batch and per step of ``b0`` tokens.
    b0 : int
        Step width in tokens.

    References
    ----------
    Li, Dai, Peng (2025), arXiv:2504.07347, Fig. 4 (staircase batch times).
    """

    kind: str
    c: float
    a: float
    b0: int

    def time(self, tau) -> np.ndarray:
        """The law at token counts ``tau`` (0 for an empty batch)."""
        tau = np.asarray(tau, dtype=np.int64)
        return np.where(tau > 0, self.c + self.a * ceil_div(tau, self.b0), 0.0)

    @property
    def per_token_min(self) -> float:
        """``inf_tau law(tau) / tau = a / b0`` (c is amortized over large batches)."""
        return self.a / self.b0


@dataclass(frozen=True)
class GpuTerms:
    """The GPU-side switches (all off by default: Eq. 2-7 exactly).

    Attributes
    ----------
    memory_floor, waves : bool
        Roofline floor per linear GeMM; wave quantization of the linear GeMMs (Eq. 4).
    attention_waves : bool
        Wave quantization of the prefill-attention GeMMs (Eq. 6).
    l2_bandwidth : float or None
        Bytes/s at which a tile's operand slices stream through L2 (``None``: the term is off).
    gemm_overhead_s : float
        Fixed seconds per linear GeMM.
    attention_call_s : float
        Fixed seconds per layer of a batch with attention work (one attention kernel call).
    mixed_decode_eta : float
        Factor of Eq. 5 at the query heads' width for a decode in a batch with a prefill chunk
        (0: off, every decode is Eq. 5).
    tp : int
        Tensor-parallel degree of the replica.
    allreduce_latency_s : float
        Latency of one all-reduce, seconds.
    allreduce_bandwidth : float or None
        NCCL bus bandwidth of the interconnect, bytes/s (required when ``tp > 1`` or ``ep > 1``).
    ep : int
        Expert-parallel group of a mixture of experts (:mod:`theory.expert_parallel`).
    all2all_backend : str
        How the group's tokens reach the experts (:data:`theory.expert_parallel.BACKENDS`).
    linear_law : LinearLaw or None
        Replaces ``T_Lin + tau / mu_nLin``.
    bytes_per_element : int
        Bytes of one weight or activation element (the profile's ``efficiency.bytes_per_element``).
    gemm_profile : str or None
        A shipped profile name or a CSV path whose measured GeMM times price the linear GeMMs of
        a matching shape (:mod:`theory.measured`; ``None``: the tile model alone).
    gemm_profile_gpu : str or None
        The ``gpu`` rows of ``gemm_profile`` to use.
    added : tuple of (str, float)
        The added-time terms switched on (:mod:`theory.cost_terms`), with their values.
    cudagraph_capture_sizes : tuple of int or None
        The engine's CUDA-graph capture sizes, ascending: a step of at most the largest runs its
        linear GeMMs at the least size at or above its token count (:mod:`theory.engine_terms`;
        ``None``: no padding).
    frontend_s : float
        The API front end's seconds per request, added to TTFT and latency (:mod:`theory.engine_terms`).

    The defaults of the terms are those of the table (:data:`theory.cost_terms.TERMS`).
    """

    memory_floor: bool = TERMS["memory_floor"].default
    waves: bool = TERMS["waves"].default
    attention_waves: bool = TERMS["attention_waves"].default
    l2_bandwidth: float | None = TERMS["l2_bandwidth_gbs"].default
    gemm_overhead_s: float = TERMS["gemm_overhead_s"].default
    attention_call_s: float = TERMS["attention_call_s"].default
    mixed_decode_eta: float = TERMS["mixed_decode_eta"].default
    tp: int = TERMS["tp"].default
    allreduce_latency_s: float = 0.0
    allreduce_bandwidth: float | None = None
    ep: int = TERMS["ep"].default
    all2all_backend: str = DEFAULT_BACKEND
    linear_law: LinearLaw | None = TERMS["linear_law"].default
    bytes_per_element: int = 2
    gemm_profile: str | None = TERMS["gemm_profile"].default
    gemm_profile_gpu: str | None = None
    added: tuple[tuple[str, float], ...] = ()
    cudagraph_capture_sizes: tuple[int, ...] | None = TERMS["cudagraph_capture_sizes"].default
    frontend_s: float = TERMS["frontend_s"].default

    @property
    def linear_plain(self) -> bool:
        """Whether the linear time is Eq. 4 as printed (no term of the linear GeMMs is on)."""
        return not (self.memory_floor or self.waves or self.gemm_overhead_s or self.tp > 1
                    or self.linear_law is not None or self.l2_bandwidth is not None
                    or self.gemm_profile is not None)

    @property
    def plain(self) -> bool:
        """Whether every GPU-side term is off (Eq. 2-6 as printed)."""
        return (self.linear_plain and not self.attention_waves and not self.attention_call_s
                and not self.mixed_decode_eta and not self.added and self.cudagraph_capture_sizes is None
                and not self.frontend_s)


@dataclass(frozen=True)
class ModelTerms:
    """The model-side switches: ``attention`` (default on) and ``lm_head`` (default off), and the
    model-side added-time terms switched on (``added``, :mod:`theory.cost_terms`)."""

    attention: bool = TERMS["attention"].default
    lm_head: bool = TERMS["lm_head"].default
    added: tuple[tuple[str, float], ...] = ()

    @property
    def plain(self) -> bool:
        """Whether the model is priced as Eq. 4-7 print it."""
        return self.attention and not self.lm_head and not self.added


def _nonneg(table: dict, key: str, where: str, default: float) -> float:
    return require_nonneg(f"{where}.{key}", table.get(key, default))


def _positive(table: dict, key: str, where: str) -> float:
    if key not in table:
        raise FieldError(f"{where}.{key}", None, "a value (missing)")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise FieldError(f"{where}.{key}", value, "a finite number > 0")
    return float(value)


def _law_from(table, where: str) -> LinearLaw:
    if not isinstance(table, dict):
        raise FieldError(where, table, "a table with kind, c, a, b0")
    unknown = set(table) - {"kind", "c", "a", "b0"}
    if unknown:
        raise FieldError(where, sorted(unknown), "only the fields kind, c, a, b0")
    kind = table.get("kind")
    if kind not in LAW_KINDS:
        raise FieldError(f"{where}.kind", kind, f"one of {', '.join(map(repr, LAW_KINDS))}")
    b0 = table.get("b0")
    if isinstance(b0, bool) or not isinstance(b0, int) or b0 < 1:
        raise FieldError(f"{where}.b0", b0, "an integer >= 1 (tokens per step)")
    return LinearLaw(kind=kind, c=_nonneg(table, "c", where, 0.0), a=_positive(table, "a", where),
                     b0=int(b0))


def _profile_fields(table: dict, where: str, key: str) -> tuple[str | None, str | None]:
    """``gemm_profile`` and ``gemm_profile_gpu`` as written (the latter defaults to ``key``); the
    profile itself is read when a cost model is built (:func:`theory.profiles.gemm_tables`)."""
    if "gemm_profile" not in table:
        if "gemm_profile_gpu" in table:
            raise FieldError(f"{where}.gemm_profile", None,
                             "a profile name or CSV path (gemm_profile_gpu is set without it)")
        return None, None
    name, gpu = table["gemm_profile"], table.get("gemm_profile_gpu", key)
    if not isinstance(name, str) or not name.strip():
        raise FieldError(f"{where}.gemm_profile", name,
                         "a shipped profile name (theory.profiles.shipped_profiles()) or a CSV path")
    if not isinstance(gpu, str) or not gpu.strip():
        raise FieldError(f"{where}.gemm_profile_gpu", gpu, "the gpu key of the profile's rows, e.g. 'a100'")
    return name.strip(), gpu.strip()


def gpu_terms_from(table: dict, where: str, bytes_per_element: int = 2) -> GpuTerms:
    """Read the GPU-side term fields of a ``[gpus.<key>]`` table (absent fields: off; an absent
    ``gemm_profile_gpu`` is ``<key>``, and :func:`theory.hardware.load_gpus` states the base key
    of a derived table)."""
    tp = table.get("tp", 1)
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise FieldError(f"{where}.tp", tp, "an integer >= 1 (tensor-parallel degree)")
    bw = None
    if "allreduce_bandwidth_gbs" in table:
        bw = _positive(table, "allreduce_bandwidth_gbs", where) * 1e9
    elif tp > 1:
        raise FieldError(f"{where}.allreduce_bandwidth_gbs", None,
                         f"the interconnect's all-reduce bus bandwidth in GB/s (needed with tp = {tp})")
    ep = table.get("ep", 1)
    if isinstance(ep, bool) or not isinstance(ep, int) or ep < 1:
        raise FieldError(f"{where}.ep", ep, "an integer >= 1 (expert-parallel group size)")
    if ep > 1 and bw is None:
        raise FieldError(f"{where}.allreduce_bandwidth_gbs", None,
                         f"the interconnect's bus bandwidth in GB/s (needed with ep = {ep})")
    backend = check_backend(table.get("all2all_backend", DEFAULT_BACKEND), where)
    law = _law_from(table["linear_law"], f"{where}.linear_law") if "linear_law" in table else None
    l2 = _positive(table, "l2_bandwidth_gbs", where) * 1e9 if "l2_bandwidth_gbs" in table else None
    profile, profile_gpu = _profile_fields(table, where, where.rpartition(".")[2])
    terms = GpuTerms(memory_floor=read_bool(table, "memory_floor", where, GpuTerms.memory_floor),
                     waves=read_bool(table, "waves", where, GpuTerms.waves),
                     attention_waves=read_bool(table, "attention_waves", where, GpuTerms.attention_waves),
                     l2_bandwidth=l2,
                     gemm_overhead_s=_nonneg(table, "gemm_overhead_s", where, GpuTerms.gemm_overhead_s),
                     attention_call_s=_nonneg(table, "attention_call_s", where, GpuTerms.attention_call_s),
                     mixed_decode_eta=_nonneg(table, "mixed_decode_eta", where, GpuTerms.mixed_decode_eta),
                     tp=tp, allreduce_latency_s=_nonneg(table, "allreduce_latency_s", where, 0.0),
                     allreduce_bandwidth=bw, ep=ep, all2all_backend=backend, linear_law=law,
                     bytes_per_element=int(bytes_per_element),
                     gemm_profile=profile, gemm_profile_gpu=profile_gpu,
                     added=read_added(table, where, "gpu"),
                     cudagraph_capture_sizes=(check_capture_sizes(table["cudagraph_capture_sizes"],
                                                                  f"{where}.cudagraph_capture_sizes")
                                              if "cudagraph_capture_sizes" in table else None),
                     frontend_s=_nonneg(table, "frontend_s", where, GpuTerms.frontend_s))
    if law is not None:
        for field, on in (("memory_floor", terms.memory_floor), ("waves", terms.waves),
                          ("gemm_overhead_s", terms.gemm_overhead_s > 0), ("tp", tp > 1),
                          ("l2_bandwidth_gbs", l2 is not None), ("gemm_profile", profile is not None)):
            if on:
                raise FieldError(f"{where}.{field}", table[field],
                                 "off when linear_law is set (the law replaces the GeMM model)")
    return terms


def model_terms_from(table: dict, where: str) -> ModelTerms:
    """Read the model-side term fields of a ``[models.<key>]`` table (absent fields: Eq. 4-7)."""
    return ModelTerms(attention=read_bool(table, "attention", where, ModelTerms.attention),
                      lm_head=read_bool(table, "lm_head", where, ModelTerms.lm_head),
                      added=read_added(table, where, "model"))


__all__ = ["LAW_KINDS", "LM_HEAD", "GpuTerms", "LinearLaw",
           "ModelTerms", "allreduce_count", "allreduce_time", "ceil_div", "check_tp", "fit_allreduce_law",
           "gpu_terms_from", "model_terms_from", "shard_memory"]
