"""Shapes from the fifth round of unseen logs (threads quoted with their source on each case): what the
diagnosis or the reader got wrong before, asserted on what the shape means, so cousins pass too."""

from __future__ import annotations

import math
from pathlib import Path

from tests.test_unseen_logs import _run, _series, _verdict  # the same helpers: analyse a folder with one log

# https://github.com/HuiZhang0812/DiffusionAD/issues/32 (train.py prints its args, then one line per epoch)
DIFFUSIONAD_ARGS = ("args1.json defaultdict(<class 'str'>, {'img_size': [256, 256], 'Batch_Size': 4, 'EPOCHS': 3000, "
                    "'T': 1000, 'base_channels': 128, 'beta_schedule': 'linear', 'loss_type': 'l2', 'diffusion_lr': "
                    "0.0001, 'seg_lr': 1e-05, 'random_slice': True, 'weight_decay': 0.0, 'save_imgs': True, "
                    "'save_vids': False, 'dropout': 0, 'noise_fn': 'gauss', 'channels': 3, 'eval_normal_t': 200, "
                    "'eval_noisier_t': 400, 'output_path': 'outputs', 'arg_num': '1'})\n")


def test_a_printed_args_dict_is_configuration_not_a_metrics_record(tmp_path: Path):
    a = _run(tmp_path, "class carpet\n" + DIFFUSIONAD_ARGS)
    assert a.run.scalars.empty  # eval_normal_t / Batch_Size are settings, not an eval metric or a signal
    assert "hf_trainer" not in a.run.frameworks
    assert _verdict(a)[0] != "healthy"  # nothing was judged


def test_one_counter_led_nan_loss_line_is_read_and_never_healthy(tmp_path: Path):
    a = _run(tmp_path, "class carpet\n" + DIFFUSIONAD_ARGS + "Epoch:0, Train loss: nan:\n")
    loss = _series(a, "loss")
    assert len(loss) == 1 and math.isnan(loss[0])
    assert _verdict(a)[0] != "healthy"


def test_prose_that_mentions_a_loss_is_still_not_a_metric(tmp_path: Path):
    a = _run(tmp_path, "In epoch 3 the loss: 0.5 was fine, then it diverged.\nSee the attached screenshot.\n")
    assert a.run.scalars.empty


# -- stable-baselines3 / OpenAI baselines key-value tables -----------------------------------------------

# https://github.com/DLR-RM/stable-baselines3/issues/232 (SB3 0.x SAC on Pendulum, env not Monitor-wrapped: no
# rollout/ rows, which is expected)
SB3_SAC = """Using cpu device
Wrapping the env in a DummyVecEnv.
---------------------------------
| time/              |          |
|    episodes        | 1        |
|    fps             | 71       |
|    time_elapsed    | 2        |
|    total timesteps | 200      |
| train/             |          |
|    actor_loss      | 7.2      |
|    critic_loss     | 2.08     |
|    ent_coef        | 0.971    |
|    ent_coef_loss   | -0.0491  |
|    learning_rate   | 0.0003   |
|    n_updates       | 99       |
---------------------------------
"""


def _sb3_ppo_table(it: int, loss: str, rew: str) -> str:
    """SB3 PPO's dump as HumanOutputFormat prints it (layout of a public run's output, ZeshiWu/ML-capstone-project-
    sophie_breakout_results.md: rollout/, time/, train/ sections, keys indented by three)."""
    rows = [("rollout/", ""), ("   ep_len_mean", "261"), ("   ep_rew_mean", rew), ("time/", ""), ("   fps", "67"),
            ("   iterations", str(it)), ("   time_elapsed", str(60 * it)), ("   total_timesteps", str(2048 * it)),
            ("train/", ""), ("   approx_kl", "0.008046303"), ("   clip_fraction", "0.0607"), ("   clip_range", "0.2"),
            ("   entropy_loss", "-1.38"), ("   explained_variance", "-0.0275"), ("   learning_rate", "0.0003"),
            ("   loss", loss), ("   n_updates", str(10 * it)), ("   policy_gradient_loss", "-0.00737"),
            ("   value_loss", "0.0626")]
    dashes = "-" * 41
    return "\n".join([dashes, *(f"| {k:<23} | {v:<11} |" for k, v in rows), dashes]) + "\n"


