"""Round 35 (2026-11-29): failures the round-35 held-out threads showed unexplained, each fixed for its family; every
log is quoted from its thread (the source is named above it), with guards for the cousins."""

from __future__ import annotations

import math
from pathlib import Path

from tests.test_unseen_logs import _series, _verdict
from tests.test_unseen_logs_33 import _run_in


def _finding(a, code: str):
    return next((f for f in a.diagnosis.findings if f.code == code), None)


# -- detectron2's FloatingPointError dict of floats: read at the iteration it names ------------------------------------

# https://github.com/facebookresearch/detectron2/issues/3367 (as quoted): the dict of later releases holds floats
# (train_loop.py: ``loss_dict = {metrics_dict}``, the np.mean of each term)
D2_3367 = """FloatingPointError: Loss became infinite or NaN at iteration=3666!
loss_dict = {'loss_cls': nan, 'loss_box_reg': inf}
"""

# the same message with NumPy >= 2, whose float64 repr is ``np.float64(nan)`` (train_loop.py prints the dict as is)
D2_NUMPY2 = """[05/17 23:40:11 d2.utils.events]:  eta: 0:41:10  iter: 79  total_loss: 1.932  loss_cls: 1.213  loss_box_reg: 0.6815  time: 0.2491  data_time: 0.0045  lr: 0.00039962  max_mem: 2640M
FloatingPointError: Loss became infinite or NaN at iteration=87!
loss_dict = {'loss_cls': np.float64(nan), 'loss_box_reg': np.float64(0.7016)}
"""


def test_a_float_loss_dict_is_read_at_the_iteration_the_error_names(tmp_path: Path):
    a = _run_in(tmp_path, 0, D2_3367)
    df = a.run.scalars
    assert set(df["step"]) == {3666}  # not at a record count's step 1
    assert math.isnan(_series(a, "loss_cls")[0]) and _series(a, "loss_box_reg") == [math.inf]
    assert _verdict(a)[0] != "healthy"


def test_a_numpy2_loss_dict_is_read_at_its_iteration_beside_the_event_lines(tmp_path: Path):
    a = _run_in(tmp_path, 0, D2_NUMPY2)
    cls = a.run.scalars[a.run.scalars["metric"] == "loss_cls"].sort_values("step")
    assert cls["step"].tolist() == [79, 87]
    assert cls["value"].iloc[0] == 1.213 and math.isnan(cls["value"].iloc[1])
    assert _series(a, "loss_box_reg") == [0.6815, 0.7016]


def test_a_dict_record_that_is_not_detectron2s_keeps_its_own_reading(tmp_path: Path):
    # guard: an HF record beside the message is still a record (only the ``loss_dict = `` one is left to detectron2)
    log = D2_3367 + "{'loss': 1.25, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.01}\n"
    a = _run_in(tmp_path, 0, log)
    assert _series(a, "grad_norm") == [0.5]


# -- a log pasted as a Markdown quote --------------------------------------------------------------------------------

# https://github.com/jwyang/faster-rcnn.pytorch/issues/75 (as pasted: a "> " quote before every line, tabs kept)
FRCNN_75 = """>  [session 1][epoch  1][iter    0] loss: 1.4996, lr: 1.00e-03
> \t\t\tfg/bg=(26/998), time cost: 2.685305
> \t\t\trpn_cls: 0.6953, rpn_box: 0.0309, rcnn_cls: 0.7547, rcnn_box 0.0187
> [session 1][epoch  1][iter  100] loss: nan, lr: 1.00e-03
"""


def test_quote_markers_become_spaces_of_the_same_length():
    from autopsy.ingest.text_stream import unquote

    assert unquote(b"> a\n> > b\n>\tc\nd > e\n", True) == b"  a\n    b\n  c\nd > e\n"
    assert unquote(b"x\n>> not a quote? it is\n") == b"x\n   not a quote? it is\n"
    assert unquote(b"loss: 1.0 > 0.5\n") == b"loss: 1.0 > 0.5\n"  # mid-line '>' untouched


def test_a_quoted_paste_keeps_its_indented_detail_lines(tmp_path: Path):
    a = _run_in(tmp_path, 0, FRCNN_75)
    assert _series(a, "rpn_box") == [0.0309] and _series(a, "rcnn_cls") == [0.7547]
    assert _series(a, "loss")[0] == 1.4996


