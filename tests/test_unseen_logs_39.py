"""Round 40 (2026-11-29): a loss that keeps swinging instead of descending is read as a step size too large; each log
is quoted from its source (named above it), with guards for the cousins."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _verdict
from tests.test_unseen_logs_33 import _run_in


def _finding(a, code: str):
    return next((f for f in a.diagnosis.findings if f.code == code), None)


# -- a curve that oscillates: climbs of >= 3x back towards where it started, again and again --------------------------

# https://github.com/graykode/nlp-tutorial/issues/77 (the 'when lr=0.01' block as pasted, its elision line included):
# BERT pre-training at lr 0.01 jumps between ~1.6 and ~18; the reporter's lr 1e-4 rerun falls steadily
NLP_TUTORIAL_77 = """Epoch: 0010 cost = 15.205759
Epoch: 0020 cost = 16.236261
Epoch: 0030 cost = 18.436878
Epoch: 0040 cost = 4.077913
Epoch: 0050 cost = 12.703120
Epoch: 0060 cost = 10.411244
Epoch: 0070 cost = 1.640913
Epoch: 0080 cost = 10.753708
Epoch: 0090 cost = 8.370532
Epoch: 0100 cost = 1.624577
Epoch: 0110 cost = 8.537676
Epoch: 0120 cost = 7.453298
Epoch: 0130 cost = 1.659591
Epoch: 0140 cost = 7.092763
Epoch: 0150 cost = 6.843360
Epoch: 0160 cost = 1.688111
Epoch: 0170 cost = 6.052425
Epoch: 0180 cost = 6.395712
Epoch: 0190 cost = 1.707749
Epoch: 0200 cost = 5.263054
······
Epoch: 5000 cost = 2.523541
"""

# https://stats.stackexchange.com/questions/478017 (the question's ten epoch lines): the training loss falls while the
# validation loss swings 0.14 <-> 3.29 from epoch to epoch; the answer: a step size that jumps across the valley
STATS_478017 = """epoch [1]: training loss: 2.27 - acc: 0.50 - val_loss: 3.29 - val_acc: 0.49
epoch [2]: training loss: 1.55 - acc: 0.50 - val_loss: 0.92 - val_acc: 0.50
epoch [3]: training loss: 1.07 - acc: 0.51 - val_loss: 1.43 - val_acc: 0.53
epoch [4]: training loss: 0.87 - acc: 0.58 - val_loss: 1.85 - val_acc: 0.61
epoch [5]: training loss: 0.59 - acc: 0.72 - val_loss: 0.58 - val_acc: 0.61
epoch [6]: training loss: 0.52 - acc: 0.79 - val_loss: 2.30 - val_acc: 0.50
epoch [7]: training loss: 0.38 - acc: 0.85 - val_loss: 0.17 - val_acc: 0.86
epoch [8]: training loss: 0.32 - acc: 0.88 - val_loss: 1.52 - val_acc: 0.60
epoch [9]: training loss: 0.21 - acc: 0.91 - val_loss: 0.14 - val_acc: 0.88
epoch [10]: training loss: 0.34 - acc: 0.88 - val_loss: 2.81 - val_acc: 0.49
"""

# guard: a healthy per-batch loss at its floor swings 3x and more both ways all the time. pytorch/examples' MNIST
# script as run in a public MS-AMP walkthrough (`python mnist.py --enable-msamp --opt-level=O2`, 98-99% test
# accuracy): the first 12 batches of epoch 1 and every batch of epoch 3, values as printed, in the script's format
MNIST_E1 = ("2.299661 1.658558 1.168246 0.913748 0.580088 0.539106 0.500326 0.750634 0.609780 0.491282 0.422410 "
            "0.524504").split()
MNIST_E3 = (
    "0.069292 0.044671 0.038313 0.108172 0.040344 0.060696 0.019324 0.043728 0.037958 0.046901 0.047915 0.050677 "
    "0.048815 0.105492 0.061945 0.188865 0.022122 0.163498 0.022859 0.083400 0.033851 0.012424 0.069556 0.031442 "
    "0.050348 0.274206 0.068391 0.104070 0.136303 0.085279 0.143739 0.165779 0.006965 0.031690 0.065237 0.245035 "
    "0.171532 0.056561 0.024486 0.081291 0.084563 0.069468 0.045520 0.087142 0.062932 0.241528 0.038127 0.157644 "
    "0.119052 0.121110 0.138711 0.028795 0.033930 0.025953 0.042950 0.115884 0.178442 0.068271 0.143876 0.114486 "
    "0.077184 0.044233 0.028880 0.136192 0.146052 0.117999 0.075927 0.091046 0.015768 0.084175 0.013997 0.088690 "
    "0.086683 0.099416 0.056337 0.091352 0.106782 0.022478 0.037793 0.026040 0.168085 0.026550 0.057223 0.289324 "
    "0.132689 0.052605 0.072443 0.049246 0.142484 0.009450 0.028935 0.171060 0.052875 0.037833").split()


def _mnist(epochs: list[tuple[int, list[str]]]) -> str:
    out = []
    for e, losses in epochs:
        for i, v in enumerate(losses):
            n = i * 640
            out.append(f"Train Epoch: {e} [{n}/60000 ({100 * n // 60000:.0f}%)]\tLoss: {v}")
    return "\n".join(out) + "\n"


def test_a_loss_swinging_back_towards_its_start_is_a_step_size_too_large(tmp_path: Path):
    a = _run_in(tmp_path, 0, NLP_TUTORIAL_77)
    assert _verdict(a) == ("failed", "lr_too_high")  # was healthy: 'loss 15.21 -> 2.524'
    f = _finding(a, "DIV001")
    assert f.symptom == "loss_oscillation" and f.first_step == 50
    assert "6 climbs" in f.title
    assert any("1.641 at step 70 -> 10.75 at step 80" in e.detail and e.where == "line 8" for e in f.evidence)


def test_a_validation_loss_swinging_from_epoch_to_epoch_is_read_too(tmp_path: Path):
    a = _run_in(tmp_path, 0, STATS_478017)
    assert _verdict(a) == ("failed", "lr_too_high")
    f = _finding(a, "DIV001")
    assert "validation loss oscillates" in f.title
    assert any("0.14 at step 9 -> 2.81 at step 10" in e.detail for e in f.evidence)
    assert "BatchNorm" in f.message  # the other readings of a calm training loss beside it


def test_batch_noise_at_the_floor_is_no_oscillation(tmp_path: Path):
    a = _run_in(tmp_path, 0, _mnist([(1, MNIST_E1), (3, MNIST_E3)]))
    assert not any(f.symptom == "loss_oscillation" for f in a.diagnosis.findings)
    assert _verdict(a)[0] == "healthy"


def test_swings_that_stop_halfway_are_no_oscillation(tmp_path: Path):
    # the same swings, then the loss settles for longer than it swung: a rough start, not a run that never settles
    calm = "".join(f"Epoch: {i * 10:04d} cost = {1.5 - i * 0.01:.6f}\n" for i in range(21, 45))
    a = _run_in(tmp_path, 0, NLP_TUTORIAL_77.replace("······\nEpoch: 5000 cost = 2.523541\n", calm))
    assert not any(f.symptom == "loss_oscillation" for f in a.diagnosis.findings)
