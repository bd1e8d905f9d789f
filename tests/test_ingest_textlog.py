"""Text-log reader: real pasted logs (dev cases), the real HF stdout, generated logs per format,
and broken files. Expectations are exact and two-sided (what is read, and what is not)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from autopsy.discover import Found
from autopsy.ingest.base import RunBuilder
from autopsy.ingest.events import HEAD_PER_KIND, TAIL_PER_KIND
from autopsy.ingest.textlog import READERS, read_text_log
from autopsy.model import Run

FIX = Path(__file__).parent / "fixtures"
DEV = FIX / "dev_cases"


def read(path: Path) -> tuple[Run, RunBuilder]:
    b = RunBuilder(path.parent)
    b.artifact(path, "text_log")
    read_text_log(Found(path, "text_log", path.stat().st_size), b)
    exact = {src: s.exact_steps for src, s in b._sources.items()}
    run = b.finish()
    run.exact = exact  # type: ignore[attr-defined]
    return run, b


def write(tmp_path: Path, text: str | bytes, name: str = "train.log") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def series(run: Run, metric: str) -> list[tuple[int, float]]:
    return [(int(s), float(v)) for s, v in zip(run.series(metric)["step"], run.series(metric)["value"])]


def same(a: list[tuple[int, float]], b: list[tuple[int, float]]) -> bool:
    return len(a) == len(b) and all(sa == sb and (va == vb or (math.isnan(va) and math.isnan(vb)))
                                    for (sa, va), (sb, vb) in zip(a, b))


def problems(run: Run) -> list[str]:
    return [f"{a.status}: {a.problem}" for a in run.problems]


def test_registered() -> None:
    assert READERS == {"text_log": read_text_log}


# -- dev cases (real pasted logs) ------------------------------------------------------------

def test_alpaca534_overflow_sequence_and_bar_steps() -> None:
    path = DEV / "chinese_alpaca534_fp16_overflow_to_min_scale" / "log.txt"
    run, _ = read(path)
    assert series(run, "loss") == [(140, 1.6747), (320, 1.6693), (380, 2.0491)]
    assert [s for s, _ in series(run, "learning_rate")] == [140, 320, 380]
    assert run.exact == {"log.txt": True}
    ov = run.events_of("overflow")
    text = path.read_text(encoding="utf-8").splitlines()
    want = [(i + 1, float(m[1]), float(m[2])) for i, ln in enumerate(text)
            if (m := re.search(r"Attempted loss scale: (\d+), reducing to (\d+)", ln))]
    assert [(e.line, e.data["attempted"], e.data["new"]) for e in ov] == want
    assert [e.step for e in ov] == [378, 379, 380, 381, 382]  # the bar each line was glued to
    assert {e.kind for e in run.events} == {"overflow"}
    assert {"deepspeed", "hf_trainer"} <= set(run.frameworks)
    assert problems(run) == []


def test_alpaca534_config_fragment() -> None:
    run, _ = read(DEV / "chinese_alpaca534_fp16_overflow_to_min_scale" / "config.txt")
    assert run.config.get("deepspeed.fp16.enabled") == "auto"
    assert run.config.get("deepspeed.fp16.initial_scale_power") == 16
    assert run.config.fact("deepspeed.fp16.initial_scale_power").where == "line 7"
    assert run.scalars.empty and run.events == []


def test_cogvideo233_initial_overflows() -> None:
    run, _ = read(DEV / "cogvideo233_initial_overflow_recovers_healthy" / "log.txt")
    ov = run.events_of("overflow")
    assert [(e.data["attempted"], e.data["new"]) for e in ov] == [(2.0 ** k, 2.0 ** (k - 1)) for k in range(32, 26, -1)]
    assert [e.line for e in ov] == [2, 3, 4, 5, 6, 7]
    assert all(e.step is None for e in ov)
    assert len(run.events) == 6 and run.scalars.empty


def test_dolly11_bare_traceback_and_bf16() -> None:
    run, _ = read(DEV / "dolly11_bf16_on_v100" / "log.txt")
    (tb,) = run.events_of("traceback")
    assert tb.data["exc_type"] == "ValueError"
    assert tb.data["exc_message"].startswith("Your setup doesn't support bf16/gpu")
    assert tb.data["frame"] == {"file": "/databricks/python/lib/python3.9/site-packages/transformers/training_args.py",
                                "line": 1098, "function": "__post_init__"}
    assert tb.line == 4
    (bf,) = run.events_of("bf16_unsupported")
    assert bf.line == 4
    assert {e.kind for e in run.events} == {"traceback", "bf16_unsupported"}


def test_llava1706_tokenization_mismatch() -> None:
    path = DEV / "llava1706_v16_34b_tokenization_mismatch_loss0" / "log.txt"
    run, _ = read(path)
    want = [(i + 1, int(a), int(b)) for i, (a, b) in
            enumerate(re.findall(r"mismatch: (\d+) vs\. (\d+)", path.read_text()))]
    got = [(e.line, e.data["a"], e.data["b"]) for e in run.events_of("tokenization_mismatch")]
    assert got == want and len(got) == 16
    assert {e.kind for e in run.events} == {"tokenization_mismatch"}


def test_mar69_mae_engine_and_nan_stop() -> None:
    run, _ = read(DEV / "mar69_autocast_fp16_loss_nan_stop" / "log.txt")
    step = 8 * 2293 + 200  # epoch 8 (0-based) of 2293 iterations, iteration 200
    assert series(run, "loss") == [(step, 0.2606)]  # the value, not the running mean (0.2654)
    assert series(run, "learning_rate") == [(step, 0.000004)]
    assert set(run.metrics()) == {"loss", "learning_rate"}  # eta/time/data/max mem are not metrics
    (stop,) = run.events_of("nan_stop")
    assert (stop.line, stop.step) == (2, step)
    (err,) = run.events_of("error")
    assert err.line == 3 and err.data["exitcode"] == 1


def test_minimind26_steps() -> None:
    path = DEV / "minimind26_pretrain_record_healthy" / "log.txt"
    run, _ = read(path)
    rows = re.findall(r"\((\d+)/24681\) loss:([\d.]+) lr:([\d.]+)", path.read_text())
    assert series(run, "loss") == [(int(s), float(v)) for s, v, _ in rows]
    assert series(run, "learning_rate") == [(int(s), float(lr)) for s, _, lr in rows]
    assert len(rows) == 19 and run.exact == {"log.txt": True}
    assert run.series("loss")["line"].tolist() == list(range(4, 23))
    assert "epoch_Time" not in set(run.scalars["key"]) and "minimind" in run.frameworks


def test_mmocr_gradnorm_nan_first_interval() -> None:
    run, _ = read(DEV / "mmocr_tablemaster_first_step_gradnorm_nan_healthy" / "log.txt")
    assert same(series(run, "grad_norm"), [(100, math.nan), (200, 3.9772)])
    assert series(run, "loss") == [(100, 1.9091), (200, 0.9186)]
    assert series(run, "loss_ce") == [(100, 1.2757), (200, 0.5921)]
    assert series(run, "learning_rate") == [(100, 1e-3), (200, 1e-3)]
    assert not {"eta", "time", "memory", "data_time"} & set(run.metrics())
    gn = run.series("grad_norm")
    assert int(gn[gn["value"].isna()]["step"].min()) == 100


def test_peft137_fragment_and_code_config() -> None:
    run, _ = read(DEV / "peft137_lora_gradckpt_no_grad_fn" / "log.txt")
    (tb,) = run.events_of("traceback")
    assert (tb.data["exc_type"], tb.data["frame"], tb.line) == ("RuntimeError", None, 2)
    (ng,) = run.events_of("no_grad_fn")
    assert ng.data == {"element": 0}
    cfg, _ = read(DEV / "peft137_lora_gradckpt_no_grad_fn" / "config.txt")
    assert cfg.config.get("lora.task_type") == "SEQ_2_SEQ_LM"
    assert cfg.config.get("lora.r") == 16
    assert cfg.config.get("lora.target_modules") == ["q", "v"]
    assert "gradient_checkpointing" not in cfg.config  # `args.gradient_checkpointing` is an expression


# -- HF Trainer stdout -----------------------------------------------------------------------

def test_hf5_stdout_example_without_bars() -> None:
    run, _b = read(FIX / "examples" / "hf_trainer_nan_run" / "stdout_log_lines.txt")
    assert run.exact == {"stdout_log_lines.txt": False}  # no tqdm counter: records numbered 1..n
    assert series(run, "loss") == [(1, 4.173), (2, 4.153), (3, 4.154), (4, 3.119), (5, 0.0), (6, 0.0), (7, 0.0)]
    gn = series(run, "grad_norm")
    assert [s for s, v in gn if math.isnan(v)] == [4, 5, 6, 7]
    assert same(series(run, "eval_loss"), [(3, 4.151), (5, math.nan), (7, math.nan)])
    assert series(run, "train_loss") == [(7, 1.906)]
    assert len(run.series("epoch")) == 10  # train + eval records; the summary's epoch is not a point


def test_hf4_bare_nan_with_bars_eval_and_summary(tmp_path: Path) -> None:
    """HF prints records with tqdm.write(), which clears the bar, prints, then redraws it."""
    bar = "\r{p:3d}%|#   | {n}/{t} [00:0{n}<00:10, 1.00it/s]"
    ev = "\r 50%|##  | {n}/4 [00:00<00:00, 9.00it/s]"
    text = (bar.format(p=10, n=1, t=20) + bar.format(p=10, n=2, t=20)
            + "\r" + " " * 20 + "\r{'loss': 2.3456, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.02}\n"
            + bar.format(p=10, n=2, t=20)  # tqdm.write() redraws the bar with the current count
            + bar.format(p=15, n=3, t=20) + ev.format(n=2) + ev.format(n=4)
            + "\n{'eval_loss': inf, 'eval_runtime': 0.5, 'epoch': 0.03}\n"
            + bar.format(p=20, n=4, t=20) + "{'loss': -inf, 'learning_rate': 4.6e-05, 'epoch': 0.04}\n"
            + "{'train_runtime': 12.5, 'train_samples_per_second': 3.2, 'train_loss': 1.5, 'epoch': 0.04}\n")
    run, _ = read(write(tmp_path, text))
    assert run.exact == {"train.log": True}
    assert series(run, "loss") == [(2, 2.3456), (4, -math.inf)]
    assert same(series(run, "grad_norm"), [(2, math.nan)])
    assert series(run, "eval_loss") == [(3, math.inf)]  # the eval bar (total 4) is not the step
    assert series(run, "train_loss") == [(4, 1.5)] and series(run, "train_runtime") == [(4, 12.5)]


def tiny_llama_and_data() -> tuple[Any, Any, Any, list[dict[str, Any]]]:
    """(transformers, torch, a one-layer Llama over 32 tokens built after seeding, 24 rows of 8 random ids that are their
    own labels) for tests that run the real Trainer on the CPU; skips where torch or transformers is missing."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.randint(0, 32, (24, 8))
    return transformers, torch, model, [{"input_ids": r, "labels": r} for r in ids]


