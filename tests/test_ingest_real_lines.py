"""Framework lines quoted verbatim from public GitHub threads (tests/fixtures/real_lines/, sources in
tests/fixtures/SOURCES.md): exact series, steps and values, NaN/inf kept, and cut/garbled pastes.

Each fixture is a short excerpt as the thread shows it: timestamps, Markdown quote marks, torchrun rank
prefixes, tqdm redraws joined on one line, a terminal-wrapped JSON record, a paste that lost its prefix.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from test_ingest_formats import pts, read_text, same

REAL = Path(__file__).parent / "fixtures" / "real_lines"
NAN, INF = math.nan, math.inf

# (fixture, {metric: exact [(step, value), ...]}, metrics that must NOT appear)
CASES = [
    # karpathy/nanoGPT#215: timestamped, Markdown-quoted ("> "), the loss turns NaN at iter 3010
    # the eval line "step 3000: train loss 4.0390, val loss 4.0427" (estimate_loss over eval_iters batches) is kept
    # apart from the per-iteration "iter 3000: loss 4.2490" of the same step
    ("nanogpt_215.txt", {"loss": [(2990, 3.8853), (3000, 4.249), (3010, NAN), (3020, NAN), (3030, NAN)],
                         "eval_train_loss": [(3000, 4.039)], "eval_loss": [(3000, 4.0427)],
                         "mfu": [(2990, 15.34), (3000, 13.85), (3010, 14.12), (3020, 14.36), (3030, 14.58)]}, ()),
    # karpathy/nanoGPT#178: the first iter prints mfu -100.00%; the eval line at 250 is not a loss point
    ("nanogpt_178.txt", {"loss": [(0, 4.2648), (10, 3.2202), (20, 2.7697), (230, 1.7159), (240, 1.6524)],
                         "eval_train_loss": [(250, 1.544)], "eval_loss": [(250, 1.722)]}, ()),
    # ml-explore/mlx-lm#18: mlx_lm.lora prints "Iter N: Val loss X" and "Iter N: Train loss Y" at the same step;
    # the capitalised "Val loss" is the eval loss, not a second loss point
    ("mlx_lm_18.txt", {"loss": [(5, 3.361), (10, 2.669), (15, 2.53)],
                       "eval_loss": [(1, 3.77), (5, 3.044), (10, 2.526), (15, 2.368)]}, ()),
    # anthonix/llm.c#2: llm.c's CUDA trainer "step   10/74 | loss     nan (+nanz)| norm    nan (+nanz)| lr ...", then
    # its step-less "val loss nan" (the model after the last printed step)
    ("llmc_anthonix_2.txt", {"loss": [(10, NAN), (11, NAN), (12, NAN), (19, NAN), (20, NAN)], "eval_loss": [(20, NAN)]},
     ("eval_train_loss",)),
    # keras-team/keras#20568: a Keras 3 row (the "━" bar, an ETA without "ETA:") between UserWarnings, glued to a
    # closing backtick of the comment's inline code
    ("keras3_20568.txt", {"loss": [(115, 0.0234)], "iou": [(115, NAN)]}, ()),
    # alexander-rakhlin/CNN-for-Sentence-Classification-in-Keras#7: Keras 1 rows ("- 1s -", no "/step"), 0.0000e+00
    ("keras_cnn_sentence_7.txt", {"loss": [(9595, 0.6242), (19190, NAN), (28785, NAN)],
                                  "eval_loss": [(9595, 0.5265), (19190, NAN), (28785, NAN)],
                                  "eval_acc": [(9595, 0.747), (19190, 0.0), (28785, 0.0)]}, ()),
    # manishsoni1908/Mobilenet-ssd-keras#21: TerminateOnNaN's message glued to the value, then "loss: inf"
    ("keras_mobilenet_ssd_21.txt", {"loss": [(3, 44.411), (4, INF)]}, ()),
    # divamgupta/image-segmentation-keras#50: everything NaN in one epoch row
    ("keras_segmentation_50.txt", {"loss": [(512, NAN)], "eval_loss": [(512, NAN)]}, ()),
    # facebookresearch/fairseq#3687: fairseq-hydra-train's "[train_inner][INFO] - {json}" records
    ("fairseq_hydra_3687.txt", {"loss": [(200, 6.503), (400, 5.939)], "grad_norm": [(200, 3.672), (400, 4.445)],
                                "learning_rate": [(200, 3.125e-05), (400, 6.25e-05)],
                                "loss_scale": [(200, 64.0), (400, 64.0)]}, ()),
    # facebookresearch/fairseq#2696: "| train | {json}" epoch summary hard-wrapped by the terminal inside a key
    # ("t\nrain_nll_loss") and inside a value ("\n9291"); "nan" strings and a null loss scale
    ("fairseq_json_2696.txt", {"train_loss": [(9291, NAN)], "train_nll_loss": [(9291, NAN)],
                               "train_grad_norm": [(9291, NAN)], "train_learning_rate": [(9291, 1e-08)]},
     ("train_loss_scale", "loss")),
    # facebookresearch/fairseq#2332: "| train_inner | epoch 001:    100 / 2952087 loss=..." (simple format)
    ("fairseq_inner_2332.txt", {"loss": [(100, 16.348), (200, 14.736), (300, 13.761)],
                                "grad_norm": [(100, 4.215), (200, 2.849), (300, 2.349)],
                                "loss_scale": [(100, 128.0), (200, 128.0), (300, 128.0)]}, ()),
    # bigscience-workshop/Megatron-DeepSpeed#396: "grad norm: nan", and no lm loss on this pipeline stage
    ("megatron_deepspeed_396.txt", {"grad_norm": [(5426, NAN), (5427, NAN), (5428, NAN)],
                                    "learning_rate": [(5426, 2.999e-04), (5427, 2.999e-04), (5428, 2.999e-04)],
                                    "nan_iterations": [(5426, 0.0), (5427, 0.0), (5428, 0.0)]}, ("loss",)),
    # NVIDIA-NeMo/Megatron-Bridge#4024: timestamp prefix, MoE/MTP losses beside lm loss
    ("megatron_bridge_4024.txt", {"loss": [(29, 0.8716962), (30, 0.8535482), (31, 0.8641004)],
                                  "mtp_1_loss": [(29, 1.11541), (30, 1.080622), (31, 1.116914)],
                                  "grad_norm": [(29, 0.852), (30, 1.366), (31, 1.081)]}, ()),
    # aws-neuron/neuronx-nemo-megatron#28: NeMo bars cut by the terminal width (no "]"), redraws on one line;
    # the bar's own "loss=nan" is Lightning's running mean, the trainer's loss is reduced_train_loss
    ("nemo_neuronx_28.txt", {"loss": [(564, 3.91), (565, 4.0)], "bar_loss": [(564, NAN), (565, NAN)],
                             "grad_norm": [(564, 1.01), (565, 1.01)]}, ()),
    # meta-pytorch/torchtune#2620: torchrun's "[trainer0|0]:" prefix in front of "epoch|step|Loss: x"
    ("torchtune_2620.txt", {"loss": [(54, 1.0960569381713867), (55, 1.0744975805282593), (56, 1.073961615562439),
                                     (57, 1.0494292974472046)]}, ()),
    # meta-pytorch/torchtune#2776: the paste lost "epoch|step"; the bar counter (3/3073) places the NaN
    ("torchtune_2776.txt", {"loss": [(3, NAN)]}, ()),
    # ultralytics/ultralytics#18466: YOLO11 console row under its header
    ("yolo11_18466.txt", {"box_loss": [(12, 1.268)], "cls_loss": [(12, 1.285)], "dfl_loss": [(12, 1.649)]}, ()),
    # WongKinYiu/yolov7#613: YOLOv5/v7 header "gpu_mem box obj cls total labels img_size", NaN box and total loss
    ("yolov7_613.txt", {"box_loss": [(41, NAN), (42, NAN), (43, NAN)], "obj_loss": [(41, 0.01516), (42, 0.0151),
                                                                                  (43, 0.01522)],
                        "loss": [(41, NAN), (42, NAN), (43, NAN)]}, ("labels", "img_size")),
]


@pytest.mark.parametrize("name,want,absent", CASES, ids=[c[0] for c in CASES])
def test_real_lines(tmp_path: Path, name: str, want: dict, absent: tuple[str, ...]):
    run = read_text(tmp_path, (REAL / name).read_bytes())
    for metric, expected in want.items():
        assert same(pts(run, metric), expected), (metric, pts(run, metric))
    for metric in absent:
        assert not run.has_metric(metric), metric


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_real_lines_cut_anywhere_or_garbled(tmp_path: Path, name: str):
    """A paste cut at any byte never raises and never yields more points than the whole; ANSI colour codes,
    NUL bytes and CRLF line ends around the same lines keep the same series."""
    raw = (REAL / name).read_bytes()
    full = read_text(tmp_path, raw, "full.log")
    n_full = len(full.scalars)
    for cut in range(0, len(raw), max(1, len(raw) // 29)):
        assert len(read_text(tmp_path, raw[:cut], "cut.log").scalars) <= n_full
    crlf = read_text(tmp_path, raw.replace(b"\n", b"\r\n"), "crlf.log")
    loss = "loss" if full.has_metric("loss") else full.metrics()[0]
    assert same(pts(crlf, loss), pts(full, loss))
    junk = read_text(tmp_path, b"\x00\xff\xfe garbage \x1b[31m\n" + raw + b"\n\x1b[0m" + b"\xff" * 50, "junk.log")
    assert all(a.status in ("read", "partial") for a in junk.artifacts)
    assert same(pts(junk, loss), pts(full, loss))


def test_truncated_wrapped_json_record_is_not_guessed(tmp_path: Path):
    """fairseq#2696's wrapped record cut before its closing brace: nothing is invented from half a record."""
    raw = (REAL / "fairseq_json_2696.txt").read_bytes()
    cut = raw[: raw.index(b'"train_lr"')]
    run = read_text(tmp_path, cut)
    assert not run.has_metric("train_loss") and not run.has_metric("train_nll_loss")


def test_openrlhf_episode_bars_without_a_postfix_invent_nothing(tmp_path: Path):
    """OpenRLHF/OpenRLHF#350: Ray-prefixed ``Episode [1/1]`` and vLLM ``Processed prompts`` bars carry no metric;
    no loss or step series is made up from their counters, and the file is still read."""
    run = read_text(tmp_path, (REAL / "openrlhf_350.txt").read_bytes())
    assert run.metrics() == [] or not any(m.startswith(("loss", "reward")) for m in run.metrics())
    assert all(a.status in ("read", "partial") for a in run.artifacts)
