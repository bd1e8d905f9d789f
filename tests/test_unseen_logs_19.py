"""Round 19 (2026-11-28): failures the fresh held-out sets showed misread, each fixed by a rule that holds for its family."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/unslothai/unsloth/issues/4982 (as pasted): Gemma-4 E2B LoRA under Unsloth, every loss and grad_norm
# exactly 16x the values of the maintainer's fixed branch (a gradient-accumulation normalisation bug)
UNSLOTH_4982 = """Unsloth: Will smartly offload gradients to save VRAM!
{'loss': '185.9', 'grad_norm': '6880', 'learning_rate': '1.263e-06', 'epoch': '0.002296'}
{'loss': '142.5', 'grad_norm': '4512', 'learning_rate': '2.538e-06', 'epoch': '0.004592'}
{'loss': '117.6', 'grad_norm': '8128', 'learning_rate': '3.814e-06', 'epoch': '0.006888'}
{'loss': '92.86', 'grad_norm': '1344', 'learning_rate': '5.089e-06', 'epoch': '0.009185'}
"""

# https://github.com/huggingface/transformers/pull/35438 (yzhangcs, 2024-12-29): the same run with gradient_accumulation_steps=1,
# a healthy from-scratch LM: its first loss 10.59 is below ln(vocab) of a large vocabulary, no scaling
HF_35438_GA1 = """{'loss': 10.5949, 'grad_norm': 188.29049682617188, 'learning_rate': 4.5833333333333334e-05, 'epoch': 0.25}
{'loss': 8.2312, 'grad_norm': 87.74673461914062, 'learning_rate': 4.166666666666667e-05, 'epoch': 0.5}
{'loss': 7.8988, 'grad_norm': 74.35655212402344, 'learning_rate': 3.7500000000000003e-05, 'epoch': 0.75}
{'loss': 8.0197, 'grad_norm': 52.913124084472656, 'learning_rate': 3.3333333333333335e-05, 'epoch': 1.0}
{'loss': 6.0704, 'grad_norm': 51.57878875732422, 'learning_rate': 2.916666666666667e-05, 'epoch': 1.25}
"""

# https://github.com/openvla/openvla/issues/49 (the end of the pasted output): the loop prints its tensors, then the loss once
OPENVLA_49 = """correct_preds:  tensor([[False, False, False, False, False, False, False, False, False, False,
         False, False, False, False, False, False, False, False, False, False]],
       device='cuda:0')
action_accuracy:  tensor(0., device='cuda:0')
train_loss:  nan
"""


def test_lm_loss_far_above_ln_vocab_is_a_scaling_bug(tmp_path: Path):
    a = _run(tmp_path, UNSLOTH_4982)
    assert _verdict(a) == ("failed", "framework_bug")  # was healthy: "loss 185.9 -> 92.86 ... all finite"
    (f,) = [f for f in a.diagnosis.findings if f.code == "FW001"]
    assert f.first_step == 1 and "185.9" in f.title
    assert "14.9x ln(262,144) = 12.48" in f.message  # the number and the bound it is measured against
    assert any("gradient_accumulation_steps" in r for r in f.remedies)


def test_lm_loss_below_the_bound_is_not_flagged(tmp_path: Path):
    a = _run(tmp_path, HF_35438_GA1)
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]
    assert _verdict(a)[0] == "healthy"


def test_a_huge_loss_outside_a_token_lm_is_not_flagged(tmp_path: Path):
    # the same numbers as a generic regression loop's log (no LM trainer, no token settings): an MSE can be 185
    text = "".join(f"step {i} | loss {v}\n" for i, v in enumerate((185.9, 142.5, 117.6, 92.86, 80.1), 1))
    a = _run(tmp_path, text)
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]


def test_a_run_that_overflows_keeps_its_overflow_cause(tmp_path: Path):
    # loss in the hundreds, then NaN: the overflow explains the values; the off-scale start is a side note
    text = UNSLOTH_4982.replace("'92.86', 'grad_norm': '1344'", "'nan', 'grad_norm': 'nan'")
    a = _run(tmp_path, text)
    offs = [f for f in a.diagnosis.findings if f.code == "FW001" and "cross-entropy" in f.title]
    assert offs and offs[0].severity == "warning"


def test_one_bare_nan_loss_line_is_read(tmp_path: Path):
    a = _run(tmp_path, OPENVLA_49)
    assert _verdict(a)[0] != "healthy"  # was healthy: nothing read
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "loss" in num.message and num.evidence[0].where == "line 5"


def test_one_bare_finite_loss_or_a_best_loss_stays_unread(tmp_path: Path):
    a = _run(tmp_path, "best_loss: inf\ntrain_loss: 2.31\nsaving model\n")
    assert "loss" not in a.run.metrics()


# https://github.com/OpenNMT/OpenNMT-py/issues/869 (as pasted): Adam at lr 2 without the noam schedule; xent 6776 at the first
# log, an explosion of the learning rate (DIV001), not a summed loss: two logs, and nothing falls
OPENNMT_PY_869 = ("[2018-08-01 18:29:48,221 INFO] Step 50/100000000; acc:   0.00; ppl: 26881171418161356094253400435962903554686976.00; "
                  "xent: 6776.20; lr: 2.00000; 4132/2064 tok/s;     52 sec\n") * 2


def test_a_huge_loss_that_does_not_fall_is_left_to_the_explosion_reading(tmp_path: Path):
    a = _run(tmp_path, OPENNMT_PY_869)
    assert _verdict(a) == ("failed", "lr_too_high")
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]