def test_sb3_tables_are_records_at_their_timestep_and_a_healthy_agent_is_healthy(tmp_path: Path):
    a = _run(tmp_path, "".join(_sb3_ppo_table(i, loss, rew) for i, (loss, rew) in
                               enumerate([("-0.00948", "1.53"), ("0.0412", "1.25"), ("-0.0664", "1.61"),
                                          ("0.0803", "1.9")], start=2)))
    df = a.run.scalars
    assert sorted(df[df["metric"] == "loss"]["step"]) == [4096, 6144, 8192, 10240]
    assert _series(a, "reward") == [1.53, 1.25, 1.61, 1.9]
    assert _verdict(a) == ("healthy", "healthy")  # an RL loss that goes up and down is not a divergence


def test_sb3_table_without_rollout_rows_is_read(tmp_path: Path):
    a = _run(tmp_path, SB3_SAC)
    assert _series(a, "actor_loss") == [7.2] and _series(a, "learning_rate") == [0.0003]
    assert a.run.scalars["step"].unique().tolist() == [200]
    assert _verdict(a) == ("healthy", "healthy")


def test_a_nan_in_an_sb3_table_is_the_onset(tmp_path: Path):
    a = _run(tmp_path, _sb3_ppo_table(2, "-0.00948", "1.53") + _sb3_ppo_table(3, "nan", "nan"))
    assert a.diagnosis.verdict.status != "healthy"
    assert any(f.first_step == 6144 for f in a.diagnosis.findings if f.code == "NUM001")


# OpenAI baselines ppo2 (logger.HumanOutputFormat: no sections), as its console prints it after each update
BASELINES_PPO2 = """------------------------------------
| approxkl           | 0.003101161 |
| clipfrac           | 0.17260742  |
| eplenmean          | 941         |
| eprewmean          | 34.9        |
| explained_variance | 0.704       |
| fps                | 981         |
| nupdates           | 1653        |
| policy_entropy     | 0.85041255  |
| policy_loss        | -0.01297911 |
| serial_timesteps   | 211584      |
| time_elapsed       | 1.63e+03    |
| total_timesteps    | 1692672     |
| value_loss         | 0.036234017 |
------------------------------------
"""


def test_openai_baselines_table_is_read(tmp_path: Path):
    a = _run(tmp_path, BASELINES_PPO2)
    assert _series(a, "reward") == [34.9] and _series(a, "value_loss") == [0.036234017]
    assert a.run.scalars["step"].unique().tolist() == [1692672]


def test_a_separator_framed_markdown_table_is_not_a_kv_record(tmp_path: Path):
    a = _run(tmp_path, "--------------------\n| name | value |\n| lr | high |\n--------------------\n")
    assert a.run.scalars.empty


# -- mmcv iteration-based runner, and a paste wrapped after a comma -----------------------------------------

# https://github.com/lhoyer/DAFormer/issues/11 (mmseg 0.x / mmcv TextLoggerHook, IterBasedRunner; the paste wrapped each
# record after "memory: 9808,"; the ImageNet feature-distance term is not computed in these iterations)
DAFORMER = """2022-02-19 08:15:52,120 - mmseg - INFO - Iter [50/40000]        lr: 1.958e-06, eta: 1 day, 2:59:33, time: 2.432, data_time: 0.081, memory: 9808,
 decode.loss_seg: 2.6839, decode.acc_seg: 10.5387, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: 1.4047, mix.decode.acc_seg: 19.1339
2022-02-19 08:17:38,012 - mmseg - INFO - Iter [100/40000]       lr: 3.950e-06, eta: 1 day, 1:12:58, time: 2.118, data_time: 0.033, memory: 9808,
 decode.loss_seg: 2.3862, decode.acc_seg: 47.4850, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: 1.3233, mix.decode.acc_seg: 41.3826
2022-02-19 08:19:28,666 - mmseg - INFO - Iter [150/40000]       lr: 5.938e-06, eta: 1 day, 0:57:19, time: 2.213, data_time: 0.034, memory: 9808,
 decode.loss_seg: 2.0347, decode.acc_seg: 62.5967, src.loss_imnet_feat_dist: nan, mix.decode.loss_seg: 1.0585, mix.decode.acc_seg: 59.3449
"""


