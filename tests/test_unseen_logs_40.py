"""Round 41 (2026-11-29): a learning rate printed in fixed point (``lr: 0.0000``) is not a zero, and Composer's
one-metric console lines are read. Each log is quoted from its source (named above it) or, where said, generated in a
framework's own format."""

from __future__ import annotations

from pathlib import Path

from autopsy.ingest.textlog import fixed_zero_decimals
from autopsy.metrics import LR_PRINT_DECIMALS
from tests.test_unseen_logs import _series, _verdict
from tests.test_unseen_logs_33 import _run_in
from tests.test_unseen_logs_39 import _finding

# https://github.com/mosaicml/examples/blob/main/llm/README.md ("You should see logs being printed to your terminal like
# so", verbatim): Composer < 0.13's ConsoleLogger prints one metric a line, every float as f"{data:.4f}"
# (composer/loggers/logger.py format_log_data_value). The MPT-125M recipe warms its LR up to 6e-4 over 100 batches, so
# at batches 8 and 9 it is ~5e-5, printed 0.0000: a healthy start of pre-training
MOSAIC_EXAMPLES_README = """[batch=7/5000]: trainer/grad_accum: 4
[batch=7/5000]: loss/train/total: 9.8454
[batch=7/5000]: metrics/train/LanguageCrossEntropy: 9.8454
[batch=7/5000]: metrics/train/Perplexity: 18871.5430
[batch=8/5000]: wall_clock/train: 16.8334
[batch=8/5000]: wall_clock/val: 0.0000
[batch=8/5000]: wall_clock/total: 16.8334
[batch=8/5000]: lr-DecoupledAdamW/group0: 0.0000
[batch=8/5000]: trainer/global_step: 8
[batch=8/5000]: trainer/batch_idx: 8
[trace]: algorithm_traces/GradientClipping/Event.AFTER_TRAIN_BATCH:1

[batch=8/5000]: trainer/grad_accum: 4
[batch=8/5000]: loss/train/total: 9.7484
[batch=8/5000]: metrics/train/LanguageCrossEntropy: 9.7484
[batch=8/5000]: metrics/train/Perplexity: 17127.0938
[batch=9/5000]: wall_clock/train: 18.3862
[batch=9/5000]: wall_clock/val: 0.0000
[batch=9/5000]: wall_clock/total: 18.3862
[batch=9/5000]: lr-DecoupledAdamW/group0: 0.0000
[batch=9/5000]: trainer/global_step: 9
[batch=9/5000]: trainer/batch_idx: 9

train                           0%|                         | 9/5000 [00:18<2:15:12,  1.63s/ba, loss/train/total=9.7484]
"""


def test_composers_one_metric_lines_are_read_at_their_batch(tmp_path: Path):
    a = _run_in(tmp_path, 0, MOSAIC_EXAMPLES_README)
    df = a.run.scalars
    lr = df[df["metric"] == "learning_rate"].sort_values("step")
    assert lr["step"].tolist() == [8, 9] and lr["value"].tolist() == [0.0, 0.0]
    assert lr["line"].tolist() == [8, 20]
    assert _series(a, "loss")[:2] == [9.8454, 9.7484]
    loss = df[df["metric"] == "loss"].sort_values("line")
    assert loss["step"].tolist()[:2] == [7, 8] and loss["line"].tolist()[:2] == [2, 14]


def test_a_warmup_lr_printed_as_four_zero_decimals_is_no_stalled_schedule(tmp_path: Path):
    a = _run_in(tmp_path, 0, MOSAIC_EXAMPLES_README)
    fact = a.run.config.fact(LR_PRINT_DECIMALS)
    assert fact is not None and fact.value == 4 and fact.where == "line 8"
    assert _finding(a, "LRZ001") is None
    assert _verdict(a) == ("healthy", "healthy")


