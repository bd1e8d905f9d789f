"""Pretty-printed JSON records (Chainer's LogReport ``log``, ESPnet1), Kaldi nnet3 and EESEN objective lines, and the
judging of a loss that is absurd in size: upwards in every term (the updates), or one term far below zero beside ordinary ones (that term's samples)."""

from __future__ import annotations

import json
from pathlib import Path

from detectors._common import loss_like
from tests.test_unseen_logs import _run, _series, _verdict


def _finding(a, code: str):
    return [f for f in a.diagnosis.findings if f.code == code][0]


def _chainer_log(rows: list[dict]) -> str:
    # chainer/training/extensions/log_report.py (and pytorch-pfn-extras' LogReport) write the whole list so:
    # ``json.dump(self._log, f, indent=4)``; ESPnet1 keeps it as exp/<dir>/results/log
    return json.dumps(rows, indent=4)


def _espnet_rows(n: int, ctc=lambda i: 60.0 - i, att=lambda i: 40.0 - i) -> list[dict]:
    return [{"main/loss_ctc": ctc(i), "main/loss_att": att(i), "main/acc": 0.5 + i / 100,
             "main/loss": 0.3 * ctc(i) + 0.7 * att(i), "validation/main/loss": 45.0 - i, "epoch": 1 + i // 4,
             "iteration": 100 * (i + 1), "elapsed_time": 30.0 * i} for i in range(n)]


def test_a_chainer_log_file_is_read_at_its_iterations_and_a_healthy_one_stays_healthy(tmp_path: Path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "log").write_text(_chainer_log(_espnet_rows(12)))
    a = _run(tmp_path / "results", "", name="unused.txt")
    steps = sorted(set(a.run.scalars[a.run.scalars["metric"] == "loss"]["step"]))
    assert steps == [100 * (i + 1) for i in range(12)]  # the iteration, not the record's position
    assert _series(a, "loss")[0] == 0.3 * 60 + 0.7 * 40
    assert _verdict(a) == ("healthy", "healthy")
    # each value at the line that prints it
    row = a.run.scalars[(a.run.scalars["key"] == "main/loss_att") & (a.run.scalars["step"] == 100)].iloc[0]
    assert row["line"] == 4


# https://github.com/espnet/espnet/issues/2669: two records of exp/.../results/log as pasted (ESPnet1 Transformer ASR;
# the paste shifted the closing braces); the maintainer: utterances whose output is longer than the subsampled input
ESPNET_2669 = """{
        "main/loss_ctc": -5.671372443975481e+35,
        "main/loss_att": 15.803862244486808,
        "main/acc": 0.9607279838545754,
        "main/loss": -1.1342744887950961e+35,
        "epoch": 9,
        "iteration": 122600,
        "elapsed_time": 28301.330499992007
    },
{
        "main/loss_ctc": -5.671372443975481e+35,
        "main/loss_att": 15.180414428114892,
        "main/acc": 0.9647341349090253,
        "main/loss": -1.1342744887950961e+35,
        "epoch": 17,
        "iteration": 234600,
        "elapsed_time": 50239.392387389904
    },
"""


def test_one_term_absurd_beside_an_ordinary_one_is_that_terms_samples_not_the_lr(tmp_path: Path):
    a = _run(tmp_path, ESPNET_2669)
    # was: healthy ("loss -1.134e+35 ... all finite"), then nan_in_data; the CTC term names its own cause
    assert _verdict(a) == ("failed", "ctc_output_longer_than_input")
    f = _finding(a, "DIV001")
    assert f.first_step == 122600 and "main/loss_ctc" in f.title and "main/loss_att stayed at 15.8" in f.title
    assert "learning rate is not what broke" in f.message and "label sequence is longer than its input frames" in f.message
    assert any("zero_infinity=True" in r for r in f.remedies)
    assert any(e.detail.startswith("main/acc = 0.9607") for e in f.evidence)


def test_every_term_absurd_together_is_still_the_updates(tmp_path: Path):
    rows = _espnet_rows(6) + [{"main/loss_ctc": 4e25, "main/loss_att": 3e24, "main/acc": 0.0, "main/loss": 1.4e25,
                               "epoch": 3, "iteration": 700, "elapsed_time": 200.0}]
    a = _run(tmp_path, _chainer_log(rows))
    assert _verdict(a) == ("failed", "lr_too_high")
    f = _finding(a, "DIV001")
    assert f.first_step == 700 and "Only" not in f.title


# https://github.com/open-mmlab/mmdetection/issues/4383 (GA-RPN on 1 GPU with the 8-GPU LR, as pasted): the RCNN head's
# terms explode while the RPN's stay calm; that is the LR (the thread's answer), and a calm term beside a huge one
# must not move the blame to the data
MMDET_4383 = ("2021-01-03 10:02:15,629 - mmdet - INFO - Epoch [1][500/58633]   lr: 1.996e-02, eta: 3 days, 18:12:13, "
              "time: 0.434, data_time: 0.005, memory: 4851, loss_rpn_cls: 2.5725, loss_rpn_bbox: 0.0047, "
              "loss_anchor_shape: 0.3861, loss_anchor_loc: 55.1215, loss_cls: 2326544033.5461, acc: 84.1525, "
              "loss_bbox: 135189261.4936, loss: 2461733416.8998, grad_norm: 1170372919273.4768\n")


