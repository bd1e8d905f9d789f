"""Shapes from the fifth round of unseen logs (threads quoted with their source on each case): what the
diagnosis or the reader got wrong before, asserted on what the shape means, so cousins pass too."""

from __future__ import annotations

import math
from pathlib import Path

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