@pytest.mark.slow
def test_real_tiny_hf_trainer_stdout(tmp_path: Path) -> None:
    import contextlib
    import io

    transformers, _torch, model, data = tiny_llama_and_data()
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=6, logging_steps=2,
                                          per_device_train_batch_size=4, report_to=[], save_strategy="no",
                                          disable_tqdm=False, use_cpu=True, learning_rate=1e-3)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        transformers.Trainer(model=model, args=args, train_dataset=data).train()
    log = buf.getvalue()
    run, _ = read(write(tmp_path, log, "stdout.log"))
    printed = re.findall(r"\{'loss': '([^']+)'", log)
    assert [s for s, _ in series(run, "loss")] == [2, 4, 6]
    assert [v for _, v in series(run, "loss")] == [float(x) for x in printed]
    assert run.exact == {"stdout.log": True}
    assert len(series(run, "train_loss")) == 1


# -- other formats (generated, as each framework prints) --------------------------------------

def test_formats_generic_megatron_ds_lightning_mmengine_swift_minimind(tmp_path: Path) -> None:
    text = "step 10 | loss 2.3000 | lr 1.0e-04\niter 100: loss 2.3100, time 12.34ms, mfu 1.23%\nstep 200: train loss 2.2000, val loss 2.4000\n iteration       30/  500000 | learning rate: 1.000E-04 | lm loss: 9.925911E+00 | loss scale: 65536.0 |\nat step 10 the loss was 0.5 and it was fine\n[Rank 0] step=40, skipped=2, lr=[0.0001, 0.0001], mom=[(0.9, 0.999)]\nEpoch 1:  50%|█████     | 5/10 [00:01<00:01, 4.50it/s, v_num=0, train_loss=0.456]\n2024/01/01 12:00:00 - mmengine - INFO - Epoch(train)  [2][ 240/735]  lr: 1.9e-04  eta: 0:10:00  loss: 2.51  grad_norm: nan\n2024/01/01 12:00:00 - mmengine - INFO - Iter(train) [ 300/1000]  lr: 1.0e-03  loss: 1.25\nEpoch:[2/2](100/500), loss: 6.1234, logits_loss: 6.1000, aux_loss: 0.0234, learning_rate: 0.00054999, epoch_time: 12.3min\n{'loss': 1.47, 'grad_norm': 10.5, 'learning_rate': 2e-06, 'epoch': 0.01, 'global_step/max_steps': '7/94', 'percentage': '1.06%', 'elapsed_time': '2s', 'remaining_time': '4m 28s', 'memory(GiB)': 4.87}\n{'lora_alpha': 16, 'r': 8, 'lora_dropout': 0.05}"
    run, _ = read(write(tmp_path, text))
    assert same(series(run, "loss"), [(7, 1.47), (10, 2.3), (15, 0.456), (30, 9.925911), (100, 2.31),
                                      (300, 1.25), (600, 6.1234), (975, 2.51)])
    assert series(run, "eval_loss") == [(200, 2.4)]
    assert series(run, "eval_train_loss") == [(200, 2.2)]  # nanoGPT's eval line: an estimate, not the step's loss
    assert series(run, "loss_scale") == [(30, 65536.0)]
    assert series(run, "skipped_steps") == [(40, 2.0)]
    assert series(run, "memory_gib") == [(7, 4.87)]
    assert same(series(run, "grad_norm"), [(7, 10.5), (975, math.nan)])
    assert not {"lora_alpha", "r", "percentage", "eta", "was"} & set(run.metrics())
    assert {"deepspeed", "lightning", "mmengine", "ms_swift", "minimind"} <= set(run.frameworks)


