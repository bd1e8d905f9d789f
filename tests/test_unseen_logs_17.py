"""Round 17 (2026-11-28): failures the fresh held-out sets showed misread, each fixed by a rule that holds for its family."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from detectors._common import _zeros_after_spike
from tests.test_unseen_logs import _run, _verdict

# https://github.com/tloen/alpaca-lora/issues/418 (a commenter's run, as pasted): LLaMA loaded in 8 bit under fp16, loss in
# the hundreds with the learning rate held at 0.0 (every step skipped by the fp16 scaler), a spike to 6.17e+07, then
# exactly 0.0 (HF's logging_nan_inf_filter over a window of NaN losses) and a NaN eval loss
ALPACA_LORA_418 = "{'loss': 537.5755, 'learning_rate': 0.0, 'epoch': 0.03}\n{'loss': 915.8001, 'learning_rate': 0.0, 'epoch': 0.05}\n{'loss': 1891.5977, 'learning_rate': 0.0, 'epoch': 0.08}\n{'loss': 425.8158, 'learning_rate': 0.0, 'epoch': 0.1}\n{'loss': 1528.4985, 'learning_rate': 0.0, 'epoch': 0.13}\n{'loss': 710.1057, 'learning_rate': 0.0, 'epoch': 0.15}\n{'loss': 2330.6316, 'learning_rate': 0.0, 'epoch': 0.18}\n{'loss': 717.576, 'learning_rate': 0.0, 'epoch': 0.21}\n{'loss': 1716.7686, 'learning_rate': 0.0, 'epoch': 0.23}\n{'loss': 1494.188, 'learning_rate': 0.0, 'epoch': 0.26}\n{'loss': 2697.4861, 'learning_rate': 0.0, 'epoch': 0.28}\n{'loss': 253.7281, 'learning_rate': 0.0, 'epoch': 0.31}\n{'loss': 906.3935, 'learning_rate': 0.0, 'epoch': 0.33}\n{'loss': 260.8695, 'learning_rate': 0.0, 'epoch': 0.36}\n{'loss': 61674848.0, 'learning_rate': 2.9999999999999997e-06, 'epoch': 0.39}\n{'loss': 0.0, 'learning_rate': 2.9999999999999997e-06, 'epoch': 0.41}\n{'loss': 0.0, 'learning_rate': 1.1999999999999999e-05, 'epoch': 0.44}\n{'loss': 0.0, 'learning_rate': 4.2e-05, 'epoch': 0.46}\n{'loss': 0.0, 'learning_rate': 7.199999999999999e-05, 'epoch': 0.49}\n{'loss': 0.0, 'learning_rate': 0.000102, 'epoch': 0.52}\n{'eval_loss': nan, 'eval_runtime': 147.7027, 'eval_samples_per_second': 13.541, 'eval_steps_per_second': 1.693, 'epoch': 0.52}\n"

# https://github.com/karpathy/nanoGPT/issues/84 (as pasted): torch.amp.autocast refuses bf16 on a card without it
NANOGPT_84 = 'PS F:\\downloads\\nanoGPT-master\\nanoGPT-master> python train.py --learning_rate=0.005 --wandb_log=True                   Overriding: learning_rate = 0.005\nOverriding: wandb_log = True\nTraceback (most recent call last):\n  File "train.py", line 101, in <module>\n    ctx = nullcontext() if device_type == \'cpu\' else torch.amp.autocast(device_type=device_type, dtype=ptdtype)\n  File "F:\\python3.8.10\\lib\\site-packages\\torch\\amp\\autocast_mode.py", line 225, in __init__\n    raise RuntimeError(\'Current CUDA Device does not support bfloat16. Please switch dtype to float16.\')\nRuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.\n'


def test_zeros_right_after_a_spike_are_hidden_nan_without_grad_norm(tmp_path: Path):
    a = _run(tmp_path, ALPACA_LORA_418)
    assert _verdict(a) == ("failed", "fp16_overflow")  # was lr_too_high, "diverged at step 20 (lr 0.000102)"
    codes = {f.code for f in a.diagnosis.findings}
    assert "NUM002" in codes  # the spike-then-zero shape, with no grad_norm to confirm the zeros
    assert "DATA002" not in codes  # the training was not finite: the eval NaN is not "eval batches without labels"
    (num,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num.first_step == 16  # the first hidden zero, not the eval NaN at step 20
    prec = [f for f in a.diagnosis.findings if f.code == "PREC001"][0]
    assert "learning_rate exactly 0 at the first 14 logs" in prec.message


def test_zeros_without_a_spike_before_them_are_not_hidden_nan():
    flat_zero = np.array([0.0, 0.0, 0.0, 0.0])  # nothing to learn from the start (all labels masked)
    assert not _zeros_after_spike(flat_zero).any()
    gradual = np.array([2.0, 1.0, 0.5, 0.1, 0.01, 0.0, 0.0])  # a loss that falls to 0 (memorised, degenerate labels)
    assert not _zeros_after_spike(gradual).any()
    single = np.array([2.0, 2.1, 1.9, 500.0, 0.0, 2.0])  # one 0.0 alone may be a rounding
    assert not _zeros_after_spike(single).any()
    spike = np.array([2.0, 2.1, 1.9, 2.0, 500.0, 0.0, 0.0, 0.0])
    assert _zeros_after_spike(spike).tolist() == [False] * 5 + [True] * 3


def test_lr_zero_stretch_outside_hf_or_deepspeed_is_no_fp16_signal(tmp_path: Path):
    # the same records as a generic "step N | loss X | lr Y" log: no trainer that holds its scheduler on a skipped step
    lines = [ln for ln in ALPACA_LORA_418.splitlines() if ln.startswith("{'loss'")]
    text = ""
    for i, ln in enumerate(lines, 1):
        d = eval(ln)  # noqa: S307 - the test's own literal
        text += f"step {i} | loss {d['loss']} | lr {d['learning_rate']}\n"
    a = _run(tmp_path, text)
    assert not [f for f in a.diagnosis.findings if f.code == "PREC001"]
    assert _verdict(a)[0] != "healthy"  # was healthy: "loss 537.6 -> 0 over 20 logged points, all finite"
    assert [f for f in a.diagnosis.findings if f.code == "NUM002"]


def test_torch_autocast_bf16_refusal_is_bf16_unsupported_hardware(tmp_path: Path):
    a = _run(tmp_path, NANOGPT_84)
    assert _verdict(a) == ("failed", "bf16_unsupported_hardware")  # was crash


def test_a_script_that_falls_back_from_bf16_is_no_failure(tmp_path: Path):
    # a training script's own fallback message (print(f"WARNING: CUDA device does not support bfloat16. Falling back to
    # float16.")), then a healthy loss
    text = ("WARNING: CUDA device does not support bfloat16. Falling back to float16.\n"
            + "".join(f"step {i} | loss {3.0 - i * 0.1:.3f}\n" for i in range(1, 12)))
    a = _run(tmp_path, text)
    assert _verdict(a)[1] != "bf16_unsupported_hardware"


# https://github.com/ruotianluo/pytorch-faster-rcnn/issues/105 (as pasted): 0-based VOC boxes under a loader that subtracts
# 1; rpn_loss_box alone turns NaN while the classification terms stay finite
FASTER_RCNN_105 = 'iter: 80 / 10000, total loss: 0.941651\n >>> rpn_loss_cls: 0.063259\n >>> rpn_loss_box: 0.815982\n >>> loss_cls: 0.047017\n >>> loss_box: 0.015394\n >>> lr: 0.001000\nspeed: 0.271s / iter\niter: 100 / 10000, total loss: 1.232251\n >>> rpn_loss_cls: 0.071523\n >>> rpn_loss_box: 1.027229\n >>> loss_cls: 0.096656\n >>> loss_box: 0.036843\n >>> lr: 0.001000\nspeed: 0.270s / iter\nWrote snapshot to: /home/hd006351/Documents/pytorch-faster-rcnn/output/vgg16/2018_train/default/vgg16_faster_rcnn_iter_101.pth\niter: 120 / 10000, total loss: 2.593077\n >>> rpn_loss_cls: 1.008498\n >>> rpn_loss_box: 1.346431\n >>> loss_cls: 0.186908\n >>> loss_box: 0.051240\n >>> lr: 0.000100\nspeed: 0.270s / iter\niter: 140 / 10000, total loss: nan\n >>> rpn_loss_cls: 0.682706\n >>> rpn_loss_box: nan\n >>> loss_cls: 0.000110\n >>> loss_box: 0.000000\n >>> lr: 0.000100\nspeed: 0.270s / iter\n'

# https://github.com/OpenNMT/OpenNMT/issues/122 (as pasted): the Lua OpenNMT's report lines, perplexity only
OPENNMT_LUA_122 = "Epoch 1 ; Iteration 74000/77776 ; Learning rate 1.0000 ; Source tokens/s 1270 ; Perplexity 14.64\nEpoch 1 ; Iteration 75000/77776 ; Learning rate 1.0000 ; Source tokens/s 1270 ; Perplexity 14.55\nEpoch 1 ; Iteration 76000/77776 ; Learning rate 1.0000 ; Source tokens/s 1270 ; Perplexity 14.46\nEpoch 1 ; Iteration 77000/77776 ; Learning rate 1.0000 ; Source tokens/s 1270 ; Perplexity 14.37\nValidation perplexity: 7.8701437591397\nSaving checkpoint to 'model-qrt/model-diff-0.5-0.8-10m_epoch1_7.87.t7'...\n\nEpoch 2 ; Iteration 1000/77776 ; Learning rate 1.0000 ; Source tokens/s 1274 ; Perplexity 8.29\nEpoch 2 ; Iteration 2000/77776 ; Learning rate 1.0000 ; Source tokens/s 1269 ; Perplexity 8.29\nEpoch 2 ; Iteration 3000/77776 ; Learning rate 1.0000 ; Source tokens/s 1270 ; Perplexity 8.29\nEpoch 2 ; Iteration 4000/77776 ; Learning rate 1.0000 ; Source tokens/s 1268 ; Perplexity 8.28\n"


def test_box_term_alone_nan_at_one_log_names_the_data(tmp_path: Path):
    a = _run(tmp_path, FASTER_RCNN_105)
    assert _verdict(a) == ("failed", "nan_in_data")  # was inconclusive
    (f,) = [f for f in a.diagnosis.findings if f.code == "DATA001"]
    assert f.title.startswith("Only rpn_loss_box goes non-finite (step 140)")
    assert "zero or negative width/height" in f.message


def test_a_classification_term_alone_at_one_log_is_not_enough(tmp_path: Path):
    text = FASTER_RCNN_105.replace(">>> rpn_loss_box: nan", ">>> rpn_loss_box: 0.912000").replace(
        ">>> rpn_loss_cls: 0.682706", ">>> rpn_loss_cls: nan")
    a = _run(tmp_path, text)
    assert not [f for f in a.diagnosis.findings if f.code == "DATA001"]


def test_lua_opennmt_report_lines_are_read(tmp_path: Path):
    a = _run(tmp_path, OPENNMT_LUA_122)
    df = a.run.scalars
    ppl = df[df["metric"] == "ppl"].sort_values("step")
    assert ppl["step"].tolist()[:2] == [74000, 75000] and ppl["value"].tolist()[:2] == [14.64, 14.55]
    assert ppl["step"].tolist()[4] == 77776 + 1000  # epoch 2 iteration 1000: the epoch's 77776 iterations before it
    assert _verdict(a) == ("healthy", "healthy")  # was nothing read
    assert "ppl 14.64 -> 8.28" in a.diagnosis.verdict.headline


def test_a_nan_perplexity_is_a_failure(tmp_path: Path):
    a = _run(tmp_path, OPENNMT_LUA_122.replace("Perplexity 8.28\n", "Perplexity nan\n"))
    assert _verdict(a)[0] != "healthy"


def test_box_regression_terms_are_told_from_other_box_heads():
    from detectors.nan_in_data import is_box_regression

    for name in ("rpn_loss_box", "loss_bbox", "loss_rpn_bbox", "loss_box_reg", "giou_loss", "loc_loss", "rpn_box"):
        assert is_box_regression(name), name
    # SeqNet's OIM re-id loss on the boxes (SeqNet#26: a torch-version bug) and a box head's classification
    for name in ("loss_box_reid", "loss_box_cls", "rpn_loss_cls", "loss_ce"):
        assert not is_box_regression(name), name


# https://github.com/microsoft/DeepSpeed/issues/5347 (as pasted): grad_norm tables whose one column is named after the run
DEEPSPEED_5347 = '**grad_norm, circle means NAN:**\n| Step | Stage2_1node_ds0.14.0 |\n|-----------------|-----------------|\n| 37   | 1.6166185140609741  |\n| 38   | 1.5178347826004028  |\n| 39   | NaN  |\n| 40   | 1.434411883354187  |\n| 41   | NaN  |\n| 42   | NaN  |\n\n| Step | Stage2_4node_ds0.14.0 |\n|-----------------|-----------------|\n| 0   | 23068.85156  |\n| 1   | 24.89443588256836  |\n| 2   | 22.727699279785156  |\n| 3   | 23.45322036743164  |\n| 4   | NaN  |\n| 5   | NaN  |\n\n| Step | Stage2_1node_ds0.14.0_smaller_lr |\n|-----------------|-----------------|\n| 113   | 1.500418203016511  |\n| 114   | 1.0031307797956182  |\n| 115   | 1.4142135623730951  |\n| 116   | 1.4142135623730951  |\n| 117   | 1.4142135623730951  |\n| 118   | 1.4142135623730951 |\n'

# https://github.com/open-mmlab/mmdetection/issues/930 (as pasted, one line): "there is no positive samples"
MMDET_930 = '2019-07-05 11:04:50,991 - INFO - Epoch [1][2250/18654]\tlr: 0.00250, eta: 2 days, 7:52:51, time: 1.009, data_time: 0.503, memory: 5589, loss_rpn_cls: 0.0000, loss_rpn_bbox: 0.0000, loss_cls: 0.0097, acc: 99.7949, loss_bbox: 0.0000, loss: 0.0097\n'


def test_a_series_that_goes_nan_is_a_failure_when_no_loss_is_named(tmp_path: Path):
    a = _run(tmp_path, DEEPSPEED_5347)
    assert _verdict(a)[0] != "healthy"  # was healthy, "No failure found in the artifacts read"
    (f,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "Stage2_" in f.message


def test_a_nan_accuracy_alone_stays_no_failure(tmp_path: Path):
    # a table of per-evaluation accuracy where one evaluation had no sample of a class: NaN there is no training failure
    text = "| Step | val_acc |\n|---|---|\n| 1 | 0.50 |\n| 2 | 0.61 |\n| 3 | NaN |\n| 4 | 0.66 |\n"
    a = _run(tmp_path, text)
    assert not [f for f in a.diagnosis.findings if f.code == "NUM001"]


def test_two_box_heads_exactly_zero_in_one_log_are_no_positive_samples(tmp_path: Path):
    a = _run(tmp_path, MMDET_930)
    assert _verdict(a) == ("failed", "all_labels_masked")  # was healthy
    (f,) = [f for f in a.diagnosis.findings if f.code == "LBL001"]
    assert "loss_bbox" in f.message and "loss_rpn_bbox" in f.message


def test_one_box_head_zero_in_one_log_is_not_enough(tmp_path: Path):
    a = _run(tmp_path, MMDET_930.replace("loss_rpn_bbox: 0.0000", "loss_rpn_bbox: 0.0312"))
    assert not [f for f in a.diagnosis.findings if f.code == "LBL001"]


# https://github.com/tensorpack/tensorpack/issues/404 (as pasted): TF's histogram summary of a weight found NaN
TENSORPACK_404 = 'InvalidArgumentError (see above for traceback): Nan in summary histogram for: param-summary/res2.2/conv1/W\n\t [[Node: param-summary/res2.2/conv1/W = HistogramSummary[T=DT_FLOAT, _device="/job:localhost/replica:0/task:0/cpu:0"](param-summary/res2.2/conv1/W/tag, res2.2/conv1/W/read/_145)]]\n'


def test_a_nan_histogram_names_the_variable_not_a_loss(tmp_path: Path):
    a = _run(tmp_path, TENSORPACK_404)
    (f,) = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert "param-summary/res2.2/conv1/W" in f.message and ": loss (" not in f.message  # was "...: loss (and it stays"


# https://discuss.pytorch.org/t/cross-entropy-loss-is-not-decreasing/43814/16 (a later poster's run, as pasted): an MLP on
# 10 classes whose epoch loss never leaves ln(10) (dead ReLUs)
TORCH_FORUM_43814 = 'epoch 0 loss = 2.308579206466675\nepoch 1 loss = 2.297269344329834\nepoch 2 loss = 2.3083386421203613\nepoch 3 loss = 2.3027005195617676\nepoch 4 loss = 2.304455518722534\nepoch 5 loss = 2.305694341659546\n'


def test_an_epoch_loss_at_ln_k_from_the_start_is_stuck_at_chance(tmp_path: Path):
    a = _run(tmp_path, TORCH_FORUM_43814)
    assert _verdict(a)[0] != "healthy"  # was healthy: "loss 2.309 -> 2.306 over 6 logged points"
    (f,) = [f for f in a.diagnosis.findings if f.code == "FLAT001"]
    assert "ln(10)" in f.title


def test_a_loss_that_leaves_ln_k_is_not_stuck(tmp_path: Path):
    # the same print, a run that learns: it starts at ln(10) and falls
    text = "".join(f"epoch {i} loss = {v}\n" for i, v in enumerate((2.3031, 2.2950, 2.2801, 2.2512, 2.2010, 2.1233)))
    a = _run(tmp_path, text)
    assert not [f for f in a.diagnosis.findings if f.code == "FLAT001"]
    # and a noisy one around ln(10) that is only four logs long
    a = _run(tmp_path, "".join(f"epoch {i} loss = {v}\n" for i, v in enumerate((2.3086, 2.2973, 2.3083, 2.3027))))
    assert not [f for f in a.diagnosis.findings if f.code == "FLAT001"]


# https://github.com/scikit-learn/scikit-learn/pull/31856 (the "before" output quoted in the fix, epochs 1-3): SGD's verbose
# lines, a one-class SVM whose hinge loss averages 0
SKLEARN_31856 = '10k samples, 1000 features\n-- Epoch 1\nNorm: 0.95, NNZs: 1000, Bias: -5.741972, T: 10000, Avg. loss: 0.000000\nTotal training time: 0.01 seconds.\n-- Epoch 2\nNorm: 0.47, NNZs: 1000, Bias: -7.123019, T: 20000, Avg. loss: 0.000000\nTotal training time: 0.02 seconds.\n-- Epoch 3\nNorm: 0.32, NNZs: 1000, Bias: -7.932197, T: 30000, Avg. loss: 0.000000\nTotal training time: 0.03 seconds.\n'


def test_a_zero_loss_outside_token_lms_is_told_in_its_own_terms(tmp_path: Path):
    a = _run(tmp_path, SKLEARN_31856)
    (f,) = [f for f in a.diagnosis.findings if f.code == "LBL001"]
    assert "supervised tokens" not in f.title and "hinge loss" in f.message  # was "the loss has no supervised tokens"
    assert not any("template" in r or "max_length" in r for r in f.remedies)
    assert f.confidence <= 0.5