# -- a box detector NaN at its first logs, at a constant modest LR: the annotations ---------------------------------

# https://github.com/jwyang/faster-rcnn.pytorch/issues/797 (as pasted): every term NaN at the second log, lr 1e-4
FRCNN_797 = """[session 1][epoch  1][iter    0/  88] loss: 4.7430, lr: 1.00e-04
\t\t\tfg/bg=(1/0), time cost: 0.255251
\t\t\trpn_cls: 0.7192, rpn_box: 0.1429, rcnn_cls: 0.7797, rcnn_box 3.1013
save model: models/res101/pascal_voc/faster_rcnn_1_1_87.pth
[session 1][epoch  2][iter    0/  88] loss: nan, lr: 1.00e-04
\t\t\tfg/bg=(1/0), time cost: 0.244978
\t\t\trpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan
"""

# https://github.com/twangnh/Distilling-Object-Detectors/issues/4 (as pasted): NaN 21,000 iterations in (the LR's)
DISTILL_4 = """[session 1][epoch  1][iter 21000/23080] loss: nan, loss_sup: 8.9603, lr: 3.00e-03
                        fg/bg=(256/0), time cost: 19.056542
                        rpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan
[session 1][epoch  1][iter 21100/23080] loss: nan, loss_sup: 8.9857, lr: 3.00e-03
                        fg/bg=(256/0), time cost: 19.276745
                        rpn_cls: nan, rpn_box: nan, rcnn_cls: nan, rcnn_box nan
"""

# https://github.com/facebookresearch/maskrcnn-benchmark/issues/721 (as pasted): NaN in the warmup ramp (the LR's)
MRCNN_721 = """2019-04-27 12:58:51,707 maskrcnn_benchmark.trainer INFO: Start training
2019-04-27 12:59:06,432 maskrcnn_benchmark.trainer INFO: eta: 6:07:52  iter: 20  loss: 5.6908 (nan)  loss_box_reg: 0.0103 (nan)  loss_classifier: 0.0842 (nan)  loss_mask: 3.5805 (nan)  loss_objectness: 0.6767 (nan)  loss_rpn_box_reg: 0.0401 (nan)  time: 0.7274 (0.7362)  data: 0.0025 (0.0143)  lr: 0.001793  max mem: 5827
2019-04-27 12:59:20,762 maskrcnn_benchmark.trainer INFO: eta: 6:02:41  iter: 40  loss: nan (nan)  loss_box_reg: nan (nan)  loss_classifier: nan (nan)  loss_mask: nan (nan)  loss_objectness: nan (nan)  loss_rpn_box_reg: nan (nan)  time: 0.7273 (0.7264)  data: 0.0023 (0.0084)  lr: 0.001927  max mem: 5827
"""


def test_an_early_detector_nan_at_a_constant_small_lr_points_at_the_boxes(tmp_path: Path):
    for i, log in enumerate((FRCNN_797, FRCNN_75)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a) == ("failed", "nan_in_data"), i
        f = _finding(a, "DATA001")
        assert "constant lr" in f.title and "annotations" in f.title
        assert any("no warmup ramp" in e.detail for e in f.evidence)


# https://github.com/jwyang/faster-rcnn.pytorch/issues/548 (as pasted, from iteration 600): rpn_box NaN, rcnn_cls finite
FRCNN_548 = """[session 1][epoch  1][iter  600/ 967] loss: nan, lr: 1.00e-03
                        fg/bg=(512/0), time cost: 40.919098
                        rpn_cls: nan, rpn_box: nan, rcnn_cls: 2.5435, rcnn_box 0.0000
"""

# https://github.com/endernewton/tf-faster-rcnn/issues/458: the total NaN while every printed term, the box terms too,
# is finite (the weight-decay part of the total, i.e. the weights: lr 0.01 was the cause); quoted in test_unseen_logs_6
from tests.test_unseen_logs_6 import TF_FASTER_RCNN_FULL as TFFRCNN_458  # noqa: E402