def test_minimind_one_based_era_and_trl_keys(tmp_path: Path) -> None:
    text = ("Epoch:[1/2](100/300), loss: 6.1, lr: 0.001, epoch_time: 1.0min\n"
            "Epoch:[2/2](100/300), loss: nan, lr: 0.001, epoch_time: 1.0min\n"
            "Epoch:[2/2](200/300), loss: 5.0, Reward: 0.5, Actor LR: 0.0001\n"
            " 10%|#   | 3/30 [00:01<00:09]{'loss': 0.6931, 'rewards/chosen': 0.0, 'logps/rejected': nan, "
            "'nll_loss': nan, 'epoch': 0.1}\n")
    run, _ = read(write(tmp_path, text))
    assert same(series(run, "loss"), [(3, 0.6931), (100, 6.1), (400, math.nan), (500, 5.0)])
    assert same(series(run, "nll_loss"), [(3, math.nan)]) and same(series(run, "logps/rejected"), [(3, math.nan)])
    assert series(run, "rewards/chosen") == [(3, 0.0)]
    assert "trl" in run.frameworks


# -- events ----------------------------------------------------------------------------------

EVENT_LINES = {
    "overflow": "[deepspeed] fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 8, reducing to 4",
    "loss_scale_min": "Exception: Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.",
    "lr_before_step": "tried to get lr value before scheduler/optimizer started stepping, returning lr=0",
    "no_grad_inputs": "/x/torch/utils/checkpoint.py:92: UserWarning: None of the inputs have requires_grad=True. Gradients will be None",
    "response_key_missing": "UserWarning: Could not find response key `### Response:` in the following instance",
    "padding_free_warning": "WARNING: Padding-free training is enabled, but the attention implementation is not set to 'flash_attention_2'.",
    "flash_attn_warning": "WARNING: You are attempting to use Flash Attention 2 without specifying a dtype.",
    "nan_stop": "Loss is nan, stopping training",
    "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "prompt_fills_max_length": "UserWarning: The prompt alone fills `max_length`, so truncation leaves an empty completion.",
    "index_out_of_range": "IndexError: index out of range in self",
    "cudnn_sdpa_warning": "UserWarning: cuDNN SDPA backward got grad_output.strides() != output.strides()",
    "ddp_unused_params": "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one.",
    "unscale_fp16": "ValueError: Attempting to unscale FP16 gradients.",
    "gemma_eager_warning": "It is strongly recommended to train Gemma2 models with the `eager` attention implementation instead of `sdpa`.",
    "loss_watchdog": "[WARNING] Loss is too high, stopping training (loss_watchdog_threshold)",
    "no_grad_fn": "ValueError: parameter has no gradients",
    "warning": "/x/y.py:3: FutureWarning: `foo` is deprecated",
}