def test_the_printed_decimals_of_a_zero():
    lines = b"lr: 0.0000 loss: 1.2\n'learning_rate': 0.0, 'epoch': 0.1\nLR 0.00000000 | x\nlr 0.000e+00\nlr: 0.0001\nloss 0.00\n"
    assert fixed_zero_decimals(lines, 1, 1, "lr") == 4
    assert fixed_zero_decimals(lines, 1, 2, "learning_rate") == 0  # Python's repr of a float: a zero
    assert fixed_zero_decimals(lines, 1, 3, "lr") == 8  # the key found in another case
    assert fixed_zero_decimals(lines, 1, 4, "lr") == 0  # an exponent: a zero
    assert fixed_zero_decimals(lines, 1, 5, "lr") == 0
    assert fixed_zero_decimals(lines, 1, 6, "lr") is None  # the line does not name it
    assert fixed_zero_decimals(lines, 1, 9, "lr") is None  # no such line in the chunk
    assert fixed_zero_decimals(lines, 3, 3, "lr") == 4  # numbered from the chunk's first line
    assert fixed_zero_decimals(b"base_lr: 0.01, lr: 0.0000\n", 1, 1, "lr") == 4  # not the tail of base_lr


def _composer_block(batch: int, loss: str, lr: str) -> str:
    return (f"[batch={batch}/4800]:\n\t Train time/batch: {batch - 1}\n\t Train loss/train/total: {loss}\n"
            f"\t Train metrics/train/LanguageCrossEntropy: {loss}\n\t Train lr-DecoupledAdamW/group0: {lr}\n")


def test_a_nan_run_whose_lr_prints_zero_keeps_the_lr_a_suspect(tmp_path: Path):
    # generated in the format of Composer >= 0.13's ConsoleLogger.log_to_console (a header line, then
    # "\t Train {name}: {value:.4f}" per metric), six batches of a warmup whose LR prints 0.0000, then NaN
    log = "".join(_composer_block(b, v, "0.0000") for b, v in
                  [(1, "12.0420"), (2, "11.9911"), (3, "11.9823"), (4, "11.9701"), (5, "11.9650"), (6, "nan")])
    a = _run_in(tmp_path, 0, log)
    assert _finding(a, "LRZ001") is None
    num = _finding(a, "NUM001")
    assert num is not None and num.first_step == 6
    text = " ".join(str(x) for f in a.diagnosis.findings for x in (f.message, *f.remedies))
    assert "too small to blow the weights up" not in text
    assert "which the log does not resolve" in text


def test_a_stalled_lr_printed_in_repr_or_with_eight_decimals_is_still_a_stall(tmp_path: Path):
    # the same Composer format with the LR printed by a loop that keeps its zeros exact (0.0, Python's repr), and
    # with eight decimals (the resolution of ViTPose_pytorch#9's "LR 0.00000000", tests/test_unseen_logs_27.py)
    for i, lr in enumerate(("0.0", "0.00000000")):
        log = "".join(_composer_block(b, "11.0000", lr) for b in range(1, 8))
        a = _run_in(tmp_path, i, log)
        assert _finding(a, "LRZ001") is not None, lr


# -- the Trainer's model card table ---------------------------------------------------------------------------------


def _model_card_table(log_history: list[dict]) -> str:
    """The "Training results" table transformers writes into a pushed model's README.md (the real writer)."""
    from transformers.modelcard import make_markdown_table, parse_log_history

    return make_markdown_table(parse_log_history(log_history)[1])


def _history(evals: list[tuple[int, float, float]], train_every: int) -> list[dict]:
    out: list[dict] = []
    for step, eval_loss, wer in evals:
        if step % train_every == 0:
            out.append({"loss": round(4.0 / step ** 0.5, 4), "grad_norm": 1.0, "learning_rate": 1e-5,
                        "epoch": step / 100, "step": step})
        out.append({"eval_loss": eval_loss, "eval_wer": wer, "eval_runtime": 1.5, "eval_samples_per_second": 20.0,
                    "eval_steps_per_second": 2.5, "epoch": step / 100, "step": step})
    last = evals[-1][0]  # the Trainer's summary record, which parse_log_history reads the rows up to
    out.append({"train_runtime": 12.5, "train_samples_per_second": 51.2, "train_steps_per_second": 3.2,
                "total_flos": 1.0e12, "train_loss": 1.0, "epoch": last / 100, "step": last})
    return out


