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


# https://github.com/chuckcho/video-caffe/issues/11 (the two test passes as pasted, the "......." separators dropped): C3D on
# UCF101; by the 19000 test the net has collapsed to chance and the test loss is Caffe's ceiling -ln(FLT_MIN)
VIDEOCAFFE_11 = """Iteration 18000, Testing net (#0)
Test net output #0: accuracy/top-1 = 0.24
Test net output #1: accuracy/top-5 = 0.486
Test net output #2: loss = 3.30735 (* 1 = 3.30735 loss)
Iteration 19000, Testing net (#0)
Test net output #0: accuracy/top-1 = 0.008
Test net output #1: accuracy/top-5 = 0.037
Test net output #2: loss = 87.3366 (* 1 = 87.3366 loss)
"""


def test_caffe_test_net_outputs_are_read_and_a_test_loss_at_the_softmax_ceiling_is_divergence(tmp_path: Path):
    a = _run(tmp_path, VIDEOCAFFE_11)
    assert _verdict(a) == ("failed", "lr_too_high")  # was "nothing to judge"
    assert a.run.arrays("eval_loss").steps.tolist() == [18000, 19000]
    assert _series(a, "eval_accuracy/top-1") == [0.24, 0.008]
    (f,) = [f for f in a.diagnosis.findings if f.code == "DIV001"]
    assert "87.3365" in f.title and f.first_step == 19000


def test_a_test_loss_jump_below_the_ceiling_is_not_the_softmax_floor(tmp_path: Path):
    a = _run(tmp_path, VIDEOCAFFE_11.replace("87.3366", "7.3366"))
    assert not [f for f in a.diagnosis.findings if "87.3365" in f.title]


# https://github.com/rbgirshick/py-faster-rcnn/issues/280 (as pasted): Caffe's solver.cpp prints each train-net output
# blob under the iteration line (faster-rcnn's four loss terms); the smoothed "Iteration N, loss" stays the loss
CAFFE_TRAIN_OUTPUTS = """I0801 19:06:38.232373 45998 solver.cpp:228] Iteration 2080, loss = 0.596326
I0801 19:06:38.232439 45998 solver.cpp:244]     Train net output #0: loss_bbox = 0.116154 (* 1 = 0.116154 loss)
I0801 19:06:38.232456 45998 solver.cpp:244]     Train net output #1: loss_cls = 0.151291 (* 1 = 0.151291 loss)
I0801 19:06:38.232471 45998 solver.cpp:244]     Train net output #2: rpn_cls_loss = 0.169351 (* 1 = 0.169351 loss)
I0801 19:06:38.232484 45998 solver.cpp:244]     Train net output #3: rpn_loss_bbox = 0.303964 (* 1 = 0.303964 loss)

I0801 19:08:26.177532 45998 solver.cpp:228] Iteration 2120, loss = 0.513034
I0801 19:08:26.177601 45998 solver.cpp:244]     Train net output #0: loss_bbox = 0.267161 (* 1 = 0.267161 loss)
I0801 19:08:26.177618 45998 solver.cpp:244]     Train net output #1: loss_cls = 0.225441 (* 1 = 0.225441 loss)
I0801 19:08:26.177630 45998 solver.cpp:244]     Train net output #2: rpn_cls_loss = 0.201166 (* 1 = 0.201166 loss)
I0801 19:08:26.177644 45998 solver.cpp:244]     Train net output #3: rpn_loss_bbox = 0.169628 (* 1 = 0.169628 loss)
"""


def test_caffe_train_net_outputs_are_the_loss_terms_at_their_iteration(tmp_path: Path):
    a = _run(tmp_path, CAFFE_TRAIN_OUTPUTS)
    assert _series(a, "loss") == [0.596326, 0.513034]
    assert _series(a, "loss_cls") == [0.151291, 0.225441] and _series(a, "rpn_loss_bbox") == [0.303964, 0.169628]
    assert a.run.arrays("loss_cls").steps.tolist() == [2080, 2120]
    assert _verdict(a)[0] == "healthy"