def test_event_kinds(tmp_path: Path) -> None:
    run, _ = read(write(tmp_path, "\n".join(EVENT_LINES.values()) + "\n"))
    got = {e.kind: e for e in run.events if e.kind != "traceback"}
    assert set(got) == set(EVENT_LINES)
    for i, kind in enumerate(EVENT_LINES):
        assert got[kind].line == i + 1, kind
    assert got["overflow"].data == {"attempted": 8.0, "new": 4.0}
    assert got["no_grad_fn"].data == {"variant": "parameter_has_no_gradients"}
    tbs = {e.data["exc_type"] for e in run.events_of("traceback")}
    assert tbs == {"Exception", "torch.OutOfMemoryError", "IndexError", "RuntimeError", "ValueError"}


def test_traceback_block_and_prose_is_silent(tmp_path: Path) -> None:
    text = ("We saw an error in the loss at step 3, nothing else.\n"
            "Traceback (most recent call last):\n"
            '  File "/w/train.py", line 10, in <module>\n    main()\n'
            '  File "/w/site-packages/trl/trainer/dpo_trainer.py", line 99, in compute_loss\n    x = y[i]\n'
            "IndexError: index out of range in self\n")
    run, _ = read(write(tmp_path, text))
    (tb,) = run.events_of("traceback")
    assert tb.data["frame"] == {"file": "/w/site-packages/trl/trainer/dpo_trainer.py", "line": 99,
                                "function": "compute_loss"}
    assert tb.data["header"] is True and tb.data["start_line"] == 2 and tb.line == 7
    assert {e.kind for e in run.events} == {"traceback", "index_out_of_range"}
    assert run.scalars.empty and "trl" in run.frameworks