def test_mmcv_iter_runner_lines_and_their_wrapped_tails_are_read_at_the_iteration(tmp_path: Path):
    a = _run(tmp_path, DAFORMER)
    df = a.run.scalars
    seg = df[df["key"] == "decode.loss_seg"].sort_values("step")
    assert seg["step"].tolist() == [50, 100, 150] and seg["value"].tolist() == [2.6839, 2.3862, 2.0347]
    assert _series(a, "learning_rate") == [1.958e-06, 3.950e-06, 5.938e-06]
    assert "memory" not in set(df["key"])  # bookkeeping, not a signal


def test_mmcv_iter_runner_on_one_line_each(tmp_path: Path):
    a = _run(tmp_path, DAFORMER.replace(",\n ", ", "))
    df = a.run.scalars
    assert df[df["key"] == "decode.loss_seg"]["step"].tolist() == [50, 100, 150]


def test_pairs_whose_loss_word_is_inside_the_key_are_a_record(tmp_path: Path):
    # the mmdet keys (loss_rpn_cls, loss_bbox) carry the signal word first: a pair line of them is a record too
    a = _run(tmp_path, "loss_rpn_cls: 0.2651, loss_rpn_bbox: 0.0412, loss_cls: 0.4077, acc: 91.1543, loss_bbox: 0.1203\n")
    assert _series(a, "loss_cls") == [0.4077]


# -- loss dicts printed with their tensors ------------------------------------------------------------------

# https://github.com/pytorch/vision/issues/1120 (torchvision's RegionProposalNetwork returns its losses as a dict of
# 0-d tensors; print/pprint shows them with device and grad_fn; pprint wraps the dict one key per line)
TV_PPRINT = """{'loss_objectness': tensor(0.6926, device='cuda:2', grad_fn=<BinaryCrossEntropyWithLogitsBackward>),
 'loss_rpn_box_reg': tensor(nan, device='cuda:2', grad_fn=<DivBackward0>)}

[{'boxes': tensor([[1324.5386,  275.7656,  699.6948,   19.5117],
          [1310.8701,  133.9805,  345.6167,   26.0156]], device='cuda:2'),
  'labels': tensor([0., 0., 5., 5.], device='cuda:2'),
  'image_id': tensor([438.], device='cuda:2')}]
"""


def test_a_pprinted_loss_dict_of_tensors_is_a_record_with_its_nan(tmp_path: Path):
    a = _run(tmp_path, TV_PPRINT)
    assert _series(a, "loss_objectness") == [0.6926]
    rpn = _series(a, "loss_rpn_box_reg")
    assert len(rpn) == 1 and math.isnan(rpn[0])
    assert _series(a, "labels") == [] and _series(a, "image_id") == []  # the targets' tensors are not metrics
    assert _verdict(a)[0] != "healthy"


def test_a_one_line_loss_dict_of_tensors_keeps_every_term(tmp_path: Path):
    # the same dict as print() shows it when it fits on one line (torchvision detection models' four losses)
    line = ("{'loss_classifier': tensor(0.6958, device='cuda:0', grad_fn=<NllLossBackward0>), 'loss_box_reg': "
            "tensor(0.0123, device='cuda:0', grad_fn=<DivBackward0>), 'loss_objectness': tensor(0.6930, device='cuda:0', "
            "grad_fn=<BinaryCrossEntropyWithLogitsBackward0>), 'loss_rpn_box_reg': tensor(nan, device='cuda:0', "
            "grad_fn=<DivBackward0>)}\n")
    a = _run(tmp_path, line)
    assert _series(a, "loss_classifier") == [0.6958] and _series(a, "loss_box_reg") == [0.0123]
    assert math.isnan(_series(a, "loss_rpn_box_reg")[0])
    assert _verdict(a)[0] != "healthy"


