"""Round 27 (2026-11-28): logs the held-out sets showed unread or misread, each fixed by a rule that holds for its
family. Every log is quoted from its thread; the guards beside each rule keep the cousins where they were."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/FranxYao/Long-Context-Data-Engineering/issues/13 (the author's reference run, as pasted; the per-length
# bucket lines after loss@4 and loss@2 cut here): a metrics dict printed one "key value" per line under a "step N" line
# every non-empty line of the paste ends with a blank, put back below
LONGCONTEXT_13 = "".join(line + (" \n" if line else "\n") for line in """step 1 token 5m
train/loss 5.5021
train/grad_norm 249.4825
train/learning_rate 0.0000
train/epoch 0.0000
train/per_length_loss/loss@2 4.8841
train/per_length_loss/loss@4 4.2377

step 50 token 250m
train/loss 2.2328
train/grad_norm 12.5982
train/learning_rate 0.0000
train/epoch 0.0300
train/per_length_loss/loss@2 5.6365""".split("\n"))


def test_namespaced_key_value_lines_under_a_step_line_are_read(tmp_path: Path):
    a = _run(tmp_path, LONGCONTEXT_13)
    assert _verdict(a)[0] == "healthy"  # was "nothing to judge"
    arr = a.run.arrays("loss")
    assert arr.steps.tolist() == [1, 50] and arr.values.tolist() == [5.5021, 2.2328]
    assert _series(a, "grad_norm") == [249.4825, 12.5982]


def test_key_value_lines_need_a_namespace_and_a_step_line(tmp_path: Path):
    # without the "/" the lines are prose or headers ("Epoch 5"); without the step line there is no step to give them
    a = _run(tmp_path, "step 1 token 5m\nloss 5.5021\ngrad_norm 249.4825\n\ntrain/loss 2.2328\ntrain/grad_norm 12.5982\n")
    assert a.run.arrays("loss") is None
    assert _verdict(a)[1] == "unknown"