def test_a_head_exploding_upwards_beside_a_calm_rpn_is_still_the_lr(tmp_path: Path):
    a = _run(tmp_path, MMDET_4383)
    assert _verdict(a) == ("failed", "lr_too_high")
    assert "Only" not in _finding(a, "DIV001").title


def test_an_absurd_negative_loss_is_not_healthy_even_without_terms(tmp_path: Path):
    rows = [{"main/loss": v, "iteration": 100 * (i + 1)} for i, v in enumerate([2.1, 1.9, -3.2e30, 1.8])]
    a = _run(tmp_path, _chainer_log(rows))
    assert a.diagnosis.verdict.status == "failed"
    assert "no loss computes a value this large" in _finding(a, "DIV001").message


def test_loss_terms_after_a_path_are_loss_like():
    assert loss_like("main/loss_ctc") and loss_like("train/loss_cls") and loss_like("validation/main/loss_att")
    assert not loss_like("ray/tune/loss")  # a tracker's copy of the loss, not a term


# kaldi-asr/kaldi nnet3-chain-train log lines as quoted in a Kaldi thread (PrintStatsForThisPhase, nnet-training.cc);
# the chain objective prints as "a + b = sum"; iostream prints NaN as -nan
KALDI = """LOG (nnet3-chain-train[5.2.107~2-e892]:PrintStatsForThisPhase():nnet-training.cc:253) Average objective function for 'output-xent' for minibatches 0-9 is -7.16759 over 64000 frames.
LOG (nnet3-chain-train[5.2.107~2-e892]:PrintStatsForThisPhase():nnet-training.cc:271) Average objective function for 'output' for minibatches 0-9 is -0.57137 + -0.00545086 = -0.576821 over 64000 frames.
LOG (nnet3-chain-train[5.2.107~2-e892]:PrintStatsForThisPhase():nnet-training.cc:253) Average objective function for 'output-xent' for minibatches 10-19 is -6.9 over 64000 frames.
LOG (nnet3-chain-train[5.2.107~2-e892]:PrintStatsForThisPhase():nnet-training.cc:271) Average objective function for 'output' for minibatches 10-19 is -0.51 + -0.005 = -0.515 over 64000 frames.
LOG (nnet3-chain-train[5.2.107~2-e892]:PrintStatsForThisPhase():nnet-training.cc:271) Average objective function for 'output' for minibatches 20-29 is -nan + -nan = -nan over 64000 frames.
LOG (nnet3-chain-train[5.2.107~2-e892]:PrintStatsForThisPhase():nnet-training.cc:271) Average objective function for 'output' for minibatches 30-39 is -nan + -nan = -nan over 64000 frames.
"""


def test_kaldi_objectives_are_read_negated_as_the_loss_at_the_phases_last_minibatch(tmp_path: Path):
    a = _run(tmp_path, KALDI)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [9, 19, 29, 39] and loss["value"].tolist()[:2] == [0.576821, 0.515]
    assert loss["key"].iloc[0] == "-objective[output]"
    assert _series(a, "loss_output-xent") == [7.16759, 6.9]
    f = [x for x in a.diagnosis.findings if x.code == "NUM001" and x.severity == "error"][0]
    assert f.first_step == 29


# https://github.com/srvk/eesen/issues/87 (train-ctc-parallel, VLOG 1 progress lines as pasted): one objective of
# -1e+27 between ordinary ones; the maintainer: exploding gradients
EESEN_87 = """VLOG1 After 201933 sequences (163.131Hr): Obj(log[Pzx]) = -41.6014 TokenAcc = 59.2475%
VLOG1 After 202939 sequences (163.96Hr): Obj(log[Pzx]) = -42.6817 TokenAcc = 58.5093%
VLOG1 After 203946 sequences (164.793Hr): Obj(log[Pzx]) = -42.561 TokenAcc = 59.4519%
VLOG1 After 204951 sequences (165.623Hr): Obj(log[Pzx]) = -43.8504 TokenAcc = 57.6078%
VLOG1 After 205951 sequences (166.449Hr): Obj(log[Pzx]) = -1e+27 TokenAcc = 58.6802%
VLOG1 After 206958 sequences (167.246Hr): Obj(log[Pzx]) = -40.0838 TokenAcc = 59.9717%
"""


def test_eesen_progress_lines_and_an_absurd_objective(tmp_path: Path):
    a = _run(tmp_path, EESEN_87)  # was: nothing read
    assert _series(a, "loss")[:2] == [41.6014, 42.6817]
    assert _verdict(a) == ("failed", "lr_too_high")
    f = _finding(a, "DIV001")
    assert f.first_step == 205951 and "1e+27" in f.message


def test_the_ctc_cause_needs_a_ctc_term(tmp_path: Path):
    """The same log with the blown term renamed: a term that is not CTC's stays bad samples (nan_in_data)."""
    a = _run(tmp_path, ESPNET_2669.replace("loss_ctc", "loss_aux"))
    assert _verdict(a) == ("failed", "nan_in_data")
    assert "label sequence is longer" not in _finding(a, "DIV001").message