def test_a_pprinted_float_dict_is_a_record_and_a_cut_one_is_not_misread(tmp_path: Path):
    a = _run(tmp_path, "{'grad_norm': 1.25,\n 'learning_rate': 2e-05,\n 'loss': 0.9412}\n")
    assert _series(a, "loss") == [0.9412] and _series(a, "grad_norm") == [1.25]
    b = _run(tmp_path / "cut" if (tmp_path / "cut").mkdir() is None else tmp_path, "{'loss': 1.2\n")
    assert b.run.scalars.empty


# -- native deaths: out of memory on Apple silicon, uncaught C++ exceptions, segfaults -----------------------

# https://github.com/ml-explore/mlx-lm/issues/236 (mlx_lm.lora full fine-tuning, Qwen3-8B)
MLX_LM = """Iter 10: Train loss 2.586, Learning Rate 1.000e-05, It/sec 1.426, Tokens/sec 251.622, Trained Tokens 1764, Peak mem 31.753 GB
Iter 20: Train loss 1.731, Learning Rate 1.000e-05, It/sec 0.525, Tokens/sec 349.200, Trained Tokens 8417, Peak mem 32.138 GB
Iter 30: Train loss 1.808, Learning Rate 1.000e-05, It/sec 0.765, Tokens/sec 330.055, Trained Tokens 12732, Peak mem 32.138 GB
Iter 40: Train loss 1.723, Learning Rate 1.000e-05, It/sec 0.739, Tokens/sec 327.007, Trained Tokens 17157, Peak mem 32.138 GB
Iter 50: Train loss 1.487, Learning Rate 1.000e-05, It/sec 0.372, Tokens/sec 358.620, Trained Tokens 26805, Peak mem 34.108 GB
libc++abi: terminating due to uncaught exception of type std::runtime_error: [METAL] Command buffer execution failed: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)
zsh: abort      mlx_lm.lora --model ./Qwen3-8
"""
# https://github.com/ml-explore/mlx-examples/issues/70 (lora.py on a 7B model, fp32)
MLX_MALLOC = """Loading pretrained model
Total parameters 7243.436M
Trainable parameters 1.704M
Loading datasets
Training
libc++abi: terminating due to uncaught exception of type std::runtime_error: [malloc_or_wait] Unable to allocate 12 bytes.
"""


def test_mlx_metal_out_of_memory_is_named_at_its_step(tmp_path: Path):
    a = _run(tmp_path, MLX_LM)
    assert _verdict(a) == ("failed", "out_of_memory")
    assert a.diagnosis.findings[0].first_step == 50


def test_mlx_allocator_failure_is_out_of_memory(tmp_path: Path):
    assert _verdict(_run(tmp_path, MLX_MALLOC)) == ("failed", "out_of_memory")


def test_a_native_abort_without_a_traceback_is_a_crash_never_healthy(tmp_path: Path):
    # libstdc++'s message for an uncaught c10::Error (torch's C++ exception), and a bare segfault: no Python traceback
    a = _run(tmp_path, "step 10 loss 2.3\nstep 20 loss 2.1\nstep 30 loss 2.0\n"
                       "terminate called after throwing an instance of 'c10::Error'\n"
                       "  what():  CUDA error: an illegal memory access was encountered\n")
    assert _verdict(a) == ("failed", "crash")
    assert "c10::Error" in a.diagnosis.verdict.headline or any("c10::Error" in f.title for f in a.diagnosis.findings)
    b = _run(tmp_path / "b" if not (tmp_path / "b").mkdir() else tmp_path,
             "Iter 10: Train loss 2.586\nIter 20: Train loss 1.9\nSegmentation fault (core dumped)\n")
    assert _verdict(b) == ("failed", "crash")