# https://github.com/Haiyang-W/DSVT/issues/31 (as pasted): every term NaN at once in a tqdm postfix, one lr shown
# (the run was fp16 with a one-cycle schedule: nothing here says the LR is constant)
DSVT_31 = ("epochs:   0%| | 0/24 [00:25<?, ?it/s, loss_hm=nan, loss_loc=nan, loss=nan, lr=2e-5, d_time=0.00(0.02), "
           "f_time=0.68(0.70), b_tWARNING:tensorboardX.x2num:NaN or Inf found in input tensor.               | "
           "33/19761 [00:23<3:55:35,  1.40it/s, total_it=33]\n"
           "WARNING:tensorboardX.x2num:NaN or Inf found in input tensor.\n")


def test_a_box_term_broken_beside_a_finite_one_needs_one_lr_log(tmp_path: Path):
    a = _run_in(tmp_path, 0, FRCNN_548)
    assert _verdict(a) == ("failed", "nan_in_data")
    f = _finding(a, "DATA001")
    assert any("rpn_box = NaN at step 600 while" in e.detail for e in f.evidence)


def test_a_late_detector_nan_or_one_in_the_warmup_ramp_is_not_put_on_the_boxes(tmp_path: Path):
    # also: box terms all finite at the NaN (the total's other part broke), and every term NaN with one lr log
    for i, log in enumerate((DISTILL_4, MRCNN_721, TFFRCNN_458, DSVT_31)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a)[1] != "nan_in_data", i


def test_an_early_detector_nan_in_fp16_is_not_put_on_the_boxes(tmp_path: Path):
    d = tmp_path / "fp16"
    d.mkdir()
    (d / "log.txt").write_text(FRCNN_797)
    # an mmcv 1.x config line turning on Fp16OptimizerHook: fp16 overflow explains an early NaN as well
    (d / "config.txt").write_text("fp16 = dict(loss_scale=512.)\n")
    from autopsy.pipeline import analyze
    a = analyze(d)
    assert _verdict(a)[1] != "nan_in_data"


# -- a segmentation pixel accuracy perfect from the first log: one class in the masks -------------------------------

# https://github.com/open-mmlab/mmsegmentation/issues/2125 (as quoted): binary Lovasz loss with reduce_zero_label=True
MMSEG_2125 = ("2022-09-29 12:44:34,605 - mmseg - INFO - Iter [100/94000]       lr: 9.991e-04, eta: 13:49:51, time: 0.576, "
              "data_time: 0.365, memory: 5635, decode.loss_lovasz: 0.1530,  decode.acc_seg: 100.0000, loss: 0.1530\n")


def test_pixel_accuracy_perfect_at_the_first_log_is_degenerate_labels(tmp_path: Path):
    a = _run_in(tmp_path, 0, MMSEG_2125)
    assert _verdict(a) == ("failed", "degenerate_labels")
    f = _finding(a, "LBL002")
    assert "one class" in f.title and f.evidence[0].step == 100


def test_pixel_accuracy_guards(tmp_path: Path):
    # a perfect score first seen deep into a run (a paste from its middle), a near-perfect one, and a classifier's
    # batch accuracy at 100 early (an easy task can do that) are not this
    late = MMSEG_2125.replace("Iter [100/94000]", "Iter [60000/94000]")
    near = MMSEG_2125.replace("decode.acc_seg: 100.0000", "decode.acc_seg: 99.9871")
    cls = MMSEG_2125.replace("decode.acc_seg: 100.0000", "decode.acc: 100.0000")
    for i, log in enumerate((late, near, cls)):
        a = _run_in(tmp_path, i, log)
        assert _verdict(a)[1] != "degenerate_labels", i


# -- the HF Trainer's summary train_loss = 0.0 of a fp16 run: NaN steps averaged as 0 ---------------------------------

# https://github.com/hiyouga/LlamaFactory/issues/4278: the log and config are tests/test_unseen_logs_30.py's (its test
# now expects fp16_overflow); here the cousins that must not be called so
def test_a_zero_average_loss_in_fp16_is_float16_overflow(tmp_path: Path):
    from tests.test_unseen_logs import _run
    from tests.test_unseen_logs_30 import LLAMAFACTORY_4278, LLAMAFACTORY_4278_CONFIG

    a = _run(tmp_path, LLAMAFACTORY_4278, LLAMAFACTORY_4278_CONFIG)
    assert _verdict(a) == ("failed", "fp16_overflow")
    assert "in fp16" in _finding(a, "LBL001").title


