"""Framework line formats (issue 11): real quoted lines, exact points, and cut/garbled variants.

Lines marked with an issue URL are quoted from that public thread (tests/fixtures/SOURCES.md); the
others are written exactly as the framework's own print statement formats them (file named beside).
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.textlog import read_text_log
from autopsy.model import Run


def read_text(tmp_path: Path, text: str | bytes, name: str = "train.log") -> Run:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    b = RunBuilder(tmp_path)
    b.artifact(p, "text_log")
    read_text_log(Found(p, "text_log", p.stat().st_size), b)
    return b.finish()


def pts(run: Run, metric: str) -> list[tuple[int, float]]:
    s = run.series(metric)
    return [(int(a), float(v)) for a, v in zip(s["step"], s["value"])]


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return len(a) == len(b) and all(x[0] == y[0] and (x[1] == y[1] or (math.isnan(x[1]) and math.isnan(y[1])))
                                    for x, y in zip(a, b))


NAN = math.nan

# (name, log text, {metric: [(step, value), ...]}) - every listed series must match exactly
CASES = [
    ("detectron2",  # https://github.com/facebookresearch/detectron2/issues/214
     "[11/01 20:14:15 d2.utils.events]: eta: 5:41:49  iter: 379  total_loss: 1.707  loss_cls: 1.184  "
     "loss_box_reg: 0.475  time: 0.2293  data_time: 0.0033  lr: 0.003796  max_mem: 3782M\n"
     "[11/01 20:14:19 d2.utils.events]: eta: 5:42:23  iter: 399  total_loss: 1.679  loss_cls: 1.186  "
     "loss_box_reg: 0.478  time: 0.2296  data_time: 0.0033  lr: 0.003996  max_mem: 3782M\n"
     "FloatingPointError: Loss became infinite or NaN at iteration=412!\n"
     "loss_dict = {'loss_cls': tensor(nan, device='cuda:0', grad_fn=<DivBackward0>), "
     "'loss_box_reg': tensor(1310.0702, device='cuda:0', grad_fn=<DivBackward0>)}\n",
     {"loss": [(379, 1.707), (399, 1.679), (412, NAN)], "loss_cls": [(379, 1.184), (399, 1.186), (412, NAN)],
      "loss_box_reg": [(379, 0.475), (399, 0.478), (412, 1310.0702)],
      "learning_rate": [(379, 0.003796), (399, 0.003996)]}),
    ("timm",  # https://github.com/huggingface/pytorch-image-models/issues/814
     "Train: 1 [4550/5004 ( 91%)]  Loss:  5.240773 (5.9820)  Time: 0.928s,  275.81/s  (0.594s,  430.72/s)  "
     "LR: 2.133e-02  Data: 0.728 (0.388)\n"
     "Train: 4 [ 300/5004 (  6%)]  Loss:       nan (   nan)  Time: 3.225s,   79.37/s  (0.646s,  396.56/s)  "
     "LR: 6.227e-02  Data: 3.035 (0.453)\n",
     {"loss": [(5004 + 4550, 5.240773), (4 * 5004 + 300, NAN)],
      "learning_rate": [(5004 + 4550, 2.133e-02), (4 * 5004 + 300, 6.227e-02)]}),
    ("swin",  # https://github.com/microsoft/Swin-Transformer/issues/47
     "[2021-04-25 05:35:19 swin_base_patch4_window7_224](main_prune.py 310): INFO Train: [0/300][4050/5004]   "
     "eta 0:17:06 lr 0.000500 time 1.1737 (1.0765)    loss 3.2572 (3.3279)    grad_norm 1.0323 (nan)  mem 4814MB\n",
     {"loss": [(4050, 3.2572)], "grad_norm": [(4050, 1.0323)], "learning_rate": [(4050, 0.0005)]}),
    ("fairseq simple",  # https://github.com/facebookresearch/fairseq/issues/1895
     "2020-03-23 11:38:13 | INFO | train | epoch 002 | loss 9.803 | nll_loss 8.89 | ppl 474.37 | wps 31194.9 | "
     "ups 0.07 | wpb 430468 | bsz 14485.4 | num_updates 695 | lr 0.00017375 | gnorm 55.005 | loss_scale 0 | "
     "train_wall 4512 | wall 9786\n"
     "2020-03-23 11:38:31 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 9.393 | nll_loss 8.328 | "
     "ppl 321.26 | wps 84912.1 | wpb 11298 | bsz 382.5 | num_updates 695 | best_loss 9.393\n"
     "2020-03-23 11:39:44 | INFO | train_inner | epoch 003:      5 / 356 loss=9.44, nll_loss=8.44, ppl=347.28, "
     "wps=30690.8, ups=0.07, wpb=427295, bsz=14390.4, num_updates=700, lr=0.000175, gnorm=156.036, "
     "loss_scale=0, train_wall=1281, wall=9877\n",
     {"loss": [(700, 9.44)], "grad_norm": [(700, 156.036)], "loss_scale": [(700, 0.0)], "learning_rate": [(700, 0.000175)],
      "train_loss": [(695, 9.803)], "eval_loss": [(695, 9.393)], "eval_nll_loss": [(695, 8.328)]}),
    ("fairseq json",  # fairseq/logging/progress_bar.py JsonProgressBar: values are strings, epoch summaries prefixed
     '2021-03-08 12:31:36 | INFO | train_inner | {"epoch": 1, "update": 0.0, "loss": "16.475", "ppl": "91120.8", '
     '"wps": "0", "num_updates": "1", "lr": "2e-05", "gnorm": "20.751", "loss_scale": "4", "wall": "105"}\n'
     '2021-03-08 12:43:15 | INFO | valid | {"epoch": 1, "valid_loss": "17.953", "valid_ppl": "253807", '
     '"valid_num_updates": "10"}\n',
     {"loss": [(1, 16.475)], "grad_norm": [(1, 20.751)], "loss_scale": [(1, 4.0)], "eval_loss": [(10, 17.953)]}),
    ("verl",  # https://github.com/verl-project/verl/issues/721 (cut), verl/utils/tracking.py concat_dict_to_str
     "step:59 - global_seqlen/min:16268.000 - actor/kl_loss:nan - actor/pg_loss:nan - actor/grad_norm:nan - "
     "critic/score/mean:0.125 - actor/lr:np.float64(1e-06) - perf/mfu/actor:0.042 -\n",
     {"actor/pg_loss": [(59, NAN)], "grad_norm": [(59, NAN)], "reward": [(59, 0.125)],
      "learning_rate": [(59, 1e-06)], "actor/kl_loss": [(59, NAN)]}),
    ("megatron",  # https://github.com/epfLLM/Megatron-LLM/issues/33
     "iteration     3383/    8000 | consumed samples:       216512 | elapsed time per iteration (ms): 7613.1 | "
     "learning rate: 6.680E-06 | global batch size:    64 | lm loss: 7.334521E-01 | loss scale: 1.0 | "
     "grad norm: 0.752 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
     "iteration     3385/    8000 | consumed samples:       216640 | elapsed time per iteration (ms): 7624.3 | "
     "learning rate: 6.676E-06 | global batch size:    64 | loss scale: 1.0 | gr\n"
     " validation loss at iteration 3400 | lm loss value: 7.100000E-01 | lm loss PPL: 2.034E+00 | \n",
     {"loss": [(3383, 0.7334521)], "learning_rate": [(3383, 6.680e-06), (3385, 6.676e-06)],
      "loss_scale": [(3383, 1.0), (3385, 1.0)], "grad_norm": [(3383, 0.752)], "skipped_iterations": [(3383, 0.0)],
      "nan_iterations": [(3383, 0.0)], "eval_loss": [(3400, 0.71)]}),
    ("caffe",  # https://github.com/yjxiong/caffe/issues/2
     "I0815 20:38:37.014174 52129 solver.cpp:631] Iteration 1640, lr = 0.001\n"
     "I0815 20:41:26.810891 52129 solver.cpp:232] Iteration 1660, loss = 2.19062\n"
     "I0815 20:41:26.811189 52129 solver.cpp:631] Iteration 1660, lr = 0.001\n"
     "I0815 20:44:16.574542 52129 solver.cpp:232] Iteration 1680 (0.12 iter/s, 169.8s/20 iters), loss = 2.07286\n",
     {"loss": [(1660, 2.19062), (1680, 2.07286)], "learning_rate": [(1640, 0.001), (1660, 0.001)]}),
    ("torchtune",  # recipes/full_finetune_single_device.py: pbar.set_description(f"{epoch+1}|{global_step}|Loss: {loss}")
     "1|1|Loss: 1.7632:   0%|          | 1/1000 [00:02<40:12,  2.41s/it]\r"
     "1|2|Loss: 1.6011:   0%|          | 2/1000 [00:04<39:50,  2.40s/it]\r"
     "1|2|Loss: 1.6011:   0%|          | 2/1000 [00:04<39:50,  2.40s/it]\n",
     {"loss": [(1, 1.7632), (2, 1.6011)]}),
    ("nanoGPT",  # karpathy/nanoGPT train.py: print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu ...")
     "step 250: train loss 1.9612, val loss 2.0724\n"
     "iter 250: loss 1.9801, time 132.03ms, mfu 7.43%\n"
     "iter 260: loss nan, time 131.77ms, mfu 7.44%\n",
     {"loss": [(250, 1.9801), (260, NAN)], "eval_train_loss": [(250, 1.9612)], "eval_loss": [(250, 2.0724)]}),
    ("keras",  # keras/src/utils/progbar.py (TF2 "[===]" bar and Keras 3 "━" bar)
     "Epoch 1/2\n100/100 [==============================] - 2s 20ms/step - loss: 0.6931 - accuracy: 0.5000 - "
     "val_loss: 0.6900 - val_accuracy: 0.5100\nEpoch 2/2\n"
     "100/100 \u2501\u2501\u2501\u2501\u2501\u2501 1s 10ms/step - accuracy: 0.5000 - loss: nan - val_loss: nan\n",
     {"loss": [(100, 0.6931), (200, NAN)], "eval_loss": [(100, 0.69), (200, NAN)]}),
    ("openrlhf tqdm postfix",  # openrlhf/trainer/sft_trainer.py: step_bar.set_postfix(logs_dict)
     "Train step of epoch 0:  10%|\u2588         | 10/100 [00:20<03:00,  2.00s/it, gpt_loss=1.23, loss_mean=1.30, lr=1e-5]\n"
     "Train step of epoch 0:  20%|\u2588\u2588        | 20/100 [00:40<02:40,  2.00s/it, gpt_loss=nan, loss_mean=nan, lr=1e-5]\n",
     {"loss": [(10, 1.23), (20, NAN)], "learning_rate": [(10, 1e-5), (20, 1e-5)]}),
    ("openrlhf ppo actor bars (2023-10..2025-04)",  # openrlhf/trainer/ray/ppo_actor.py: pbar.set_postfix(short_status)
     # with short_status = {"pg", "rm", "ret", "glen", "tlen", "kl", "act_lr"}; the bar restarts at every PPO update
     "Train epoch [1/1]:  50%|\u2588\u2588\u2588\u2588\u2588     | 1/2 [00:02<00:02,  2.10s/it, pg=-0.0889, rm=0.411, ret=0.0884, "
     "glen=104, tlen=264, kl=0, act_lr=1.74e-6]\n"
     "Train epoch [1/1]: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 2/2 [00:03<00:00,  1.80s/it, pg=0.161, rm=0.396, "
     "ret=-0.0884, glen=126, tlen=287, kl=0.0244, act_lr=1.1e-6]\n"
     "Train epoch [1/1]:  50%|\u2588\u2588\u2588\u2588\u2588     | 1/2 [00:02<00:02,  2.10s/it, pg=nan, rm=0, ret=0, glen=2048, "
     "tlen=2200, kl=nan, act_lr=1.1e-6]\n",
     {"loss": [(1, -0.0889), (2, 0.161), (3, NAN)], "reward": [(1, 0.411), (2, 0.396), (3, 0.0)],
      "learning_rate": [(1, 1.74e-6), (2, 1.1e-6), (3, 1.1e-6)]}),
    ("openrlhf ppo actor bar (2025-04..)",  # short_status = {"act_loss", "reward", "return", "gen_len", ...}
     "Train epoch [1/1]: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 4/4 [00:10<00:00,  2.50s/it, act_loss=nan, reward=0, "
     "return=0, gen_len=512, tot_len=640, kl=nan, act_lr=3e-7]\n",
     {"loss": [(4, NAN)], "learning_rate": [(4, 3e-7)]}),
    ("openrlhf episode bar",  # openrlhf/trainer/ppo_trainer.py: Episode [e/E] bar, pbar.set_postfix(status) per update
     "Episode [1/2]:  50%|\u2588\u2588\u2588\u2588\u2588     | 5/10 [05:00<05:00, 60.00s/it, policy_loss=0.12, kl=0.01, reward=0.5, "
     "actor_lr=1e-6]\n"
     "Episode [2/2]:  10%|\u2588         | 1/10 [01:00<09:00, 60.00s/it, policy_loss=nan, kl=nan, reward=0, actor_lr=1e-6]\n"
     "Train epoch [1/1]: 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 2/2 [00:03<00:00,  1.80s/it, pg=nan, rm=0, "
     "ret=0, glen=2048, tlen=2200, kl=nan, act_lr=1e-6]\n",
     {"loss": [(5, 0.12), (11, NAN)], "reward": [(5, 0.5), (11, 0.0)]}),
    ("nemo lightning bar",  # NeMo (Lightning progress bar; the trainer's global_step is in the postfix)
     "Epoch 0: :   1%|          | 10/1000 [00:30<49:30, reduced_train_loss=2.310, global_step=9.000, "
     "consumed_samples=320.0, train_step_timing in s=2.95]\n"
     "Epoch 0: :   2%|          | 20/1000 [01:00<49:00, reduced_train_loss=nan, global_step=19.000, "
     "consumed_samples=640.0, train_step_timing in s=2.95]\n",
     {"loss": [(9, 2.31), (19, NAN)], "consumed_samples": [(9, 320.0), (19, 640.0)]}),
    ("yolo console",  # ultralytics/engine/trainer.py progress bar rows under the column header
     "      Epoch    GPU_mem   box_loss   cls_loss   dfl_loss  Instances       Size\n"
     "        1/3      2.61G      1.218      1.408      1.208        167        640: 100%|\u2588\u2588\u2588| 8/8 [00:02<00:00,  3.12it/s]\n"
     "        2/3      2.63G        nan        nan        nan        160        640: 100%|\u2588\u2588\u2588| 8/8 [00:02<00:00,  3.12it/s]\n",
     {"box_loss": [(1, 1.218), (2, NAN)], "cls_loss": [(1, 1.408), (2, NAN)]}),
    ("hf notebook table",  # https://github.com/huggingface/open-r1/issues/704
     "Step | Training Loss | reward | reward_std | kl | entropy\n-- | -- | -- | -- | -- | --\n"
     "1 | -0.283600 | 13.437500 | 21.810942 | nan | 0\n2 | -0.149100 | 6.931818 | 14.526671 | nan | No Log\n",
     {"loss": [(1, -0.2836), (2, -0.1491)], "kl": [(1, NAN), (2, NAN)], "entropy": [(1, 0.0)]}),
    ("llamafactory records in prose",  # LLaMA-Factory extras/callbacks.py LogCallback -> trainer_log.jsonl records
     "Here is my log:\n```\n"
     '{"current_steps": 10, "total_steps": 100, "loss": 1.2, "lr": 2e-05, "epoch": 0.1, "percentage": 10.0}\n'
     '{"current_steps": 20, "total_steps": 100, "loss": NaN, "lr": 2e-05, "epoch": 0.2, "percentage": 20.0}\n'
     "```\nWhat is wrong?\n",
     {"loss": [(10, 1.2), (20, NAN)], "learning_rate": [(10, 2e-05), (20, 2e-05)]}),
    ("bare step loss columns",
     "step loss\n1 2.31\n2 2.05\n3 nan\n",
     {"loss": [(1, 2.31), (2, 2.05), (3, NAN)]}),
]


@pytest.mark.parametrize("name,text,want", CASES, ids=[c[0] for c in CASES])
def test_format_points(tmp_path: Path, name: str, text: str, want: dict[str, list[tuple[int, float]]]):
    run = read_text(tmp_path, text)
    for metric, expected in want.items():
        assert same(pts(run, metric), expected), (metric, pts(run, metric))


@pytest.mark.parametrize("name,text,want", CASES, ids=[c[0] for c in CASES])
def test_format_cut_and_garbled(tmp_path: Path, name: str, text: str, want: dict):
    """Every prefix of the text (a paste cut anywhere) and junk bytes never raise, and never invent points."""
    full = read_text(tmp_path, text, "full.log")
    n_full = len(full.scalars)
    raw = text.encode()
    for cut in range(0, len(raw), max(1, len(raw) // 23)):
        run = read_text(tmp_path, raw[:cut], "cut.log")
        assert len(run.scalars) <= n_full
    junk = read_text(tmp_path, b"\x00\xff\xfe garbage \x1b[31m" + raw.replace(b"\n", b"\n\x00", 1) + b"\xff" * 50, "junk.log")
    assert all(a.status in ("read", "partial") for a in junk.artifacts)


def test_prose_is_not_read_as_columns(tmp_path: Path):
    run = read_text(tmp_path, "We trained 3 models\n2 of them 4 times\nin 2023 1 failed\n")
    assert run.scalars.empty


def test_fairseq_overflow_and_minimum_scale_events(tmp_path: Path):
    # https://github.com/facebookresearch/fairseq/issues/1895 and fairseq/optim/dynamic_loss_scaler.py
    run = read_text(tmp_path,
                    "2020-03-23 11:41:18 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 0.00048828125\n"
                    "2022-10-18 04:38:08 | INFO | fairseq.trainer | NOTE: gradient overflow detected, ignoring gradient, "
                    "setting loss scale to: 8.0\n"
                    "FloatingPointError: Minimum loss scale reached (0.0001). Your loss is probably exploding. Try lowering "
                    "the learning rate, using gradient clipping or increasing the batch size.\n")
    kinds = [(e.kind, e.data.get("new"), e.data.get("min_scale")) for e in run.events if e.kind != "traceback"]
    assert kinds == [("overflow", 0.00048828125, None), ("overflow", 8.0, None), ("loss_scale_min", None, 0.0001)]
    assert any(e.kind == "traceback" and e.data["exc_type"] == "FloatingPointError" for e in run.events)


def test_state_dict_size_mismatch_is_an_error_event(tmp_path: Path):
    # https://github.com/ymcui/Chinese-LLaMA-Alpaca-2/issues/392
    run = read_text(tmp_path, "\tsize mismatch for base_model.model.model.layers.76.mlp.gate_proj.lora_A.default.weight: "
                              "copying a param with shape torch.Size([0]) from checkpoint, the shape in current model "
                              "is torch.Size([64, 8192]).\n")
    (ev,) = run.events
    assert ev.kind == "error" and ev.data["variant"] == "state_dict_size_mismatch"
    assert ev.data["checkpoint_shape"] == [0] and ev.data["model_shape"] == [64, 8192]