def test_the_trainers_model_card_table_is_read_at_its_steps(tmp_path: Path):
    # evaluations every 5 steps, training logs every 10: the first row says "No log", odd rows repeat the last log
    table = _model_card_table(_history([(5, 3.5, 48.2), (10, 1.5, 30.9), (15, 1.2, 25.9), (20, 1.1, 24.0)], 10))
    assert "| No log" in table and "| Training Loss | Epoch | Step | Validation Loss | Wer" in table
    a = _run_in(tmp_path, 0, "Training results\n\n" + table)
    df = a.run.scalars
    ev = df[df["metric"] == "eval_loss"].sort_values("step")
    assert ev["step"].tolist() == [5, 10, 15, 20] and ev["value"].tolist() == [3.5, 1.5, 1.2, 1.1]
    assert ev["line"].tolist() == [5, 6, 7, 8]
    loss = df[df["metric"] == "loss"].sort_values("step")
    assert loss["step"].tolist() == [10, 20]  # step 15 repeats step 10's log
    assert _series(a, "eval_wer") == [48.2, 30.9, 25.9, 24.0]
    assert "hf_trainer" in a.run.frameworks
    assert _verdict(a) == ("healthy", "healthy")


def test_a_model_card_whose_validation_loss_went_nan_says_where(tmp_path: Path):
    table = _model_card_table(_history([(10, 2.0, 40.0), (20, 1.8, 35.0), (30, float("nan"), 100.0),
                                        (40, float("nan"), 100.0)], 10))
    a = _run_in(tmp_path, 0, table)
    assert _verdict(a)[0] != "healthy"
    onset = [f for f in a.diagnosis.findings if f.first_step == 30]
    assert onset, [(f.code, f.first_step) for f in a.diagnosis.findings]


# -- an evaluation that turns NaN after finite ones is no masked eval batch ------------------------------------------


def _hf_dicts(rows: list[dict]) -> str:
    return "".join(repr(r) + "\n" for r in rows)


def test_an_eval_loss_that_turns_nan_after_finite_evaluations_is_not_read_as_masked_batches(tmp_path: Path):
    # generated in the HF Trainer's console format (the dicts its log() prints): the same eval set gave 1.52 and 1.31
    # before its NaN, so no batch of it has every label masked; an eval set that has one is NaN from its first pass
    rows = []
    for step in range(10, 70, 10):
        rows.append({"loss": round(2.0 - step / 100, 4), "grad_norm": 1.2, "learning_rate": 2e-05,
                     "epoch": step / 100})
        if step % 20 == 0:
            rows.append({"eval_loss": {20: 1.52, 40: 1.31, 60: float("nan")}[step], "eval_runtime": 3.1,
                         "eval_samples_per_second": 32.2, "eval_steps_per_second": 4.0, "epoch": step / 100})
    a = _run_in(tmp_path, 0, _hf_dicts(rows))
    assert _finding(a, "DATA002") is None and a.diagnosis.verdict.root_cause != "all_labels_masked"
    assert _verdict(a)[0] != "healthy"
    # the same log with the NaN at the first evaluation keeps the masked-batch reading
    rows = [dict(r, eval_loss=float("nan")) if "eval_loss" in r else r for r in rows]
    b = _run_in(tmp_path, 1, _hf_dicts(rows))
    assert b.diagnosis.verdict.root_cause == "all_labels_masked"