def test_a_zero_average_loss_without_fp16_or_with_masking_warnings_is_not_fp16(tmp_path: Path):
    from tests.test_unseen_logs import _run
    from tests.test_unseen_logs_30 import LLAMAFACTORY_4278, LLAMAFACTORY_4278_CONFIG

    d1, d2 = tmp_path / "bf16", tmp_path / "warned"
    d1.mkdir()
    d2.mkdir()
    a = _run(d1, LLAMAFACTORY_4278, LLAMAFACTORY_4278_CONFIG.replace("fp16: true", "bf16: true"))
    assert _verdict(a)[1] != "fp16_overflow"
    # LLaVA's warning when a sample's template does not tokenize as expected (its target is then all IGNORE_INDEX)
    warned = "".join(f"WARNING: tokenization mismatch: {385 + i} vs. {399 + i}. (ignored)\n" for i in range(4))
    b = _run(d2, warned + LLAMAFACTORY_4278, LLAMAFACTORY_4278_CONFIG)
    assert _verdict(b)[1] == "all_labels_masked"


# -- round 36 ----------------------------------------------------------------------------------------------------------

# https://github.com/IBM/aihwkit/issues/446 (as pasted): the example's "Loss error: ..." print, falling then rising
# (the loop never called opt.zero_grad())
AIHWKIT_446 = """Loss error: 1.0298337936401367
Loss error: 0.8178885579109192
Loss error: 0.4703792631626129
Loss error: 0.1962183117866516
Loss error: 0.0619336031377316
Loss error: 0.0884876772761345
Loss error: 0.2775749266147614
Loss error: 0.5320941805839539
Loss error: 0.7531698346138000
Loss error: 0.8695605397224426
"""


def test_a_loss_error_or_value_print_is_the_loss(tmp_path: Path):
    a = _run_in(tmp_path, 0, AIHWKIT_446)
    assert _series(a, "loss")[:2] == [1.0298337936401367, 0.8178885579109192] and len(_series(a, "loss")) == 10
    b = _run_in(tmp_path, 1, AIHWKIT_446.replace("Loss error", "Loss value"))
    assert len(_series(b, "loss")) == 10
    # guard: "loss scale" (a fp16 scaler's state) is no loss
    c = _run_in(tmp_path, 2, AIHWKIT_446.replace("Loss error", "loss scale"))
    assert _series(c, "loss") == []


def test_a_diverging_hand_written_loop_is_told_to_check_zero_grad(tmp_path: Path):
    a = _run_in(tmp_path, 0, AIHWKIT_446)
    assert _verdict(a) == ("failed", "lr_too_high")
    assert any("zero_grad" in r for r in _finding(a, "OPT001").remedies)
    # guard: a trainer's run (a framework recognised) is not sent to look for a loop's zero_grad
    hf = "".join(f"{{'loss': {v}, 'learning_rate': 0.01, 'epoch': {i / 100}}}\n"
                 for i, v in enumerate((1.0, 0.8, 0.47, 0.2, 0.06, 0.09, 0.28, 0.53, 0.75, 0.87), 1))
    b = _run_in(tmp_path, 1, hf)
    f = _finding(b, "OPT001")
    assert f is not None and not any("zero_grad" in r for r in f.remedies)


# https://github.com/NVIDIA-Merlin/Transformers4Rec/issues/342 (as pasted): NaN from the first batch, only with the
# Keras mixed_float16 policy the reporter's script sets
T4REC_342_LOG = """1/226 [..............................] - ETA: 34:35 - train_ndcg@10: 0.0000e+00 - train_ndcg@20: 0.0000e+00 - train_recall@10: 0.0000e+00 - train_recall@20: 0.0000e+00 - loss: nan - regularization_lo
2/226 [..............................] - ETA: 1:44 - train_ndcg@10: 0.0000e+00 - train_ndcg@20: 0.0000e+00 - train_recall@10: 0.0000e+00 - train_recall@20: 0.0000e+00 - loss: nan - regularization_los
3/226 [..............................] - ETA: 1:41 - train_ndcg@10: 0.0000e+00 - train_ndcg@20: 0.0000e+00 - train_recall@10: 0.0000e+00 - train_recall@20: 0.0000e+00 - loss: nan - regularization_loss
"""
T4REC_342_CODE = """import tensorflow as tf
from tensorflow.keras import mixed_precision
policy = mixed_precision.Policy('mixed_float16')
mixed_precision.set_global_policy(policy)
"""