# -- an adapter loaded frozen --------------------------------------------------------------------------------

# https://github.com/huggingface/peft/issues/282 (continuing training from a saved LoRA adapter)
PEFT_LOAD = """from peft import PeftModel
from transformers import LlamaForCausalLM
import torch

orig_model = LlamaForCausalLM.from_pretrained(
   'decapoda-research/llama-7b-hf',
    load_in_8bit=True,
    torch_dtype=torch.float16,
    device_map="auto",
)

out = PeftModel.from_pretrained(orig_model, "tloen/alpaca-lora-7b")
print(out.print_trainable_parameters())
"""
PEFT_ZERO = "trainable params: 0 || all params: 6755201024 || trainable%: 0.0\n"


def test_zero_trainable_params_after_a_default_peft_load_is_the_frozen_adapter(tmp_path: Path):
    a = _run(tmp_path, PEFT_ZERO, PEFT_LOAD)
    assert _verdict(a) == ("failed", "gradientless_params")
    assert any("is_trainable=True" in r for f in a.diagnosis.findings for r in f.remedies)


def test_a_trainable_peft_load_spread_over_lines_is_not_blamed(tmp_path: Path):
    code = PEFT_LOAD.replace('"tloen/alpaca-lora-7b")', '\n    "tloen/alpaca-lora-7b",\n    is_trainable=True,\n)')
    a = _run(tmp_path, PEFT_ZERO, code)
    assert [f.value for f in a.run.config.facts("peft.is_trainable")] == [True]
    assert _verdict(a)[0] == "healthy"  # the summary line alone, with no training, stays a warning


def test_a_multi_line_default_peft_load_is_read_as_frozen(tmp_path: Path):
    code = PEFT_LOAD.replace('"tloen/alpaca-lora-7b")', '\n    "tloen/alpaca-lora-7b",\n    torch_dtype=torch.float16,\n)')
    a = _run(tmp_path, PEFT_ZERO, code)
    assert [f.value for f in a.run.config.facts("peft.is_trainable")] == [False]
    assert _verdict(a) == ("failed", "gradientless_params")


# -- llama-recipes / llama-cookbook -------------------------------------------------------------------------

# https://github.com/meta-llama/llama-cookbook/issues/190 (alpaca fine-tuning; the end of the first epoch and the
# final summary of finetuning.py)
LLAMA_RECIPES_END = """ eval_ppl=tensor(nan, device='cuda:0') eval_epoch_loss=tensor(nan, device='cuda:0')
Epoch 1: train_perplexity=2.9854, train_epoch_loss=1.0937, epoch time 3146.0126402731985s
Key: avg_train_prep, Value: 2.985416889190674
Key: avg_train_loss, Value: 1.09373939037323
Key: avg_eval_prep, Value: nan
Key: avg_eval_loss, Value: inf
Key: avg_epoch_time, Value: 3146.0126402731985
Key: avg_checkpoint_time, Value: 6.0286372900009155e-05
"""


def _llama_recipes_steps(epoch: int, losses: list[str], per_epoch: int = 100) -> str:
    """The tqdm description train_utils.py sets each step (loss.detach().float() is a tensor), redrawn by tqdm."""
    out = []
    for i, loss in enumerate(losses):
        desc = f"Training Epoch: {epoch}/3, step {i}/{per_epoch} completed (loss: tensor({loss}, device='cuda:0'))"
        out.append(f"\r{desc}:   {i}%|          | {i}/{per_epoch} [00:0{i}<01:00,  1.5it/s]\r{desc}")
    return "".join(out) + "\n"


