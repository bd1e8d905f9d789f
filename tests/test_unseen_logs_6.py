"""Shapes from the sixth round of unseen logs (eval/held_out_6a, 6b; each thread quoted with its source): what the
diagnosis got wrong, asserted on what the shape means, so cousins pass too."""

from __future__ import annotations

from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict

# -- "labels all -100" only explains runs that have token labels ------------------------------------------------

# https://github.com/endernewton/tf-faster-rcnn/issues/458 (TF1 Faster R-CNN, lr 0.01: the total is NaN from the first
# print while the printed terms are finite; the detail lines are trimmed to the header here, and kept below)
TF_FASTER_RCNN_FULL = """\
iter: 20 / 70000, total loss: nan
 >>> rpn_loss_cls: 0.648382
 >>> rpn_loss_box: 0.045217
 >>> loss_cls: 2.149889
 >>> loss_box: 0.199051
 >>> lr: 0.010000
speed: 0.794s / iter
iter: 40 / 70000, total loss: nan
 >>> rpn_loss_cls: 0.574709
 >>> rpn_loss_box: 0.317064
 >>> loss_cls: 0.000009
 >>> loss_box: 0.000000
 >>> lr: 0.010000
speed: 0.524s / iter
"""
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


# -- batch counters of hand-written loops ------------------------------------------------------------------------

# https://github.com/dmlc/gluon-cv/issues/366 (GluonCV train_yolo3.py: "[Epoch e][Batch b], LR: ..., ObjLoss=..."; every
# term NaN from the first print)
GLUONCV = """\
INFO:root:[Epoch 0][Batch 99], LR: 5.99E-05, Speed: 31.597 samples/sec, ObjLoss=nan, BoxCenterLoss=nan, BoxScaleLoss=nan, ClassLoss=nan
INFO:root:[Epoch 0][Batch 199], LR: 1.20E-04, Speed: 32.253 samples/sec, ObjLoss=nan, BoxCenterLoss=nan, BoxScaleLoss=nan, ClassLoss=nan
INFO:root:[Epoch 0][Batch 299], LR: 1.81E-04, Speed: 31.947 samples/sec, ObjLoss=nan, BoxCenterLoss=nan, BoxScaleLoss=nan, ClassLoss=nan
"""
# https://github.com/akanimax/BMSG-GAN/issues/40 (a GAN loop: "Elapsed [...] batch: N  d_loss: x  g_loss: y")
GAN = """\
Elapsed [0:05:20.807550] batch: 252  d_loss: 0.000000  g_loss: 9.195433
Elapsed [0:05:32.021947] batch: 261  d_loss: 0.000000  g_loss: 9.544848
Elapsed [0:05:43.313830] batch: 270  d_loss: 0.000000  g_loss: 8.533874
"""


def test_epoch_batch_rows_are_read_at_their_batch(tmp_path: Path):
    a = _run(tmp_path, GLUONCV)
    df = a.run.scalars
    assert df[df["metric"] == "ObjLoss"]["step"].tolist() == [99, 199, 299]
    assert _series(a, "learning_rate") == [5.99e-05, 1.20e-04, 1.81e-04]


def test_camel_case_loss_terms_all_nan_are_never_healthy(tmp_path: Path):
    a = _run(tmp_path, GLUONCV)
    assert _verdict(a)[0] != "healthy"


def test_a_batch_counter_without_epoch_counts_from_the_start(tmp_path: Path):
    a = _run(tmp_path, GAN)
    df = a.run.scalars
    assert df[df["metric"] == "g_loss"][["step", "value"]].values.tolist()[0] == [252, 9.195433]
    assert _series(a, "d_loss") == [0.0, 0.0, 0.0]


def test_batch_size_is_not_a_batch_counter(tmp_path: Path):
    a = _run(tmp_path, "batch size: 32, loss: 0.5 is what we expect\n")
    assert a.run.scalars.empty or "loss" not in set(a.run.scalars["metric"])


# -- NaN gradients that never reached the weights ----------------------------------------------------------------

# https://github.com/InternLM/xtuner/issues/187 (QLoRA, mmengine AMP: "grad_norm: nan" at two logs while the loss keeps
# falling: the scaler skipped those steps)
XTUNER = """\
10/30 22:18:02 - mmengine - INFO - Epoch(train) [1][200/735]  lr: 1.9870e-04  eta: 2:46:39  time: 2.8906  data_time: 0.0042  memory: 10762  loss: 2.7522  grad_norm: 3.0608
10/30 22:18:30 - mmengine - INFO - Epoch(train) [1][210/735]  lr: 1.9857e-04  eta: 2:46:12  time: 2.8865  data_time: 0.0041  memory: 10762  loss: 2.6150  grad_norm: 2.7647
10/30 22:18:59 - mmengine - INFO - Epoch(train) [1][220/735]  lr: 1.9843e-04  eta: 2:45:44  time: 2.8826  data_time: 0.0040  memory: 10762  loss: 2.6687  grad_norm: 2.7647
10/30 22:19:28 - mmengine - INFO - Epoch(train) [1][230/735]  lr: 1.9828e-04  eta: 2:45:16  time: 2.8833  data_time: 0.0040  memory: 10762  loss: 2.7682  grad_norm: 2.5099
10/30 22:19:57 - mmengine - INFO - Epoch(train) [1][240/735]  lr: 1.9813e-04  eta: 2:44:49  time: 2.8874  data_time: 0.0042  memory: 10762  loss: 2.5128  grad_norm: nan
10/30 22:20:26 - mmengine - INFO - Epoch(train) [1][250/735]  lr: 1.9797e-04  eta: 2:44:21  time: 2.8906  data_time: 0.0039  memory: 10762  loss: 2.4566  grad_norm: nan
"""


