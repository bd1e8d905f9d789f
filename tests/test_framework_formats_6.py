"""Console formats of frameworks the reader did not know (OpenNMT-py, darknet, MXNet, ESPnet2), each from a
thread's pasted log (source above each) and checked against the framework's own print format (noted in
``autopsy/ingest/text_formats.py``): the points land at the step the framework counts, NaN is kept."""

from __future__ import annotations

import math
from pathlib import Path

from autopsy.ingest.text_formats import epoch_step
from autopsy.ingest.text_metrics import StepState
from tests.test_unseen_logs import _run, _series, _verdict

# https://github.com/OpenNMT/OpenNMT-py/issues/1072 (onmt 0.x, Statistics.output with train_steps set)
ONMT_STEPS = """\
[2018-11-26 14:59:57,699 INFO] Step 5550/50000; acc:  47.00; ppl: 10.46; xent: 2.35; lr: 0.00069; 1851/1358 tok/s;  20746 sec
[2018-11-26 15:02:57,162 INFO] Step 5600/50000; acc:  47.14; ppl:  9.83; xent: 2.29; lr: 0.00069; 1065/1591 tok/s;  20926 sec
[2018-11-26 15:06:01,481 INFO] Step 5650/50000; acc:   0.19; ppl:   nan; xent:  nan; lr: 0.00070; 1928/2310 tok/s;  21110 sec
[2018-11-26 15:09:00,598 INFO] Step 5700/50000; acc:   0.17; ppl:   nan; xent:  nan; lr: 0.00070; 1827/2180 tok/s;  21289 sec
[2018-11-26 15:09:03,577 INFO] Loading train dataset from ./disc_data/data.train.1.pt, number of examples: 221287
[2018-11-26 15:12:08,893 INFO] Step 5750/50000; acc:   0.12; ppl:   nan; xent:  nan; lr: 0.00071; 1664/2365 tok/s;  21477 sec
"""

# https://github.com/OpenNMT/OpenNMT-py/issues/709 (before 0.4: "Epoch %2d, %5d/%5d;", batches counted per epoch)
ONMT_EPOCHS = """\
Epoch  1, 12850/37527; acc:   3.99; ppl: 12792.57; xent:   9.46; 3438 src tok/s; 3517 tgt tok/s;   9823 s elapsed
Epoch  1, 12900/37527; acc:   4.48; ppl: 35173.75; xent:  10.47; 3599 src tok/s; 3678 tgt tok/s;   9861 s elapsed
Epoch  2,    50/37527; acc:   4.50; ppl: 42885.19; xent:  10.67; 3594 src tok/s; 3678 tgt tok/s;   9897 s elapsed
"""


def test_opennmt_step_lines_give_xent_as_the_loss_and_the_nan_onset(tmp_path: Path):
    a = _run(tmp_path, ONMT_STEPS)
    loss = _series(a, "loss")
    assert loss[:2] == [2.35, 2.29] and all(math.isnan(x) for x in loss[2:]) and len(loss) == 5
    assert _series(a, "learning_rate")[0] == 0.00069
    df = a.run.scalars
    assert sorted(df[df["metric"] == "loss"]["step"].tolist()) == [5550, 5600, 5650, 5700, 5750]
    assert _verdict(a)[0] != "healthy"
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and num[0].first_step == 5650


def test_opennmt_epoch_lines_count_batches_across_epochs(tmp_path: Path):
    a = _run(tmp_path, ONMT_EPOCHS)
    df = a.run.scalars
    assert sorted(df[df["metric"] == "loss"]["step"].tolist()) == [12850, 12900, 37527 + 50]
    assert _series(a, "ppl")[-1] == 42885.19


def test_a_sentence_about_accuracy_is_not_an_opennmt_row(tmp_path: Path):
    a = _run(tmp_path, "Step 3 of the tutorial; acc: high enough, ppl: fine\n")
    assert a.run.scalars.empty