def test_llama_recipes_eval_nan_beside_finite_training_is_read(tmp_path: Path):
    a = _run(tmp_path, LLAMA_RECIPES_END)
    assert math.isnan(_series(a, "eval_loss")[0])
    assert _series(a, "train_epoch_loss") == [1.0937]
    assert not _series(a, "avg_epoch_time")  # timings are not signals
    assert _verdict(a) == ("failed", "all_labels_masked")


def test_llama_recipes_step_losses_are_one_point_per_step_at_the_global_step(tmp_path: Path):
    a = _run(tmp_path, _llama_recipes_steps(1, ["1.9", "1.7", "1.6"]) + _llama_recipes_steps(2, ["1.4", "1.3"]))
    df = a.run.scalars
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [0, 1, 2, 100, 101] and loss["value"].tolist() == [1.9, 1.7, 1.6, 1.4, 1.3]


# https://github.com/mst272/LLM-Dojo/issues/23 (a DPO run in fp16 on a V100, rerun under torch.autograd.detect_anomaly();
# the message is torch's own, from torch/csrc/autograd/engine.cpp)
ANOMALY = "RuntimeError: Function 'LogSigmoidBackward0' returned nan values in its 0th output.\n"


def test_autograd_anomaly_nan_is_a_nonfinite_onset_not_an_unknown_crash(tmp_path: Path):
    a = _run(tmp_path, ANOMALY)
    assert _verdict(a)[1] != "crash" and _verdict(a)[0] != "healthy"
    num = [f for f in a.diagnosis.findings if f.code == "NUM001"]
    assert num and any("LogSigmoidBackward0" in e.detail for e in num[0].evidence)


# https://github.com/alibaba/Pai-Megatron-Patch/issues/680 (Megatron in bf16: the loss scale is a constant 1.0)
MEGATRON_BF16_NAN = (" iteration        1/    5000 | consumed samples:          128 | elapsed time per iteration (ms): "
                     "140930.2 | throughput per GPU (TFLOP/s/GPU): 0.3 | learning rate: 5.000000E-08 | global batch size:"
                     "   128 | lm loss: 1.196676E+01 | load_balancing_loss: 5.185859E-01 | loss scale: 1.0 | grad norm: nan "
                     "| number of skipped iterations:   0 | number of nan iterations:   0 |\n\n"
                     " AssertionError: Rank 114: found NaN in local forward loss calculation. Device: 2,\n")


def test_a_single_loss_scale_of_one_is_not_a_collapse(tmp_path: Path):
    a = _run(tmp_path, MEGATRON_BF16_NAN)
    assert _verdict(a)[1] != "loss_scale_collapse"
    assert not any(f.root_cause == "loss_scale_collapse" for f in a.diagnosis.findings)
    assert _verdict(a)[0] != "healthy"


# https://github.com/huggingface/trl/issues/1447 (KTOTrainer: a batch without rejected examples averages nothing)
KTO = """{'loss': 1.0431, 'grad_norm': 42.099464416503906, 'learning_rate': 1.0000000000000002e-06, 'rewards/chosen': 0.0, 'rewards/rejected': 0.0, 'rewards/margins': 0.0, 'kl': 0.0, 'logps/chosen': -37.16696548461914, 'logps/rejected': -87.62107849121094, 'epoch': 0.0}
{'loss': nan, 'grad_norm': 41.9438362121582, 'learning_rate': 2.0000000000000003e-06, 'rewards/chosen': 0.0, 'rewards/rejected': nan, 'rewards/margins': nan, 'kl': 0.0, 'logps/chosen': -32.92508316040039, 'logps/rejected': nan, 'epoch': 0.0}
{'loss': nan, 'grad_norm': 29.28327178955078, 'learning_rate': 3e-06, 'rewards/chosen': nan, 'rewards/rejected': nan, 'rewards/margins': nan, 'kl': 0.15479230880737305, 'logps/chosen': nan, 'logps/rejected': nan, 'epoch': 0.0}
{'loss': nan, 'grad_norm': 32.70748519897461, 'learning_rate': 4.000000000000001e-06, 'rewards/chosen': 0.06518054008483887, 'rewards/rejected': nan, 'rewards/margins': nan, 'kl': 0.43951892852783203, 'logps/chosen': -31.101844787597656, 'logps/rejected': nan, 'epoch': 0.0}
"""


