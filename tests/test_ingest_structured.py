"""Structured readers on real artifacts (fixtures made by the real writers) and on broken variants.

Each reader is driven directly with a RunBuilder so the expectations are exact per file; the CLI
test at the end checks the same numbers through ``autopsy run``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES

from autopsy.discover import Found, classify
from autopsy.ingest import readers
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.structured import READERS, lightning_metric
from autopsy.model import Run

EXPECTED_KINDS = {"trainer_state", "results_json", "swift_jsonl", "llamafactory_jsonl", "jsonl", "lightning_csv",
                  "hparams_yaml", "adapter_config", "model_config", "args_json", "args_yaml", "training_args_bin",
                  "json_config", "yaml_config", "weights_index"}


def read(path: Path, root: Path | None = None, kind: str | None = None) -> Run:
    """Read one file with the reader its discovery kind selects."""
    root = root or path.parent
    kind = kind or classify(path, path.stat().st_size)
    builder = RunBuilder(root)
    builder.artifact(path, kind, size=path.stat().st_size)
    readers()[kind](Found(path, kind, path.stat().st_size), builder)  # the kind may come from content
    return builder.finish()


def series(run: Run, metric: str) -> list[tuple[int, float]]:
    return [(int(s), float(v)) for s, v in zip(run.series(metric)["step"], run.series(metric)["value"])]


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return len(a) == len(b) and all(sa == sb and (va == vb or (math.isnan(va) and math.isnan(vb)))
                                    for (sa, va), (sb, vb) in zip(a, b))


def artifact(run: Run, name: str):
    return next(a for a in run.artifacts if a.path.endswith(name))


def test_reader_table_covers_every_kind():
    assert set(READERS) == EXPECTED_KINDS


# -- trainer_state.json (real HF Trainer output) ------------------------------------------------


def test_hf_nan_run_trainer_state_exact():
    run = read(EXAMPLES / "hf_trainer_nan_run" / "trainer_state.json")
    nan = math.nan
    assert same(series(run, "grad_norm"), [(1, 0.8437987565994263), (2, 0.8250136971473694), (4, 0.8616647124290466),
                                           (6, nan), (8, nan), (10, nan), (12, nan)])
    assert same(series(run, "loss"), [(1, 4.172769069671631), (2, 4.15283203125), (4, 4.154237747192383),
                                      (6, 3.1186022758483887), (8, 0.0), (10, 0.0), (12, 0.0)])
    assert same(series(run, "eval_loss"), [(4, 4.151437282562256), (8, nan), (12, nan)])
    gn = run.series("grad_norm")
    assert int(gn[gn["value"].isna()]["step"].iloc[0]) == 6
    assert int(gn[gn["step"] == 6]["line"].iloc[0]) == 4  # log_history index
    assert len(run.series("learning_rate")) == 7
    assert len(run.series("epoch")) == 7  # eval/summary entries repeat the epoch: not duplicated
    assert series(run, "train_loss") == [(12, 1.905940095583598)]  # final summary entry, own metric
    assert series(run, "train_runtime") == [(12, 0.2401)]
    cfg = run.config
    assert (cfg.get("global_step"), cfg.get("max_steps"), cfg.get("logging_steps"), cfg.get("save_steps"),
            cfg.get("train_batch_size"), cfg.get("num_train_epochs")) == (12, 12, 2, 4, 4, 1)
    assert run.frameworks == ["hf_trainer"]
    assert artifact(run, "trainer_state.json").status == "read"


def test_checkpoint_trainer_states_latest_global_step_first(tmp_path):
    root = tmp_path / "run"
    shutil.copytree(EXAMPLES / "hf_trainer_nan_run", root)
    from autopsy.pipeline import read_run

    run, _ = read_run(root, debug=True, with_checkpoints=False)
    assert run.config.get("global_step") == 12
    assert sorted(f.value for f in run.config.facts("global_step")) == [4, 12, 12]  # ckpt-4, ckpt-12, root
    assert run.series("loss")["step"].tolist() == [1, 2, 4, 6, 8, 10, 12]


TRL_CASES = {
    # file: (canonical metric, exact series) from the real TRL 1.16 runs
    "sft": ("token_accuracy", [(1, 0.02083333395421505), (2, 0.0), (3, 0.02083333395421505), (4, 0.0)]),
    "dpo": ("rewards/accuracies", [(1, 0.0), (2, 0.75), (3, 0.75), (4, 0.5)]),
    "kto": ("kl", [(1, 0.0), (2, 0.011222362518310547), (3, 0.0), (4, 0.0)]),
    "reward": ("accuracy", [(1, 0.75), (2, 0.75), (3, 0.75), (4, 0.25)]),
    "grpo": ("completions/mean_length", [(1, 6.0), (2, 5.75), (3, 4.25), (4, 6.0)]),
}


@pytest.mark.parametrize("name", sorted(TRL_CASES))
def test_trl_trainer_states(name, tmp_path):
    src = EXAMPLES / "trl_trainer_states" / f"{name}_trainer_state.json"
    path = tmp_path / src.name
    shutil.copy(src, path)
    run = read(path)  # discovered as json_config; the reader recognises a TrainerState
    metric, expected = TRL_CASES[name]
    assert series(run, metric) == expected
    assert run.frameworks == ["hf_trainer", "trl"]
    assert len(run.series("loss")) == 4 and len(run.series("train_loss")) == 1
    assert artifact(run, src.name).kind == "trainer_state"


def test_trl_dpo_keys_kept_verbatim(tmp_path):
    path = tmp_path / "trainer_state.json"
    shutil.copy(EXAMPLES / "trl_trainer_states" / "dpo_trainer_state.json", path)
    run = read(path)
    assert {"rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected",
            "logits/chosen", "logits/rejected", "entropy", "num_tokens"} <= set(run.metrics())
    assert series(run, "logps/chosen")[0] == (1, -20.78748321533203)


def test_plain_hf_state_is_not_trl():
    run = read(EXAMPLES / "hf_lora_checkpoint" / "trainer_state.json")
    assert "trl" not in run.frameworks
    assert len(run.series("loss")) == 8 and len(run.series("eval_loss")) == 2


# -- broken trainer_state variants (written with json.dump, like the Trainer) -----------------------


def _state(n: int) -> dict:
    log = [{"epoch": i / n, "grad_norm": math.nan if i == 3 else 0.5, "learning_rate": 1e-3, "loss": 2.0 - i / 10,
            "step": i} for i in range(1, n + 1)]
    return {"global_step": n, "max_steps": n, "logging_steps": 1, "log_history": log}


def test_bare_nan_and_infinity_kept_as_floats(tmp_path):
    st = _state(4)
    st["log_history"][1]["loss"] = math.inf
    st["log_history"][2]["loss"] = -math.inf
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(st, indent=2))
    assert "NaN" in path.read_text() and "Infinity" in path.read_text()
    run = read(path)
    assert same(series(run, "loss"), [(1, 1.9), (2, math.inf), (3, -math.inf), (4, 1.6)])
    assert same(series(run, "grad_norm"), [(1, 0.5), (2, 0.5), (3, math.nan), (4, 0.5)])
    assert artifact(run, "trainer_state.json").status == "read"


def test_truncated_trainer_state_salvages_complete_entries(tmp_path):
    text = json.dumps(_state(6), indent=2, sort_keys=True)
    cut = text.index('"step": 5') + 3  # inside the 5th entry
    path = tmp_path / "trainer_state.json"
    path.write_bytes(text[:cut].encode())
    run = read(path)
    assert series(run, "loss") == [(1, 1.9), (2, 1.8), (3, 1.7), (4, 1.6)]
    art = artifact(run, "trainer_state.json")
    assert art.status == "partial"
    assert "4 complete log_history entries" in art.problem and "byte" in art.problem
    assert run.config.get("global_step") == 6  # keys sorted before log_history survive


def test_truncated_before_log_history_is_unreadable_not_raised(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_bytes(b'{"best_global_step": nu')
    run = read(path)
    assert run.scalars.empty and artifact(run, "trainer_state.json").status == "unreadable"


@pytest.mark.parametrize("payload, needle", [
    (b"\x00\x01\x02\x89PNG garbage" * 100, "binary"),
    (b"[" * 100_000 + b"]" * 100_000, "nesting"),
    (b'{"log_history": ' + b"[" * 100_000, "nesting"),
    (b"", "empty"),
    (b"\xff\xfe\xfa not json at all", "Expecting value"),
    (b"[1, 2, 3]", "expected the TrainerState"),
])
def test_garbled_trainer_state_never_raises(tmp_path, payload, needle):
    path = tmp_path / "trainer_state.json"
    path.write_bytes(payload)
    run = read(path)
    art = artifact(run, "trainer_state.json")
    assert run.scalars.empty
    assert art.status in ("unreadable", "partial") and needle in art.problem


def test_wrong_types_are_skipped_counted_and_the_rest_read(tmp_path):
    st = _state(5)
    st["log_history"][1]["step"] = "2"  # string step: entry skipped
    st["log_history"][2]["loss"] = {"oops": 1}  # dict value: value skipped, entry kept
    st["log_history"].insert(0, ["not", "an", "entry"])
    st["log_history"][4]["grad_norm"] = None  # None: dropped silently
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(st))
    run = read(path)
    assert series(run, "loss") == [(1, 1.9), (4, 1.6), (5, 1.5)]
    assert [s for s, _ in series(run, "grad_norm")] == [1, 3, 5]
    art = artifact(run, "trainer_state.json")
    assert art.status == "partial"
    assert "1 log entries that are not objects (first at log_history index 0)" in art.problem
    assert "1 log entries without an integer step (first at log_history index 2)" in art.problem
    assert "1 values that are not numbers" in art.problem


def test_log_history_not_a_list(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"global_step": 3, "log_history": {"step": 1, "loss": 2.0}}))
    run = read(path)
    art = artifact(run, "trainer_state.json")
    assert run.scalars.empty and art.status == "partial" and "log_history is a dict" in art.problem
    assert run.config.get("global_step") == 3


# -- JSONL logs -------------------------------------------------------------------------------------


def test_ms_swift_logging_jsonl(tmp_path):
    lines = []
    for i in range(1, 5):
        lines.append(json.dumps({"loss": 1.5 - i / 10, "grad_norm": 10.5, "learning_rate": 2e-06, "token_acc": 0.6 + i / 100,
                                 "nll_loss": math.nan if i == 3 else 0.9, "epoch": 0.01 * i,
                                 "global_step/max_steps": f"{i}/94", "percentage": f"{i * 1.06:.2f}%",
                                 "elapsed_time": "2s", "remaining_time": "4m 28s", "memory(GiB)": 4.87,
                                 "train_speed(iter/s)": 0.345807}, ensure_ascii=False))
    lines.insert(2, "{'loss': 1.2, broken python dict")
    lines.append(json.dumps({"eval_loss": 1.1, "eval_token_acc": 0.7, "global_step/max_steps": "4/94"}))
    lines.append(json.dumps({"last_model_checkpoint": "/out/v0-20250101-000000/checkpoint-4",
                             "best_model_checkpoint": None, "global_step": 4, "log_history": [{"loss": 9.0, "step": 4}],
                             "memory": {"cuda:0": "5GiB"}}))
    d = tmp_path / "v0-20250101-000000"
    d.mkdir()
    path = d / "logging.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = read(path)
    assert series(run, "loss") == [(1, 1.4), (2, 1.3), (3, 1.2), (4, 1.1)]  # summary's log_history not re-read
    assert same(series(run, "nll_loss"), [(1, 0.9), (2, 0.9), (3, math.nan), (4, 0.9)])
    assert series(run, "token_accuracy") == [(1, 0.61), (2, 0.62), (3, 0.63), (4, 0.64)]
    assert series(run, "eval_loss") == [(4, 1.1)]
    assert len(run.series("memory_gib")) == 4 and len(run.series("train_speed(iter/s)")) == 4
    assert not run.has_metric("percentage")
    assert run.config.get("max_steps") == 94
    assert run.config.get("last_model_checkpoint") == "/out/v0-20250101-000000/checkpoint-4"
    art = artifact(run, "logging.jsonl")
    assert art.status == "partial" and "1 lines that are not JSON (first at line 3)" in art.problem
    assert run.frameworks == ["ms_swift"]
    assert int(run.series("loss")["line"].iloc[2]) == 4  # 1-based file line


def test_llamafactory_trainer_log_jsonl(tmp_path):
    recs = [
        {"current_steps": 10, "total_steps": 30, "loss": 1.23, "lr": 5e-05, "epoch": 0.1, "percentage": 33.33,
         "elapsed_time": "0:00:30", "remaining_time": "0:01:00"},
        {"current_steps": 20, "total_steps": 30, "loss": math.nan, "lr": 4e-05, "epoch": 0.2, "percentage": 66.67,
         "reward": None, "accuracy": 0.5},
        {"current_steps": 20, "total_steps": 30, "eval_loss": math.nan},
        {"current_steps": 30, "total_steps": 30, "loss": 0.0, "lr": 0.0, "predict_loss": 2.5},
    ]
    path = tmp_path / "trainer_log.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in recs) + "\n\nnull\n")
    run = read(path)
    assert same(series(run, "loss"), [(10, 1.23), (20, math.nan), (30, 0.0)])
    assert series(run, "learning_rate") == [(10, 5e-05), (20, 4e-05), (30, 0.0)]
    assert same(series(run, "eval_loss"), [(20, math.nan)])
    assert series(run, "predict_loss") == [(30, 2.5)] and series(run, "accuracy") == [(20, 0.5)]
    assert not run.has_metric("percentage") and not run.has_metric("reward")
    assert run.config.get("max_steps") == 30
    art = artifact(run, "trainer_log.jsonl")
    assert art.status == "partial" and "1 lines that are not JSON objects (first at line 6)" in art.problem
    assert run.frameworks == ["llamafactory"]


def test_generic_jsonl_with_and_without_step(tmp_path):
    with_step = tmp_path / "metrics.jsonl"
    with_step.write_text("\n".join(json.dumps({"iteration": i * 5, "train/loss": 3.0 / i, "lr": 1e-4}) for i in range(1, 4)))
    run = read(with_step)
    assert [s for s, _ in series(run, "loss")] == [5, 10, 15]
    assert not run.has_metric("iteration")

    no_step = tmp_path / "losses.jsonl"
    no_step.write_text("\n".join(json.dumps({"loss": v}) for v in (3.0, 2.0, 1.0)))
    builder = RunBuilder(tmp_path)
    READERS["jsonl"](Found(no_step, "jsonl", no_step.stat().st_size), builder)
    assert builder._sources["losses.jsonl"].exact_steps is False
    assert series(builder.finish(), "loss") == [(0, 3.0), (1, 2.0), (2, 1.0)]


def test_dataset_jsonl_is_ignored(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b", "id": i}) for i in range(50)))
    run = read(path)
    assert run.scalars.empty and artifact(run, "train.jsonl").status == "ignored"


def test_jsonl_huge_line_and_binary_junk(tmp_path, monkeypatch):
    import autopsy.ingest.jsonsafe as js

    monkeypatch.setattr(js, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "trainer_log.jsonl"
    big = json.dumps({"current_steps": 2, "loss": 1.0, "pad": "x" * 5000})
    path.write_bytes(b"\n".join([json.dumps({"current_steps": 1, "loss": 2.0}).encode(), big.encode(),
                                 b"\x00\xff\xfe\x00junk", json.dumps({"current_steps": 3, "loss": 0.5}).encode()]))
    monkeypatch.setattr("autopsy.ingest.structured.iter_lines", lambda fh: js.iter_lines(fh, 1000))
    run = read(path)
    assert series(run, "loss") == [(1, 2.0), (3, 0.5)]
    prob = artifact(run, "trainer_log.jsonl").problem
    assert "1 over-long lines (first at line 2)" in prob and "1 lines that are not JSON (first at line 3)" in prob


# -- Lightning ----------------------------------------------------------------------------------------


def test_lightning_metrics_csv_real():
    run = read(EXAMPLES / "lightning" / "lightning_logs" / "version_0" / "metrics.csv")
    loss = series(run, "loss")
    assert [s for s, _ in loss] == [1, 3, 5, 7, 9, 11, 13, 15]
    assert loss[0] == (1, 1.3071786165237427)
    assert series(run, "eval_loss") == [(7, 0.6872766017913818), (15, 0.6514295339584351)]
    assert len(run.series("epoch")) == 10
    assert set(run.series("loss")["key"]) == {"train_loss"}
    assert run.frameworks == ["lightning"]
    assert artifact(run, "metrics.csv").status == "read"


def test_lightning_csv_garbage(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,step,train_loss,val_acc,\n"
                    "0,0,2.5,,\n"
                    "0,1,oops,,\n"
                    "0,x,2.0,,\n"
                    "0,2,nan,,\n"
                    "0,3,1.0,0.5,,extra\n"
                    "0,3,,0.75,\n"
                    "0,4,Infinity,,\n")
    run = read(path)
    assert same(series(run, "loss"), [(0, 2.5), (2, math.nan), (4, math.inf)])
    assert series(run, "eval_accuracy") == [(3, 0.75)]
    prob = artifact(run, "metrics.csv").problem
    assert "empty or duplicate column names" in prob
    assert "1 rows with the wrong number of cells (first at line 6)" in prob
    assert "1 rows without an integer step (first at line 4)" in prob
    assert "1 cells that are not numbers (first at line 3 column 'train_loss')" in prob


@pytest.mark.parametrize("key, metric", [("train_loss", "loss"), ("val_loss", "eval_loss"), ("train_loss_step", "loss"),
                                         ("train_loss_epoch", "loss_epoch"), ("lr-AdamW", "learning_rate"),
                                         ("val_acc", "eval_accuracy"), ("epoch", "epoch"), ("custom", "custom")])
def test_lightning_metric_names(key, metric):
    assert lightning_metric(key) == metric


def test_hparams_yaml_real_and_unsafe(tmp_path):
    run = read(EXAMPLES / "lightning" / "lightning_logs" / "version_0" / "hparams.yaml")
    assert run.config.get("hparams.hidden") == 8 and run.config.get("learning_rate") == 0.01
    assert run.frameworks == ["lightning"]
    evil = tmp_path / "hparams.yaml"
    evil.write_text("a: !!python/object/apply:os.system ['echo pwned > pwned.txt']\n")
    run = read(evil)
    assert artifact(run, "hparams.yaml").status == "unreadable" and not (tmp_path / "pwned.txt").exists()


def test_yaml_alias_bomb_does_not_hang(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    path = tmp_path / "hparams.yaml"
    path.write_text("\n".join(lines) + "\nlr: 0.1\n")
    run = read(path)
    assert run.config.get("learning_rate") == 0.1
    assert artifact(run, "hparams.yaml").status == "partial"


# -- configs --------------------------------------------------------------------------------------------


def test_model_config_real():
    run = read(EXAMPLES / "hf_trainer_nan_run" / "config.json")
    c = run.config
    assert (c.get("torch_dtype"), c.get("model_type"), c.get("vocab_size"), c.get("architectures"),
            c.get("version.transformers")) == ("float32", "llama", 64, ["LlamaForCausalLM"], "5.23.0")
    assert c.fact("torch_dtype").where == "dtype"


def test_multimodal_config_uses_text_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava",
                                "text_config": {"vocab_size": 32064, "torch_dtype": "bfloat16"},
                                "_attn_implementation": "flash_attention_2"}))
    c = read(path).config
    assert c.get("vocab_size") == 32064 and c.fact("vocab_size").where == "text_config.vocab_size"
    assert c.get("torch_dtype") == "bfloat16" and c.get("attn_implementation") == "flash_attention_2"


def test_adapter_config_real():
    run = read(EXAMPLES / "hf_lora_checkpoint" / "adapter_config.json")
    c = run.config
    assert (c.get("lora.task_type"), c.get("lora.r"), c.get("lora.alpha"), c.get("lora.target_modules"),
            c.get("version.peft")) == ("CAUSAL_LM", 4, 8, ["q_proj", "v_proj"], "0.21.2")
    assert "lora.modules_to_save" not in c
    assert run.frameworks == ["peft"]


def test_training_args_bin_real_fixture():
    run = read(EXAMPLES / "hf_trainer_nan_run" / "checkpoint-4" / "training_args.bin")
    c = run.config
    assert (c.get("learning_rate"), c.get("optim"), c.get("lr_scheduler_type"), c.get("logging_nan_inf_filter"),
            c.get("fp16"), c.get("bf16"), c.get("per_device_train_batch_size"), c.get("max_grad_norm"),
            c.get("gradient_accumulation_steps"), c.get("warmup_steps"), c.get("gradient_checkpointing")) == (
        0.001, "adamw_torch_fused", "linear", True, False, False, 4, 1.0, 1, 0, False)
    assert c.get("training_args.class") == "transformers.training_args.TrainingArguments"
    assert run.frameworks == ["hf_trainer"]
    assert artifact(run, "training_args.bin").status == "read"


@pytest.mark.parametrize("payload, needle", [
    (b"", "empty file"),
    (b"PK\x03\x04 truncated zip", "cannot unpickle"),
    (b"\x80\x02}q\x00(X\x01\x00\x00\x00a", "cannot unpickle"),
    (b"\x80\x04K\x05.", "not a TrainingArguments"),
])
def test_training_args_bin_broken(tmp_path, payload, needle):
    path = tmp_path / "training_args.bin"
    path.write_bytes(payload)
    run = read(path)
    art = artifact(run, "training_args.bin")
    assert needle in art.problem and art.status in ("unreadable", "ignored")


def test_training_args_bin_truncated_real(tmp_path):
    data = (EXAMPLES / "hf_trainer_nan_run" / "checkpoint-4" / "training_args.bin").read_bytes()
    path = tmp_path / "training_args.bin"
    path.write_bytes(data[: len(data) // 2])
    run = read(path)
    assert artifact(run, "training_args.bin").status == "unreadable" and "learning_rate" not in run.config


def test_ms_swift_args_json(tmp_path):
    args = {"model": "Qwen/Qwen2.5-7B-Instruct", "model_type": "qwen2_5", "train_type": "full", "rlhf_type": "dpo",
            "torch_dtype": "bfloat16", "attn_impl": "flash_attn", "max_length": 8192, "sequence_parallel_size": 4,
            "padding_free": False, "packing": False, "rpo_alpha": 1.0, "beta": 0.1, "loss_type": "sigmoid",
            "learning_rate": 1e-5, "lora_rank": 8, "lora_alpha": 32, "target_modules": ["all-linear"],
            "deepspeed": {"zero_optimization": {"stage": 3, "overlap_comm": False},
                          "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}},
            "fp16": False, "bf16": True, "output_dir": "/out/v0-20250101"}
    path = tmp_path / "args.json"
    path.write_text(json.dumps(args))
    run = read(path)
    c = run.config
    assert (c.get("sequence_parallel_size"), c.get("attn_implementation"), c.get("rpo_alpha"), c.get("rlhf_type"),
            c.get("torch_dtype"), c.get("max_length"), c.get("train_type"), c.get("lora.r"), c.get("lora.alpha"),
            c.get("deepspeed.zero_stage"), c.get("deepspeed.bf16.enabled"), c.get("bf16")) == (
        4, "flash_attention_2", 1.0, "dpo", "bfloat16", 8192, "full", 8, 32, 3, "auto", True)
    assert c.fact("attn_implementation").original_key == "attn_impl"
    assert c.fact("deepspeed.zero_stage").where == "deepspeed.zero_optimization.stage"
    assert run.frameworks == ["ms_swift", "deepspeed"]


def test_llamafactory_training_args_yaml(tmp_path):
    cfg = {"stage": "dpo", "finetuning_type": "lora", "lora_rank": 16, "lora_target": "all", "pref_beta": 0.1,
           "pref_loss": "sigmoid", "pref_ftx": 0.5, "cutoff_len": 2048, "flash_attn": "fa2", "packing": True,
           "neat_packing": True, "bf16": True, "fp16": False, "learning_rate": 5.0e-6, "template": "qwen",
           "deepspeed": "examples/deepspeed/ds_z3_config.json"}
    path = tmp_path / "training_args.yaml"
    path.write_text(yaml.safe_dump(cfg))
    run = read(path)
    c = run.config
    assert (c.get("cutoff_len"), c.get("attn_implementation"), c.get("packing"), c.get("neat_packing"), c.get("stage"),
            c.get("finetuning_type"), c.get("bf16"), c.get("fp16"), c.get("lora.r"), c.get("beta"), c.get("loss_type"),
            c.get("rpo_alpha"), c.get("deepspeed")) == (
        2048, "flash_attention_2", True, True, "dpo", "lora", True, False, 16, 0.1, "sigmoid", 0.5,
        "examples/deepspeed/ds_z3_config.json")
    assert run.frameworks == ["llamafactory"]


@pytest.mark.parametrize("flash_attn, expected", [("disabled", "eager"), ("sdpa", "sdpa"), ("auto", "auto"), ("fa3", "flash_attention_3")])
def test_llamafactory_flash_attn_values(tmp_path, flash_attn, expected):
    path = tmp_path / "training_args.yaml"
    path.write_text(yaml.safe_dump({"stage": "sft", "finetuning_type": "full", "flash_attn": flash_attn}))
    assert read(path).config.get("attn_implementation") == expected


def test_deepspeed_json(tmp_path):
    ds = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": 1.0,
          "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000,
                   "hysteresis": 2, "min_loss_scale": 1},
          "bfloat16": {"enabled": False},
          "zero_optimization": {"stage": 2, "overlap_comm": True, "offload_optimizer": {"device": "cpu"}}}
    path = tmp_path / "ds_config_zero2.json"
    path.write_text(json.dumps(ds))
    run = read(path)
    c = run.config
    assert (c.get("deepspeed.zero_stage"), c.get("deepspeed.overlap_comm"), c.get("deepspeed.fp16.enabled"),
            c.get("deepspeed.fp16.loss_scale"), c.get("deepspeed.fp16.initial_scale_power"),
            c.get("deepspeed.fp16.min_loss_scale"), c.get("deepspeed.fp16.hysteresis"), c.get("deepspeed.bf16.enabled"),
            c.get("deepspeed.offload_optimizer")) == (2, True, "auto", 0, 16, 1, 2, False, "cpu")
    assert run.frameworks == ["deepspeed"]


def test_unknown_json_and_yaml_are_ignored(tmp_path):
    j = tmp_path / "dataset_info.json"
    j.write_text(json.dumps({"alpaca": {"file_name": "alpaca.json"}}))
    y = tmp_path / "random.yaml"
    y.write_text("foo: bar\n")
    for p in (j, y):
        run = read(p)
        assert artifact(run, p.name).status == "ignored" and not list(run.config)


def test_accelerate_config_yaml(tmp_path):
    path = tmp_path / "accelerate_config.yaml"
    path.write_text(yaml.safe_dump({"compute_environment": "LOCAL_MACHINE", "distributed_type": "DEEPSPEED",
                                    "mixed_precision": "fp16", "deepspeed_config": {"zero_stage": 3}}))
    c = read(path).config
    assert c.get("fp16") is True and c.get("deepspeed.zero_stage") == 3


def test_results_json_real():
    c = read(EXAMPLES / "hf_trainer_nan_run" / "all_results.json").config
    assert c.get("results.train_loss") == 1.905940095583598 and c.get("results.train_runtime") == 0.2401


def test_eval_results_with_nan(tmp_path):
    path = tmp_path / "eval_results.json"
    path.write_text(json.dumps({"epoch": 1.0, "eval_loss": math.nan}))
    assert math.isnan(read(path).config.get("results.eval_loss"))


def test_weights_index_real_fixture_reports_missing_shards():
    run = read(EXAMPLES / "misc" / "model.safetensors.index.json")
    c = run.config
    assert (c.get("weights.total_size"), c.get("weights.total_parameters"), c.get("weights.shards"),
            c.get("weights.tensors")) == (26944, 6736, 3, 21)
    art = artifact(run, "model.safetensors.index.json")
    assert art.status == "partial" and "3 of 3 shard file(s) are missing" in art.problem


def test_weights_index_outside_root_and_complete(tmp_path):
    root = tmp_path / "run"
    ck = root / "checkpoint-2"
    ck.mkdir(parents=True)
    (tmp_path / "secret.safetensors").write_bytes(b"x")
    (ck / "model-00001-of-00002.safetensors").write_bytes(b"x")
    (ck / "model-00002-of-00002.safetensors").write_bytes(b"x")
    good = {"metadata": {"total_size": 8}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                                           "b": "model-00002-of-00002.safetensors"}}
    path = ck / "model.safetensors.index.json"
    path.write_text(json.dumps(good))
    assert artifact(read(path, root), "model.safetensors.index.json").status == "read"
    bad = {"weight_map": {"a": "../../secret.safetensors", "b": "/etc/passwd", "c": 5}}
    path.write_text(json.dumps(bad))
    art = artifact(read(path, root), "model.safetensors.index.json")
    assert art.status == "partial"
    assert "2 shard(s) point outside the run directory" in art.problem and "1 weight_map entries" in art.problem


# -- real writers: TrainingArguments / TRL DPOConfig / LoraConfig (imports take ~20 s here) --------------


@pytest.mark.slow
def test_real_training_args_and_dpo_config_bins(tmp_path):
    import torch
    from transformers import TrainingArguments
    from trl import DPOConfig

    ta = TrainingArguments(output_dir=str(tmp_path / "o"), learning_rate=3e-5, gradient_accumulation_steps=32,
                           max_grad_norm=0.5, logging_nan_inf_filter=False, optim="adamw_torch", warmup_steps=5,
                           lr_scheduler_type="cosine", gradient_checkpointing=True, report_to=[], use_cpu=True)
    zip_path = tmp_path / "zip" / "training_args.bin"
    legacy_path = tmp_path / "legacy" / "training_args.bin"
    for p in (zip_path, legacy_path):
        p.parent.mkdir()
    torch.save(ta, zip_path)
    torch.save(ta, legacy_path, _use_new_zipfile_serialization=False)
    for p in (zip_path, legacy_path):
        run = read(p)
        c = run.config
        assert (c.get("learning_rate"), c.get("gradient_accumulation_steps"), c.get("max_grad_norm"),
                c.get("logging_nan_inf_filter"), c.get("optim"), c.get("warmup_steps"), c.get("lr_scheduler_type"),
                c.get("gradient_checkpointing")) == (3e-5, 32, 0.5, False, "adamw_torch", 5, "cosine", True), p
        assert run.frameworks == ["hf_trainer"]
    assert read(legacy_path).config.fact("training_args.class").where == "torch_legacy"

    dpo = DPOConfig(output_dir=str(tmp_path / "o"), beta=0.25, max_length=512, padding_free=True, bf16=False,
                    use_cpu=True, report_to=[], model_init_kwargs={"attn_implementation": "sdpa", "dtype": "float16"})
    dpo_path = tmp_path / "training_args.bin"
    torch.save(dpo, dpo_path)
    run = read(dpo_path)
    c = run.config
    assert (c.get("beta"), c.get("max_length"), c.get("padding_free"), c.get("loss_type"), c.get("attn_implementation"),
            c.get("torch_dtype")) == (0.25, 512, True, ["sigmoid"], "sdpa", "float16")
    assert c.fact("attn_implementation").where == "model_init_kwargs.attn_implementation"
    assert run.frameworks == ["trl", "hf_trainer"]


@pytest.mark.slow
def test_real_lora_config_save_pretrained(tmp_path):
    from peft import LoraConfig

    LoraConfig(task_type="SEQ_CLS", r=16, lora_alpha=32, target_modules=["q_proj", "k_proj"],
               modules_to_save=["score"]).save_pretrained(str(tmp_path))
    c = read(tmp_path / "adapter_config.json").config
    assert (c.get("lora.task_type"), c.get("lora.r"), c.get("lora.alpha"), sorted(c.get("lora.target_modules")),
            c.get("lora.modules_to_save")) == ("SEQ_CLS", 16, 32, ["k_proj", "q_proj"], ["score"])


# -- end to end through the CLI -------------------------------------------------------------------------------


def test_cli_run_json_series_counts(copy_fixture):
    from typer.testing import CliRunner

    from autopsy.cli import app

    root = copy_fixture("examples/hf_trainer_nan_run")
    result = CliRunner().invoke(app, ["run", str(root), "--format", "json", "--output", "-", "--quiet"])
    assert result.exit_code in (0, 1), result.output
    report = json.loads(result.stdout)
    m = report["run"]["metrics"]
    assert (m["loss"]["count"], m["grad_norm"]["count"], m["eval_loss"]["count"], m["learning_rate"]["count"]) == (7, 7, 3, 7)
    assert m["grad_norm"]["first_nonfinite_step"] == 6 and m["grad_norm"]["nonfinite"] == 4
    assert m["eval_loss"]["first_nonfinite_step"] == 8 and m["eval_loss"]["nonfinite"] == 2
    assert m["train_loss"]["count"] == 1
    cfg = report["run"]["config"]
    assert cfg["logging_nan_inf_filter"]["value"] is True and cfg["optim"]["value"] == "adamw_torch_fused"
    assert {"hf_trainer"} <= set(report["run"]["frameworks"])
    states = [a for a in report["artifacts"] if a["path"].endswith("trainer_state.json")]
    assert len(states) == 3 and all(a["status"] == "read" for a in states)


# -- fuzz: no reader raises on arbitrary bytes ----------------------------------------------------------------

FUZZ_NAMES = ["trainer_state.json", "logging.jsonl", "trainer_log.jsonl", "x.jsonl", "metrics.csv", "hparams.yaml",
              "adapter_config.json", "config.json", "args.json", "training_args.yaml", "training_args.bin",
              "ds.json", "c.yaml", "all_results.json", "model.safetensors.index.json"]


def test_fuzz_readers_never_raise(tmp_path):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    seeds = [b'{"log_history": [{"step": 1, "loss": NaN}', b'{"current_steps": 1}\n', b"epoch,step,loss\n0,1,",
             b"a: &x [1]\nb: *x\n", b"PK\x03\x04", b"\x80\x02", b'{"weight_map": {"a": "../b"}}']

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(name=st.sampled_from(FUZZ_NAMES), seed=st.sampled_from(seeds), tail=st.binary(max_size=64))
    def check(name, seed, tail):
        path = tmp_path / name
        path.write_bytes(seed + tail)
        run = read(path)  # must not raise
        assert all(a.status in ("read", "partial", "unreadable", "ignored") for a in run.artifacts)

    check()