def test_the_log_benchmark_refuses_an_unknown_option_before_writing_anything(tmp_path: Path):
    # benchmarks/bench_logs.py read every argument it did not know as nothing: "--help" started the whole 1.09 GB run
    import subprocess
    import sys

    script = Path(__file__).resolve().parent.parent / "benchmarks" / "bench_logs.py"
    bench = script.parent.parent / ".bench"
    before = sorted(p.name for p in bench.iterdir()) if bench.exists() else []
    r = subprocess.run([sys.executable, str(script), "--hf-onyl", "1000"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "unknown option(s): --hf-onyl" in r.stderr and "Run by hand" in r.stdout
    h = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert h.returncode == 0 and "--hf-only" in h.stdout
    after = sorted(p.name for p in bench.iterdir()) if bench.exists() else []
    assert after == before


# -- the "Running training" banner: the settings a Trainer prints before its first step ----------------------------


def test_the_trainers_running_training_banner_gives_its_settings(tmp_path: Path):
    # the real HF Trainer's banner (Trainer._inner_training_loop's logger.info lines), captured from its logger
    import io
    import logging

    from tests.test_ingest_textlog import tiny_llama_and_data

    transformers, _torch, model, data = tiny_llama_and_data()
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=3, logging_steps=1,
                                          per_device_train_batch_size=4, gradient_accumulation_steps=2, report_to=[],
                                          save_strategy="no", disable_tqdm=True, use_cpu=True)
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    hf_logger = logging.getLogger("transformers")
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_info()
    hf_logger.addHandler(handler)
    try:
        transformers.Trainer(model=model, args=args, train_dataset=data).train()
    finally:
        hf_logger.removeHandler(handler)
        transformers.logging.set_verbosity(level)
    log = buf.getvalue()
    assert "***** Running training *****" in log and "Gradient Accumulation steps = 2" in log
    a = _run_in(tmp_path, 0, log)
    got = {k: a.run.config.get(k) for k in ("gradient_accumulation_steps", "max_steps", "per_device_train_batch_size")}
    assert got == {"gradient_accumulation_steps": 2, "max_steps": 3, "per_device_train_batch_size": 4}


# https://github.com/unslothai/unsloth/issues/1145 (as pasted): Unsloth's banner replaces the Trainer's, its settings in
# " | "-separated cells
UNSLOTH_1145 = r"""==((====))==  Unsloth - 2x faster free finetuning | Num GPUs = 1
    \   /|    Num examples = 2,500 | Num Epochs = 1
O^O/ \_/ \    Batch size per device = 2 | Gradient Accumulation steps = 8
\        /    Total batch size = 16 | Total steps = 312
 "-____-"     Number of trainable parameters = 982,515,712
"""


def test_unsloths_banner_gives_its_settings(tmp_path: Path):
    a = _run_in(tmp_path, 0, UNSLOTH_1145 + "{'loss': 2.5521, 'grad_norm': 1.1, 'learning_rate': 2e-05, 'epoch': 0.01}\n")
    cfg = a.run.config
    assert (cfg.get("gradient_accumulation_steps"), cfg.get("per_device_train_batch_size"), cfg.get("max_steps"),
            cfg.get("num_train_epochs")) == (8, 2, 312, 1)
    assert cfg.fact("gradient_accumulation_steps").where == "line 3"
    # "Total batch size = 16" and the GPU count are no setting of those names
    assert cfg.get("max_steps") != 16


# -- dotted argument dumps: DeepSpeed's engine configuration and Megatron-LM's arguments ----------------------------

# https://github.com/huggingface/accelerate/issues/2169 (as pasted): DeepSpeed's "DeepSpeedEngine configuration:" rows,
# "  {arg} {'.' * (29 - len(arg))} {value}" (deepspeed/runtime/config.py DeepSpeedConfig.print)
ACCELERATE_2169 = """[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   fp16_auto_cast ............... None
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   fp16_enabled ................. False
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   fp16_master_weights_and_gradients  False
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   global_rank .................. 0
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   grad_accum_dtype ............. None
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   gradient_accumulation_steps .. 1
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   gradient_clipping ............ 0.8
[2023-11-19 15:27:06,670] [INFO] [config.py:976:print]   gradient_predivide_factor .... 1.0
"""
# https://github.com/huggingface/transformers/issues/10929 (as pasted): a name of 30 letters gets no dots
HF_10929 = """[2021-03-27 17:02:52,849] [INFO] [config.py:741:print]   train_batch_size ............. 4
[2021-03-27 17:02:52,849] [INFO] [config.py:741:print]   train_micro_batch_size_per_gpu  4
[2021-03-27 17:02:52,849] [INFO] [config.py:741:print]   wall_clock_breakdown ......... False
[2021-03-27 17:02:52,849] [INFO] [config.py:741:print]   world_size ................... 1
[2021-03-27 17:02:52,849] [INFO] [config.py:741:print]   zero_allow_untested_optimizer  False
"""


def test_deepspeeds_engine_configuration_gives_its_settings(tmp_path: Path):
    a = _run_in(tmp_path, 0, ACCELERATE_2169)
    cfg = a.run.config
    assert (cfg.get("fp16"), cfg.get("gradient_accumulation_steps"), cfg.get("max_grad_norm")) == (False, 1, 0.8)
    assert cfg.fact("fp16").where == "line 2" and cfg.fact("fp16").original_key == "fp16_enabled"
    assert "fp16_master_weights_and_gradients" not in cfg.keys() and cfg.get("deepspeed.zero_stage") is None
    b = _run_in(tmp_path, 1, HF_10929)
    assert b.run.config.get("per_device_train_batch_size") == 4
    assert b.run.config.fact("per_device_train_batch_size").where == "line 2"


def test_megatrons_argument_dump_gives_its_settings(tmp_path: Path):
    # generated in Megatron-LM's print_args format ("  {arg} {'.' * (48 - len(arg))} {value}" between its rules),
    # then one of its iteration lines
    args = {"bf16": False, "clip_grad": 1.0, "fp16": True, "lr": 0.0003, "lr_warmup_iters": 2000, "micro_batch_size": 4,
            "train_iters": 500000}
    log = ("------------------------ arguments ------------------------\n"
           + "".join(f"  {k} {'.' * (48 - len(k))} {v}\n" for k, v in args.items())
           + "-------------------- end of arguments ---------------------\n")
    a = _run_in(tmp_path, 0, log)
    cfg = a.run.config
    got = {k: cfg.get(k) for k in ("bf16", "max_grad_norm", "fp16", "learning_rate", "warmup_steps",
                                   "per_device_train_batch_size", "max_steps")}
    assert got == {"bf16": False, "max_grad_norm": 1.0, "fp16": True, "learning_rate": 0.0003, "warmup_steps": 2000,
                   "per_device_train_batch_size": 4, "max_steps": 500000}
    # its micro_batch_size and clip_grad stand in for TrainingArguments' names, but the run stays a Megatron one: its
    # remedies name Megatron's flags, not the HF Trainer's
    from detectors.knobs import family

    b = _run_in(tmp_path, 1, log + " iteration       10/  500000 | consumed samples:         2560 | elapsed time per "
                                   "iteration (ms): 900.1 | learning rate: 1.500E-06 | global batch size:   256 | lm loss: "
                                   "1.083367E+01 | loss scale: 262144.0 | grad norm: 3.461 | number of skipped iterations:"
                                   "  14 | number of nan iterations:   0 |\n")
    assert "megatron" in b.run.frameworks and family(b.run) == "megatron"


# -- messages that name their mistake -----------------------------------------------------------------------------


def _crash_of(tmp_path: Path, i: int, last: str):
    a = _run_in(tmp_path, i, 'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
                             '    trainer.train()\n' + last + "\n")
    return a, _finding(a, "CRASH001")


def test_a_prompt_longer_than_vllms_max_model_len_is_explained(tmp_path: Path):
    for i, last in enumerate((
        # https://github.com/huggingface/open-r1/issues/672 (vLLM 0.8.5 under TRL 0.18 GRPO, colocate mode)
        "ValueError: The decoder prompt (length 3353) is longer than the maximum model length of 2560. Make sure that "
        "max_model_len is no smaller than the number of text tokens.",
        # https://github.com/ritzz-ai/GUI-R1/issues/32 (the V1 engine's wording, a Qwen2.5-VL GRPO run under EasyR1)
        "ValueError: Prompt length of 4834 is longer than the maximum model length of 4096.",
    )):
        a, crash = _crash_of(tmp_path, i, last)
        assert _verdict(a) == ("failed", "crash")
        assert crash is not None and "max_model_len" in crash.title and "vllm_max_model_length" in " ".join(crash.remedies)


def test_an_import_of_a_name_the_library_lacks_is_a_version_mismatch(tmp_path: Path):
    # generated in the wording of CPython's ImportError for a name a module does not define ("cannot import name %R
    # from %R (%S)", Python/ceval.c import_from), for a name of recent transformers.utils run against another release
    a, crash = _crash_of(tmp_path, 0, "ImportError: cannot import name 'is_torch_xla_available' from 'transformers.utils' "
                                      "(/usr/local/lib/python3.10/dist-packages/transformers/utils/__init__.py)")
    assert crash is not None and "version" in crash.title
    b, other = _crash_of(tmp_path, 1, "ModuleNotFoundError: No module named 'flash_attn'")
    assert other is None or "version that does not match" not in other.title


def test_a_short_name_without_dots_is_no_dump_row():
    # DeepSpeed pads names shorter than 29 letters with dots and Megatron shorter than 48: "lr  0.001" at the end of a
    # line holding a " ." elsewhere is prose or a metric, not a setting
    from autopsy.ingest.text_facts import FactScanner

    got: list = []
    scan = FactScanner(lambda key, value, line, original: got.append((key, value)))
    scan.line(1, "step 10 . loss 2.0 lr  0.001")
    scan.line(2, "  lr ....................................... 0.0003")
    assert got == [("learning_rate", 0.0003)]


def test_lightnings_precision_line_gives_the_precision(tmp_path: Path):
    # the real Lightning Trainer's line (accelerator_connector: "Using bfloat16 Automatic Mixed Precision (AMP)" for
    # precision="bf16-mixed"), captured from its logger on a two-step CPU fit; then the 16-mixed form and PL 1.x's
    import io
    import logging

    import pytest

    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning.pytorch")

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            return self.layer(batch).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    pl_logger = logging.getLogger("lightning.pytorch")
    pl_logger.addHandler(handler)
    try:
        trainer = L.Trainer(default_root_dir=str(tmp_path / "pl"), max_steps=2, accelerator="cpu", precision="bf16-mixed",
                            logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
        trainer.fit(Module(), torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4))
    finally:
        pl_logger.removeHandler(handler)
    log = buf.getvalue()
    assert "Using bfloat16 Automatic Mixed Precision (AMP)" in log
    a = _run_in(tmp_path, 0, log)
    assert a.run.config.get("bf16") is True and a.run.config.get("fp16") is None
    for i, line in enumerate(("Using 16bit Automatic Mixed Precision (AMP)", "Using 16bit native Automatic Mixed Precision (AMP)",
                              "Using native 16bit precision."), start=1):
        b = _run_in(tmp_path, i, line + "\nGPU available: True (cuda), used: True\n")
        assert b.run.config.get("fp16") is True, line


def test_accelerates_state_gives_the_mixed_precision(tmp_path: Path):
    # the real AcceleratorState repr, as accelerate's and diffusers' example scripts log it (logger.info(accelerator.state))
    import pytest

    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState

    # the state is a process-wide singleton another test (a Trainer run) may have set: start from a fresh one, leave none
    AcceleratorState._reset_state(reset_partial_state=True)
    try:
        state = repr(accelerate.Accelerator(cpu=True, mixed_precision="bf16").state)
    finally:
        AcceleratorState._reset_state(reset_partial_state=True)
    assert "Mixed precision type: bf16" in state
    a = _run_in(tmp_path, 0, "11/29/2026 10:00:00 - INFO - __main__ - " + state)
    assert a.run.config.get("bf16") is True and a.run.config.get("fp16") is None
    b = _run_in(tmp_path, 1, state.replace("type: bf16", "type: fp16"))
    assert b.run.config.get("fp16") is True
    c = _run_in(tmp_path, 2, state.replace("type: bf16", "type: no"))
    assert c.run.config.get("fp16") is None and c.run.config.get("bf16") is None


def test_llama_factorys_compute_dtype_gives_the_precision(tmp_path: Path):
    # generated in LLaMA-Factory's start-up summary (hparams/parser.py get_train_args' logger.info, behind its logger's
    # prefix): torch.float16 is fp16=True, torch.bfloat16 bf16 (or pure_bf16), None neither
    head = "[INFO|2025-05-16 10:00:00] llamafactory.hparams.parser:406 >> Process rank: 0, world size: 1, device: cuda:0, "
    for i, (dtype, want) in enumerate((("torch.float16", "fp16"), ("torch.bfloat16", "bf16"), ("None", None))):
        a = _run_in(tmp_path, i, head + f"distributed training: False, compute dtype: {dtype}\n")
        got = [k for k in ("fp16", "bf16") if a.run.config.get(k) is True]
        assert got == ([want] if want else []), dtype
