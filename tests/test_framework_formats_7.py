"""Console formats and phrasings the reader missed (Marian, MindSpore, epoch-local step counters, held-out
losses said as a phrase, full-width punctuation, running-loss names, a Keras header glued mid-row), each from
a thread's pasted log or the framework's print format (source above each): the points land at the step the
framework counts, NaN is kept."""

from __future__ import annotations

import math
from pathlib import Path

from autopsy.ingest.text_metrics import StepState, epoch_local_step, generic_pairs
from autopsy.ingest.text_stream import ascii_punctuation
from tests.test_unseen_logs import _run, _series, _verdict


def _steps(a, metric: str) -> list[int]:
    df = a.run.scalars
    return sorted(df[df["metric"] == metric]["step"].tolist())


# -- Marian NMT ----------------------------------------------------------------------------------------

# https://github.com/marian-nmt/marian/issues/120 (Marian 1.x: no gNorm/L.r.), then the same format going NaN
# (``LOG(info, "Ep. {} : Up. {} : Sen. {} : Cost {:.2f} : Time {} : {:.2f} words/s", ...)``, fmt prints ``nan``)
MARIAN_OLD = """\
[2017-10-18 18:14:31] Ep. 7 : Up. 306350 : Sen. 5630845 : Cost 34.46 : Time 6.91s : 13596.73 words/s
[2017-10-18 18:14:37] Ep. 7 : Up. 306360 : Sen. 5635375 : Cost 41.04 : Time 6.20s : 14970.67 words/s
[2017-10-18 18:14:43] Ep. 7 : Up. 306370 : Sen. 5640755 : Cost nan : Time 5.84s : 14396.02 words/s
[2017-10-18 18:14:48] Ep. 7 : Up. 306380 : Sen. 5645115 : Cost nan : Time 5.46s : 13058.30 words/s
"""

# https://github.com/marian-nmt/marian-dev/issues/195 (label counts after the cost, and the L.r. report);
# validation lines as scheduler.h's validate() prints them
MARIAN_LR = """\
[2018-02-22 20:39:54] Ep. 1 : Up. 500 : Sen. 350559 : Cost 9.89 * 10696858 : Time 482.42s : 22173.46 words/s : L.r. 9.3750e-06
[2018-02-22 20:47:18] Ep. 1 : Up. 1000 : Sen. 699788 : Cost 8.54 * 10581251 : Time 444.68s : 23794.96 words/s : L.r. 1.8750e-05
[2018-02-22 20:54:42] Ep. 1 : Up. 1500 : Sen. 1047256 : Cost 7.92 * 10575207 : Time 443.88s : 23824.48 words/s : L.r. 2.8125e-05
[2018-02-22 20:55:10] [valid] Ep. 1 : Up. 1500 : cross-entropy : 210.5 : new best
[2018-02-22 20:55:40] [valid] Ep. 1 : Up. 1500 : perplexity : 35.2 : stalled 1 times (last best: 34.9)
"""


def test_marian_cost_is_the_loss_at_its_update_and_nan_is_kept(tmp_path: Path):
    a = _run(tmp_path, MARIAN_OLD)
    loss = _series(a, "loss")
    assert loss[:2] == [34.46, 41.04] and all(math.isnan(x) for x in loss[2:])
    assert _steps(a, "loss") == [306350, 306360, 306370, 306380]
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and num[0].first_step == 306370


def test_marian_label_counts_lr_and_validators(tmp_path: Path):
    a = _run(tmp_path, MARIAN_LR)
    assert _series(a, "loss") == [9.89, 8.54, 7.92]
    assert _series(a, "learning_rate") == [9.375e-06, 1.875e-05, 2.8125e-05]
    assert _series(a, "eval_loss") == [210.5] and _steps(a, "eval_loss") == [1500]
    assert _series(a, "eval_perplexity") == [35.2]


# -- MindSpore -----------------------------------------------------------------------------------------

# mindspore/train/callback/_loss_monitor.py: print("epoch: %s step: %s, loss is %s" % (epoch, step_in_epoch, loss)),
# and on a NaN/Inf loss: raise ValueError("epoch: {} step: {}. Invalid loss, terminating training.")
MINDSPORE = """\
epoch: 1 step: 1874, loss is 0.3104
epoch: 1 step: 1875, loss is 0.2104
epoch: 2 step: 1, loss is 0.1904
epoch: 2 step: 2, loss is 0.1804
Traceback (most recent call last):
ValueError: epoch: 2 step: 3. Invalid loss, terminating training.
"""

