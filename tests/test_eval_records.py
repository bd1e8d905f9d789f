"""Held-out results printed by training scripts: pytorch/examples' "Test set: Average loss" (and its copies'
"Validation set"), TF Estimator's "Saving dict for global step N", OpenNMT-tf's "Evaluation result for step N". Their
loss is the evaluation loss, never a training log at that step; an evaluation NaN beside a finite training loss is
named as such."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/ikostrikov/pytorch-flows/issues/4 (Glow on GAS, pytorch/examples-style lines as pasted): the
# validation loss is NaN after the first epoch while every training loss is finite
PYTORCH_FLOWS_4 = 'Warning: Results for GLOW are not as good as for MAF yet.\nWarning: Results for GLOW are not as good as for MAF yet.\nWarning: Results for GLOW are not as good as for MAF yet.\nWarning: Results for GLOW are not as good as for MAF yet.\nWarning: Results for GLOW are not as good as for MAF yet.\nTrain Epoch: 0 [0/852174 (0%)]\tLoss: 6.648179\nTrain Epoch: 0 [100000/852174 (12%)]\tLoss: -2.193499\nTrain Epoch: 0 [200000/852174 (23%)]\tLoss: -2.497202\nTrain Epoch: 0 [300000/852174 (35%)]\tLoss: -1.122860\nTrain Epoch: 0 [400000/852174 (47%)]\tLoss: -2.892694\nTrain Epoch: 0 [500000/852174 (59%)]\tLoss: -2.268665\nTrain Epoch: 0 [600000/852174 (70%)]\tLoss: -3.088916\nTrain Epoch: 0 [700000/852174 (82%)]\tLoss: -3.798649\nTrain Epoch: 0 [800000/852174 (94%)]\tLoss: -2.554942\n\nValidation set: Average loss: nan\n\nBest validation at epoch 0: Average loss: inf\n'

# https://github.com/OpenNMT/OpenNMT-tf/issues/744 (GPT2Small LM, as pasted): the run ended "Model diverged with loss
# = NaN" (the title); the learning rate printed is ~1.2
OPENNMT_TF_744 = 'INFO:tensorflow:Saved checkpoint data/model_gpt/ckpt-435000\nINFO:tensorflow:Running evaluation for step 435000\nINFO:tensorflow:Evaluation result for step 435000: loss = 148890.718750 ; perplexity = inf\nINFO:tensorflow:Step = 435100 ; steps/s = 2.97, source words/s = 12176 ; Learning rate = 1.202480 ; Loss = 185912.781250\nINFO:tensorflow:Step = 435200 ; steps/s = 2.93, source words/s = 12020 ; Learning rate = 1.202172 ; Loss = 158771.156250\nINFO:tensorflow:Step = 435300 ; steps/s = 2.95, source words/s = 12102 ; Learning rate = 1.201864 ; Loss = 138000.156250\nINFO:tensorflow:Step = 435400 ; steps/s = 2.96, source words/s = 12106 ; Learning rate = 1.201557 ; Loss = 159760.921875\nINFO:tensorflow:Step = 435500 ; steps/s = 2.95, source words/s = 12101 ; Learning rate = 1.201249 ; Loss = 159738.687500\nINFO:tensorflow:Step = 435600 ; steps/s = 2.96, source words/s = 12111 ; Learning rate = 1.200941 ; Loss = 169730.593750\nINFO:tensorflow:Step = 435700 ; steps/s = 2.96, source words/s = 12105 ; Learning rate = 1.200633 ; Loss = 141221.359375\nINFO:tensorflow:Step = 435800 ; steps/s = 2.95, source words/s = 12103 ; Learning rate = 1.200325 ; Loss = 161559.109375\n'

# https://github.com/pythonlessons/TensorFlow-2.x-YOLOv3/issues/8 (as pasted): the validation GIoU loss is NaN while the
# training losses stay finite
TF2_YOLOV3_8 = 'epoch:49 step:    0/19, lr:0.000052, giou_loss:   2.64, conf_loss:  11.12, prob_loss:   0.08, total_loss:  13.83\nepoch:49 step:    1/19, lr:0.000052, giou_loss:   2.31, conf_loss:  10.61, prob_loss:   0.08, total_loss:  12.99\n\ngiou_val_loss:    nan, conf_val_loss:  12.31, prob_val_loss:   0.06, total_val_loss:    nan\n\nepoch:50 step:    2/19, lr:0.000052, giou_loss:   1.96, conf_loss:  10.34, prob_loss:   0.09, total_loss:  12.38\nepoch:50 step:    3/19, lr:0.000052, giou_loss:   2.51, conf_loss:  11.29, prob_loss:   0.08, total_loss:  13.87\nepoch:50 step:    4/19, lr:0.000052, giou_loss:   2.17, conf_loss:  10.95, prob_loss:   0.06, total_loss:  13.18\n'

# pytorch/examples mnist/main.py: 'Train Epoch: {} [{}/{} ({:.0f}%)]\tLoss: {:.6f}' and
# '\nTest set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)\n' (values made up, format as printed)
MNIST = (
    "Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.329474\n"
    "Train Epoch: 1 [640/60000 (1%)]\tLoss: 1.425025\n"
    "Train Epoch: 1 [1280/60000 (2%)]\tLoss: 0.797103\n\n"
    "Test set: Average loss: 0.1022, Accuracy: 9681/10000 (97%)\n\n"
    "Train Epoch: 2 [0/60000 (0%)]\tLoss: 0.207453\n"
    "Train Epoch: 2 [640/60000 (1%)]\tLoss: 0.126530\n\n"
    "Test set: Average loss: 0.0914, Accuracy: 9712/10000 (97%)\n\n"
)

# TF Estimator's eval record (estimator.py: 'Saving dict for global step %d: %s', sorted 'k = v' pairs), values made up
ESTIMATOR = (
    "INFO:tensorflow:loss = 2.3, step = 1\n"
    "INFO:tensorflow:loss = 0.9, step = 101 (2.0 sec)\n"
    "INFO:tensorflow:Saving dict for global step 200: accuracy = 0.81, average_loss = 0.52, global_step = 200, "
    "loss = 51.3\n"
    "INFO:tensorflow:loss = 0.5, step = 201 (2.0 sec)\n"
)


def test_test_set_lines_are_the_held_out_loss_at_the_step_before(tmp_path: Path):
    a = _run(tmp_path, MNIST)
    assert _verdict(a) == ("healthy", "healthy")
    df = a.run.scalars
    ev = df[df["metric"] == "eval_loss"].sort_values("step")
    assert ev["value"].tolist() == [0.1022, 0.0914] and ev["step"].tolist() == [3, 5]
    assert _series(a, "test set accuracy") == [0.9681, 0.9712]
    assert _series(a, "loss") == [2.329474, 1.425025, 0.797103, 0.207453, 0.12653]


def test_a_validation_nan_beside_finite_training_is_named_as_the_evaluation(tmp_path: Path):
    a = _run(tmp_path, PYTORCH_FLOWS_4)
    assert _verdict(a) == ("inconclusive", "unknown")
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.title == "The evaluation loss went non-finite at step 9 while the training loss stayed finite"
    assert f.symptom == "eval_nonfinite" and f.remedies[0].startswith("Only the evaluation is non-finite")


def test_estimator_eval_dict_is_not_a_training_loss(tmp_path: Path):
    a = _run(tmp_path, ESTIMATOR)
    assert _series(a, "loss") == [2.3, 0.9, 0.5]
    assert _series(a, "eval_loss") == [51.3] and _series(a, "eval_accuracy") == [0.81]
    assert _verdict(a) == ("healthy", "healthy")


def test_opennmt_tf_evaluation_result_and_an_infinite_perplexity(tmp_path: Path):
    a = _run(tmp_path, OPENNMT_TF_744)
    assert _series(a, "eval_loss") == [148890.71875]
    assert 148890.71875 not in _series(a, "loss")
    assert _verdict(a) == ("failed", "lr_too_high")
    f = next(x for x in a.diagnosis.findings if x.code == "DIV001")
    assert f.evidence[0].detail.startswith("eval_perplexity Inf at step 435000 overflowed to inf")
    assert "learning rate 1.202 at step 435100" in f.evidence[-1].detail


def test_a_held_out_term_nan_is_named_as_the_evaluation(tmp_path: Path):
    a = _run(tmp_path, TF2_YOLOV3_8)
    f = next(x for x in a.diagnosis.findings if x.code == "NUM001")
    assert f.title.startswith("The evaluation loss went non-finite at step") and f.title.endswith("(giou_val_loss)")
    assert f.symptom == "eval_nonfinite"