def test_statistics_of_a_batch_subset_are_not_loss_terms(tmp_path: Path):
    a = _run(tmp_path, KTO)
    assert not any(f.code == "DATA001" for f in a.diagnosis.findings)  # logps/rejected NaN = no rejected sample
    assert _verdict(a)[0] != "healthy"


# -- "(Step: N) key = value." -------------------------------------------------------------------------------

# https://github.com/TensorSpeech/TensorFlowTTS/issues/258 (FastSpeech2, base_trainer._check_log_interval)
TFTTS = """[train]:  48%|####8     | 95400/200000 [02:45<7:39:06,  3.80it/s]2020-09-10 11:52:14,447 (base_trainer:831) INFO: (Step: 95400) train_duration_loss = 0.0353.
2020-09-10 11:52:14,448 (base_trainer:831) INFO: (Step: 95400) train_f0_loss = 0.0659.
2020-09-10 11:52:14,448 (base_trainer:831) INFO: (Step: 95400) train_energy_loss = 0.0505.
2020-09-10 11:52:14,449 (base_trainer:831) INFO: (Step: 95400) train_mel_loss_before = nan.
2020-09-10 11:52:14,449 (base_trainer:831) INFO: (Step: 95400) train_mel_loss_after = nan.
"""


def test_paren_step_lines_are_read_and_a_nan_loss_term_is_never_healthy(tmp_path: Path):
    a = _run(tmp_path, TFTTS)
    df = a.run.scalars
    assert set(df["step"]) == {95400}
    assert _series(a, "train_f0_loss") == [0.0659] and math.isnan(_series(a, "train_mel_loss_before")[0])
    assert _verdict(a)[0] != "healthy"


def test_parallel_wavegan_style_steps_lines(tmp_path: Path):
    # kan-bayashi/ParallelWaveGAN trainers: logging.info(f"(Steps: {self.steps}) {key} = {value:.4f}.")
    a = _run(tmp_path, "".join(f"2021-01-01 00:00:0{i},000 (train:300) INFO: (Steps: {1000 * i}) "
                               f"train/generator_loss = {3.0 - i / 10:.4f}.\n" for i in range(1, 5)))
    df = a.run.scalars
    assert sorted(df["step"]) == [1000, 2000, 3000, 4000]
    assert _verdict(a) == ("healthy", "healthy")


# -- a detector that never sees a ground-truth box -------------------------------------------------------------

# https://github.com/open-mmlab/mmdetection/issues/2744 (custom COCO-format dataset, classes not set in the config)
MMDET_NO_GT = """2020-05-16 14:56:10,068 - mmdet - INFO - workflow: [('train', 1)], max: 12 epochs
2020-05-16 14:56:28,250 - mmdet - INFO - Epoch [1][50/534]      lr: 0.00198, eta: 0:38:23, time: 0.362, data_time: 0.013, memory: 3274, loss_rpn_cls: 0.2651, loss_rpn_bbox: 0.0000, loss_cls: 0.4077, acc: 91.1543, loss_bbox: 0.0000, loss: 0.6728
2020-05-16 14:56:42,271 - mmdet - INFO - Epoch [1][100/534]     lr: 0.00398, eta: 0:33:46, time: 0.280, data_time: 0.006, memory: 3274, loss_rpn_cls: 0.0000, loss_rpn_bbox: 0.0000, loss_cls: 0.4531, acc: 100.0000, loss_bbox: 0.0000, loss: 0.4531
2020-05-16 14:56:57,230 - mmdet - INFO - Epoch [1][150/534]     lr: 0.00597, eta: 0:32:44, time: 0.299, data_time: 0.007, memory: 3274, loss_rpn_cls: 0.0000, loss_rpn_bbox: 0.0000, loss_cls: 0.1650, acc: 100.0000, loss_bbox: 0.0000, loss: 0.1650
"""