# a loss-scale cell's (loss, overflow, scale) tuple printed whole (TrainOneStepWithLossScaleCell outputs)
MINDSPORE_TUPLE = """\
epoch: 1 step: 10, loss is (Tensor(shape=[1], dtype=Float32, value= [ 1.03e+01]), Tensor(shape=[], dtype=Bool, value= False), Tensor(shape=[], dtype=Float32, value= 65536))
epoch: 1 step: 11, loss is (Tensor(shape=[1], dtype=Float32, value= [ nan]), Tensor(shape=[], dtype=Bool, value= True), Tensor(shape=[], dtype=Float32, value= 32768))
"""


def test_mindspore_loss_monitor_steps_restart_each_epoch_and_invalid_loss_is_nan(tmp_path: Path):
    a = _run(tmp_path, MINDSPORE)
    assert _steps(a, "loss") == [1874, 1875, 1876, 1877, 1878]
    loss = _series(a, "loss")
    assert loss[:4] == [0.3104, 0.2104, 0.1904, 0.1804] and math.isnan(loss[4])
    assert _verdict(a)[0] != "healthy"


def test_mindspore_loss_scale_tuple(tmp_path: Path):
    a = _run(tmp_path, MINDSPORE_TUPLE)
    loss = _series(a, "loss")
    assert loss[0] == 10.3 and math.isnan(loss[1])
    assert _series(a, "loss_scale") == [65536.0, 32768.0]
    assert _series(a, "overflow") == [0.0, 1.0]


def test_a_sentence_with_loss_is_is_not_a_mindspore_row(tmp_path: Path):
    a = _run(tmp_path, "In this step: the loss is what we minimise\n")
    assert a.run.scalars.empty


# -- counters that restart every epoch -------------------------------------------------------------

# https://github.com/mindspore-lab/mindocr/issues/670 (mindocr callbacks: step counted within the epoch); the last
# two lines are the same format after the epoch change
MINDOCR = """\
[2024-03-04 12:02:42] mindocr.utils.callbacks INFO - epoch: [12/20] step: [700/4468], loss: 19.327375, lr: 0.000793, per step time: 223.489 ms, fps per card: 4.47 img/s
[2024-03-04 12:03:04] mindocr.utils.callbacks INFO - epoch: [12/20] step: [800/4468], loss: 14.977672, lr: 0.000792, per step time: 215.858 ms, fps per card: 4.63 img/s
[2024-03-04 12:26:04] mindocr.utils.callbacks INFO - epoch: [13/20] step: [100/4468], loss: nan, lr: 0.000791, per step time: 214.546 ms, fps per card: 4.66 img/s
[2024-03-04 12:26:26] mindocr.utils.callbacks INFO - epoch: [13/20] step: [200/4468], loss: nan, lr: 0.000790, per step time: 220.665 ms, fps per card: 4.53 img/s
"""


def test_a_step_counter_that_restarts_after_an_epoch_number_keeps_counting(tmp_path: Path):
    a = _run(tmp_path, MINDOCR)
    assert _steps(a, "loss") == [700, 800, 4468 + 100, 4468 + 200]
    loss = _series(a, "loss")
    assert loss[:2] == [19.327375, 14.977672] and all(math.isnan(x) for x in loss[2:])
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and num[0].first_step == 4568


def test_a_global_step_after_an_epoch_number_is_read_as_printed():
    st = StepState()
    got = [epoch_local_step(st, "generic", e, s, None) for e, s in [(1, 4990), (1, 5000), (2, 5001), (2, 5100),
                                                                  (3, 10001)]]
    assert got == [4990, 5000, 5001, 5100, 10001]


def test_an_epoch_local_counter_without_a_total_adds_each_epochs_highest():
    st = StepState()
    got = [epoch_local_step(st, "generic", e, s, None) for e, s in [(0, 10), (0, 20), (1, 10), (1, 30), (2, 10)]]
    assert got == [10, 20, 30, 50, 60]
    assert epoch_local_step(st, "generic", 0, 5, None) == 5  # an epoch number going back: a rerun


# -- a held-out loss said as a phrase ----------------------------------------------------------------

# https://github.com/yaoyichen/CIKM-Cup-2017/issues/7 ("step 0, training mse loss nan, val mse loss nan"); finite
# lines of the same format before it
CIKM = """\
step 0, training mse loss 2.5, val mse loss 2.6
step 250, training mse loss 1.5, val mse loss 1.7
step 500, training mse loss nan, val mse loss nan
step 750, training mse loss nan, val mse loss nan
"""