def test_warning_folding_and_caps(tmp_path: Path) -> None:
    lines = [f"[2024-01-0{1 + i % 9} 10:00:0{i % 10},000] [WARNING] [x.py:1] same warning" for i in range(500)]
    lines += [f"OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (i % 30 + 1)}, reducing to {2 ** (i % 30)}"
              for i in range(1000)]
    run, _ = read(write(tmp_path, "\n".join(lines) + "\n"))
    (w,) = run.events_of("warning")
    assert w.count == 500 and w.line == 1 and w.data["last_line"] == 500
    ov = run.events_of("overflow")
    assert len(ov) == HEAD_PER_KIND + TAIL_PER_KIND
    assert ov[HEAD_PER_KIND].data["omitted_before"] == 1000 - HEAD_PER_KIND - TAIL_PER_KIND
    assert ov[-1].line == 1500 and ov[0].line == 501


# -- config facts ----------------------------------------------------------------------------

def test_facts_from_text(tmp_path: Path) -> None:
    text = ("- `transformers` version: 4.46.0\n- PyTorch version (GPU?): 2.5.0+cu121 (True)\n"
            "[2024] [INFO] DeepSpeed info: version=0.14.4, git-hash=unknown\n"
            "|   0  Tesla V100-SXM2-32GB           On  | 00000000:00:1E.0 Off |\n"
            "python train.py --bf16 --learning_rate 2e-4 --max_length 512 --model x \\\n"
            "model = AutoModel.from_pretrained(p, torch_dtype=torch.float16)\n"
            "peft_config = LoraConfig(r=8, task_type=TaskType.SEQ_CLS)\n"
            "fp16=True, gradient_checkpointing=True\n")
    run, _ = read(write(tmp_path, text))
    c = run.config
    assert c.get("version.transformers") == "4.46.0" and c.get("version.torch") == "2.5.0+cu121"
    assert c.get("version.deepspeed") == "0.14.4"
    assert c.get("gpu.name") == "Tesla V100-SXM2-32GB"
    assert (c.get("bf16"), c.get("learning_rate"), c.get("max_length")) == (True, 2e-4, 512)
    assert c.get("torch_dtype") == "float16" and c.get("lora.task_type") == "SEQ_CLS" and c.get("lora.r") == 8
    assert c.get("fp16") is True and c.get("gradient_checkpointing") is True
    assert c.fact("learning_rate").where == "line 5"