def test_the_keras_mixed_float16_policy_is_fp16(tmp_path: Path):
    from tests.test_unseen_logs import _run

    a = _run(tmp_path, T4REC_342_LOG, T4REC_342_CODE)
    assert a.run.config.get("fp16") is True
    assert _verdict(a) == ("failed", "fp16_overflow")
    # TF's own line when the policy is set; 'mixed_bfloat16' is bf16
    d = tmp_path / "tf"
    d.mkdir()
    b = _run(d, "INFO:tensorflow:Mixed precision compatibility check (mixed_bfloat16): OK\n" + T4REC_342_LOG)
    assert b.run.config.get("bf16") is True and b.run.config.get("fp16") is None


# https://github.com/graphdeco-inria/gaussian-splatting/issues/156 (as pasted): train.py's tqdm postfix is
# set_postfix({"Loss": ...}), capitalised
GS_156 = """Training progress:  14%|\u2588\u2588\u2588\u2588\u2588\u2588                                     | 7000/50000 [05:20<47:50, 14.98it/s, Loss=0.0937450]
[ITER 7000] Evaluating train: L1 0.03856598660349846 PSNR 23.824575805664065 [31/08 22:43:31]

[ITER 7000] Saving Gaussians [31/08 22:43:31]
Training progress:  60%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u258f                | 30000/50000 [39:43<29:39, 11.24it/s, Loss=0.0586456]
[ITER 30000] Evaluating train: L1 0.02656959928572178 PSNR 27.107151794433594 [31/08 23:17:54]
"""


def test_a_capitalised_loss_in_a_tqdm_postfix_is_read(tmp_path: Path):
    a = _run_in(tmp_path, 0, GS_156)
    loss = a.run.scalars[a.run.scalars["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [7000, 30000] and loss["value"].tolist() == [0.093745, 0.0586456]
    assert _verdict(a)[0] == "healthy"


# -- round 37 ----------------------------------------------------------------------------------------------------------

# https://github.com/Res2Net/Res2Net-maskrcnn/issues/1 (as pasted): the body of load_state_dict's error alone, Res2Net-50
# weights into a ResNet-50 config
RES2NET_1 = ("size mismatch for backbone.body.layer4.2.conv3.weight: copying a param with shape torch.Size([2048, 896, 1, "
             "1]) from checkpoint, the shape in current model is torch.Size([2048, 512, 1, 1]).\n")


def test_a_lone_state_dict_size_mismatch_is_a_checkpoint_of_another_architecture(tmp_path: Path):
    a = _run_in(tmp_path, 0, RES2NET_1)
    assert _verdict(a) == ("failed", "pretrained_weights_not_loaded")  # was healthy
    f = _finding(a, "PRE001")
    assert "[2048, 896, 1, 1] in the checkpoint, [2048, 512, 1, 1] in the model" in f.title


def test_a_size_mismatch_inside_a_traceback_stays_the_crashs(tmp_path: Path):
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
           "    model.load_state_dict(sd)\n"
           "RuntimeError: Error(s) in loading state_dict for GeneralizedRCNN:\n\t" + RES2NET_1)
    a = _run_in(tmp_path, 0, log)
    assert _finding(a, "PRE001") is None and _verdict(a)[1] == "crash"


# https://github.com/SpongebBob/Finetune-ChatGLM2-6B/issues/13 (as pasted): c10d's message and the c10::Error frame
# marker, no Python traceback (rank 0 was tokenizing 2.3M samples while rank 7 waited for its NCCL id)
CHATGLM2_13 = """This may indicate a possible application crash on rank 0 or a network set up issue.[7] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Socket Timeout
Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:604 (most recent call first)
"""


def test_a_c10_error_without_its_python_traceback_is_a_crash_with_its_meaning(tmp_path: Path):
    a = _run_in(tmp_path, 0, CHATGLM2_13)  # was "nothing to judge"
    assert _verdict(a) == ("failed", "crash")
    f = _finding(a, "CRASH001")
    assert "ranks waiting for rank 0 timed out" in f.title and any("ddp_timeout" in r for r in f.remedies)
    ev = a.run.events_of("native_abort")[0]
    assert ev.data["frame"] == {"file": "../torch/csrc/distributed/c10d/Utils.hpp", "line": 604, "function": "recvBytes"}


def test_a_c10_frame_marker_after_a_python_exception_line_adds_no_second_crash(tmp_path: Path):
    log = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    dist.barrier()\n"
           "torch.distributed.DistBackendError: " + CHATGLM2_13.splitlines()[0] + "\n" + CHATGLM2_13.splitlines()[1] + "\n")
    a = _run_in(tmp_path, 0, log)
    assert len(a.run.events_of("traceback")) == 1 and not a.run.events_of("native_abort")