def test_val_words_before_a_loss_make_it_the_eval_loss(tmp_path: Path):
    a = _run(tmp_path, CIKM)
    assert _steps(a, "loss") == [0, 250, 500, 750]
    assert _series(a, "loss")[:2] == [2.5, 1.5]
    assert _series(a, "eval_loss")[:2] == [2.6, 1.7]


def test_held_out_words_only_reach_the_loss_after_them():
    keys = [k for k, _ in generic_pairs(b", val top1 acc 0.5, loss 2.3, held-out test mse loss 2.9")]
    assert keys == ["acc", "loss", "val_loss"]


# -- full-width punctuation --------------------------------------------------------------------------

# https://github.com/xiaotudui/pytorch-tutorial/issues/1 (print("训练次数：{}, Loss：{}".format(...))), then NaN
CN_LOG = """\
训练次数：100, Loss：1.9817659854888916
训练次数：200, Loss：1.9057204723358154
训练次数：300, Loss：nan
训练次数：400, Loss：nan
"""


def test_full_width_colons_are_read_like_ascii(tmp_path: Path):
    a = _run(tmp_path, CN_LOG)
    loss = _series(a, "loss")
    assert loss[:2] == [1.9817659854888916, 1.9057204723358154] and all(math.isnan(x) for x in loss[2:])
    assert _verdict(a)[0] != "healthy"


def test_ascii_punctuation_keeps_line_breaks():
    raw = "a：1，b；2（x）\nc：3\r\n".encode()
    out = ascii_punctuation(raw)
    assert out == b"a: 1, b; 2(x)\nc: 3\r\n"
    assert ascii_punctuation(b"plain: 1\n") == b"plain: 1\n"


# -- running-loss names as the run's loss -------------------------------------------------------------

# kohya-ss/sd-scripts train_network.py: progress_bar.set_postfix(**{"avr_loss": avr_loss}) (the epoch's running mean)
KOHYA = """\
steps:   1%|▏         | 10/1000 [00:10<16:30,  1.00s/it, avr_loss=0.123]
steps:   2%|▏         | 20/1000 [00:20<16:20,  1.00s/it, avr_loss=0.119]
steps:   3%|▎         | 30/1000 [00:30<16:10,  1.00s/it, avr_loss=nan]
"""

# diffusers examples/text_to_image/train_text_to_image.py: logs = {"step_loss": ..., "lr": ...}; set_postfix(**logs)
DIFFUSERS = """\
Steps:   1%|          | 10/1000 [00:10<16:30,  1.00s/it, lr=0.0001, step_loss=0.123]
Steps:   2%|▏         | 20/1000 [00:20<16:20,  1.00s/it, lr=0.0001, step_loss=0.119]
Steps:   3%|▎         | 30/1000 [00:30<16:10,  1.00s/it, lr=0.0001, step_loss=nan]
"""


def test_a_running_loss_is_the_loss_when_nothing_else_is(tmp_path: Path):
    for i, log in enumerate((KOHYA, DIFFUSERS)):
        d = tmp_path / str(i)
        d.mkdir()
        a = _run(d, log)
        loss = _series(a, "loss")
        assert loss[:2] == [0.123, 0.119] and math.isnan(loss[2]), i


def test_a_running_loss_beside_the_loss_stays_apart(tmp_path: Path):
    a = _run(tmp_path, "step 1 loss 2.5 avg_loss 2.6\nstep 2 loss 2.4 avg_loss 2.5\n")
    assert _series(a, "loss") == [2.5, 2.4]


# -- Keras header glued to a row ------------------------------------------------------------------------

# https://github.com/kr-colab/ReLERNN/issues/26 (a nested fit's "Epoch 1/1000" printed at the end of the ETA row)
KERAS_GLUED = """\
Epoch 308/1000
 99/100 [============================>.] - ETA: 2s - loss: 0.2445Epoch 1/1000
100/100 [==============================] - 328s 3s/step - loss: 0.2445 - val_loss: 0.2342
Epoch 309/1000
 99/100 [============================>.] - ETA: 3s - loss: nanEpoch 1/1000
100/100 [==============================] - 332s 3s/step - loss: nan - val_loss: nan
"""