# https://github.com/AlexeyAB/darknet/issues/2996 (AlexeyAB detector.c: "%d: %f, %f avg loss, %f rate, ...")
DARKNET_ALEXEYAB = """\
 74: -nan, -nan avg loss, 0.000100 rate, 39.074849 seconds, 1776 images
Loaded: 0.000095 seconds
Region Avg IOU: nan, Class: nan, Obj: nan, No Obj: nan, Avg Recall: 0.000000,  count: 2
Region Avg IOU: nan, Class: nan, Obj: -nan, No Obj: nan, Avg Recall: 0.000000,  count: 2

 75: -nan, -nan avg loss, 0.000100 rate, 40.009583 seconds, 1800 images
Loaded: 0.000060 seconds
"""
# https://github.com/AlexeyAB/darknet/issues/786 (the pjreddie form: "avg" without "loss")
DARKNET_PJREDDIE = " 2267: nan, nan avg, 0.001000 rate, 3.430528 seconds, 145088 images\n"


def test_darknet_iteration_lines_keep_the_nan_loss(tmp_path: Path):
    a = _run(tmp_path, DARKNET_ALEXEYAB)
    df = a.run.scalars
    assert sorted(df[df["metric"] == "loss"]["step"].tolist()) == [74, 75]
    assert all(math.isnan(x) for x in _series(a, "loss") + _series(a, "avg_loss"))
    assert _series(a, "learning_rate") == [0.0001, 0.0001]
    assert _verdict(a)[0] != "healthy"


def test_darknet_pjreddie_line_is_read(tmp_path: Path):
    a = _run(tmp_path, DARKNET_PJREDDIE)
    assert math.isnan(_series(a, "loss")[0])
    assert _series(a, "learning_rate") == [0.001]


# https://github.com/apache/mxnet/issues/4900 (Module.fit + Speedometer, MXNet 0.9: "Train-" metric names)
MXNET_FIT = """\
INFO:root:Epoch[0] Batch [800]  Speed: 14336.24 samples/sec     Train-accuracy=0.945000
INFO:root:Epoch[0] Batch [900]  Speed: 14762.29 samples/sec     Train-accuracy=0.950313
INFO:root:Epoch[0] Resetting Data Iterator
INFO:root:Epoch[0] Time cost=28.650
INFO:root:Epoch[0] Validation-accuracy=0.958002
INFO:root:Epoch[1] Batch [100]  Speed: 12488.17 samples/sec     Train-accuracy=0.954219
INFO:root:Epoch[1] Batch [200]  Speed: 11174.90 samples/sec     Train-accuracy=0.953281
"""
# https://github.com/NervanaSystems/ngraph-mxnet/pull/378 (SSD: two loss metrics, tab-separated)
MXNET_SSD = "INFO:root:Epoch[0] Batch [10]\tSpeed: 3.22 samples/sec\tCrossEntropy=4.200497\tSmoothL1=0.816728\n"


def test_mxnet_speedometer_rows_count_batches_across_epochs(tmp_path: Path):
    a = _run(tmp_path, MXNET_FIT)
    df = a.run.scalars
    assert sorted(df[df["metric"] == "accuracy"]["step"].tolist()) == [800, 900, 1000, 1100]
    ev = df[df["metric"] == "eval_accuracy"]
    assert ev["step"].tolist() == [900] and ev["value"].tolist() == [0.958002]  # at the end of epoch 0


def test_mxnet_cross_entropy_metric_is_the_loss(tmp_path: Path):
    a = _run(tmp_path, MXNET_SSD)
    assert _series(a, "loss") == [4.200497]
    assert _series(a, "SmoothL1") == [0.816728]


# https://github.com/espnet/espnet/issues/2674 (espnet2 LM training: SubReporter rows, Reporter epoch results)
ESPNET = """\
[PC] 2020-11-11 16:30:09,675 (trainer:486) INFO: 1epoch:train:6751-7125batch: iter_time=0.001, forward_time=0.005, loss=2.367, backward_time=0.005, optim_step_time=1.953e-04, lr_0=0.100, train_time=0.013
[PC] 2020-11-11 16:30:14,840 (trainer:486) INFO: 1epoch:train:7126-7500batch: iter_time=0.001, forward_time=0.005, loss=2.339, backward_time=0.005, optim_step_time=1.963e-04, lr_0=0.100, train_time=0.014
[PC] 2020-11-11 16:30:18,406 (trainer:243) INFO: 1epoch results: [train] iter_time=0.001, forward_time=0.005, loss=2.853, backward_time=0.005, optim_step_time=1.974e-04, lr_0=0.100, train_time=0.013, time=1 minute and 42.6 seconds, total_count=7507, [valid] loss=2.387, time=3 seconds, total_count=240, [att_plot] time=0.28 seconds, total_count=0
[PC] 2020-11-11 16:30:18,969 (trainer:286) INFO: The best model has been updated: valid.loss
[PC] 2020-11-11 16:30:18,969 (trainer:184) INFO: 2/20epoch started. Estimated time to finish: 33 minutes and 42.59 seconds
[PC] 2020-11-11 16:30:24,312 (trainer:486) INFO: 2epoch:train:1-375batch: iter_time=0.001, forward_time=0.005, loss=2.313, backward_time=0.005, optim_step_time=2.000e-04, lr_0=0.100, train_time=0.014
"""


