"""LRZ001: a learning rate decayed to a positive value no weight can feel (< 1e-20), beside a live group or at two
logs; a schedule's exact 0 at its last step is its end, not a failure."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/coqui-ai/TTS/issues/1003 (HiFiGAN, Coqui's trainer console as pasted): the generator's LR is
# 7.05e-111 after 244k steps while the discriminator's is 1e-4
COQUI_1003 = ' > TRAINING (2021-11-29 10:06:07) \n\n   --> STEP: 24/352 -- GLOBAL_STEP: 244300\n     | > G_l1_spec_loss: 0.36788  (0.35471)\n     | > G_gen_loss: 16.55468  (15.96176)\n     | > G_adv_loss: 0.00000  (0.00000)\n     | > loss_0: 16.55468  (15.96176)\n     | > grad_norm_0: 22.85464  (28.87626)\n     | > current_lr_0: 7.0524350586068e-111 \n     | > current_lr_1: 0.00010 \n     | > step_time: 0.29070  (0.29190)\n     | > loader_time: 0.00150  (0.00135)\n\n --> EVAL PERFORMANCE\n     | > avg_loader_time: 0.00034 (-0.00003)\n     | > avg_G_l1_spec_loss: 0.35621 (+0.00000)\n     | > avg_G_gen_loss: 16.02957 (+0.00000)\n     | > avg_G_adv_loss: 0.00000 (+0.00000)\n     | > avg_loss_0: 16.02957 (+0.00000)\n'


def _hf(lrs: list[float]) -> str:
    return "".join(f"{{'loss': {2.0 - 0.1 * i:.2f}, 'grad_norm': 1.5, 'learning_rate': {lr}, 'epoch': {0.1 * (i + 1):.1f}}}\n"
                   for i, lr in enumerate(lrs))


def test_one_group_decayed_to_nothing_beside_a_live_one(tmp_path: Path):
    a = _run(tmp_path, COQUI_1003)
    assert _verdict(a) == ("failed", "lr_schedule_stalled")
    f = next(x for x in a.diagnosis.findings if x.code == "LRZ001")
    assert f.title == "current_lr_0 decayed to 7.05e-111: the weights it drives no longer change"
    assert "current_lr_1 is still 0.0001" in f.message
    assert [e.where for e in f.evidence] == ["line 9", "line 10"]  # each value's own line of the block


def test_an_exponential_decay_underflowing_at_two_logs(tmp_path: Path):
    a = _run(tmp_path, _hf([1e-4, 1e-9, 1e-15, 3e-22, 1e-29]))
    f = next(x for x in a.diagnosis.findings if x.code == "LRZ001")
    assert f.root_cause == "lr_schedule_stalled" and "below 1e-20 at 2 of 5 logs" in f.evidence[-1].detail


def test_a_linear_schedule_ending_at_zero_is_its_end(tmp_path: Path):
    a = _run(tmp_path, _hf([1e-4, 7.5e-5, 5e-5, 2.5e-5, 0.0]))
    assert not [x for x in a.diagnosis.findings if x.code == "LRZ001"]


def test_one_float_residue_at_the_last_log_alone_is_not_enough(tmp_path: Path):
    a = _run(tmp_path, _hf([1e-4, 7.5e-5, 5e-5, 2.5e-5, 6e-21]))
    assert not [x for x in a.diagnosis.findings if x.code == "LRZ001"]
