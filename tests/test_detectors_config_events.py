"""Config/event detectors (LEN001, LBL001, SP001, PACK001, LORA001, HW001, VOCAB001).

Each detector: fires (exact numbers and evidence), a near miss just below its threshold stays
silent, a healthy run stays silent, and missing data is skipped or silent. Runs are built with
the real RunBuilder from real artifacts where the libraries make them here (TRL trainer_state
log_history, PEFT adapter_config.json + adapter safetensors, a real torch embedding IndexError,
a real PEFT AttributeError) and from real public log lines (the dev cases) otherwise.
"""

from __future__ import annotations

import json
import math
import traceback
from pathlib import Path

import pytest

from autopsy.ingest.base import RunBuilder
from autopsy.model import Checkpoint, CheckpointFile, Run, TensorStat
from detectors import (
    ALL,
    all_labels_masked,
    bf16_hardware,
    empty_response,
    lora_task_type,
    padding_free,
    sequence_parallel,
    vocab_mismatch,
)
from detectors.base import DOC_HEADINGS, doc_sections, missing_inputs

FIX = Path(__file__).parent / "fixtures"
TRL_STATES = FIX / "examples" / "trl_trainer_states"
DEV = FIX / "dev_cases"
MINE = [empty_response, all_labels_masked, sequence_parallel, padding_free, lora_task_type, bf16_hardware,
        vocab_mismatch]


# -- helpers -------------------------------------------------------------------------------------
def builder(tmp_path: Path) -> RunBuilder:
    return RunBuilder(tmp_path)


def add_log_history(b: RunBuilder, records: list[dict], source: str = "trainer_state.json") -> None:
    for i, rec in enumerate(records):
        step = rec.get("step")
        for k, v in rec.items():
            if k in ("step",) or isinstance(v, (str, bool)) or v is None:
                continue
            b.scalar(source, "trainer_state", int(step), k, v, line=i)


def log_history(name: str) -> list[dict]:
    return json.loads((TRL_STATES / f"{name}_trainer_state.json").read_text())["log_history"]


def find(run: Run, module) -> list:
    if missing_inputs(module, run):
        return []
    return list(module.detect(run))


def dev_lines(case: str) -> list[str]:
    return (DEV / case / "log.txt").read_text(encoding="utf-8").splitlines()


# -- registry / docs -----------------------------------------------------------------------------
def test_registered_with_unique_codes_and_doc_headings():
    codes = [m.CODE for m in ALL]
    assert len(codes) == len(set(codes))
    for m in MINE:
        assert m in ALL
        secs = doc_sections(m)
        for h in DOC_HEADINGS:
            assert secs.get(h), f"{m.CODE} docstring lacks '{h}'"
        assert m.ROOT_CAUSE in __import__("autopsy.model", fromlist=["ROOT_CAUSES"]).ROOT_CAUSES