def test_a_keras_epoch_header_glued_to_a_value_is_not_an_epoch(tmp_path: Path):
    a = _run(tmp_path, KERAS_GLUED)
    assert _steps(a, "loss") == [30800, 30900]
    assert _steps(a, "eval_loss") == [30800, 30900]


# -- GAN loops ---------------------------------------------------------------------------------------------

# https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/510 (finite rows), then issue 1220's NaN rows; the
# names are the model's loss_<name> attributes (Visualizer.print_current_losses, written to loss_log.txt)
_CYCLEGAN_ROWS = """\
(epoch: 1, iters: 100, time: 0.507, data: 0.091) D_A: 0.201 G_A: 0.297 cycle_A: 4.741 idt_A: 0.712 D_B: 0.250 G_B: 0.422 cycle_B: 2.388 idt_B: 2.395
(epoch: 1, iters: 200, time: 0.513, data: 0.001) D_A: 0.111 G_A: 0.589 cycle_A: 2.417 idt_A: 1.068 D_B: 0.263 G_B: 0.449 cycle_B: 2.285 idt_B: 1.070
(epoch: 2, iters: 100, time: 0.317, data: 2.125) D_A: nan G_A: nan cycle_A: nan idt_A: nan D_B: nan G_B: nan cycle_B: nan idt_B: nan
(epoch: 2, iters: 200, time: 0.320, data: 0.000) D_A: nan G_A: nan cycle_A: nan idt_A: nan D_B: nan G_B: nan cycle_B: nan idt_B: nan
"""
#: each row ends in the space print_current_losses leaves after its last value
CYCLEGAN = "".join(row + " \n" for row in _CYCLEGAN_ROWS.splitlines())


def test_cyclegan_rows_are_loss_terms_counted_across_epochs(tmp_path: Path):
    a = _run(tmp_path, CYCLEGAN)
    assert _series(a, "loss_D_A")[:2] == [0.201, 0.111]
    assert _steps(a, "loss_cycle_B") == [100, 200, 300, 400]
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and num[0].first_step == 300
    assert _verdict(a)[0] != "healthy"


# pytorch/examples dcgan/main.py: '[%d/%d][%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
DCGAN = """\
[0/25][0/782] Loss_D: 1.8210 Loss_G: 5.1234 D(x): 0.6123 D(G(z)): 0.6000 / 0.0100
[0/25][781/782] Loss_D: 0.8210 Loss_G: 3.1234 D(x): 0.7123 D(G(z)): 0.3000 / 0.0500
[1/25][0/782] Loss_D: nan Loss_G: nan D(x): nan D(G(z)): nan / nan
"""


def test_dcgan_rows_count_batches_within_the_epoch(tmp_path: Path):
    a = _run(tmp_path, DCGAN)
    assert _steps(a, "Loss_D") == [0, 781, 782]
    assert _series(a, "Loss_G")[:2] == [5.1234, 3.1234]
    assert _series(a, "D(x)")[0] == 0.6123


# https://github.com/carpedm20/DCGAN-tensorflow/issues/34 ("Epoch: [%2d] [%4d/%4d] time: ..., d_loss: ..., g_loss: ...")
DCGAN_TF = """\
Epoch: [ 0] [   0/3165] time: 2.6742, d_loss: 7.06172514, g_loss: 0.00106246
Epoch: [ 0] [   1/3165] time: 4.7950, d_loss: 6.95885229, g_loss: 0.00125823
I tensorflow/core/common_runtime/gpu/pool_allocator.cc:244] PoolAllocator: After 2487 get requests, put_count=2449 evicted_count=1000 eviction_rate=0.40833 and unsatisfied allocation rate=0.457579
Epoch: [ 0] [   2/3165] time: 6.1750, d_loss: 7.25680256, g_loss: 0.00104984
"""


def test_dcgan_tensorflow_rows_with_a_padded_epoch(tmp_path: Path):
    a = _run(tmp_path, DCGAN_TF)
    assert _series(a, "d_loss") == [7.06172514, 6.95885229, 7.25680256]
    assert _steps(a, "g_loss") == [0, 1, 2]