# https://github.com/huggingface/transformers/issues/10674 (as pasted): T5-small evaluated with --fp16_full_eval and
# label smoothing, eval_loss NaN while BLEU is ordinary (the smoothing's sum over the vocabulary overflows float16)
T5_10674 = """***** eval metrics *****
  eval_bleu                 = 24.1257
  eval_gen_len              =  39.554
  eval_loss                 =     nan
  eval_mem_cpu_alloc_delta  =    56MB
"""
T5_10674_CMD = ("python examples/seq2seq/run_seq2seq.py --model_name_or_path t5-small --output_dir output_dir --do_eval "
                "--label_smoothing 0.1 --per_device_eval_batch_size $BS --predict_with_generate --fp16_full_eval\n")


def test_an_eval_nan_under_fp16_full_eval_is_the_float16_evaluation(tmp_path: Path):
    from tests.test_unseen_logs import _run

    a = _run(tmp_path, T5_10674, T5_10674_CMD)
    assert a.run.config.get("fp16_full_eval") is True
    assert _verdict(a) == ("failed", "fp16_overflow")  # was all_labels_masked
    d = tmp_path / "plain"
    d.mkdir()
    b = _run(d, T5_10674, T5_10674_CMD.replace(" --fp16_full_eval", ""))
    assert _verdict(b)[1] == "all_labels_masked"  # guard: without it, masked eval batches stay the reading


# https://github.com/hezhangsprinter/DCPDN/issues/12 (the traceback's end as pasted; 16 GB of RAM, num_workers=0 fixed it)
DCPDN_12 = """Traceback (most recent call last):
  File "train.py", line 210, in <module>
    val_target_cpu, val_input_cpu = val_target_cpu.float().cuda(), val_input_cpu.float().cuda()
  File "/home/littlemonster/anaconda3/envs/pic/lib/python2.7/site-packages/torch/utils/data/dataloader.py", line 175, in handler
    _error_if_any_worker_fails()
RuntimeError: DataLoader worker (pid 19597) is killed by signal: Killed.
"""


def test_a_dataloader_worker_sigkilled_is_the_hosts_memory_and_a_bus_error_the_shared_memory(tmp_path: Path):
    a = _run_in(tmp_path, 0, DCPDN_12)
    f = _finding(a, "CRASH001")
    assert "killed for the host's memory" in f.title and any("num_workers" in r for r in f.remedies)
    b = _run_in(tmp_path, 1, DCPDN_12.replace("signal: Killed.", "signal: Bus error."))
    assert "(shared memory)" in _finding(b, "CRASH001").title


def test_exception_raised_from_in_other_words_loses_nothing(tmp_path: Path):
    # a line with the marker's first words but not its form, then a traceback: the chunk is read whole (a first version
    # left the traceback branch's framework lookup under the marker's branch and failed the chunk)
    log = ("Exception raised from the data loader, retrying\nstep 1 | loss 2.5\nstep 2 | loss 2.4\nstep 3 | loss 2.3\n"
           "Traceback (most recent call last):\n"
           "  File \"/usr/lib/python3.10/site-packages/ultralytics/engine/trainer.py\", line 12, in train\n"
           "RuntimeError: boom\n")
    a = _run_in(tmp_path, 0, log)
    assert all(art.status == "read" for art in a.run.artifacts)
    assert len(a.run.events_of("traceback")) == 1 and "ultralytics" in a.run.frameworks