# -- LEN001 empty response -----------------------------------------------------------------------
def test_len001_config_and_nan_logps_with_finite_nll(tmp_path):
    b = builder(tmp_path)
    b.fact("max_prompt_length", 2048, "args.json", "max_prompt_length")
    b.fact("max_length", "2048", "args.json", "max_length")
    # CPO/SimPO record shape (TRL keys): logps NaN while nll_loss finite at step 20
    for step, lp, nll in [(10, -1.2, 1.5), (20, math.nan, 1.4), (30, math.nan, 1.3)]:
        b.scalar("trainer_state.json", "trainer_state", step, "logps/chosen", lp, line=step // 10)
        b.scalar("trainer_state.json", "trainer_state", step, "nll_loss", nll, line=step // 10)
        b.scalar("trainer_state.json", "trainer_state", step, "loss", 2.0, line=step // 10)
    [f] = find(b.finish(), empty_response)
    assert (f.severity, f.basis, f.root_cause, f.first_step) == ("error", "direct", "empty_response", 20)
    assert "max_prompt_length 2048 >= max_length 2048" in f.message
    assert "logps/chosen went NaN at step 20 while nll_loss was finite (1.4)" in f.message
    assert any(e.detail.startswith("max_length = 2048: a prompt of max_prompt_length tokens leaves 0 tokens")
               for e in f.evidence)


def test_len001_trl_warning_text_direct(tmp_path):
    b = builder(tmp_path)
    # the real TRL 1.x message (trl/experimental/cpo/cpo_trainer.py), seen as a generic warning line
    msg = ("The prompt alone fills `max_length`, so truncation leaves an empty completion. Consider increasing "
           "`max_length` or filtering out long prompts.")
    b.event("warning", msg, "train.log", line=41)
    [f] = find(b.finish(), empty_response)
    assert (f.severity, f.basis, f.confidence) == ("warning", "direct", 0.6)  # no damage shown yet
    assert f.evidence[0].where == "line 41"


def test_len001_near_miss_and_healthy(tmp_path):
    b = builder(tmp_path)
    b.fact("max_prompt_length", 1023, "args.json")
    b.fact("max_length", 1024, "args.json")
    add_log_history(b, log_history("dpo"))
    assert find(b.finish(), empty_response) == []  # 1023 < 1024 and the real DPO run learns


def test_len001_dpo_stuck_at_ln2_whole_run_vs_first_log_only(tmp_path):
    recs = log_history("dpo")[:-1]  # drop the final summary record
    stuck = []
    for r in recs:
        r = dict(r)
        r["loss"] = 0.6931
        for k in ("rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen", "logps/rejected"):
            r[k] = 0.0
        stuck.append(r)
    b = builder(tmp_path)
    add_log_history(b, stuck)
    [f] = find(b.finish(), empty_response)
    assert (f.severity, f.basis, f.confidence) == ("error", "inferred", 0.7)
    assert f"at all {len(stuck)} logged steps 1-{stuck[-1]['step']}" in f.evidence[0].detail
    # the real run: ln 2 and rewards 0 only at the first log (healthy DPO start)
    b2 = RunBuilder(tmp_path)
    add_log_history(b2, log_history("dpo"))
    assert find(b2.finish(), empty_response) == []


def test_len001_rewards_zero_but_logps_nonzero_is_not_empty_response(tmp_path):
    recs = [dict(r, loss=0.6931, **{"rewards/chosen": 0.0, "rewards/rejected": 0.0})
            for r in log_history("dpo")[:-1]]
    b = builder(tmp_path)
    add_log_history(b, recs)
    assert find(b.finish(), empty_response) == []  # weights not moving is another cause


def test_len001_all_nan_together_is_not_pattern(tmp_path):
    b = builder(tmp_path)
    for step in (10, 20):
        v = math.nan if step == 20 else 1.0
        for k in ("logps/chosen", "nll_loss", "loss"):
            b.scalar("s.json", "trainer_state", step, k, v)
    assert find(b.finish(), empty_response) == []


# -- LBL001 all labels masked --------------------------------------------------------------------
def mismatch_events(b: RunBuilder, kind: str = "tokenization_mismatch") -> int:
    n = 0
    for i, line in enumerate(dev_lines("llava1706_v16_34b_tokenization_mismatch_loss0"), 1):
        if "tokenization mismatch" in line:
            a, c = [int(x) for x in line.split("mismatch:")[1].split("(")[0].replace(".", " ").split("vs")]
            b.event(kind, line.strip(), "log.txt", line=i, a=a, b=c)
            n += 1
    return n


def test_lbl001_llava1706_sixteen_mismatch_warnings(tmp_path):
    b = builder(tmp_path)
    assert mismatch_events(b) == 16
    [f] = find(b.finish(), all_labels_masked)
    assert (f.root_cause, f.severity, f.basis, f.confidence) == ("all_labels_masked", "error", "direct", 0.75)
    assert "16 sample(s) reported 'tokenization mismatch'" in f.message
    assert f.evidence[0].where == "line 1" and "385 vs. 399" in f.evidence[0].detail


def test_lbl001_generic_warning_kind_still_matched(tmp_path):
    b = builder(tmp_path)
    assert mismatch_events(b, kind="warning") == 16
    [f] = find(b.finish(), all_labels_masked)
    assert f.severity == "error"


def test_lbl001_loss_zero_from_start_with_response_key_missing(tmp_path):
    b = builder(tmp_path)
    b.event("warning", "UserWarning: Could not find response key `### Response:` in the following instance: ... "
                       "This instance will be ignored in loss calculation. Note, if this happens often, consider "
                       "increasing the `max_seq_length`.", "train.log", line=12)
    for step in (5, 10, 15, 20):
        b.scalar("trainer_state.json", "trainer_state", step, "loss", 0.0, line=step)
        b.scalar("trainer_state.json", "trainer_state", step, "grad_norm", math.nan, line=step)
    b.fact("max_seq_length", 64, "args.json")
    [f] = find(b.finish(), all_labels_masked)
    assert (f.severity, f.confidence, f.first_step) == ("error", 0.9, 5)
    assert "loss is exactly 0.0 from the first log on (4/4 points)" in f.message
    assert "max_seq_length is only 64 tokens" in f.message


def test_lbl001_accuracy_zero_with_num_tokens_growing(tmp_path):
    b = builder(tmp_path)
    for step, tok in ((1, 52), (2, 104), (3, 156)):
        b.scalar("s.json", "trainer_state", step, "mean_token_accuracy", 0.0)
        b.scalar("s.json", "trainer_state", step, "num_tokens", tok)
        b.scalar("s.json", "trainer_state", step, "loss", math.nan)
    [f] = find(b.finish(), all_labels_masked)
    assert (f.severity, f.basis) == ("error", "inferred")
    assert "num_tokens grew 52 -> 156" in " ".join(e.detail for e in f.evidence)


def test_lbl001_near_miss_and_healthy(tmp_path):
    # two mismatch warnings in a run that trains normally: a few bad samples, not a failure
    b = builder(tmp_path)
    b.event("tokenization_mismatch", "WARNING: tokenization mismatch: 385 vs. 399. (ignored)", "log.txt", line=3)
    b.event("tokenization_mismatch", "WARNING: tokenization mismatch: 381 vs. 395. (ignored)", "log.txt", line=9)
    add_log_history(b, log_history("sft"))
    assert find(b.finish(), all_labels_masked) == []
    # loss 0.0 only later (NaN hidden by the filter) is NUM001's, not "from the start"
    b2 = RunBuilder(tmp_path)
    for step, v in ((1, 2.0), (2, 1.9), (3, 0.0), (4, 0.0)):
        b2.scalar("s.json", "trainer_state", step, "loss", v)
    assert find(b2.finish(), all_labels_masked) == []
    b3 = RunBuilder(tmp_path)
    add_log_history(b3, log_history("sft"))  # real SFT: accuracy 0.0 only at some steps
    assert find(b3.finish(), all_labels_masked) == []


def test_lbl001_many_warnings_with_healthy_loss_is_warning(tmp_path):
    b = builder(tmp_path)
    assert mismatch_events(b) == 16
    add_log_history(b, log_history("sft"))
    [f] = find(b.finish(), all_labels_masked)
    assert (f.severity, f.title) == ("warning", "16 samples had every label masked")


# -- SP001 sequence parallel ---------------------------------------------------------------------
def sp_run(tmp_path, sp, nll_values) -> Run:
    b = RunBuilder(tmp_path)
    b.fact("sequence_parallel_size", sp, "v0-20250101-000000/args.json", "sequence_parallel_size")
    b.fact("rpo_alpha", 1.0, "v0-20250101-000000/args.json")
    for i, nll in enumerate(nll_values, 1):
        step = i * 5
        b.scalar("logging.jsonl", "swift_jsonl", step, "loss", 0.69 - 0.01 * i, line=i)
        b.scalar("logging.jsonl", "swift_jsonl", step, "nll_loss", nll, line=i)
    return b.finish()


def test_sp001_nan_nll_with_finite_loss(tmp_path):
    [f] = find(sp_run(tmp_path, 4, [math.nan] * 6), sequence_parallel)
    assert (f.root_cause, f.severity, f.first_step, f.confidence) == ("sequence_parallel_labels", "error", 5, 0.85)
    assert "nll_loss is NaN at 6 of 6 logged steps (from step 5)" in f.message
    assert "sequence_parallel_size = 4" in f.message
    assert f.evidence[1].where == "line 1"


def test_sp001_near_miss_and_healthy(tmp_path):
    # 2 of 6 NaN (33% < 50%): a blip, not a broken term
    assert find(sp_run(tmp_path, 4, [math.nan, math.nan, 1.1, 1.0, 0.9, 0.9]), sequence_parallel) == []
    assert find(sp_run(tmp_path, 1, [math.nan] * 6), sequence_parallel) == []  # SP off: not this cause
    assert find(sp_run(tmp_path, 4, [1.2, 1.1, 1.0, 0.9, 0.9, 0.8]), sequence_parallel) == []  # healthy SP run


def test_sp001_missing_config_is_skipped(tmp_path):
    b = RunBuilder(tmp_path)
    b.scalar("s.json", "trainer_state", 1, "nll_loss", math.nan)
    run = b.finish()
    assert missing_inputs(sequence_parallel, run) == ["config"]


# -- PACK001 padding-free ------------------------------------------------------------------------
PF_WARNING_OLD = ("/usr/lib/python3.11/site-packages/trl/trainer/sft_trainer.py:453: UserWarning: Padding-free "
                  "training is enabled, but the attention implementation is not set to 'flash_attention_2'. "
                  "Padding-free training flattens batches into a single sequence, and 'flash_attention_2' is the only "
                  "known attention mechanism that reliably supports this.")


def pf_run(tmp_path, attn=None, tf=None, warn=False, first_loss=None, packing=False, trl=None) -> Run:
    b = RunBuilder(tmp_path)
    b.fact("packing" if packing else "padding_free", True, "args.yaml", "padding_free")
    if attn:
        b.fact("attn_implementation", attn, "args.yaml", "attn_implementation")
    if tf:
        b.fact("version.transformers", tf, "env.txt")
    if trl:
        b.fact("version.trl", trl, "env.txt")
    if warn:
        b.event("warning", PF_WARNING_OLD, "train.log", line=7)
    if first_loss is not None:
        for i, v in enumerate([first_loss, first_loss * 0.8, 2.1, 1.9, 1.8], 1):
            b.scalar("trainer_state.json", "trainer_state", i * 10, "loss", v, line=i)
    return b.finish()


def test_pack001_affected_version_with_sdpa_is_error(tmp_path):
    [f] = find(pf_run(tmp_path, attn="sdpa", tf="4.46.3"), padding_free)
    assert (f.root_cause, f.severity, f.basis, f.confidence) == ("padding_free_without_flash_attn", "error",
                                                                  "direct", 0.85)
    assert "transformers 4.46.3 predates boundary-aware SDPA/eager masks (4.54)" in f.message


def test_pack001_warning_plus_high_start_loss(tmp_path):
    [f] = find(pf_run(tmp_path, attn="flash_attention_2", warn=True, first_loss=7.5), padding_free)
    assert (f.severity, f.confidence, f.first_step) == ("error", 0.7, 10)
    assert "the trainer warned" in f.message and "the first loss is 7.5" in f.message


def test_pack001_warning_without_symptom_or_version_is_warning(tmp_path):
    [f] = find(pf_run(tmp_path, warn=True, first_loss=1.9), padding_free)  # 1.9 < HIGH_START_LOSS
    assert (f.severity, f.confidence) == ("warning", 0.5)


def test_pack001_fixed_versions_and_flash_are_silent(tmp_path):
    # transformers >= 4.54 masks packed rows for sdpa/eager (transformers#39194): not flagged, even with TRL's warning
    assert find(pf_run(tmp_path, attn="sdpa", tf="4.54.0", warn=True, first_loss=7.5), padding_free) == []
    assert find(pf_run(tmp_path, attn="sdpa", tf="5.23.0"), padding_free) == []
    assert find(pf_run(tmp_path, attn="flash_attention_2", tf="4.46.3"), padding_free) == []
    assert find(pf_run(tmp_path, attn="kernels-community/vllm-flash-attn3", tf="4.50.0"), padding_free) == []
    # packing with TRL < 0.19 is the wrapped kind (no position_ids): not this failure
    assert find(pf_run(tmp_path, attn="sdpa", tf="4.46.3", packing=True, trl="0.18.2"), padding_free) == []
    [f] = find(pf_run(tmp_path, attn="sdpa", tf="4.53.3", packing=True, trl="0.19.0"), padding_free)
    assert f.severity == "error"


def test_pack001_padding_free_off_or_unknown_is_silent(tmp_path):
    b = RunBuilder(tmp_path)
    b.fact("padding_free", "false", "args.yaml")
    b.fact("attn_implementation", "sdpa", "args.yaml")
    b.fact("version.transformers", "4.46.3", "env.txt")
    assert find(b.finish(), padding_free) == []
    assert find(pf_run(tmp_path), padding_free) == []  # no kernel, no version, no symptom: too speculative


# -- LORA001 LoRA task type ----------------------------------------------------------------------
def tiny_cls_model():
    from transformers import LlamaConfig, LlamaForSequenceClassification

    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, num_labels=1, pad_token_id=0)
    return LlamaForSequenceClassification(cfg)


def saved_adapter(tmp_path: Path, task_type) -> Checkpoint:
    """A real PEFT adapter saved from a tiny classification model, as the checkpoint stage records it."""
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open

    out = tmp_path / f"checkpoint-8-{task_type}"
    model = get_peft_model(tiny_cls_model(), LoraConfig(task_type=task_type, r=2, target_modules=["q_proj", "v_proj"]))
    model.save_pretrained(out)
    adapter = json.loads((out / "adapter_config.json").read_text())
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as fh:
        names = list(fh.keys())
    tensors = [TensorStat(name=n, dtype="F32", shape=[1], numel=1) for n in names]
    return Checkpoint(path=out.name, step=8, kind="peft", adapter=adapter,
                      files=[CheckpointFile(path=f"{out.name}/adapter_model.safetensors", format="safetensors",
                                            tensors=tensors)])


def reward_run(tmp_path, ck: Checkpoint | None) -> Run:
    b = RunBuilder(tmp_path)
    add_log_history(b, log_history("reward"))
    run = b.finish()
    if ck is not None:
        run.checkpoints.append(ck)
    return run


@pytest.mark.slow
def test_lora001_real_adapters_both_ways(tmp_path):
    [f] = find(reward_run(tmp_path, saved_adapter(tmp_path, "FEATURE_EXTRACTION")), lora_task_type)
    # the saved adapter itself shows the head is missing: the damage is confirmed, hence 0.85 (0.8 on the config alone)
    assert (f.root_cause, f.severity, f.confidence) == ("lora_task_type_mismatch", "error", 0.85)
    details = " ".join(e.detail for e in f.evidence)
    assert "adapter task_type = FEATURE_EXTRACTION" in details
    assert "4 adapter tensors, classification head absent" in details
    assert "reward-trainer metrics logged: margin, min_reward, mean_reward, max_reward" in details
    # SEQ_CLS: PEFT adds score to modules_to_save and saves base_model.model.score.weight
    assert find(reward_run(tmp_path, saved_adapter(tmp_path, "SEQ_CLS")), lora_task_type) == []
    # a causal-LM run with a CAUSAL_LM adapter: no classification evidence, silent
    b = RunBuilder(tmp_path)
    add_log_history(b, log_history("sft"))
    b.fact("lora.task_type", "CAUSAL_LM", "adapter_config.json")
    assert find(b.finish(), lora_task_type) == []


@pytest.mark.slow
def test_lora001_real_peft_attribute_error(tmp_path):
    from peft import LoraConfig, get_peft_model

    try:
        get_peft_model(tiny_cls_model(), LoraConfig(task_type="CAUSAL_LM", r=2, target_modules=["q_proj"]))
    except AttributeError:
        tb = traceback.format_exc()
    else:  # pragma: no cover - would mean PEFT changed behaviour
        pytest.fail("PEFT no longer raises for CAUSAL_LM on a classification model")
    last = tb.strip().splitlines()[-1]
    assert last == "AttributeError: 'LlamaForSequenceClassification' object has no attribute 'prepare_inputs_for_generation'"
    b = RunBuilder(tmp_path)
    b.event("traceback", tb, "train.log", line=120, exc_type="AttributeError", exc_message=last.split(": ", 1)[1])
    [f] = find(b.finish(), lora_task_type)
    assert (f.severity, f.basis, f.confidence) == ("error", "direct", 0.95)
    assert f.evidence[0].where == "line 120"


def test_lora001_config_head_in_modules_to_save_is_warning(tmp_path):
    b = RunBuilder(tmp_path)
    add_log_history(b, log_history("reward"))
    b.fact("lora.task_type", "CAUSAL_LM", "adapter_config.json")
    b.fact("lora.modules_to_save", ["score"], "adapter_config.json")
    [f] = find(b.finish(), lora_task_type)
    assert (f.severity, f.confidence) == ("warning", 0.5)
    b2 = RunBuilder(tmp_path)  # LlamaFactory#2724: "scores" is not the head's name, nothing is saved
    add_log_history(b2, log_history("reward"))
    b2.fact("lora.task_type", "CAUSAL_LM", "adapter_config.json")
    b2.fact("lora.modules_to_save", ["scores"], "adapter_config.json")
    [f2] = find(b2.finish(), lora_task_type)
    assert f2.severity == "error"


# -- HW001 bf16 on old GPUs ----------------------------------------------------------------------
def test_hw001_dolly11_value_error(tmp_path):
    lines = dev_lines("dolly11_bf16_on_v100")
    b = RunBuilder(tmp_path)
    last = lines[-1]
    b.event("traceback", "\n".join(lines), "log.txt", line=len(lines), exc_type="ValueError",
            exc_message=last.split(": ", 1)[1])
    [f] = find(b.finish(), bf16_hardware)
    assert (f.root_cause, f.severity, f.basis, f.confidence) == ("bf16_unsupported_hardware", "error", "direct", 0.95)
    assert "Your setup doesn't support bf16/gpu" in f.message
    assert f.evidence[0].where == f"line {len(lines)}"


def test_hw001_config_on_v100_is_warning_and_near_misses(tmp_path):
    b = RunBuilder(tmp_path)
    b.fact("bf16", "true", "training_args.bin", "bf16")
    b.fact("gpu.name", "Tesla V100-SXM2-32GB", "log.txt", "line 3")
    [f] = find(b.finish(), bf16_hardware)
    assert (f.severity, f.title) == ("warning", "bf16 on a pre-Ampere GPU (Tesla V100-SXM2-32GB)")
    for gpu, bf16 in (("NVIDIA A100-SXM4-80GB", True), ("Tesla V100-SXM2-32GB", False), ("NVIDIA H100 80GB HBM3", True)):
        b2 = RunBuilder(tmp_path)
        b2.fact("bf16", bf16, "args.json")
        b2.fact("gpu.name", gpu, "log.txt")
        assert find(b2.finish(), bf16_hardware) == [], gpu


# -- VOCAB001 vocabulary mismatch ----------------------------------------------------------------
def real_embedding_traceback() -> str:
    import torch

    emb = torch.nn.Embedding(10, 4)
    try:
        emb(torch.tensor([[3, 12]]))
    except IndexError:
        return traceback.format_exc()
    raise AssertionError("torch no longer raises for an out-of-range embedding index")


def test_vocab001_real_cpu_embedding_error(tmp_path):
    tb = real_embedding_traceback()
    assert tb.strip().endswith("IndexError: index out of range in self")
    b = RunBuilder(tmp_path)
    b.event("traceback", tb, "train.log", line=88, exc_type="IndexError", exc_message="index out of range in self")
    b.fact("vocab_size", 32000, "config.json", "vocab_size")
    b.fact("tokenizer.vocab_size", 32003, "tokenizer.json")
    [f] = find(b.finish(), vocab_mismatch)
    assert (f.root_cause, f.severity, f.basis, f.confidence) == ("vocab_mismatch", "error", "direct", 0.9)
    assert "the tokenizer has 32003 tokens but the model 32000" in f.message
    assert any("ids 32000..32002 have no embedding row" in e.detail for e in f.evidence)


def test_vocab001_cuda_device_assert_line(tmp_path):
    b = RunBuilder(tmp_path)
    b.event("error", "../aten/src/ATen/native/cuda/Indexing.cu:1289: indexSelectLargeIndex: block: [193,0,0], "
                     "thread: [64,0,0] Assertion `srcIndex < srcSelectDimSize` failed.", "train.log", line=301)
    [f] = find(b.finish(), vocab_mismatch)
    assert (f.severity, f.confidence, f.basis) == ("error", 0.9, "direct")


def test_vocab001_near_miss_and_healthy(tmp_path):
    b = RunBuilder(tmp_path)
    b.fact("vocab_size", 151936, "config.json")  # Qwen: model rows padded above the tokenizer's 151665
    b.fact("tokenizer.vocab_size", 151665, "tokenizer.json")
    assert find(b.finish(), vocab_mismatch) == []
    b2 = RunBuilder(tmp_path)
    b2.fact("vocab_size", 32000, "config.json")
    b2.fact("tokenizer.vocab_size", 32001, "tokenizer.json")
    [f] = find(b2.finish(), vocab_mismatch)
    assert (f.severity, f.confidence) == ("warning", 0.6)  # risky config, no crash seen


# -- all of them on healthy and empty runs -------------------------------------------------------
@pytest.mark.parametrize("state", ["sft", "dpo", "kto", "reward", "grpo"])
def test_all_silent_on_real_healthy_trl_runs(tmp_path, state):
    b = RunBuilder(tmp_path)
    add_log_history(b, log_history(state))
    run = b.finish()
    for m in MINE:
        assert find(run, m) == [], m.CODE


def test_all_skip_or_silent_on_empty_run(tmp_path):
    run = RunBuilder(tmp_path).finish()
    for m in MINE:
        assert find(run, m) == []


def test_pack001_other_padding_free_warnings_do_not_count(tmp_path):
    b = RunBuilder(tmp_path)
    b.fact("padding_free", True, "args.yaml")
    b.event("padding_free_warning", "You are using a per_device_train_batch_size of 1 with padding-free training. "
            "Using a batch size of 1 annihilate the benefits of padding-free training.", "train.log", line=5)
    assert find(b.finish(), padding_free) == []


def test_vocab001_bare_device_side_assert_is_not_enough(tmp_path):
    b = RunBuilder(tmp_path)
    b.event("index_out_of_range", "RuntimeError: CUDA error: device-side assert triggered", "train.log", line=9)
    assert find(b.finish(), vocab_mismatch) == []


# -- end to end through the real readers ---------------------------------------------------------
@pytest.mark.parametrize(("case", "cause", "code"), [
    ("llava1706_v16_34b_tokenization_mismatch_loss0", "all_labels_masked", "LBL001"),
    ("dolly11_bf16_on_v100", "bf16_unsupported_hardware", "HW001"),
])
def test_dev_cases_end_to_end(copy_fixture, case, cause, code):
    from autopsy.pipeline import analyze

    a = analyze(copy_fixture(f"dev_cases/{case}"))
    assert (a.diagnosis.verdict.status, a.diagnosis.verdict.root_cause) == ("failed", cause)
    assert code in {f.code for f in a.diagnosis.findings}
    mine = {m.CODE for m in MINE}
    assert {f.code for f in a.diagnosis.findings if f.code in mine} == {code}  # no other config/event detector fires


EXPECTED_MINE = {"llava1706_v16_34b_tokenization_mismatch_loss0": {"LBL001"}, "dolly11_bf16_on_v100": {"HW001"}}


@pytest.mark.parametrize("case", sorted(p.name for p in DEV.iterdir() if p.is_dir()))
def test_dev_cases_only_expected_config_event_findings(copy_fixture, case):
    from autopsy.pipeline import analyze

    a = analyze(copy_fixture(f"dev_cases/{case}"))
    mine = {m.CODE for m in MINE}
    assert {f.code for f in a.diagnosis.findings if f.code in mine} == EXPECTED_MINE.get(case, set())