# https://github.com/eriklindernoren/ML-From-Scratch/issues/29 (Keras-GAN style "%d [D loss: %f, acc.: %.2f%%] [G loss: %f]")
KERAS_GAN = """\
35 [D loss: 0.043149, acc: 96.88%] [G loss: 5.387241, acc: 0.00%]
36 [D loss: 0.017758, acc: 100.00%] [G loss: 5.255211, acc: 0.00%]
python2.7/lib/python2.7/site-packages/mlfromscratch-0.0.4-py2.7.egg/mlfromscratch/utils/layers.py:486: RuntimeWarning: invalid value encountered in multiply
37 [D loss: 0.020248, acc: 100.00%] [G loss: nan, acc: 100.00%]
38 [D loss: nan, acc: 50.00%] [G loss: nan, acc: 100.00%]
39 [D loss: nan, acc: 50.00%] [G loss: nan, acc: 100.00%]
"""


def test_two_models_losses_on_one_line_stay_apart(tmp_path: Path):
    a = _run(tmp_path, KERAS_GAN)
    assert _series(a, "D_loss")[:3] == [0.043149, 0.017758, 0.020248]
    assert _series(a, "G_loss")[:2] == [5.387241, 5.255211]
    assert _steps(a, "G_loss") == [35, 36, 37, 38, 39]
    assert "loss" not in set(a.run.scalars["metric"])
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and num[0].first_step == 37


# https://github.com/eriklindernoren/PyTorch-GAN (implementations/gan/gan.py):
# "[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]", batches counted from 0 within each epoch
PYTORCH_GAN = """\
[Epoch 0/200] [Batch 0/938] [D loss: 0.693147] [G loss: 0.693147]
[Epoch 0/200] [Batch 1/938] [D loss: 0.593147] [G loss: 0.793147]
[Epoch 1/200] [Batch 0/938] [D loss: 0.493147] [G loss: 0.893147]
[Epoch 1/200] [Batch 1/938] [D loss: nan] [G loss: nan]
"""


def test_a_zero_based_batch_counter_does_not_collide_at_the_epoch_change(tmp_path: Path):
    a = _run(tmp_path, PYTORCH_GAN)
    assert _steps(a, "D_loss") == [0, 1, 2, 3]
    assert _series(a, "D_loss")[:3] == [0.693147, 0.593147, 0.493147]


# -- CLU (JAX) ----------------------------------------------------------------------------------------------

# clu/metric_writers/logging_writer.py: logging.info("[%d]%s %s", step, collection, ", ".join(f"{k}={v:.6g}"))
CLU = """\
I0301 10:00:00.000000 140000 logging_writer.py:48] [100] learning_rate=0.001, loss=2.345, train_accuracy=0.1
I0301 10:00:05.000000 140000 logging_writer.py:48] [100] collection=eval accuracy=0.2, loss=2.5
I0301 10:00:10.000000 140000 logging_writer.py:48] [200] learning_rate=0.001, loss=1.345, train_accuracy=0.3
I0301 10:00:20.000000 140000 logging_writer.py:48] [300] learning_rate=0.001, loss=nan, train_accuracy=0
"""


def test_clu_scalars_at_their_step_and_an_eval_collection(tmp_path: Path):
    a = _run(tmp_path, CLU)
    assert _steps(a, "loss") == [100, 200, 300]
    assert _series(a, "loss")[:2] == [2.345, 1.345]
    assert _series(a, "eval_loss") == [2.5]


def test_a_bracketed_number_before_prose_is_not_clu(tmp_path: Path):
    a = _run(tmp_path, "[1] see the loss=curve, it dips\n[2] then rises again\n")
    assert a.run.scalars.empty


# -- a step counter under an epoch header ---------------------------------------------------------------

# paddle.hapi ProgBarLogger: "Epoch %d/%d" on its own line, then "step %d/%d - loss: ... - acc: ... - %dms/step"
HAPI = """\
Epoch 1/10
step  10/938 - loss: 2.3026 - acc: 0.1000 - 10ms/step
step 938/938 - loss: 0.3026 - acc: 0.9000 - 10ms/step
Epoch 2/10
step  10/938 - loss: nan - acc: 0.1000 - 10ms/step
step  20/938 - loss: nan - acc: 0.1000 - 10ms/step
"""


def test_step_rows_under_epoch_headers_count_on(tmp_path: Path):
    a = _run(tmp_path, HAPI)
    assert _steps(a, "loss") == [10, 938, 948, 958]
    loss = _series(a, "loss")
    assert loss[:2] == [2.3026, 0.3026] and all(math.isnan(x) for x in loss[2:])


# -- a run-wide step before an epoch and a batch -------------------------------------------------------------

