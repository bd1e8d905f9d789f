"""Every dev case and every example yields its metric series (issue 11 "Done when").

The tables pin, per case, every canonical series read and its point count, so a format that stops
being read (or a parser that starts reading prose as data) fails here. Renaming a dev case's log to
``pasted.txt`` or to a name with no extension must not change what is read nor the verdict: the
format is decided by content, not by name.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLES

from autopsy.pipeline import analyze, read_run

DEV_CASES = Path(__file__).parent / "fixtures" / "dev_cases"

#: canonical metric -> points read, per dev case
DEV = {
    'automodel1883_gemma4_sdpa_nan_lbs2': {'grad_norm': 3, 'loss': 4},
    'belle134_ds_fp16_lr0_first_steps_healthy': {'epoch': 12, 'learning_rate': 12, 'loss': 12},
    'caffe_yjxiong2_slow_decrease_healthy': {'learning_rate': 12, 'loss': 11},
    'chinese_alpaca534_fp16_overflow_to_min_scale': {'epoch': 3, 'learning_rate': 3, 'loss': 3},
    'chinesellamaalpaca2_392_zero3_lora_empty_tensors': {},
    'cogvideo233_initial_overflow_recovers_healthy': {},
    'detectron2_214_retinanet_1gpu_default_lr_nan': {'learning_rate': 7, 'loss': 9, 'loss_box_reg': 8, 'loss_cls': 9},
    'dolly11_bf16_on_v100': {},
    'dpo36_chosen_reward_decreasing_margin_up_healthy': {'epoch': 2, 'learning_rate': 2, 'logits/chosen': 2, 'logits/rejected': 2, 'logps/chosen': 2, 'logps/rejected': 2, 'loss': 2, 'rewards/accuracies': 2, 'rewards/chosen': 2, 'rewards/margins': 2, 'rewards/rejected': 2},
    'fairseq1895_bt_reverse_min_loss_scale': {'bsz': 2, 'clip': 1, 'eval_bsz': 2, 'eval_loss': 2, 'eval_nll_loss': 2, 'eval_ppl': 2, 'eval_wpb': 2, 'eval_wps': 2, 'grad_norm': 2, 'learning_rate': 2, 'loss': 2, 'loss_scale': 2, 'nll_loss': 2, 'oom': 1, 'ppl': 2, 'train_bsz': 2, 'train_clip': 1, 'train_grad_norm': 2, 'train_learning_rate': 2, 'train_loss': 2, 'train_loss_scale': 2, 'train_nll_loss': 2, 'train_oom': 1, 'train_ppl': 2, 'train_ups': 2, 'train_wpb': 2, 'train_wps': 2, 'ups': 2, 'wpb': 2, 'wps': 2},
    'firefly57_baichuan13b_qlora_no_grad': {},
    'llamafactory10224_qwen35moe_zero3_rank_disagreement': {},
    'llamafactory1221_zero2_adam_oom_v100': {},
    'llamafactory381_no_metric_loss_to_plot_warning': {},
    'llava1706_v16_34b_tokenization_mismatch_loss0': {},
    'mar69_autocast_fp16_loss_nan_stop': {'learning_rate': 1, 'loss': 1},
    'megatronllm33_bf16_nan_not_detected': {'batch_size': 3, 'consumed_samples': 3, 'grad_norm': 2, 'iteration_time_ms': 3, 'learning_rate': 3, 'loss': 2, 'loss_scale': 3, 'nan_iterations': 2, 'skipped_iterations': 2},
    'minimind26_pretrain_record_healthy': {'learning_rate': 19, 'loss': 19},
    'mmocr_tablemaster_first_step_gradnorm_nan_healthy': {'grad_norm': 2, 'horizon_bbox_loss': 2, 'learning_rate': 2, 'loss': 2, 'loss_ce': 2, 'vertical_bbox_loss': 2},
    'msswift3579_grpo_negative_loss_normal': {'clip_ratio': 1, 'completion_length': 1, 'epoch': 1, 'grad_norm': 1, 'kl': 1, 'learning_rate': 1, 'loss': 1, 'memory_gib': 1, 'response_clip_ratio': 1, 'reward': 1, 'reward_std': 1, 'rewards/Format': 1, 'rewards/MultiModalAccuracyORM': 1, 'train_speed(iter/s)': 1},
    'openr1_704_grpo_kl_nan_beta0': {'completions/clipped_ratio': 1, 'completions/max_length': 1, 'completions/max_terminated_length': 1, 'completions/mean_length': 1, 'completions/mean_terminated_length': 1, 'completions/min_length': 1, 'completions/min_terminated_length': 1, 'entropy': 2, 'kl': 5, 'loss': 5, 'reward': 5, 'reward_std': 5, 'rewards/format_reward/mean': 1, 'rewards/format_reward/std': 1, 'rewards/score_reward/mean': 1, 'rewards/score_reward/std': 1, 'rewards/sorted_events_reward/mean': 1, 'rewards/sorted_events_reward/std': 1},
    'peft137_lora_gradckpt_no_grad_fn': {},
    'swin47_apex_overflow_gradnorm_avg_nan': {'grad_norm': 1, 'learning_rate': 1, 'loss': 1},
    'timm814_mnv3_lr_not_scaled_for_batch_nan': {'learning_rate': 15, 'loss': 16},
    'trl1053_eval_loss_nan_response_template_truncated': {'eval_loss': 1, 'eval_runtime': 1, 'eval_samples_per_second': 1, 'eval_steps_per_second': 1},
    'trl5312_grpo_vllm_sleep_mode_weights_not_synced': {'clip_ratio/high_max': 1, 'clip_ratio/high_mean': 1, 'clip_ratio/low_mean': 1, 'clip_ratio/low_min': 1, 'clip_ratio/region_mean': 1, 'completions/clipped_ratio': 1, 'completions/max_length': 1, 'completions/max_terminated_length': 1, 'completions/mean_length': 1, 'completions/mean_terminated_length': 1, 'completions/min_length': 1, 'completions/min_terminated_length': 1, 'entropy': 1, 'epoch': 1, 'frac_reward_zero_std': 1, 'grad_norm': 1, 'learning_rate': 1, 'loss': 1, 'num_tokens': 1, 'reward': 1, 'reward_std': 1, 'rewards/length_reward/mean': 1, 'rewards/length_reward/std': 1, 'sampling/importance_sampling_ratio/max': 1, 'sampling/importance_sampling_ratio/mean': 1, 'sampling/importance_sampling_ratio/min': 1, 'sampling/sampling_logp_difference/max': 1, 'sampling/sampling_logp_difference/mean': 1, 'step_time': 1, 'train_loss': 1, 'train_runtime': 1, 'train_samples_per_second': 1, 'train_steps_per_second': 1},
    'verl721_grpo_nan_oldlogprob_exclamation_collapse': {'actor/entropy_loss': 1, 'actor/kl_coef': 1, 'actor/kl_loss': 1, 'actor/pg_clipfrac': 1, 'actor/pg_loss': 1, 'actor/ppo_kl': 1, 'global_seqlen/balanced_max': 1, 'global_seqlen/balanced_min': 1, 'global_seqlen/max': 1, 'global_seqlen/mean': 1, 'global_seqlen/min': 1, 'global_seqlen/minmax_diff': 1, 'grad_norm': 1, 'perf/cpu_memory_used_gb': 1, 'perf/max_memory_allocated_gb': 1, 'perf/max_memory_reserved_gb': 1, 'perf/mfu/actor': 1},
}
#: the same for each example run under tests/fixtures/examples
EXAMPLE_SERIES = {
    'deepspeed': {'epoch': 4, 'grad_norm': 4, 'learning_rate': 4, 'loss': 4},
    'hf_lora_checkpoint': {'epoch': 8, 'eval_loss': 2, 'eval_runtime': 2, 'eval_samples_per_second': 2, 'eval_steps_per_second': 2, 'grad_norm': 8, 'learning_rate': 8, 'loss': 8},
    'hf_trainer_nan_run': {'epoch': 7, 'eval_loss': 3, 'eval_runtime': 3, 'eval_samples_per_second': 3, 'eval_steps_per_second': 3, 'grad_norm': 7, 'learning_rate': 7, 'loss': 7, 'total_flos': 1, 'train_loss': 1, 'train_runtime': 1, 'train_samples_per_second': 1, 'train_steps_per_second': 1},
    'lightning': {'epoch': 10, 'eval_loss': 2, 'loss': 8},
    'misc': {},
    'tfevents': {'dbl': 1, 'loss': 4},
    'trl_trainer_states': {'accuracy': 4, 'clip_ratio/high_max': 4, 'clip_ratio/high_mean': 4, 'clip_ratio/low_mean': 4, 'clip_ratio/low_min': 4, 'clip_ratio/region_mean': 4, 'completions/clipped_ratio': 4, 'completions/max_length': 4, 'completions/max_terminated_length': 4, 'completions/mean_length': 4, 'completions/mean_terminated_length': 4, 'completions/min_length': 4, 'completions/min_terminated_length': 4, 'entropy': 4, 'epoch': 4, 'frac_reward_zero_std': 4, 'grad_norm': 4, 'kl': 4, 'learning_rate': 4, 'logits/chosen': 4, 'logits/rejected': 4, 'logps/chosen': 4, 'logps/rejected': 4, 'loss': 4, 'margin': 4, 'max_reward': 4, 'mean_reward': 4, 'min_reward': 4, 'num_tokens': 4, 'reward': 4, 'reward_std': 4, 'rewards/accuracies': 4, 'rewards/chosen': 4, 'rewards/len_reward/mean': 4, 'rewards/len_reward/std': 4, 'rewards/margins': 4, 'rewards/rejected': 4, 'step_time': 4, 'token_accuracy': 4, 'total_flos': 1, 'train_loss': 1, 'train_runtime': 1, 'train_samples_per_second': 1, 'train_steps_per_second': 1},
}


def _series(path: Path) -> dict[str, int]:
    run, _ = read_run(path, with_checkpoints=False)
    s = run.scalars
    return dict(s.groupby("metric", observed=True).size().items()) if len(s) else {}


def test_tables_cover_every_case_and_example():
    assert set(DEV) == {p.parent.name for p in DEV_CASES.glob("*/truth.json")}
    assert set(EXAMPLE_SERIES) == {p.name for p in EXAMPLES.iterdir() if p.is_dir()}


@pytest.mark.parametrize("case", sorted(DEV))
def test_dev_case_series(case: str):
    assert _series(DEV_CASES / case) == DEV[case]


@pytest.mark.parametrize("name", sorted(EXAMPLE_SERIES))
def test_example_series(name: str):
    assert _series(EXAMPLES / name) == EXAMPLE_SERIES[name]


def _staged(case: str, tmp: Path, log_name: str) -> Path:
    d = tmp / f"{case}-{log_name.replace('.', '_')}"
    d.mkdir()
    for p in (DEV_CASES / case).iterdir():
        if p.name != "truth.json":
            shutil.copy2(p, d / (log_name if p.name == "log.txt" else p.name))
    return d


@pytest.mark.parametrize("case", sorted(DEV))
def test_renamed_log_reads_and_judges_the_same(case: str, tmp_path: Path):
    got = {}
    for name in ("log.txt", "pasted.txt", "pasted"):
        a = analyze(_staged(case, tmp_path, name))
        s = a.run.scalars
        series = dict(s.groupby("metric", observed=True).size().items()) if len(s) else {}
        got[name] = (series, sorted(e.kind for e in a.run.events), a.diagnosis.verdict.root_cause, a.diagnosis.verdict.status)
    assert got["pasted.txt"] == got["log.txt"] and got["pasted"] == got["log.txt"]
