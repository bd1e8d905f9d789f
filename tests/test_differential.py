"""An unexplained non-finite onset comes with the usual suspects, ordered by the run's own numbers."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run


def _num001(a):
    return [f for f in a.diagnosis.findings if f.code == "NUM001" and f.severity == "error"][0]


def _suspects(f) -> list[str]:
    return [r for r in f.remedies if r.startswith("Suspect ")]


def _raw_num001(a):
    """NUM001 as the detector gives it, before the diagnosis drops advice that another finding makes moot."""
    from detectors.nonfinite_onset import detect

    return [f for f in detect(a.run) if f.severity == "error"][0]


def _moot(a, f, cause: str) -> None:
    """The verdict names ``cause`` and explains NUM001: its "if no other finding names the cause" suspects are gone
    from the report, its other advice stays."""
    assert a.diagnosis.verdict.root_cause == cause and f.explained_by == cause
    assert not _suspects(f) and not any("if no other finding names the cause" in r for r in f.remedies)
    assert any(r.startswith("Fix the cause (the one another finding names") for r in f.remedies)


# https://github.com/PaddlePaddle/PaddleDetection/issues/5337 (ppdet's logger as pasted; SSDLite on CPU, batch 4)
PPDET = """\
2022-03-09 15:20:28,459-INFO: iter: 0, lr: 0.000083, 'loss': '24.061707', eta: 0:02:34, batch_cost: 0.00039 sec, ips: 5168.58164 images/sec
2022-03-09 15:20:50,962-INFO: iter: 20, lr: 0.000085, 'loss': 'nan', eta: 5 days, 18:42:12, batch_cost: 1.24839 sec, ips: 1.60206 images/sec
2022-03-09 15:21:12,661-INFO: iter: 40, lr: 0.000087, 'loss': 'nan', eta: 5 days, 1:16:20, batch_cost: 1.09156 sec, ips: 1.83224 images/sec
"""


def test_an_unexplained_nan_lists_the_suspects_with_the_numbers_that_order_them(tmp_path: Path):
    a = _run(tmp_path, PPDET)
    _moot(a, _num001(a), "lr_too_high")  # OPT001: a NaN while the LR still ramps up (below)
    f = _raw_num001(a)
    sus = _suspects(f)
    assert len(sus) == 3
    assert "learning rate too high" in sus[0] and "lr 8.5e-05 at step 20; still rising (warmup)" in sus[0]
    assert "nothing read says which precision" in sus[1]
    assert "Fix the cause (the one another finding names, else the suspect a rerun confirms)" in f.remedies[len(sus)]  # the suspects come first
    lr_rows = [e for e in f.evidence if e.detail.startswith("learning_rate 8.5e-05 at step 20")]
    assert lr_rows and lr_rows[0].where.endswith("2"), [e.where for e in f.evidence]  # line 2 of log.txt


# HF Trainer dicts (the shape every transformers run prints); bf16 on; the loss is calm, goes NaN for two logs and
# comes back: particular batches, not the LR and never fp16 (stdout dicts carry no step: the n-th log is step n)
HF_CALM = "".join(
    f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': 2e-05, 'epoch': {s / 100:.2f}}}\n"
    for s, v, g in [(10, 1.52, 1.1), (20, 1.31, 0.9), (30, 1.22, 1.0), (40, "nan", "nan"), (50, "nan", "nan"),
                    (60, 1.18, 0.95), (70, 1.15, 0.9), (80, 1.12, 0.92)])


def test_a_calm_loss_that_comes_back_puts_the_data_first_and_rules_out_fp16(tmp_path: Path):
    a = _run(tmp_path, HF_CALM, config="--bf16 True --learning_rate 2e-5\n")
    _moot(a, _num001(a), "nan_in_data")
    f = _raw_num001(a)
    sus = _suspects(f)
    assert sus, f.remedies
    assert "a bad batch" in sus[0] and "particular batches" in sus[0] and "calm (1.22 at step 3)" in sus[0]
    assert any(s.startswith("Suspect") and "not float16 overflow: bf16 = true" in s for s in sus)
    assert not any("float16 overflow: rerun" in s for s in sus)


# the same dicts with a climbing loss and growing grad_norm before the NaN: the LR comes first
HF_CLIMB = "".join(
    f"{{'loss': {v}, 'grad_norm': {g}, 'learning_rate': {lr}, 'epoch': {s / 100:.2f}}}\n"
    for s, v, g, lr in [(10, 2.1, 1.0, 1e-4), (20, 1.9, 1.1, 2e-4), (30, 1.8, 0.9, 3e-4), (40, 2.9, 6.0, 4e-4),
                        (50, 5.5, 40.0, 5e-4), (60, "nan", "nan", 5e-4), (70, "nan", "nan", 5e-4)])


def test_a_climbing_loss_puts_the_learning_rate_first_with_its_numbers(tmp_path: Path):
    a = _run(tmp_path, HF_CLIMB)
    _moot(a, _num001(a), "lr_too_high")  # OPT001 names it
    sus = _suspects(_raw_num001(a))
    assert "learning rate too high" in sus[0]
    assert "climbed from 1.8 (step 3) to 5.5 (step 5)" in sus[0] and "grad_norm grew" in sus[0]


def test_a_nan_at_the_first_step_keeps_the_first_forward_pass_advice_only(tmp_path: Path):
    a = _run(tmp_path, "".join(f"step {s} | loss nan | lr 1e-05\n" for s in (1, 2, 3, 4)))
    f = _num001(a)
    assert not _suspects(f)
    assert f.remedies[0].startswith("Non-finite from the first log, before the optimizer could act")


# a loop's own NaN check raising in words of its own (each line as the library raises it):
# RecBole trainer.py _check_nan (RecBole#1726), AllenNLP/OLMo trainers, GluonTS trainer (gluonts#1405),
# tf.debugging.check_numerics(loss, "Loss is NaN or Inf")
NAN_RAISES = [
    "ValueError: Training loss is nan",
    "ValueError: nan loss encountered",
    "gluonts.core.exception.GluonTSUserError: Got NaN in first epoch. Try reducing initial learning rate.",
    "tensorflow.python.framework.errors_impl.InvalidArgumentError: Loss is NaN or Inf : Tensor had NaN values",
]
NOT_NAN_RAISES = [
    # scikit-learn's input check is about the data handed to it, not a training loss
    "ValueError: Input contains NaN, infinity or a value too large for dtype('float64').",
    # fairseq's DynamicLossScaler: the fp16 scale collapse, its own kind
    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering the "
    "learning rate, using gradient clipping or increasing the batch size.",
]


def test_a_loops_own_nan_check_raising_is_a_nan_stop_not_an_unknown_crash(tmp_path: Path):
    from autopsy.ingest.events import classify

    for line in NAN_RAISES:
        assert classify(line)[0] == "nan_stop", line
    for line in NOT_NAN_RAISES:
        assert (classify(line) or ("",))[0] != "nan_stop", line
    log = ('Traceback (most recent call last):\n'
           '  File "D:\\anaconda3\\lib\\site-packages\\recbole\\trainer\\trainer.py", line 177, in _train_epoch\n'
           '    self._check_nan(loss)\n'
           '  File "D:\\anaconda3\\lib\\site-packages\\recbole\\trainer\\trainer.py", line 248, in _check_nan\n'
           "    raise ValueError('Training loss is nan')\n"
           'ValueError: Training loss is nan\n')
    a = _run(tmp_path, log)
    v = a.diagnosis.verdict
    assert v.root_cause != "crash" and v.status == "inconclusive", (v.status, v.root_cause)
    f = _num001(a)
    assert _suspects(f) and "no numbers to order them" in _suspects(f)[0]


# YunYang1994/TensorFlow2.0-Examples YOLOv3 train.py prints (TensorFlow2.0-Examples#8):
# "=> STEP %4d   lr: %.6f   giou_loss: %4.2f   conf_loss: %4.2f   prob_loss: %4.2f   total_loss: %4.2f"
def _yolo(rows) -> str:
    return "".join(f"=> STEP {s:4d}   lr: {lr:.6f}   giou_loss: {g}   conf_loss: {c}   prob_loss: 0.03   total_loss: {t}\n"
                   for s, lr, g, c, t in rows)


WARMUP_NAN = [(s, s * 8e-7, "2.10", "6.18", f"{8.3 + (s % 3) * 0.4:.2f}") for s in range(740, 750)] + [
    (750, 6.0e-4, " nan", "10.89", " nan"), (751, 6.01e-4, " nan", " nan", " nan"), (752, 6.02e-4, " nan", " nan", " nan")]


def test_a_nan_while_the_lr_still_ramps_up_names_the_lr_and_says_why(tmp_path: Path):
    a = _run(tmp_path, _yolo(WARMUP_NAN))
    v = a.diagnosis.verdict
    assert (v.status, v.root_cause) == ("failed", "lr_too_high")
    f = [x for x in a.diagnosis.findings if x.code == "OPT001"][0]
    assert "still rising (warmup)" in f.message and f.first_step == 750


def test_a_nan_at_a_constant_lr_or_in_an_fp16_run_is_not_put_on_the_warmup(tmp_path: Path):
    flat = [(s, 6e-4, g, c, t) for s, _, g, c, t in WARMUP_NAN]
    (tmp_path / "flat").mkdir()
    a = _run(tmp_path / "flat", _yolo(flat))
    assert a.diagnosis.verdict.root_cause != "lr_too_high"
    (tmp_path / "fp16").mkdir()
    a = _run(tmp_path / "fp16", _yolo(WARMUP_NAN), config="--fp16 True\n")
    assert a.diagnosis.verdict.root_cause != "lr_too_high"
    # finite logs after the NaN: particular batches, not the LR's climb
    back = WARMUP_NAN[:-2] + [(751, 6.01e-4, "2.00", "6.00", "8.10"), (752, 6.02e-4, "2.00", "6.00", "8.00")]
    (tmp_path / "back").mkdir()
    a = _run(tmp_path / "back", _yolo(back))
    assert a.diagnosis.verdict.root_cause != "lr_too_high"