# PaddleNLP trainer logs: "global step %d/%d, epoch: %d, batch: %d, rank_id: %s, loss: %f, lr: %.10f, speed: %.4f step/s"
PADDLENLP = """\
[2022-01-01 10:00:00,000] [    INFO] - global step 10/1000, epoch: 0, batch: 10, rank_id: 0, loss: 2.345000, lr: 0.0001000000, speed: 1.2000 step/s
[2022-01-01 10:00:10,000] [    INFO] - global step 20/1000, epoch: 0, batch: 20, rank_id: 0, loss: 1.345000, lr: 0.0001000000, speed: 1.2000 step/s
[2022-01-01 10:00:20,000] [    INFO] - global step 30/1000, epoch: 1, batch: 5, rank_id: 0, loss: nan, lr: 0.0001000000, speed: 1.2000 step/s
"""


def test_a_global_step_before_epoch_and_batch_is_the_step(tmp_path: Path):
    a = _run(tmp_path, PADDLENLP)
    assert _steps(a, "loss") == [10, 20, 30]
    assert not {"rank_id", "epoch", "batch"} & set(a.run.scalars["metric"])


# -- Keras verbose=2 ----------------------------------------------------------------------------------------

# tf.keras Progbar with verbose=2 (one line per epoch, no bar) and Keras <= 2.2's " - 5s - loss: ..." form
KERAS_V2 = """\
Epoch 1/10
1875/1875 - 5s - loss: 0.2950 - accuracy: 0.9150 - val_loss: 0.1400 - val_accuracy: 0.9580 - 5s/epoch - 3ms/step
Epoch 2/10
1875/1875 - 4s - loss: nan - accuracy: 0.0990 - val_loss: nan - val_accuracy: 0.0980 - 4s/epoch - 2ms/step
"""
KERAS_V2_OLD = """\
Epoch 1/10
 - 5s - loss: 0.2950 - acc: 0.9150 - val_loss: 0.1400 - val_acc: 0.9580
Epoch 2/10
 - 4s - loss: nan - acc: 0.0990 - val_loss: nan - val_acc: 0.0980
"""


def test_keras_verbose_2_lines(tmp_path: Path):
    for i, (log, steps) in enumerate(((KERAS_V2, [1875, 3750]), (KERAS_V2_OLD, [1, 2]))):
        d = tmp_path / str(i)
        d.mkdir()
        a = _run(d, log)
        assert _steps(a, "loss") == steps, i
        loss = _series(a, "loss")
        assert loss[0] == 0.295 and math.isnan(loss[1]), i
        assert _series(a, "eval_loss")[0] == 0.14, i


# -- header blocks (OLMo, Composer) ---------------------------------------------------------------------------

# allenai/OLMo olmo/train.py log_metrics_to_console(f"[step={self.global_step}/{self.max_steps}]", metrics):
# "    name=value" per metric, values over 1000 with thousands commas
OLMO = """\
2023-10-01 10:00:00.000\tnode1:0\tolmo.train:816\tINFO\t[step=10/739328]
    train/CrossEntropyLoss=10.88
    train/Perplexity=53,227
    throughput/total_tokens=41,943,040
    optim/total_grad_norm=1.234
2023-10-01 10:00:10.000\tnode1:0\tolmo.train:816\tINFO\t[step=20/739328]
    train/CrossEntropyLoss=nan
    train/Perplexity=nan
    optim/total_grad_norm=nan
"""

# mosaicml/composer loggers/console_logger.py log_to_console: "[epoch=1][batch=10/100]:" then "\n\t Train name: value"
COMPOSER = """\
[epoch=1][batch=99/100]:
\t Train time/batch: 98
\t Train loss/train/total: 7.5123
\t Train lr-DecoupledAdamW/group0: 0.0001
[epoch=2][batch=10/100]:
\t Train time/batch: 109
\t Train loss/train/total: nan
\t Train lr-DecoupledAdamW/group0: 0.0001
"""


def test_olmo_header_blocks(tmp_path: Path):
    a = _run(tmp_path, OLMO)
    assert _steps(a, "loss") == [10, 20]
    assert _series(a, "loss")[0] == 10.88 and math.isnan(_series(a, "loss")[1])
    assert _series(a, "grad_norm")[0] == 1.234
    assert 41943040.0 in _series(a, "throughput/total_tokens")


def test_composer_header_blocks_count_batches_within_epochs(tmp_path: Path):
    a = _run(tmp_path, COMPOSER)
    assert _steps(a, "loss") == [99, 110]
    assert _series(a, "loss")[0] == 7.5123
    assert _series(a, "learning_rate") == [0.0001, 0.0001]