def test_nan_grad_norm_with_the_loss_still_finite_and_falling_after_it_is_skipped_steps(tmp_path: Path):
    a = _run(tmp_path, XTUNER)
    assert _verdict(a)[0] == "healthy"
    warn = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert warn and warn[0].severity == "warning" and "never reached the weights" in warn[0].message
    assert any(e.detail.startswith("loss 2.457 at step 250") for e in warn[0].evidence)  # the loss the claim rests on


def test_nan_grad_norm_followed_by_a_nan_loss_was_applied(tmp_path: Path):
    # the same lines with the last loss NaN (an applied NaN update): a failure from step 240
    applied = XTUNER.replace("loss: 2.4566  grad_norm: nan", "loss: nan  grad_norm: nan")
    a = _run(tmp_path, applied)
    assert _verdict(a)[0] == "failed"


# -- a loss exactly 0.0 from the first records; a development build -------------------------------------------------

# https://github.com/huggingface/accelerate/issues/1763 (FSDP on accelerate's main branch: the first two records, and the
# reporter's system info)
ACCELERATE_ZERO = ("{'loss': 0.0, 'learning_rate': 3.0000000000000004e-08, 'epoch': 0.0}\n"
                   "{'loss': 0.0, 'learning_rate': 1.2000000000000002e-07, 'epoch': 0.0}\n")
ACCELERATE_INFO = ("- `Accelerate` version: 0.22.0.dev0\n- Platform: Linux-5.4.0-148-generic-x86_64-with-glibc2.35\n"
                   "- PyTorch version (GPU?): 2.0.1+cu117 (True)\n- GPU type: NVIDIA A100 80GB PCIe\n")


def test_two_records_of_loss_exactly_zero_at_the_start_are_not_healthy(tmp_path: Path):
    a = _run(tmp_path, ACCELERATE_ZERO, config=ACCELERATE_INFO)
    assert _verdict(a)[0] != "healthy"
    codes = {f.code: f for f in a.diagnosis.findings}
    assert "LBL001" in codes
    dev = codes.get("FW001")
    assert dev is not None and "0.22.0.dev0" in dev.title and dev.root_cause == "framework_bug"


def test_a_development_build_alone_is_not_a_finding(tmp_path: Path):
    a = _run(tmp_path, XTUNER, config=ACCELERATE_INFO)  # a healthy run (above) on a dev build
    assert _verdict(a)[0] == "healthy"
    assert not [f for f in a.diagnosis.findings if f.code == "FW001"]


# -- fixed-width tables with blank cells (chainer's PrintReport, ESPnet1) -------------------------------------------

# https://github.com/espnet/espnet/issues/4092 (ESPnet1 transducer: validation columns blank between validations)
ESPNET1 = """\
epoch       iteration   main/loss   validation/main/loss  main/loss_trans  validation/main/loss_trans  elapsed_time  validation/main/cer  validation/main/wer
0           100         0.0183482                         0.0183482                                    123.279
0           200         -0.00548435                        -0.00548435                                  236.267
0           300         -0.0430187                        -0.0430187                                   348.067
"""


def test_a_fixed_width_table_with_blank_cells_keeps_each_value_under_its_header(tmp_path: Path):
    a = _run(tmp_path, ESPNET1)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")  # chainer's main/loss
    assert loss[["step", "value"]].values.tolist() == [[100, 0.0183482], [200, -0.00548435], [300, -0.0430187]]
    assert _series(a, "main/loss_trans") == [0.0183482, -0.00548435, -0.0430187]
    assert _series(a, "elapsed_time") == [123.279, 236.267, 348.067]
    assert "eval_loss" not in set(df["metric"]) and "epoch" not in set(df["metric"])


# -- fp16 on a card whose half precision gives NaN -----------------------------------------------------------------