def test_espnet2_rows_and_epoch_results(tmp_path: Path):
    a = _run(tmp_path, ESPNET)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [7125, 7500, 7875] and loss["value"].tolist() == [2.367, 2.339, 2.313]
    assert df[df["metric"] == "eval_loss"][["step", "value"]].values.tolist() == [[7500, 2.387]]
    assert _series(a, "learning_rate")[0] == 0.1
    assert not df["metric"].str.endswith("_time").any() and "total_count" not in set(df["metric"])
    assert _verdict(a)[0] == "healthy"


def test_espnet2_nan_row_is_never_healthy(tmp_path: Path):
    nan_row = ESPNET.replace("2epoch:train:1-375batch: iter_time=0.001, forward_time=0.005, loss=2.313",
                             "2epoch:train:1-375batch: iter_time=0.001, forward_time=0.005, loss=nan")
    a = _run(tmp_path, nan_row)
    assert math.isnan(_series(a, "loss")[-1])
    assert _verdict(a)[0] != "healthy"


def test_epoch_step_adds_the_batches_of_earlier_epochs_and_restarts_on_a_rerun():
    st = StepState()
    assert [epoch_step(st, "f", 0, b) for b in (100, 200)] == [100, 200]
    assert epoch_step(st, "f", 1, 100) == 300
    assert epoch_step(st, "f", 0, 100) == 100  # epoch 0 again: a rerun pasted below


# https://github.com/facebookresearch/maskrcnn-benchmark/issues/1347 (a hand-written loop printing its summed losses)
LOSSES_EXPLODE = """\
iteration : 1, losses : 39.65670394897461
iteration : 2, losses : 22.218917846679688
iteration : 3, losses : 68.60948944091797
iteration : 4, losses : 1266.863037109375
iteration : 5, losses : 332.03045654296875
iteration : 6, losses : 1436176.25
iteration : 7, losses : nan
iteration : 8, losses : nan
iteration : 9, losses : nan
iteration : 10, losses : nan
"""


def test_a_summed_losses_key_is_the_loss_when_no_loss_is_logged(tmp_path: Path):
    a = _run(tmp_path, LOSSES_EXPLODE)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"]
    assert len(loss) == 10 and set(loss["key"].astype(str)) == {"losses"}  # the original key is kept
    assert _verdict(a) == ("failed", "lr_too_high")  # x36,000 growth, then NaN: divergence


def test_a_total_beside_a_logged_loss_is_not_promoted(tmp_path: Path):
    log = "".join(f"step {i} | loss {2.0 - i / 10:.2f} | total_loss {9.0 - i / 10:.2f}\n" for i in range(1, 6))
    a = _run(tmp_path, log)
    assert _series(a, "loss") == [1.9, 1.8, 1.7, 1.6, 1.5]
    assert _series(a, "total_loss") == [8.9, 8.8, 8.7, 8.6, 8.5]


# Detectron (Caffe2) ``log_json_stats``: floats printed as '{:.6f}' strings; the record quoted from a tutorial in
# the public code index (a Detectron Mask R-CNN training's last line); NaN as Detectron prints float('nan') that way
DETECTRON_JSON = ('json_stats: {"accuracy_cls": "1.000000", "eta": "0:00:00", "iter": 89999, "loss": "0.017020", '
                  '"loss_bbox": "0.000918", "loss_cls": "0.001638", "loss_mask": "0.013256", "lr": "0.000200", '
                  '"mb_qsize": 64, "mem": 6802, "time": "0.358213"}\n')


def test_detectron_json_stats_records_are_read_with_string_numbers(tmp_path: Path):
    nan_rec = DETECTRON_JSON.replace('"iter": 89999', '"iter": 90019').replace('"loss": "0.017020"', '"loss": "nan"')
    a = _run(tmp_path, DETECTRON_JSON + nan_rec)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [89999, 90019]
    assert loss["value"].iloc[0] == 0.01702 and math.isnan(loss["value"].iloc[1])
    assert _series(a, "learning_rate") == [0.0002, 0.0002]
    assert not {"mem", "mb_qsize", "time", "eta"} & set(df["metric"])