def test_box_regression_loss_zero_at_every_log_is_no_ground_truth(tmp_path: Path):
    a = _run(tmp_path, MMDET_NO_GT)
    assert _verdict(a) == ("failed", "all_labels_masked")
    f = next(f for f in a.diagnosis.findings if f.code == "LBL001")
    assert "loss_bbox" in f.message and f.first_step == 50


def test_box_regression_loss_that_is_sometimes_zero_is_healthy(tmp_path: Path):
    # a sparse-object dataset: some intervals have no positive anchor, most do
    log = MMDET_NO_GT.replace("loss_rpn_bbox: 0.0000, loss_cls: 0.4531", "loss_rpn_bbox: 0.0412, loss_cls: 0.4531") \
                     .replace("loss_bbox: 0.0000, loss: 0.4531", "loss_bbox: 0.1203, loss: 0.4531")
    a = _run(tmp_path, log)
    assert not any(f.code == "LBL001" for f in a.diagnosis.findings)


# -- a Keras run that ran out of input ------------------------------------------------------------------------

# https://github.com/zxq2233/n2n-watermark-remove/issues/10 (model.fit with a Python generator, default steps_per_epoch
# 1000 and 100 epochs; the warning is glued to the tail of the progress bar)
KERAS_SHORT = (".6352WARNING:tensorflow:Your input ran out of data; interrupting training. Make sure that your dataset "
               "or generator can generate at least `steps_per_epoch * epochs` batches (in this case, 100000 batches). "
               "You may need to use the repeat() function when building your dataset\n")


def test_keras_input_ran_out_of_data_is_a_run_cut_short(tmp_path: Path):
    a = _run(tmp_path, KERAS_SHORT)
    assert _verdict(a) == ("failed", "data_exhausted")
    f = next(f for f in a.diagnosis.findings if f.root_cause == "data_exhausted")
    assert "100,000" in f.message and any("repeat()" in r for r in f.remedies)


# https://github.com/ml-explore/mlx-examples/issues/718 (mlx_lm LoRA on an 8-bit Phi-3: NaN before any update)
MLX_NAN_FIRST = """Trainable parameters: 0.042% (1.573M/3750.282M)
Loading datasets
Training
Starting training..., iters: 100
Iter 1: Val loss nan, Val took 61.907s
Iter 10: Train loss nan, Learning Rate 1.000e-05, It/sec 0.264, Tokens/sec 530.838, Trained Tokens 20105, Peak mem 16.146 GB
"""


def test_nan_from_the_first_log_points_at_the_first_forward_not_the_lr(tmp_path: Path):
    a = _run(tmp_path, MLX_NAN_FIRST)
    num = next(f for f in a.diagnosis.findings if f.code == "NUM001")
    assert "first log" in num.title and "first forward" in num.remedies[0]
    assert _verdict(a)[1] != "lr_too_high"


def test_nan_after_finite_logs_is_not_called_first_log(tmp_path: Path):
    a = _run(tmp_path, "Iter 10: Train loss 2.31, Learning Rate 1.000e-05\nIter 20: Train loss 2.1, Learning Rate 1.000e-05\n"
                       "Iter 30: Train loss nan, Learning Rate 1.000e-05\n")
    num = next(f for f in a.diagnosis.findings if f.code == "NUM001")
    assert "first log" not in num.title


def test_a_pprinted_config_with_a_loss_weight_is_not_a_metrics_record(tmp_path: Path):
    a = _run(tmp_path, "{'batch_size': 8,\n 'loss_weight': 1.0,\n 'lr': 0.0002,\n 'use_amp': True}\n"
                       "{\n  \"loss_scale_window\": 1000,\n  \"loss_weight\": 0.5,\n  \"fp16\": true\n}\n")
    assert a.run.scalars.empty