# -- TF Object Detection API --------------------------------------------------------------------------------

# tensorflow/models research/object_detection/model_lib_v2.py train_loop: "Step {} per-step time {:.3f}s" then the
# losses dict logged through absl (pprint-wrapped)
TFOD = """\
I0301 10:00:00.000000 140000 model_lib_v2.py:705] Step 100 per-step time 0.512s
I0301 10:00:00.000000 140000 model_lib_v2.py:708] {'Loss/classification_loss': 0.51234,
 'Loss/localization_loss': 0.31234,
 'Loss/regularization_loss': 0.11234,
 'Loss/total_loss': 0.93702,
 'learning_rate': 0.0133}
I0301 10:01:00.000000 140000 model_lib_v2.py:705] Step 200 per-step time 0.512s
I0301 10:01:00.000000 140000 model_lib_v2.py:708] {'Loss/classification_loss': nan,
 'Loss/localization_loss': nan,
 'Loss/regularization_loss': nan,
 'Loss/total_loss': nan,
 'learning_rate': 0.0266}
"""


def test_tf_object_detection_losses_dict_at_its_step(tmp_path: Path):
    a = _run(tmp_path, TFOD)
    assert _steps(a, "loss") == [100, 200]
    assert _series(a, "loss")[0] == 0.93702
    assert _series(a, "Loss/localization_loss")[0] == 0.31234


# -- per-epoch loggers: GluonTS, MONAI tutorials, fastText, segmentation_models_pytorch -------------------------

# gluonts/mx/trainer/_base.py: "Epoch[%d] Learning rate is %s", "Epoch[%d] Evaluation metric '%s'=%f"
GLUONTS = """\
INFO:gluonts.trainer:Epoch[0] Learning rate is 0.001
100%|██████████| 50/50 [00:02<00:00, 20.00it/s, epoch=1/10, avg_epoch_loss=5.23]
INFO:gluonts.trainer:Epoch[0] Elapsed time 2.500 seconds
INFO:gluonts.trainer:Epoch[0] Evaluation metric 'epoch_loss'=5.230000
INFO:gluonts.trainer:Epoch[0] Evaluation metric 'validation_epoch_loss'=5.530000
INFO:gluonts.trainer:Epoch[1] Learning rate is 0.001
INFO:gluonts.trainer:Epoch[1] Evaluation metric 'epoch_loss'=nan
"""

# Project-MONAI tutorials: print(f"epoch {epoch + 1}/{max_epochs}"), print(f"{step}/{epoch_len}, train_loss: ..."),
# print(f"epoch {epoch + 1} average loss: {epoch_loss:.4f}")
MONAI = """\
----------
epoch 1/100
1/50, train_loss: 0.9876
50/50, train_loss: 0.9543
epoch 1 average loss: 0.9600
----------
epoch 2/100
1/50, train_loss: nan
epoch 2 average loss: nan
"""

# fastText FastText::printInfo, as in the threads' pasted runs ("Progress: 100.0% words/sec/thread: ... avg.loss: ...")
FASTTEXT = (
    "Read 0M words\nNumber of words:  14598\nNumber of labels: 734\n"
    "\rProgress:  50.0% words/sec/thread:   75439 lr:  0.050000 avg.loss: 10.123456 ETA:   0h 0m 5s"
    "\rProgress: 100.0% words/sec/thread:   75439 lr:  0.000000 avg.loss:      nan ETA:   0h 0m 0s\n"
)

# segmentation_models_pytorch utils/train.py: iterator.set_postfix_str(", ".join("{} - {:.4}".format(k, v) ...))
SMP = """\
Epoch: 0
train: 100%|██████████| 100/100 [00:10<00:00,  9.50it/s, dice_loss - 0.5432, iou_score - 0.4321]
valid: 100%|██████████| 20/20 [00:01<00:00, 19.50it/s, dice_loss - 0.5032, iou_score - 0.4621]
Epoch: 1
train: 100%|██████████| 100/100 [00:10<00:00,  9.50it/s, dice_loss - nan, iou_score - 0.0]
"""


def test_gluonts_epoch_metrics(tmp_path: Path):
    a = _run(tmp_path, GLUONTS)
    assert _steps(a, "loss") == [0, 1]
    assert _series(a, "loss")[0] == 5.23 and math.isnan(_series(a, "loss")[1])
    assert _series(a, "eval_loss") == [5.53]