# PySlowFast ``TrainMeter.log_iter_stats`` (``"epoch": "{cur}/{max}"``, ``"iter": "{cur}/{epoch_iters}"``): the sample
# log of an EPIC-KITCHENS SlowFast README in the public code index, quoted
SLOWFAST = ('[05/03 12:00:12][INFO] logging.py:  99: json_stats: {"_type": "train_iter", "dt_data": 0.01517, "dt_diff": '
            '0.55199, "dt_net": 0.53681, "epoch": "8/30", "eta": "1:12:41", "gpu_mem": "5.22G", "iter": "10/344", "loss": '
            '1.63013, "lr": 0.01000, "mem": 6, "noun_loss": 1.70481, "noun_top1_acc": 56.25000, "noun_top5_acc": 84.37500, '
            '"top1_acc": 37.50000, "top5_acc": 81.25000, "verb_loss": 1.72457, "verb_top1_acc": 43.75000, "verb_top5_acc": '
            '90.62500}\n')


def test_pyslowfast_json_stats_train_iter_counts_iterations_across_epochs(tmp_path: Path):
    a = _run(tmp_path, SLOWFAST)
    df = a.run.scalars
    assert df[df["metric"] == "loss"][["step", "value"]].values.tolist() == [[7 * 344 + 10, 1.63013]]
    assert _series(a, "verb_loss") == [1.72457] and _series(a, "learning_rate") == [0.01]
    assert not df["metric"].str.startswith("dt").any() and "gpu_mem" not in set(df["metric"])


# https://github.com/wenet-e2e/wenet/issues/941 (4 GPUs: each rank prints its row; "Batch {epoch}/{batch_idx}")
WENET = """\
2023-01-30 18:47:07,107 DEBUG TRAIN Batch 4/203700 loss 12.646465 loss_att 10.921429 loss_ctc 16.671551 lr 0.00032621 rank 0
2023-01-30 18:47:16,614 DEBUG TRAIN Batch 4/203700 loss 16.885244 loss_att 13.554604 loss_ctc 24.656742 lr 0.00032621 rank 1
2023-01-30 18:47:22,712 DEBUG TRAIN Batch 4/203700 loss 19.729301 loss_att 16.203592 loss_ctc 27.955961 lr 0.00032621 rank 2
2023-01-30 18:49:20,301 DEBUG TRAIN Batch 4/203800 loss 23.600426 loss_att 18.615641 loss_ctc 35.231586 lr 0.00032619 rank 2
2023-01-30 18:49:20,315 DEBUG TRAIN Batch 4/203800 loss 18.340179 loss_att 15.005867 loss_ctc 26.120243 lr 0.00032619 rank 1
2023-01-30 18:49:20,438 DEBUG TRAIN Batch 4/203800 loss 25.618004 loss_att 20.509174 loss_ctc 37.538609 lr 0.00032619 rank 0
2023-01-30 18:49:55,773 DEBUG CV Batch 4/0 loss 28.517015 loss_att 24.142754 loss_ctc 38.723625 history loss 27.957858 rank 2
2023-01-30 18:49:56,046 DEBUG CV Batch 4/0 loss 28.402842 loss_att 24.164579 loss_ctc 38.292122 history loss 27.845923 rank 0
"""


def test_wenet_rows_keep_rank_zero_and_cv_as_evaluation(tmp_path: Path):
    a = _run(tmp_path, WENET)
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss[["step", "value"]].values.tolist() == [[203700, 12.646465], [203800, 25.618004]]
    assert _series(a, "loss_ctc") == [16.671551, 37.538609]
    assert _series(a, "learning_rate") == [0.00032621, 0.00032619]
    assert df[df["metric"] == "eval_loss"][["step", "value"]].values.tolist() == [[203800, 28.402842]]