# https://github.com/ultralytics/ultralytics/issues/17812 (YOLO11 on a GTX 1660, AMP on: NaN losses; the paste stops at
# the epoch header). The cards: ultralytics PR #17977 ("Hardcode failing GPUs in AMP checks")
ULTRA_1660 = """\
Ultralytics 8.3.38 \U0001f680 Python-3.11.9 torch-2.5.1+cu118 CUDA:0 (NVIDIA GeForce GTX 1660, 6144MiB)
AMP: running Automatic Mixed Precision (AMP) checks...
AMP: checks passed \u2705
Starting training for 20 epochs...
"""
# ultralytics' console rows (engine/trainer.py progress bar under its header), finite and NaN
YOLO_ROWS = ("      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
             "        1/3      2.61G      1.218      1.408      1.208        167        640: 100%| 8/8 [00:02<00:00,  3.12it/s]\n"
             "        2/3      2.63G      1.201      1.350      1.190        160        640: 100%| 8/8 [00:02<00:00,  3.12it/s]\n")


def test_fp16_on_a_gtx_1660_is_named_when_nothing_else_was_logged(tmp_path: Path):
    a = _run(tmp_path, ULTRA_1660)
    assert _verdict(a) == ("failed", "fp16_unsupported_hardware")


def test_fp16_on_a_gtx_1660_with_nan_losses_is_named(tmp_path: Path):
    a = _run(tmp_path, ULTRA_1660 + YOLO_ROWS.replace("1.201      1.350      1.190", "  nan        nan        nan"))
    assert _verdict(a) == ("failed", "fp16_unsupported_hardware")
    hw = [f for f in a.diagnosis.findings if f.code == "HW002"]
    assert hw and hw[0].confidence == 0.8


def test_fp16_on_a_gtx_1660_with_finite_losses_is_left_alone(tmp_path: Path):
    a = _run(tmp_path, ULTRA_1660 + YOLO_ROWS)
    assert not [f for f in a.diagnosis.findings if f.code == "HW002"]
    assert _verdict(a)[0] == "healthy"


def test_fp32_on_a_gtx_1660_is_left_alone(tmp_path: Path):
    a = _run(tmp_path, ULTRA_1660.replace("AMP: checks passed \u2705", "AMP: checks failed \u274c, disabling AMP"))
    assert not [f for f in a.diagnosis.findings if f.code == "HW002"]


# -- a loose loss line keeps its layout when a value turns NaN; its *_loss terms are read -----------------------------

# https://github.com/JJBOY/BMN-Boundary-Matching-Network/issues/22 (the terms print beside the total; one goes NaN first)
BMN = """\
BMN training loss(epoch 0): tem_loss: 1.184, pem class_loss: 0.458, pem reg_loss: 0.024, total_loss: 1.883
BMN training loss(epoch 0): tem_loss: 1.184, pem class_loss: 0.458, pem reg_loss: 0.024, total_loss: 1.884
BMN training loss(epoch 0): tem_loss: 1.184, pem class_loss: nan, pem reg_loss: 0.024, total_loss: nan
BMN training loss(epoch 0): tem_loss: nan, pem class_loss: nan, pem reg_loss: 0.024, total_loss: nan
"""


def test_loose_loss_lines_whose_values_turn_nan_are_one_layout_with_their_terms(tmp_path: Path):
    a = _run(tmp_path, BMN)
    loss = _series(a, "loss")
    assert loss[:2] == [1.883, 1.884] and len(loss) == 4
    assert _series(a, "class_loss")[:2] == [0.458, 0.458] and _series(a, "reg_loss") == [0.024] * 4
    assert _verdict(a)[0] == "failed"  # one term NaN while the others compute: the data, not the optimisation
    data = [f for f in a.diagnosis.findings if f.code == "DATA001"]
    # tem_loss follows class_loss into NaN at the next log: only reg_loss stays finite through both
    assert data and data[0].title == "class_loss goes non-finite first (steps 3..4); reg_loss stays finite"


def test_one_pair_detail_lines_under_a_step_line_take_its_step(tmp_path: Path):
    a = _run(tmp_path, TF_FASTER_RCNN_FULL)
    df = a.run.scalars
    assert df[df["metric"] == "rpn_loss_cls"][["step", "value"]].values.tolist() == [[20, 0.648382], [40, 0.574709]]
    assert _series(a, "loss_box") == [0.199051, 0.0]
    assert _series(a, "learning_rate") == [0.01, 0.01]
    assert _verdict(a)[1] != "all_labels_masked"


def test_one_pair_lines_under_no_step_line_are_left_alone(tmp_path: Path):
    block = "".join(line + "\n" for line in TF_FASTER_RCNN_FULL.splitlines() if line.startswith(" >>> "))
    a = _run(tmp_path, "Training settings:\n" + block)
    assert a.run.scalars.empty or "rpn_loss_cls" not in set(a.run.scalars["metric"])


def test_skipped_amp_steps_on_a_gtx_1660_are_not_its_fp16_failure(tmp_path: Path):
    # the xtuner rows above (grad_norm NaN twice, the loss finite and falling) under the 1660's AMP lines: the scaler
    # skipping steps, which NUM001 calls normal, is no evidence that this card's fp16 gives NaN losses
    a = _run(tmp_path, ULTRA_1660 + XTUNER)
    assert not [f for f in a.diagnosis.findings if f.code == "HW002"]