def test_monai_rows_count_on_across_epochs_and_keep_the_average_apart(tmp_path: Path):
    a = _run(tmp_path, MONAI)
    assert _steps(a, "loss") == [1, 50, 51]
    assert _series(a, "loss")[:2] == [0.9876, 0.9543]
    assert _steps(a, "epoch_avg_loss") == [50, 51]


def test_fasttext_progress(tmp_path: Path):
    a = _run(tmp_path, FASTTEXT)
    assert _steps(a, "loss") == [500, 1000]
    assert _series(a, "loss")[0] == 10.123456 and math.isnan(_series(a, "loss")[1])


def test_smp_bars_with_dash_pairs(tmp_path: Path):
    a = _run(tmp_path, SMP)
    # the run's only loss (the one its optimizer steps on) is its loss
    assert _series(a, "loss")[0] == 0.5432 and math.isnan(_series(a, "loss")[1])
    assert _steps(a, "loss") == [100, 200]
    assert _steps(a, "eval_dice_loss") == [100]


# aymericdamien/TensorFlow-Examples: "Step " + str(step) + ", Minibatch Loss= " + "{:.4f}".format(loss) + ..."
TF_EXAMPLES = """\
Step 1, Minibatch Loss= 2.3025, Training Accuracy= 0.100
Step 200, Minibatch Loss= 1.3025, Training Accuracy= 0.500
Step 400, Minibatch Loss= nan, Training Accuracy= 0.098
Optimization Finished!
"""


def test_a_minibatch_loss_alone_is_the_loss(tmp_path: Path):
    a = _run(tmp_path, TF_EXAMPLES)
    assert _steps(a, "loss") == [1, 200, 400]


# dmlc/dgl examples (gcn.py style): "Epoch {:05d} | Loss {:.4f} | Train Acc {:.4f} | Val Acc {:.4f}", one line per epoch
DGL = """\
Epoch 00000 | Loss 1.9463 | Train Acc 0.2929 | Val Acc 0.2600
Epoch 00001 | Loss 1.8463 | Train Acc 0.3929 | Val Acc 0.3600
Epoch 00002 | Loss nan | Train Acc 0.1429 | Val Acc 0.1220
"""


def test_a_line_per_epoch_is_placed_at_its_epoch(tmp_path: Path):
    a = _run(tmp_path, DGL)
    assert _steps(a, "loss") == [0, 1, 2]
    assert _series(a, "loss")[:2] == [1.9463, 1.8463]


def test_the_only_loss_under_a_name_of_its_own_is_the_loss(tmp_path: Path):
    a = _run(tmp_path, "Epoch 1, MSE loss: 0.5\nEpoch 2, MSE loss: 0.4\nEpoch 3, MSE loss: nan\n")
    assert _steps(a, "loss") == [1, 2, 3]
    b = _run(tmp_path / "gan", KERAS_GAN) if (tmp_path / "gan").mkdir() is None else None
    assert "loss" not in set(b.run.scalars["metric"])  # two models' losses: no guess


# -- tables with a dashed rule under the header (tabulate "simple", wasabi/spaCy) -------------------------------

# tabulate(rows, headers=[...]) default "simple" format
TABULATE = """\
  step    loss    grad_norm    learning_rate
------  ------  -----------  ---------------
    10  2.3456       1.2345           0.0001
    20  1.3456       1.1345           0.0001
    30  nan          nan              0.0001
"""

# spaCy v3 `spacy train` console logger (wasabi msg.row: header, a dash rule per column, rows); two-word headers
SPACY = """\
E    #       LOSS TOK2VEC  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE
---  ------  ------------  --------  ------  ------  ------  ------
  0       0          0.00     49.29    0.00    0.00    0.00    0.00
  0     200         25.12   2048.98   50.12   55.00   46.00    0.50
  1     400           nan       nan    0.00    0.00    0.00    0.00
"""


def test_a_table_with_a_rule_under_its_header(tmp_path: Path):
    a = _run(tmp_path, TABULATE)
    assert _steps(a, "loss") == [10, 20, 30]
    assert _series(a, "grad_norm")[:2] == [1.2345, 1.1345]


def test_spacy_table_columns_come_from_the_rule(tmp_path: Path):
    a = _run(tmp_path, SPACY)
    assert _steps(a, "LOSS_NER") == [0, 200, 400]
    assert _series(a, "LOSS_NER")[:2] == [49.29, 2048.98] and math.isnan(_series(a, "LOSS_NER")[2])
    assert _series(a, "ENTS_F")[1] == 50.12
