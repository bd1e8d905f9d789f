"""Degenerate labels (LBL002): a training accuracy perfect on every batch from the first logs while the loss falls
to ~0 is a trivial target, almost always one class; healthy runs that reach 100% by learning are left alone."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _verdict

# https://github.com/pytorch/examples/issues/737 (imagenet/main.py, ProgressMeter lines as pasted, tab-separated):
# an extra folder level made torchvision's ImageFolder see a single class
PYTORCH_EXAMPLES_737 = 'Epoch: [0][    0/40037]\tTime  1.073 ( 1.073)\tData  0.646 ( 0.646)\tLoss 6.9085e+00 (6.9085e+00)\tAcc@1   0.00 (  0.00)\tAcc@5   0.00 (  0.00)\nEpoch: [0][   10/40037]\tTime  0.018 ( 0.114)\tData  0.000 ( 0.059)\tLoss 2.9971e+00 (6.2409e+00)\tAcc@1 100.00 ( 81.82)\tAcc@5 100.00 ( 81.82)\nEpoch: [0][   20/40037]\tTime  0.018 ( 0.069)\tData  0.000 ( 0.031)\tLoss 0.0000e+00 (3.2690e+00)\tAcc@1 100.00 ( 90.48)\tAcc@5 100.00 ( 90.48)\nEpoch: [0][   30/40037]\tTime  0.018 ( 0.053)\tData  0.000 ( 0.022)\tLoss 0.0000e+00 (2.2145e+00)\tAcc@1 100.00 ( 93.55)\tAcc@5 100.00 ( 93.55)\nEpoch: [0][   40/40037]\tTime  0.018 ( 0.046)\tData  0.000 ( 0.019)\tLoss 0.0000e+00 (1.6744e+00)\tAcc@1 100.00 ( 95.12)\tAcc@5 100.00 ( 95.12)\n'

# https://github.com/open-mmlab/mmsegmentation/issues/2242 (SegFormer on a custom binary dataset, the first lines of
# the stored paste, which starts at iter 1100): "It's a data error", closed by the reporter
MMSEG_2242 = '2022-10-27 17:28:08,770 - mmseg - INFO - Iter [1100/160000]     lr: 4.366e-05, eta: 6:30:57, time: 0.137, data_time: 0.005, memory: 970, decode.loss_ce: 0.0045, decode.acc_seg: 100.0000, loss: 0.0045\n2022-10-27 17:28:15,777 - mmseg - INFO - Iter [1150/160000]     lr: 4.563e-05, eta: 6:29:58, time: 0.140, data_time: 0.006, memory: 970, decode.loss_ce: 0.0036, decode.acc_seg: 100.0000, loss: 0.0036\n2022-10-27 17:28:22,689 - mmseg - INFO - Iter [1200/160000]     lr: 4.760e-05, eta: 6:28:53, time: 0.139, data_time: 0.006, memory: 970, decode.loss_ce: 0.0029, decode.acc_seg: 100.0000, loss: 0.0029\n2022-10-27 17:28:29,744 - mmseg - INFO - Iter [1250/160000]     lr: 4.957e-05, eta: 6:28:07, time: 0.141, data_time: 0.005, memory: 970, decode.loss_ce: 0.0026, decode.acc_seg: 100.0000, loss: 0.0026\n2022-10-27 17:28:36,759 - mmseg - INFO - Iter [1300/160000]     lr: 5.154e-05, eta: 6:27:20, time: 0.140, data_time: 0.006, memory: 970, decode.loss_ce: 0.0022, decode.acc_seg: 100.0000, loss: 0.0022\n2022-10-27 17:28:43,464 - mmseg - INFO - Iter [1350/160000]     lr: 5.351e-05, eta: 6:26:02, time: 0.134, data_time: 0.007, memory: 970, decode.loss_ce: 0.0021, decode.acc_seg: 100.0000, loss: 0.0021\n'


def _imagenet(accs: list[float], losses: list[float], every: int = 10, top5: float | None = None) -> str:
    """Lines in the format of pytorch/examples imagenet/main.py's ProgressMeter (Epoch: [e][ i/N] then tab-separated
    meters, each "name value (average)")."""
    out = []
    for k, (acc, loss) in enumerate(zip(accs, losses)):
        a5 = top5 if top5 is not None else min(100.0, acc + 20)
        out.append(f"Epoch: [0][{k * every:5d}/40037]\tTime  0.018 ( 0.069)\tData  0.000 ( 0.031)\t"
                   f"Loss {loss:.4e} ({loss:.4e})\tAcc@1 {acc:6.2f} ({acc:6.2f})\tAcc@5 {a5:6.2f} ({a5:6.2f})")
    return "\n".join(out) + "\n"


def test_perfect_accuracy_from_the_second_log_and_loss_zero_is_one_class(tmp_path: Path):
    a = _run(tmp_path, PYTORCH_EXAMPLES_737)
    assert _verdict(a) == ("failed", "degenerate_labels")
    f = next(x for x in a.diagnosis.findings if x.code == "LBL002")
    assert f.first_step == 10 and f.severity == "error"
    assert f.evidence[0].detail.startswith("Acc@1 = 100 at step 10") and f.evidence[0].where == "line 2"
    assert "perfect at 4 of 5 logs" in f.evidence[1].detail
    assert "loss 6.909 at step 0 -> 0.0 at step 40" in f.evidence[2].detail
    assert any("ImageFolder" in r for r in f.remedies)


def test_perfect_pixel_accuracy_at_every_log_of_a_cut_paste(tmp_path: Path):
    a = _run(tmp_path, MMSEG_2242)
    assert _verdict(a) == ("failed", "degenerate_labels")
    f = next(x for x in a.diagnosis.findings if x.code == "LBL002")
    assert "decode.acc_seg is a perfect score at every one of its 6 logs (steps 1100..1350)" in f.message


def test_accuracy_that_climbs_to_100_is_learning(tmp_path: Path):
    """A run that learns: accuracy rises over many logs before it is perfect, as the loss falls."""
    accs = [0.0, 12.5, 31.2, 55.0, 71.9, 84.4, 93.8, 96.9, 100.0, 100.0, 100.0]
    losses = [6.9, 5.1, 3.7, 2.4, 1.5, 0.9, 0.4, 0.1, 0.02, 0.009, 0.008]
    a = _run(tmp_path, _imagenet(accs, losses))
    assert not [x for x in a.diagnosis.findings if x.code == "LBL002"]


def test_perfect_accuracy_with_a_loss_above_zero_is_not_enough(tmp_path: Path):
    a = _run(tmp_path, _imagenet([0.0, 100.0, 100.0, 100.0, 100.0], [6.9, 2.9, 1.2, 0.8, 0.5]))
    assert not [x for x in a.diagnosis.findings if x.code == "LBL002"]


def test_top5_alone_is_not_read(tmp_path: Path):
    """Top-5 is 100% with five classes or fewer whatever the model does: only a top-1 accuracy counts."""
    text = _imagenet([0.0, 40.0, 50.0, 60.0, 70.0], [6.9, 0.008, 0.007, 0.006, 0.005], top5=100.0)
    a = _run(tmp_path, text)
    assert not [x for x in a.diagnosis.findings if x.code == "LBL002"]


def test_memorised_training_set_with_a_poor_validation_score_is_left_alone(tmp_path: Path):
    """A tail cut from a long Keras run that overfits: training accuracy 1.0 at every epoch shown, loss ~0, but
    val_accuracy far lower (the labels differ; the training set was memorised)."""
    rows = [f"Epoch {e}/100\n32/32 [==============================] - 1s 20ms/step - loss: {0.004 - e * 1e-5:.4f} - "
            f"accuracy: 1.0000 - val_loss: 2.31{e % 10} - val_accuracy: 0.61{e % 10}" for e in range(90, 97)]
    a = _run(tmp_path, "\n".join(rows) + "\n")
    assert not [x for x in a.diagnosis.findings if x.code == "LBL002"]