# https://github.com/coqui-ai/TTS/issues/3637 (coqui trainer's ConsoleLogger: "--> TIME: ... -- STEP: .. -- GLOBAL_STEP")
COQUI = """\
   --> TIME: 2024-03-18 13:31:18 -- STEP: 0/496 -- GLOBAL_STEP: 0
     | > current_lr: 2.5e-07\x20
     | > step_time: 0.9393  (0.9392588138580322)
     | > loader_time: 0.4176  (0.4175543785095215)

 [!] `train_step()` retuned `None` outputs. Skipping training step.

 --> TIME: 2024-03-18 13:31:34 -- STEP: 25/496 -- GLOBAL_STEP: 25
     | > loss: 3.6332433223724365  (3.534811576207479)
     | > log_mle: 0.632981538772583  (0.6383022785186767)
     | > loss_dur: 3.0002617835998535  (2.896509297688802)
     | > amp_scaler: 16384.0  (16384.0)
     | > grad_norm: tensor(10.7261, device='cuda:0')
"""
# https://github.com/coqui-ai/TTS/issues/4327 (the evaluation block: averages with their change)
COQUI_EVAL = """\
 > EVALUATION\x20

  --> EVAL PERFORMANCE
     | > avg_loader_time: 0.209410655789259 (+0)
     | > avg_loss_disc: 2.7281397639251335 (+0)
     | > avg_loss_0: 2.7281397639251335 (+0)
     | > avg_loss_mel: 27.186232636614545 (+0)
"""


def test_coqui_step_blocks_at_their_global_step(tmp_path: Path):
    a = _run(tmp_path, COQUI + COQUI_EVAL)
    df = a.run.scalars
    assert df[df["metric"] == "loss"][["step", "value"]].values.tolist() == [[25, 3.6332433223724365]]
    assert _series(a, "grad_norm") == [10.7261]  # printed as a tensor
    assert _series(a, "loss_scale") == [16384.0]
    assert _series(a, "learning_rate")[0] == 2.5e-07
    assert not df["metric"].str.endswith("_time").any()
    assert df[df["metric"] == "eval_loss_mel"][["step", "value"]].values.tolist() == [[25, 27.186232636614545]]


# https://github.com/k2-fsa/ZipVoice/issues/146 (icefall-style train loop, with global_batch_idx, cur_lr and grad_scale)
ICEFALL = """\
2025-10-27 17:32:19 2025-10-27 17:32:19,686 WARNING [optim.py:600] Clipping_scale=2.0, grad-norm quartiles 2.645e-03 3.446e-03 3.830e-03 4.745e-03 9.672e-03, threshold=1.532e-02, percent-clipped=0.0
2025-10-27 17:32:39 2025-10-27 17:32:39,748 INFO [train_zipvoice.py:731] Epoch 1, batch 49, global_batch_idx: 50, batch size: 25, loss[loss=0.06789, over 17994.00 frames. ], tot_loss[loss=0.06891, over 778288.75 frames. ], cur_lr: 1.00e-04, grad_scale: 65536.0
2025-10-27 17:34:29 2025-10-27 17:34:29,249 INFO [train_zipvoice.py:731] Epoch 1, batch 99, global_batch_idx: 100, batch size: 25, loss[loss=0.07778, over 17972.00 frames. ], tot_loss[loss=0.06926, over 1385734.50 frames. ], cur_lr: 1.00e-04, grad_scale: 65536.0
"""


def test_icefall_rows_read_the_batch_loss_not_the_running_total(tmp_path: Path):
    a = _run(tmp_path, ICEFALL)
    df = a.run.scalars
    assert df[df["metric"] == "loss"][["step", "value"]].values.tolist() == [[50, 0.06789], [100, 0.07778]]
    assert _series(a, "loss_scale") == [65536.0, 65536.0] and _series(a, "learning_rate") == [1e-04, 1e-04]


def test_icefall_recipe_rows_count_batches_across_epochs(tmp_path: Path):
    # icefall's own recipes print "Epoch {e}, batch {batch_idx}, loss[...], tot_loss[...], batch size: N, lr: X"
    # (the format string checked in egs/*/train.py); the rows are the ZipVoice ones above in that form
    rows = ICEFALL.replace("batch 49, global_batch_idx: 50, batch size: 25, ", "batch 49, ")
    rows = rows.replace("Epoch 1, batch 99, global_batch_idx: 100, batch size: 25, ", "Epoch 2, batch 20, ")
    a = _run(tmp_path, rows.replace("cur_lr", "batch size: 25, lr"))
    df = a.run.scalars
    assert sorted(df[df["metric"] == "loss"]["step"].tolist()) == [49, 69]
