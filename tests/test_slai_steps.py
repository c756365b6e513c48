"""The Section 6 replay of SLAI's batches (paper_checks.slai_steps): it exercises every rule and
names the step a deviating scheduler breaks."""

from dataclasses import replace

from paper_checks import slai_steps
from paper_checks.registry import Verdict


def test_the_seeded_runs_exercise_every_rule_and_tell_the_two_readings_of_eq8_apart():
    evidence = slai_steps.sec6_slai_batch_steps(True).evidence
    counts = evidence["counts"]
    assert counts.pop("batches with a tie") >= 0
    assert all(v > 0 for v in counts.values()), counts
    literal = next(v for k, v in evidence.items() if "read literally" in k)
    assert 0 < literal < evidence["counts"]["batches compared"]


def test_a_scheduler_admitting_fcfs_where_spf_is_stated_breaks_step_3():
    sc = slai_steps.SCENARIOS[0]
    assert sc.order == "spf"
    found = slai_steps.replay(slai_steps.simulate(replace(sc, order="fcfs")), sc)["violations"]
    assert found and found[0]["step"] == "3: prefills"


def test_a_scheduler_with_another_offset_is_caught():
    sc = slai_steps.SCENARIOS[1]
    run = slai_steps.simulate(replace(sc, delta=sc.delta + 20.0))  # C_j earlier than Eq. 8's
    found = slai_steps.replay(run, sc)["violations"]
    assert found
    assert slai_steps.slai_steps_core([(sc, run)]).verdict is Verdict.FAIL
