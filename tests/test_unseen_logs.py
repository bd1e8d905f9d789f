"""Logs the dev cases never showed: real lines quoted from public issue threads (source on each case),
each a failure (or a healthy run) the diagnosis got wrong before. Every case is a shape, not a sample:
the assertions are on what the shape means (a log_metrics block is read, a warning alone is not a
failure, a low loss scale reached slowly is not a collapse), so a cousin of each passes too.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autopsy.pipeline import analyze


def _run(tmp_path: Path, log: str, config: str | None = None, name: str = "log.txt"):
    (tmp_path / name).write_text(log)
    if config is not None:
        (tmp_path / "config.txt").write_text(config)
    return analyze(tmp_path)


def _verdict(a):
    return a.diagnosis.verdict.status, a.diagnosis.verdict.root_cause


def _series(a, metric: str) -> list[float]:
    df = a.run.scalars
    return df[df["metric"] == metric].sort_values("step")["value"].tolist()


# -- formats read for the first time -----------------------------------------------------------------

# https://github.com/huggingface/transformers/issues/10819 (run_translation.py, mt5-small, --fp16)
HF_EVAL_BLOCK = """***** eval metrics *****
  epoch                     =     3.0
  eval_bleu                 =  0.0039
  eval_gen_len              =    2.95
  eval_loss                 =     nan
  eval_mem_cpu_alloc_delta  =     4MB
  eval_runtime              = 72.1865
  eval_samples              =    1999
  eval_samples_per_second   =  27.692
"""


def test_hf_log_metrics_block_is_read_and_fp16_named(tmp_path: Path):
    a = _run(tmp_path, HF_EVAL_BLOCK, "python run_translation.py --model_name_or_path google/mt5-small --do_train "
                                      "--do_eval --predict_with_generate --max_train_samples 100 --fp16\n")
    loss = _series(a, "eval_loss")
    assert len(loss) == 1 and math.isnan(loss[0])
    assert _series(a, "eval_bleu") == [0.0039]
    assert not _series(a, "eval_runtime") and not _series(a, "eval_mem_cpu_alloc_delta")  # bookkeeping, not signals
    assert _verdict(a) == ("failed", "fp16_overflow")


def test_hf_log_metrics_block_truncated_keeps_what_was_printed(tmp_path: Path):
    a = _run(tmp_path, HF_EVAL_BLOCK[:HF_EVAL_BLOCK.index("  eval_loss")] + "  eval_lo")
    assert _series(a, "eval_bleu") == [0.0039] and not _series(a, "eval_loss")


# https://github.com/guillaumegenthial/sequence_tagging/issues/47 (a TF1 loop's logging lines, no step counter)
COUNTERLESS = """2018-03-23 15:29:33,355:INFO: train loss:1.10886
2018-03-23 15:31:41,870:INFO: train loss:1.53702
2018-03-23 15:33:53,753:INFO: train loss:0.866067
2018-03-23 15:36:03,349:INFO: train loss:1.32708
2018-03-23 15:38:15,538:INFO: train loss:1.20029
2018-03-23 15:40:22,720:INFO: train loss:nan
2018-03-23 15:42:27,061:INFO: train loss:nan
2018-03-23 16:04:34,913:INFO: acc 0.74 - f1 0.02
"""


def test_counterless_loss_lines_are_numbered_in_order(tmp_path: Path):
    a = _run(tmp_path, COUNTERLESS)
    loss = _series(a, "loss")
    assert len(loss) == 7 and loss[:2] == [1.10886, 1.53702] and all(math.isnan(v) for v in loss[5:])
    assert a.diagnosis.verdict.status != "healthy"


def test_a_loss_mentioned_in_prose_is_not_a_series(tmp_path: Path):
    a = _run(tmp_path, "My train loss: 1.2 at first, and I expected the val loss: 0.9 to drop.\nAny idea?\n")
    assert not _series(a, "loss") and not _series(a, "eval_loss")


# https://github.com/huggingface/trl/issues/5697 (the reporter's table of TRL GRPO metrics, rows elided)
GRPO_TABLE = """Step  loss  grad_norm  reward_mean  clipped_ratio  mean_length
1     0     0          0            1.0            256
2     0     0          0            1.0            256
...
10    0     0          0            1.0            256
"""
GRPO_CODE = """training_args = GRPOConfig(
    output_dir="output",
    # all defaults: per_device_train_batch_size=8, num_generations=8, max_completion_length=256
    logging_steps=1,
)
trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=accuracy_reward, args=training_args)
"""


def test_headed_table_with_elided_rows_names_truncated_completions(tmp_path: Path):
    a = _run(tmp_path, GRPO_TABLE, GRPO_CODE)
    assert _series(a, "mean_length") == [256.0, 256.0, 256.0]
    assert _verdict(a) == ("failed", "completions_truncated")  # not "labels masked": a GRPO loss is 0 by construction


# -- messages: what they say, and what prose about them does not ------------------------------------

def test_prose_mentioning_oom_is_not_an_oom(tmp_path: Path):
    # https://github.com/kenziyuliu/MS-G3D/issues/9: apex O2 overflow at a large scale, maintainer: nothing to worry about
    a = _run(tmp_path, "Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to 131072.0\n",
             "MS-G3D, '--amp_opt_level 2 --half' (needed to avoid CUDA out of memory), single RTX 2080 Ti\n")
    assert not a.run.events_of("oom")
    assert a.diagnosis.verdict.status == "healthy"


def test_oom_messages_of_other_frameworks(tmp_path: Path):
    # TF's allocator message, as pasted in many Keras/TF threads
    a = _run(tmp_path, "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor "
                       "with shape[64,256,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0\n")
    assert a.run.events_of("oom") and _verdict(a) == ("failed", "out_of_memory")


def test_low_loss_scale_reached_slowly_is_not_a_collapse(tmp_path: Path):
    # https://github.com/mailong25/self-supervised-speech-recognition/issues/20 (fairseq wav2vec2, maintainer: normal)
    a = _run(tmp_path, """2021-01-26 03:01:31 | INFO | fairseq.trainer | begin training epoch 1