# -- broken input ----------------------------------------------------------------------------

def test_truncated_invalid_utf8_ansi_and_cr(tmp_path: Path) -> None:
    data = (b"\x1b[32m 50%|##| 5/10 [00:01<00:01]\x1b[0m\r{'loss': 1.5, 'epoch': 0.5}\r\n"
            b"\xff\xfe bad \xc3 bytes WARNING: caf\xe9 broke\n"
            b" 60%|##| 6/10 [00:01<00:01]{'loss': 1.4, 'grad_")
    run, _ = read(write(tmp_path, data))
    assert series(run, "loss") == [(5, 1.5)]  # the cut record at EOF is not invented
    (w,) = run.events_of("warning")
    assert w.line == 2 and "\ufffd" in w.message
    assert problems(run) == []


def test_huge_line_is_capped_and_reported(tmp_path: Path) -> None:
    big = b"x" * (50 * 1024 * 1024)
    p = write(tmp_path, b"step 1 | loss 2.0\n" + big + b"\nstep 2 | loss 1.0\nWARNING: after\n")
    run, _ = read(p)
    assert series(run, "loss") == [(1, 2.0), (2, 1.0)]
    (w,) = run.events_of("warning")
    assert w.line == 4
    (a,) = run.problems
    assert a.status == "partial" and "line 2" in a.problem and "64 KiB" in a.problem


