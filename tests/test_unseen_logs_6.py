"""Shapes from the sixth round of unseen logs (eval/held_out_6a, 6b; each thread quoted with its source): what the
diagnosis got wrong, asserted on what the shape means, so cousins pass too."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# -- "labels all -100" only explains runs that have token labels ------------------------------------------------

# https://github.com/endernewton/tf-faster-rcnn/issues/458 (TF1 Faster R-CNN, lr 0.01: the total is NaN from the first
# print while the printed terms are finite; the detail lines are trimmed to the header here)
TF_FASTER_RCNN = """\
iter: 20 / 70000, total loss: nan
speed: 0.794s / iter
iter: 40 / 70000, total loss: nan
speed: 0.524s / iter
iter: 60 / 70000, total loss: nan
speed: 0.436s / iter
iter: 80 / 70000, total loss: nan
"""
# https://github.com/RyanWangZf/transtab/issues/1 (a tabular model: validation loss NaN, training loss finite)
TRANSTAB = """\
epoch: 0, test val_loss: nan
epoch: 0, train loss: 7.0228, lr: 0.000100, spent: 0.7 secs
epoch: 1, test val_loss: nan
epoch: 1, train loss: 6.7598, lr: 0.000100, spent: 1.4 secs
"""


def test_nan_from_the_first_log_outside_a_language_model_is_not_masked_labels(tmp_path: Path):
    a = _run(tmp_path, TF_FASTER_RCNN)
    assert _series(a, "loss")  # read: total_loss is the run's loss
    status, cause = _verdict(a)
    assert status != "healthy" and cause != "all_labels_masked"


def test_eval_nan_outside_a_language_model_is_not_masked_labels(tmp_path: Path):
    a = _run(tmp_path, TRANSTAB)
    assert _series(a, "loss") == [7.0228, 6.7598]
    assert _verdict(a)[1] != "all_labels_masked"


# https://github.com/axolotl-ai-cloud/axolotl/issues/3026 (the HF Trainer's dicts mark a token-label run)
AXOLOTL_EVAL_NAN = """\
{'eval_loss': nan, 'eval_runtime': 5.3319, 'eval_samples_per_second': 1.313, 'eval_steps_per_second': 0.188, 'epoch': 9.0}
{'loss': 0.3877, 'grad_norm': 0.341796875, 'learning_rate': 4.894348370484648e-07, 'epoch': 9.5}
"""


def test_eval_nan_in_a_language_model_run_still_names_masked_eval_labels(tmp_path: Path):
    a = _run(tmp_path, AXOLOTL_EVAL_NAN)
    assert _verdict(a) == ("failed", "all_labels_masked")