2021-01-26 03:02:32 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0
2021-01-26 03:03:23 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 32.0
2021-01-26 03:04:15 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 16.0
2021-01-26 03:10:26 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 8.0
2021-01-26 03:56:38 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 4.
""")
    assert a.diagnosis.verdict.status == "healthy"
    (f,) = [f for f in a.diagnosis.findings if f.code == "PREC001"]
    assert f.severity == "warning" and "fell to 4" in f.title


def test_consecutive_overflows_to_a_low_scale_are_a_collapse(tmp_path: Path):
    # DeepSpeed's message (loss_scaler.py update_scale) on consecutive steps, as in Chinese-LLaMA-Alpaca#534
    lines = [f"{s}/2724 [13:58:09<86:18:35, 132.44s/it][2023-06-07 22:16:00,018] [INFO] [loss_scaler.py:181:update_scale] "
             f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (7 - i)}, reducing to {2 ** (6 - i)}"
             for i, s in enumerate(range(378, 383))]
    a = _run(tmp_path, "\n".join(" 14%|█▍        | " + x for x in lines) + "\n")
    assert _verdict(a) == ("failed", "loss_scale_collapse")


def test_icefall_grad_scale_abort_is_a_collapse(tmp_path: Path):
    # https://github.com/k2-fsa/ZipVoice/issues/17
    a = _run(tmp_path, """Traceback (most recent call last):
  File "/root/workspace/ZipVoice/zipvoice/train_flow.py", line 769, in train_one_epoch
    raise RuntimeError(
RuntimeError: grad_scale is too small, exiting: 2.3283064365386963e-10
""")
    assert _verdict(a) == ("failed", "loss_scale_collapse")


def test_checkpointing_warning_alone_is_not_a_failure(tmp_path: Path):
    # https://github.com/Victorwz/LLaVA-Llama-3/issues/4 (author: only at iteration 0, no effect on training)
    a = _run(tmp_path, "/usr/local/lib/python3.10/dist-packages/torch/utils/checkpoint.py:61: UserWarning: None of "
                       "the inputs have requires_grad=True. Gradients will be None\n  warnings.warn(\n")
    assert a.diagnosis.verdict.status == "healthy"
    (f,) = [f for f in a.diagnosis.findings if f.code == "GRAD001"]
    assert f.severity == "warning"


def test_checkpointing_warning_with_gradients_flowing_says_nothing(tmp_path: Path):
    # https://github.com/huggingface/trl/issues/3452 (GRPO: loss 0 by construction, grad_norm non-zero)
    a = _run(tmp_path, "/home/cy/anaconda3/envs/hf_trl/lib/python3.11/site-packages/torch/utils/checkpoint.py:87: "
                       "UserWarning: None of the inputs have requires_grad=True. Gradients will be None\n" + "".join(
        f"{{'loss': 0.0, 'grad_norm': {g}, 'learning_rate': 6.9e-06, 'completion_length': 232.8, 'reward': 1.71, "
        f"'reward_std': 0.57, 'kl': 0.00053, 'epoch': 0.{31 + i}}}\n" for i, g in enumerate((0.0865, 0.0966, 0.1058))))
    assert a.diagnosis.verdict.status == "healthy"
    assert not [f for f in a.diagnosis.findings if f.code in ("GRAD001", "LBL001")]


def test_checkpointing_warning_before_the_backward_error_is_the_cause(tmp_path: Path):
    # https://github.com/ymcui/Chinese-LLaMA-Alpaca/issues/847
    a = _run(tmp_path, """/home/tupk/anaconda3/envs/nlp/lib/python3.8/site-packages/torch/utils/checkpoint.py:31: UserWarning: None of the inputs have requires_grad=True. Gradients will be None
  warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")
Traceback (most recent call last):
    tr_loss_step = self.training_step(model, inputs)
RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn
""")
    assert _verdict(a) == ("failed", "gradientless_params")


def test_unsloth_dataset_check_names_masked_labels(tmp_path: Path):
    # https://github.com/unslothai/unsloth/issues/1290 (message from unsloth's train_on_responses_only check)
    a = _run(tmp_path, "Unsloth: Most labels in your dataset are -100. Training losses will be all 0.\n"
                       "For example, are you sure you used `train_on_responses_only` correctly?\n")
    assert _verdict(a) == ("failed", "all_labels_masked")


def test_device_assert_on_two_lines_names_the_vocabulary(tmp_path: Path):
    # https://github.com/huggingface/transformers/issues/1848
    a = _run(tmp_path, "CUDA runtime error (59) : device-side assert triggered\n"
                       "Assertion 'srcIndex < srcSelectDimSize' failed\n")
    assert _verdict(a) == ("failed", "vocab_mismatch")


# -- judging -------------------------------------------------------------------------------------

def test_fabric_16_true_precision_is_fp16(tmp_path: Path):
    # https://github.com/Lightning-AI/litgpt/issues/291 (falcon-7b adapter, precision 16-true on V100)
    log = "".join(f"iter {i} step {i // 7}: loss {v}, iter time: 1806.42ms\n"
                  for i, v in enumerate(["0.5254", "1.5451", "2.3252", "1.1392", "1.3027", "3.6702", "1.1289", "1.1201",
                                         "nan", "nan", "nan"]))
    a = _run(tmp_path, log, "devices = 8\nmicro_batch_size = 1\nprecision: 16-true\n")
    assert a.run.config.get("fp16") is True
    assert _verdict(a) == ("failed", "fp16_overflow")


def test_nan_in_an_excerpt_from_mid_run_is_not_from_the_start(tmp_path: Path):
    # https://github.com/open-mmlab/mmpretrain/issues/1632: the paste starts at epoch 165, loss nan
    log = "".join(f"2023/06/09 23:47:22 - mmengine - INFO - Epoch(train) [{e}][{i}/351] lr: 2.3623e-03 eta: 5 days, "
                  f"22:27:01 time: 0.9934 data_time: 0.0023 memory: 48596 loss: nan\n"
                  for e, i in ((165, 300), (166, 100), (166, 200), (166, 300)))
    a = _run(tmp_path, log)
    assert not [f for f in a.diagnosis.findings if f.code == "LBL001"]
    assert a.diagnosis.verdict.status != "healthy"


# https://github.com/keras-team/keras/issues/5239 (Keras 1.2 Progbar: no per-step time; rmsprop at its default LR)
KERAS1 = "".join(f"Epoch {e}/200\n50000/50000 [==============================] - 16s - loss: {tl} - acc: 0.61 - "
                 f"val_loss: {v} - val_acc: 0.59\n"
                 for e, (tl, v) in enumerate([("1.6163", "1.1957"), ("1.2506", "1.0052"), ("1.1442", "1.2103"),
                                             ("1.1237", "0.9753"), ("1.1419", "1.2223"), ("1.1594", "1.2934"),
                                             ("1.1765", "1.2739"), ("1.2114", "1.2458")], start=1))


def test_keras1_rows_are_read_and_a_late_rise_is_named(tmp_path: Path):
    a = _run(tmp_path, KERAS1)
    assert _series(a, "loss")[:2] == [1.6163, 1.2506] and len(_series(a, "eval_loss")) == 8
    assert _verdict(a) == ("failed", "lr_too_high")
    (f,) = [f for f in a.diagnosis.findings if f.code == "DIV001"]
    assert "rising" in f.title


def test_a_loss_that_flattens_with_noise_is_not_a_late_rise(tmp_path: Path):
    vals = ["1.6163", "1.2506", "1.1442", "1.1237", "1.1419", "1.1194", "1.1265", "1.1101"]
    a = _run(tmp_path, "".join(f"Epoch {e}/8\n500/500 [====] - 16s - loss: {v}\n" for e, v in enumerate(vals, 1)))
    assert a.diagnosis.verdict.status == "healthy"


def test_an_exploded_loss_in_one_line_is_named(tmp_path: Path):
    # https://github.com/open-mmlab/mmdetection/issues/4383 (GA-RPN on 1 GPU with the 8-GPU learning rate)
    a = _run(tmp_path, "2021-01-03 10:02:15,629 - mmdet - INFO - Epoch [1][500/58633]   lr: 1.996e-02, eta: 3 days, "
                       "18:12:13, time: 0.434, data_time: 0.005, memory: 4851, loss_rpn_cls: 2.5725, loss_rpn_bbox: "
                       "0.0047, loss_cls: 2326544033.5461, acc: 84.1525, loss_bbox: 135189261.4936, loss: "
                       "2461733416.8998, grad_norm: 1170372919273.4768\n")
    assert _verdict(a) == ("failed", "lr_too_high")


def _d2_lines(rows, between: str = "") -> str:
    """detectron2 CommonMetricPrinter lines, (iter, total_loss, lr) per row."""
    return "".join(f"[03/15 07:45:41 d2.utils.events]:  eta: 0:01:18  iter: {i}  total_loss: {loss}  {between}"
                   f"lr: {lr}  max_mem: 824M\n" for i, loss, lr in rows)


def test_warmup_as_long_as_the_run_is_a_stalled_schedule(tmp_path: Path):
    # https://github.com/facebookresearch/d2go/issues/19 (detectron2 CommonMetricPrinter lines; config cells of the notebook)
    log = _d2_lines(((19, "1.511", "2.3417e-07"), (39, "1.378", "2.175e-07"), (59, "1.466", "2.0083e-07")),
                    "loss_cls: 0.7482  time: 0.2877  data_time: 0.0751  ")
    a = _run(tmp_path, log, "cfg.SOLVER.MAX_ITER = 300\ncfg.SOLVER.WARMUP_ITERS = 300\n")
    assert a.run.config.get("max_steps") == 300 and a.run.config.get("warmup_steps") == 300
    assert _verdict(a) == ("failed", "lr_schedule_stalled")


def test_a_short_warmup_is_not_flagged(tmp_path: Path):
    log = _d2_lines(((19, "1.511", "0.00025"), (39, "1.378", "0.00025"), (59, "1.266", "0.00025")))
    a = _run(tmp_path, log, "cfg.SOLVER.MAX_ITER = 300\ncfg.SOLVER.WARMUP_ITERS = 30\n")
    assert a.diagnosis.verdict.status == "healthy"


def test_numpy_warning_in_data_code_names_the_data(tmp_path: Path):
    # https://github.com/thtrieu/darkflow/issues/151 (an annotation with xmin > xmax; sqrt of a negative width)
    a = _run(tmp_path, "Parsing cfg/yolo-2c.cfg\nBuilding net ...\n"
                       "/home/ubuntu/darkflow/net/yolov2/data.py:40: RuntimeWarning: invalid value encountered in sqrt\n"
                       "obj[3] = np.sqrt(obj[3])\n"
                       "/home/ubuntu/darkflow/net/yolov2/data.py:41: RuntimeWarning: invalid value encountered in sqrt\n")
    assert _verdict(a) == ("failed", "nan_in_data")


def test_data_warning_and_calm_nan_are_one_finding(tmp_path: Path):
    # the darkflow warning (above) followed by a NaN out of a calm curve: one DATA001 holding both pieces of evidence
    curve = "".join(f"{{'loss': {2.0 - i * 0.01:.4f}, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': {i / 100}}}\n"
                    for i in range(1, 21))
    a = _run(tmp_path, curve + "/home/ubuntu/darkflow/net/yolov2/data.py:40: RuntimeWarning: invalid value encountered "
                       "in sqrt\n" + "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.21}\n" * 3)
    data = [f for f in a.diagnosis.findings if f.code == "DATA001"]
    assert len(data) == 1 and data[0].title.startswith("The input pipeline computes NaN/Inf")
    assert any("no divergence before the NaN" in ev.detail for ev in data[0].evidence)
    assert _verdict(a) == ("failed", "nan_in_data")


def test_numpy_warning_in_model_code_is_not_the_data(tmp_path: Path):
    a = _run(tmp_path, "/home/u/proj/model/attention.py:88: RuntimeWarning: overflow encountered in exp\n")
    assert not [f for f in a.diagnosis.findings if f.code == "DATA001"]


def test_known_bug_shape_on_an_affected_version_is_a_candidate_to_check(tmp_path: Path):
    # https://github.com/hiyouga/LlamaFactory/issues/5627 (system-info block; ZeRO stage and overlap_comm not given)
    log = ("{'loss': 1.4596, 'grad_norm': nan, 'learning_rate': 4.552255167404752e-06, 'epoch': 0.66}\n"
           + "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 4.549912997495027e-06, 'epoch': 0.66}\n" * 3)
    a = _run(tmp_path, log, "- `llamafactory` version: 0.9.1.dev0\n- Transformers version: 4.45.0.dev0\n"
                            "- DeepSpeed version: 0.14.0\n")
    fw = [f for f in a.diagnosis.findings if f.code == "FW001"]
    assert [f.title.split(" ")[0] for f in fw] == ["KI-DEEPSPEED-001"]  # not the Gemma-2 entry: the model is unknown
    assert fw[0].severity == "warning" and "zero_stage" in fw[0].message
    assert a.diagnosis.verdict.status == "inconclusive"  # the shape alone does not make it the cause


def test_imagenet_progress_meter_lines_are_read(tmp_path: Path):
    # https://github.com/zhangy0822/USER/issues/8 (MoCo-style loop; a contrastive loss is negative by construction)
    a = _run(tmp_path, "2024-08-27 16:18:16,449 Epoch: [0][199/1133]    Eit 200  lr 0.0005  Le_moco -0.7086 (-0.6772)  "
                       "Le -7.4980 (-7.1140)  Loss -8.2066 (-7.7912)     Time 5.422 (0.000)      Data 0.065 (0.000)\n"
                       "2024-08-27 16:43:12,104 Epoch: [0][399/1133]    Eit 400  lr 0.0005  Le_moco -0.7247 (-0.6984)  "
                       "Le -7.5738 (-7.3367)  Loss -8.2985 (-8.0350)     Time 5.876 (0.000)      Data 0.074 (0.000)\n")
    assert _series(a, "loss") == [-8.2066, -8.2985] and _series(a, "Le_moco") == [-0.7086, -0.7247]
    assert not _series(a, "Time")
    assert a.diagnosis.verdict.status == "healthy"


def test_scheduler_verbose_lines_give_the_lr(tmp_path: Path):
    # https://github.com/pytorch/pytorch/issues/65417 (OneCycleLR with verbose=True)
    a = _run(tmp_path, "".join(f"Adjusting learning rate of group 0 to {v}.\n"
                               for v in ("4.0001e-03", "4.0004e-03", "4.0009e-03", "4.0017e-03")))
    assert _series(a, "learning_rate") == [4.0001e-03, 4.0004e-03, 4.0009e-03, 4.0017e-03]


def test_a_finite_explosion_before_the_nan_names_the_lr(tmp_path: Path):
    # https://github.com/amdegroot/ssd.pytorch/issues/275 (batch 1 with the default LR; no fp16)
    a = _run(tmp_path, "".join(f"iter {i} || Loss: {v} || timer: 0.0842 sec.\n" for i, v in
                               zip(range(0, 80, 10), ["3.2635", "14.6995", "12.2860", "14.0080", "20.0848",
                                                      "29821698048.0000", "nan", "nan"])))
    assert _verdict(a) == ("failed", "lr_too_high")


def test_batch_counter_lines_with_a_pasted_precision(tmp_path: Path):
    # https://github.com/IDEA-CCNL/Fengshenbang-LM/issues/222 (Lightning, T5, precision=16: NaN from batch 0)
    a = _run(tmp_path, "precision=16，loss nan（如下所示），precision=32或者bf16则正常\n\n" + "".join(
        f"Epoch 0/1 | Batch {b}/15582 | Train Loss nan | Learning Rate {lr}\n"
        for b, lr in ((0, "0.0"), (100, "2e-08"), (200, "4e-08"), (300, "6e-08"))))
    assert a.run.config.get("fp16") is True
    assert len(_series(a, "loss")) == 4 and _series(a, "learning_rate")[1] == 2e-08
    assert _verdict(a) == ("failed", "fp16_overflow")


def test_a_tqdm_description_with_a_loss_is_one_point(tmp_path: Path):
    # https://github.com/jeffffffli/res-loglikelihood-regression/issues/33 (a negative NLL is normal)
    a = _run(tmp_path, "loss: -8.48068483 | acc: 0.2207:  71%|█████████████████████▎        | 417/586 "
                       "[47:52<27:15,  9.68s/it]\n")
    assert _series(a, "loss") == [-8.48068483] and _series(a, "acc") == []
    assert a.diagnosis.verdict.status == "healthy" and a.diagnosis.verdict.confidence < 0.9


def test_a_pasted_summary_of_metric_pairs_is_one_record(tmp_path: Path):
    # https://github.com/greyhaven-ai/autocontext/pull/1067 (TRL GRPO metrics pasted as a summary; cap 256)
    a = _run(tmp_path, "completions/mean_length: 256   completions/clipped_ratio: 1   mean_terminated_length: 0\n"
                       "reward: 0   reward_std: 0   frac_reward_zero_std: 1   loss: 0   grad_norm: 0\n",
             "max_completion_length=256\n")
    df = a.run.scalars
    assert set(df["metric"]) >= {"completions/clipped_ratio", "reward_std", "loss", "grad_norm"}
    assert set(df["step"]) == {1}  # the two lines hold no key twice: one record, wrapped
    assert _verdict(a) == ("failed", "completions_truncated")


def test_one_summary_line_without_flat_rewards_is_not_truncation(tmp_path: Path):
    a = _run(tmp_path, "completions/mean_length: 256   completions/clipped_ratio: 1   reward: 0.61   reward_std: 0.32\n",
             "max_completion_length=256\n")
    assert not [f for f in a.diagnosis.findings if f.code == "GEN001"]  # one log, rewards still vary: a phase at most


def test_pair_records_repeat_and_step_on_a_repeated_key(tmp_path: Path):
    log = "".join(f"step: {i}, loss: {3 - i / 10:.2f}, lr: 0.0001, acc: 0.{i}\n" for i in range(1, 6))
    log += "loss: 1.20 | grad_norm: 0.9 | tokens: 512\nloss: 1.10 | grad_norm: 0.8 | tokens: 512\n"
    a = _run(tmp_path, log)
    assert _series(a, "loss") == [2.9, 2.8, 2.7, 2.6, 2.5, 1.2, 1.1]
    assert sorted(set(a.run.scalars["step"])) == [1, 2, 3, 4, 5, 6, 7]


def test_prose_and_mixed_lines_are_not_pair_records(tmp_path: Path):
    a = _run(tmp_path, "I trained with loss: 0.5, lr: 1e-4, batch: 8 and it diverged\n"  # words between the pairs
                       "acc: 0.5  f1: 0.4  precision: 0.3\n"  # pairs only, but no training signal named
                       "loss: nan\n")  # one pair: read only because it is NaN (round 19, openvla#49's "train_loss:  nan")
    assert a.run.scalars[["metric", "line"]].values.tolist() == [["loss", 3]]
    assert a.run.scalars["value"].isna().all()


# -- a trainer's own finiteness check: the stop message is the non-finite evidence -------------------------------

def test_keras_terminate_on_nan_is_a_nonfinite_stop(tmp_path: Path):
    # https://github.com/bricewalker/Hey-Jetson/issues/7 (keras.callbacks.TerminateOnNaN)
    a = _run(tmp_path, "3455/3455 [==============================] - 21350s 6s/step - loss: 356.8575 - val_loss: 237.5635\n"
                       "Epoch 2/30\n"
                       "1883/3455 [===============>..............] - ETA: 2:39:53 - loss: nan     Batch 1882: Invalid loss, "
                       "terminating training\n")
    assert [e.kind for e in a.run.events] == ["nan_stop"]
    assert a.diagnosis.verdict.status != "healthy"
    assert any(f.code == "NUM001" for f in a.diagnosis.findings)


def test_detectron2_floating_point_error_is_the_nan_not_an_unknown_crash(tmp_path: Path):
    # https://github.com/facebookresearch/detectron2/issues/508 (SimpleTrainer._detect_anomaly)
    a = _run(tmp_path, "FloatingPointError: Loss became infinite or NaN at iteration=27!\n"
                       "loss_dict = {'loss_cls': tensor(nan, device='cuda:0', grad_fn=), 'loss_box_reg': "
                       "tensor(0.2576, device='cuda:0', grad_fn=)}\n")
    stop = a.run.events_of("nan_stop")
    assert stop and stop[0].data["iteration"] == 27
    assert not [f for f in a.diagnosis.findings if f.code == "CRASH001" and f.severity == "error"]
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and num[0].first_step == 27
    assert a.diagnosis.verdict.status == "inconclusive"  # two lines: the NaN, not why (the thread: base_lr for 8 GPUs)


def test_tensorflow_nan_in_summary_histogram_is_a_nonfinite_stop(tmp_path: Path):
    # https://github.com/kratzert/finetune_alexnet_with_tensorflow/issues/23
    a = _run(tmp_path, "tensorflow.python.framework.errors_impl.InvalidArgumentError: Nan in summary histogram for: "
                       "fc8/biases_0\n")
    stop = a.run.events_of("nan_stop")
    assert stop and stop[0].data == {"tensor": "fc8/biases_0", "what": "weights"}
    assert a.diagnosis.verdict.status != "healthy"


ESPNET_DATA = (  # https://github.com/espnet/espnet/issues/3630 (ESPnet2 trainer and CTC warnings)
    "(trainer:582) WARNING: The grad norm is nan. Skipping updating the model.\n"
    "(ctc:71) WARNING: 5/42 samples got nan grad. These were ignored for CTC loss.\n"
    "(trainer:404) WARNING: The gradients at all steps are invalid in this epoch. Something seems wrong. This training "
    "was stopped at 2epoch\n")


def test_espnet_invalid_gradients_stop_with_nan_samples_names_the_data(tmp_path: Path):
    a = _run(tmp_path, ESPNET_DATA)
    assert a.run.events_of("nan_stop") and a.run.events_of("nan_input")
    assert _verdict(a) == ("failed", "nan_in_data")


def test_espnet_invalid_gradients_stop_under_use_amp_is_fp16(tmp_path: Path):
    # https://github.com/espnet/espnet/issues/3104 (the LM ran with use_amp: true)
    a = _run(tmp_path, "(trainer:582) WARNING: The grad norm is nan. Skipping updating the model.\n"
                       "(trainer:404) WARNING: The gradients at all steps are invalid in this epoch. Something seems "
                       "wrong. This training was stopped at 2epoch\n", "use_amp: true\n")
    assert a.run.config.get("fp16") is True
    assert _verdict(a) == ("failed", "fp16_overflow")
    (tmp_path / "no_amp").mkdir()
    b = _run(tmp_path / "no_amp", "(trainer:404) WARNING: The gradients at all steps are invalid in this epoch. Something seems wrong.\n")
    assert b.diagnosis.verdict.status == "inconclusive"  # the stop alone names no cause


def test_device_side_assert_without_traceback_is_a_crash_not_healthy(tmp_path: Path):
    # https://github.com/unslothai/unsloth-zoo/pull/600 (the PR's repro output, dtype float16)
    log = ("python scripts/gemma4_grpo_sudoku_repro.py --model unsloth/gemma-4-E2B-it --dtype float16 --max-steps 8 "
           "--grad-accum 4 --num-generations 2\n\nUnpatched result (dtype=float16):\n\n"
           "step 1: loss=0.0, grad_norm=0.1108, reward=1.416\nstep 2: CUDA error: device-side assert triggered\n")
    a = _run(tmp_path, log)
    # a run that samples completions in float16: the sampler's assert on non-finite probabilities
    assert _verdict(a) == ("failed", "fp16_overflow")
    (tmp_path / "sft").mkdir()
    b = _run(tmp_path / "sft", "step 1: loss=2.31, grad_norm=1.2\nstep 2: CUDA error: device-side assert triggered\n")
    crash = [f for f in b.diagnosis.findings if f.code == "CRASH001"]
    assert crash and crash[0].title.startswith("Crashed with CUDA error")
    assert b.diagnosis.verdict.status != "healthy"


def test_completion_only_collator_warning_tail_is_a_missing_response_key(tmp_path: Path):
    # https://github.com/foundation-model-stack/fms-hf-tuning/issues/18 (TRL DataCollatorForCompletionOnlyLM; the
    # paste keeps only the end of each warning)
    log = ("### Label: no complaint<|endoftext|><|endoftext|> This instance will be ignored in loss calculation. Note, if "
           "this happens often, consider increasing the `max_seq_length`. \n"
           "### Label: complaint This instance will be ignored in loss calculation. Note, if this happens often, "
           "consider increasing the `max_seq_length`.\n  \n"
           "{'loss': 0.0, 'learning_rate': 6.716876096514944e-06, 'epoch': 2.04}\n...\n"
           "{'loss': 0.0, 'learning_rate': 0.0, 'epoch': 5.0}  \n")
    a = _run(tmp_path, log)
    assert len(a.run.events_of("response_key_missing")) >= 1
    assert _verdict(a) == ("failed", "all_labels_masked")


def _hf_losses(values, lr=1.77e-4):
    return "".join(f"{{'loss': {v}, 'learning_rate': {lr}, 'epoch': 0.24}}\n" for v in values)


def test_loss_spiking_again_and_higher_at_the_end_is_divergence(tmp_path: Path):
    # https://github.com/haotian-liu/LLaVA/issues/918 (task LoRA at lr 2e-4: 0.55-0.8, then 4.27, then 6.66 and stays)
    a = _run(tmp_path, _hf_losses([0.6623, 0.8022, 4.2653, 0.77, 0.556, 0.8223, 6.6635]))
    div = [f for f in a.diagnosis.findings if f.code == "DIV001"]
    assert div and div[0].first_step is not None and "6.663" in div[0].title
    assert _verdict(a) == ("failed", "lr_too_high")


@pytest.mark.parametrize("values", [
    [0.66, 0.80, 0.71, 0.77, 0.55, 0.82, 6.66],  # one jump at the very end: a blip until the next log says otherwise
    [0.66, 0.80, 4.27, 0.77, 0.55, 0.82, 0.61],  # a spike that came back
    [0.66, 0.80, 4.27, 0.77, 0.55, 6.66, 0.61],  # ... twice
])
def test_single_or_recovered_spikes_are_not_divergence(tmp_path: Path, values):
    a = _run(tmp_path, _hf_losses(values))
    assert not [f for f in a.diagnosis.findings if f.code == "DIV001"]


# -- nothing to train ------------------------------------------------------------------------------------------

PEFT_FROZEN = "trainable params: 0 || all params: 1,066,493,952 || trainable%: 0.0 \n"  # huggingface/peft#1410
PEFT_OK = "trainable params: 1,179,648 || all params: 1,066,493,952 || trainable%: 0.11060990995662018  \n"  # same thread


def test_zero_trainable_parameters_then_training_is_gradientless(tmp_path: Path):
    a = _run(tmp_path, PEFT_FROZEN + _hf_losses([2.31, 2.30, 2.31, 2.32], lr=2e-4))
    ev = a.run.events_of("no_trainable_params")
    assert ev and ev[0].data["all_params"] == 1066493952
    assert _verdict(a) == ("failed", "gradientless_params")


def test_zero_trainable_parameters_without_training_is_only_a_warning(tmp_path: Path):
    a = _run(tmp_path, PEFT_FROZEN + "Input: hello\n")  # an inference script prints the same line
    grad = [f for f in a.diagnosis.findings if f.code == "GRAD001"]
    assert grad and grad[0].severity == "warning"
    assert a.diagnosis.verdict.status != "failed"


def test_trainable_parameters_and_keras_non_trainable_zero_are_not_frozen(tmp_path: Path):
    a = _run(tmp_path, PEFT_OK + "Total params: 1,000\nTrainable params: 1,000\nNon-trainable params: 0\n"
             + _hf_losses([2.31, 2.1, 1.9, 1.7], lr=2e-4))
    assert not a.run.events_of("no_trainable_params")
    assert a.diagnosis.verdict.status == "healthy"


def test_grad_scaler_without_inf_checks_is_gradientless_not_a_crash(tmp_path: Path):
    # torch/amp/grad_scaler.py GradScaler.step: assert len(optimizer_state["found_inf_per_device"]) > 0,
    # "No inf checks were recorded for this optimizer." (no parameter of the optimizer had a .grad)
    a = _run(tmp_path, "Traceback (most recent call last):\n  File \"train.py\", line 88, in <module>\n"
                       "    scaler.step(optimizer)\nAssertionError: No inf checks were recorded for this optimizer.\n")
    assert _verdict(a) == ("failed", "gradientless_params")
    assert not [f for f in a.diagnosis.findings if f.code == "CRASH001" and f.severity == "error"]


def test_paddledetection_static_lines_with_quoted_values_are_read(tmp_path: Path):
    # https://github.com/PaddlePaddle/PaddleDetection/issues/1946 (EfficientDet, 8-GPU LR on 1 GPU)
    log = ("2020-12-22 07:57:49,194-INFO: iter: 0, lr: 0.001000, 'loss_cls': '1.144142', 'loss_bbox': '0.012837', "
           "'loss': '1.785993', eta: 0:13:17, batch_cost: 0.00797 sec, ips: 250.91553 images/sec\n"
           "2020-12-22 08:06:04,634-INFO: iter: 1340, lr: 0.019991, 'loss_cls': '0.712402', 'loss_bbox': '0.010561', "
           "'loss': '1.215312', eta: 11:56:02, batch_cost: 0.43546 sec, ips: 4.59280 images/sec\n"
           "2020-12-22 08:09:37,999-INFO: iter: 1860, lr: 0.019983, 'loss_cls': 'nan', 'loss_bbox': 'nan', 'loss': 'nan', "
           "eta: 13:18:26, batch_cost: 0.48815 sec, ips: 4.09711 images/sec\n")
    a = _run(tmp_path, log)
    loss = a.run.series("loss")
    assert list(loss["step"]) == [0, 1340, 1860] and math.isnan(float(loss["value"].iloc[-1]))
    assert list(a.run.series("loss_cls")["value"])[:2] == [1.144142, 0.712402]
    assert a.diagnosis.verdict.status == "failed"


def test_accelerate_bf16_refusal_is_unsupported_hardware(tmp_path: Path):
    # https://github.com/Linaqruf/kohya-trainer/issues/246 (accelerate on a T4/V100 with mixed_precision = "bf16")
    a = _run(tmp_path, "ValueError: bf16 mixed precision requires PyTorch >= 1.10 and a supported device.\n",
             'mixed_precision = "bf16"\n')
    assert _verdict(a) == ("failed", "bf16_unsupported_hardware")


FRCNN = (  # https://github.com/jwyang/faster-rcnn.pytorch/issues/562 (custom VOC data with degenerate boxes)
    "Loading pretrained weights from data/pretrained_model/resnet101_caffe.pth\n"
    "[session 1][epoch  1][iter    0/2892] loss: 2.0858, lr: 1.00e-04\n"
    "                        fg/bg=(10/118), time cost: 0.233441\n"
    "                        rpn_cls: 0.7161, rpn_box: 0.0311, rcnn_cls: 1.1516, rcnn_box 0.1871\n"
    "[session 1][epoch  1][iter  100/2892] loss: nan, lr: 1.00e-04\n"
    "                        fg/bg=(7/121), time cost: 19.324604\n"
    "                        rpn_cls: 0.6902, rpn_box: nan, rcnn_cls: 0.2591, rcnn_box 0.0000\n"
    "[session 1][epoch  1][iter  200/2892] loss: nan, lr: 1.00e-04\n"
    "                        fg/bg=(128/0), time cost: 19.772832\n"
    "                        rpn_cls: 0.6851, rpn_box: nan, rcnn_cls: 1.0205, rcnn_box 0.0000\n")


def test_indented_detail_lines_take_the_counter_line_step(tmp_path: Path):
    a = _run(tmp_path, FRCNN)
    box = a.run.series("rpn_box")
    assert list(box["step"]) == [0, 100, 200] and math.isnan(float(box["value"].iloc[1]))
    assert list(a.run.series("rcnn_cls")["value"]) == [1.1516, 0.2591, 1.0205]


def test_one_loss_term_nan_while_the_others_compute_is_the_data(tmp_path: Path):
    a = _run(tmp_path, FRCNN)
    assert _verdict(a) == ("failed", "nan_in_data")
    data = [f for f in a.diagnosis.findings if f.code == "DATA001"]
    assert data[0].title.startswith("Only rpn_box goes non-finite") and "box" in data[0].remedies[0]


def test_every_term_nan_after_the_first_says_nothing_about_the_data(tmp_path: Path):
    # https://github.com/YunYang1994/TensorFlow2.0-Examples/issues/8: giou_loss NaN first, then every term (weights gone)
    log = ("=> STEP  748   lr: 0.000598   giou_loss: 2.10   conf_loss: 6.18   prob_loss: 0.03   total_loss: 8.31\n"
           "=> STEP  749   lr: 0.000599   giou_loss: 2.54   conf_loss: 6.51   prob_loss: 0.02   total_loss: 9.07\n"
           "=> STEP  750   lr: 0.000600   giou_loss:  nan   conf_loss: 10.89   prob_loss: 0.06   total_loss:  nan\n"
           "=> STEP  751   lr: 0.000601   giou_loss:  nan   conf_loss:  nan   prob_loss:  nan   total_loss:  nan\n")
    a = _run(tmp_path, log)
    assert not [f for f in a.diagnosis.findings if f.code == "DATA001"]


def test_a_rerun_pasted_below_the_failed_run_is_judged_on_its_own(tmp_path: Path):
    # https://github.com/ml-explore/mlx-examples/issues/620 (mlx-lm LoRA: the first run's head, then the rerun)
    first = ("Iter 1: Val loss 2.381, Val took 16.942s\n"
             "Iter 25: Train loss 8.108, Learning Rate 7.000e-05, It/sec 0.984, Tokens/sec 384.079, Trained Tokens 9761, "
             "Peak mem 6.906 GB\n"
             "Iter 50: Train loss 6.509, Learning Rate 7.000e-05, It/sec 0.934, Tokens/sec 364.859, Trained Tokens 19531, "
             "Peak mem 7.058 GB\n")
    rerun = "Training\nStarting training..., iters: 2596\nIter 1: Val loss 2.086, Val took 17.177s\n" + "".join(
        f"Iter {i}: Train loss {v}, Learning Rate 7.000e-05, It/sec 0.999, Tokens/sec 387.697, Trained Tokens 9699, "
        "Peak mem 8.104 GB\n"
        for i, v in ((25, 1.593), (50, 1.406), (75, 3.316), (100, 6.437), (125, 5.478), (150, 4.857), (175, 4.874),
                     (200, 4.604)))
    a = _run(tmp_path, first + "\n" + rerun)
    div = [f for f in a.diagnosis.findings if f.code == "DIV001"]
    assert div and "1.406 -> 4.604" in div[0].title  # the rerun's own best and end, not the first run's 8.108
    assert a.diagnosis.verdict.status != "healthy"


TORCHTUNE_BF16 = ("RuntimeError: bf16 precision was requested but not available on this hardware. Please use fp32 "
                  "precision instead.\n")  # https://github.com/meta-pytorch/torchtune/issues/891


@pytest.mark.parametrize("gpu,cause", [("Tesla T4", "bf16_unsupported_hardware"),
                                       ("NVIDIA GeForce RTX 4090", "framework_bug"),  # the thread's card: NCCL check
                                       (None, "bf16_unsupported_hardware")])
def test_torchtune_bf16_refusal_names_the_card_or_the_check(tmp_path: Path, gpu, cause):
    a = _run(tmp_path, TORCHTUNE_BF16 + (f"GPU 0: {gpu} (UUID: GPU-5f0e)\n" if gpu else ""))  # nvidia-smi -L
    assert _verdict(a) == ("failed", cause)
    assert not [f for f in a.diagnosis.findings if f.code == "CRASH001" and f.severity == "error"]


@pytest.mark.parametrize("blank", [0, 1])
def test_a_model_id_on_the_line_after_from_pretrained_is_the_model(tmp_path: Path, blank: int):
    # the usual layout of a pasted loading cell (the id on its own line, arguments after it)
    cfg = ("model = AutoModelForCausalLM.from_pretrained(\n" + "\n" * blank + '    "google/gemma-2-9b",\n'
           "    torch_dtype=torch.bfloat16,\n)\n")
    a = _run(tmp_path, "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n", cfg)
    assert a.run.config.get("model.name_or_path") == "google/gemma-2-9b"
    (tmp_path / "x").mkdir()
    b = _run(tmp_path / "x", "{'loss': 2.31, 'grad_norm': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n",
             'names = [\n    "google/gemma-2-9b",\n]\n')  # a quoted id with no from_pretrained( above: not the model
    assert b.run.config.get("model.name_or_path") is None