def test_binary_junk_and_empty(tmp_path: Path) -> None:
    junk = bytes(range(256)) * 400 + b"\x00" * 10000
    run, _ = read(write(tmp_path, junk, "nohup.out"))
    assert run.scalars.empty
    (a,) = run.problems
    assert a.status == "partial" and "NUL" in a.problem
    empty, _ = read(write(tmp_path, b"", "empty.log"))
    assert empty.scalars.empty and empty.events == [] and problems(empty) == []


def test_unreadable_path_is_a_problem(tmp_path: Path) -> None:
    b = RunBuilder(tmp_path)
    read_text_log(Found(tmp_path / "missing.log", "text_log", 0), b)
    (a,) = b.finish().problems
    assert a.status == "unreadable" and "cannot open" in a.problem


def test_many_records_mixed_layouts_eval_bars_and_bad_values(tmp_path: Path) -> None:
    """The vectorised dict path: thousands of records per chunk, train/eval layouts interleaved, eval
    bars (another total) between them, a record with a non-number where its layout had one."""
    parts, want_loss, want_eval = [], [], []
    for i in range(1, 3001):
        parts.append(f"\r{i * 100 // 3000:3d}%|#  | {i}/3000 [00:01<00:09, 9.00it/s]\r    \r")
        if i == 1500:
            parts.append("{'loss': None, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': 0.5}\n")
            continue
        loss = "nan" if i % 7 == 0 else f"{1 + 1 / i:.6f}"
        parts.append(f"{{'loss': {loss}, 'grad_norm': 1.0, 'learning_rate': 1e-05, 'epoch': {i / 3000:.4f}}}\n")
        parts.append(f"\r{i * 100 // 3000:3d}%|#  | {i}/3000 [00:01<00:09, 9.00it/s]")  # tqdm.write's redraw
        want_loss.append((i, float(loss)))
        if i % 500 == 0:
            parts.append("".join(f"\r 50%|#  | {k}/8 [00:00<00:00]" for k in range(1, 9)))
            parts.append(f"\n{{'eval_loss': {i / 1000}, 'eval_runtime': 0.5, 'epoch': {i / 3000:.4f}}}\n")
            want_eval.append((i, i / 1000))
    run, _ = read(write(tmp_path, "".join(parts)))
    assert same(series(run, "loss"), want_loss) and len(want_loss) == 2999
    assert series(run, "eval_loss") == want_eval  # eval bars (total 8) never move the step
    assert 1500 not in {s for s, _ in series(run, "grad_norm")}  # the record with loss None is skipped whole
    assert run.exact == {"train.log": True}
    lines = run.series("eval_loss")["line"].tolist()
    raw = (tmp_path / "train.log").read_bytes().split(b"\n")
    assert len(lines) == 5 and all(raw[ln - 1].startswith(b"{'eval_loss'") for ln in lines)


def test_stale_bar_before_a_record_yields_to_the_redraw_after_it(tmp_path: Path) -> None:
    """tqdm repaints at most every mininterval, so the bar before a record can be stale (HF 5 on a
    fast run prints '0/6 ... {record} 2/6'); tqdm.write()'s redraw right after it has the count."""
    text = ("\r  0%|          | 0/6 [00:00<?, ?it/s]\r                                     \r"
            "{'loss': '4.153', 'grad_norm': '1.563', 'learning_rate': '0.0008333', 'epoch': '0.125'}\n"
            "\r 33%|###3      | 2/6 [00:00<00:00, 106.16it/s]\r                                              \r"
            "{'loss': '4.148', 'grad_norm': 'nan', 'learning_rate': '0.0005', 'epoch': '0.25'}\n"
            "\r 67%|######6   | 4/6 [00:00<00:00, 121.60it/s]\n")
    run, _ = read(write(tmp_path, text))
    assert series(run, "loss") == [(2, 4.153), (4, 4.148)]
    assert same(series(run, "grad_norm"), [(2, 1.563), (4, math.nan)])
    assert run.exact == {"train.log": True}
