"""Flight recorder inside the real HF Trainer, a real TRL trainer (SFTTrainer) and Lightning, on a
tiny Llama built in code, with a NaN planted in model.layers.2.mlp at step 4 (forward and backward
variants): the record and `autopsy run` name that layer, direction and step; "stop" leaves a last
checkpoint with finite weights."""

from __future__ import annotations

import pytest
import torch
from record_plants import DEVICE, Plant, all_finite, collate, tiny_llama, token_rows

from autopsy.pipeline import analyze
from autopsy.record.format import read_record

LAYER, STEP = 2, 4
MODULE, GROUP = f"model.layers.{LAYER}.mlp", f"model.layers.{LAYER}"


def _onset(out):
    rec = read_record(out / "autopsy-record" / "record.jsonl")
    assert rec.header["format"] == "autopsy-record", rec.problems
    return rec


def _rec001(out):
    found = [f for f in analyze(out).diagnosis.findings if f.code == "REC001"]
    assert len(found) == 1
    return found[0]


def _check(out, direction):
    rec = _onset(out)
    on = rec.onset
    assert on["step"] == STEP and on["direction"] == direction and on["group"] == GROUP, on
    if direction == "forward":
        assert on["module"] == MODULE
    else:
        assert on["param"].startswith(MODULE) and on["first_in_model_order"] == "model.embed_tokens.weight"
    f = _rec001(out)
    assert f.first_step == STEP and (MODULE in f.title or GROUP in f.message)
    return rec


# -- HF Trainer -------------------------------------------------------------------------------
def _hf_trainer(out, direction, action="record", trl=False, max_grad_norm=1.0):
    from transformers import Trainer, TrainerCallback, TrainingArguments

    from autopsy.record import AutopsyCallback

    model = tiny_llama()
    plant = Plant(model.model.layers[LAYER].mlp, STEP, direction)

    class StepOfPlant(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            plant.current = state.global_step + 1

    common = dict(output_dir=str(out), max_steps=7, per_device_train_batch_size=4, learning_rate=1e-3,
                  logging_steps=1, save_strategy="no", report_to=[], use_cpu=DEVICE == "cpu", max_grad_norm=max_grad_norm,
                  seed=0, dataloader_num_workers=0)
    callbacks = [StepOfPlant(), AutopsyCallback(on_nonfinite=action)]
    if trl:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer

        tok = word_tokenizer()
        g = torch.Generator().manual_seed(0)
        texts = [" ".join(f"w{int(i)}" for i in torch.randint(0, 60, (8 + k % 4,), generator=g)) for k in range(28)]
        args = SFTConfig(**common, max_length=16, packing=False)
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list([{"text": t} for t in texts]),
                             processing_class=tok, callbacks=callbacks)
    else:
        trainer = Trainer(model=model, args=TrainingArguments(**common), train_dataset=token_rows(28),
                          data_collator=collate, callbacks=callbacks)
    trainer.train()
    assert next(model.parameters()).device.type == DEVICE
    return trainer


def word_tokenizer():
    """A word-level tokenizer built in code (no hub download): <pad> <s> </s> <unk> w0..w59."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<s>", "</s>", "<unk>"] + [f"w{i}" for i in range(60)])}
    t = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>")


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_hf_trainer(tmp_path, direction):
    trainer = _hf_trainer(tmp_path, direction)
    rec = _check(tmp_path, direction)
    # norms are taken before the Trainer clips (max_grad_norm=1.0): they equal HF's own logged grad_norm
    logged = {h["step"]: h["grad_norm"] for h in trainer.state.log_history if "grad_norm" in h}
    ours = {s["step"]: s["gn"] for s in rec.steps}
    assert rec.header["framework"] == "transformers"
    for step in range(1, STEP):
        assert abs(logged[step] - ours[step]) / logged[step] < 1e-3 and ours[step] > 1.0


def test_hf_trainer_stop_leaves_finite_checkpoint(tmp_path):
    trainer = _hf_trainer(tmp_path, "forward", action="stop")
    rec = _onset(tmp_path)
    assert rec.onset["step"] == STEP and rec.onset["action"] == "stop"
    ck = tmp_path / f"checkpoint-{STEP}"
    assert (ck / "model.safetensors").exists() and all_finite(ck / "model.safetensors")
    assert trainer.state.global_step == STEP and rec.checkpoints[-1]["path"] == f"checkpoint-{STEP}"
    assert rec.checkpoints[-1]["clean"] is True
    f = _rec001(tmp_path)
    assert any(f"checkpoint-{STEP}" in r for r in f.remedies)


def test_trl_sft_trainer_backward(tmp_path):
    _hf_trainer(tmp_path, "backward", trl=True)
    _check(tmp_path, "backward")


# -- Lightning ----------------------------------------------------------------------------------
def _lightning(out, direction, action="record"):
    L = pytest.importorskip("lightning.pytorch")
    from autopsy.record import AutopsyLightningCallback

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_llama()

        def training_step(self, batch, batch_idx):
            return self.model(**batch).loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    module = Module()
    plant = Plant(module.model.model.layers[LAYER].mlp, STEP, direction)

    devices = set()

    class StepOfPlant(L.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            plant.current = trainer.global_step + 1
            devices.add(pl_module.device.type)

    loader = torch.utils.data.DataLoader(token_rows(28), batch_size=4, collate_fn=collate)
    trainer = L.Trainer(default_root_dir=str(out), max_steps=7, accelerator="gpu" if DEVICE == "cuda" else "cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[StepOfPlant(), AutopsyLightningCallback(on_nonfinite=action)])
    trainer.fit(module, loader)
    assert devices == {DEVICE}  # trained where asked (Lightning moves the module back to the CPU at the end)
    return trainer, module



@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_lightning(tmp_path, direction):
    _lightning(tmp_path, direction)
    on = _onset(tmp_path).onset
    assert on["step"] == STEP and on["direction"] == direction and on["group"] == "model." + GROUP, on
    if direction == "forward":
        assert on["module"] == "model." + MODULE
    else:
        assert on["param"].startswith("model." + MODULE)
    f = _rec001(tmp_path)
    assert f.first_step == STEP


def test_lightning_stop_saves_finite_checkpoint(tmp_path):
    trainer, module = _lightning(tmp_path, "forward", action="stop")
    assert trainer.global_step == STEP
    assert all(bool(torch.isfinite(p).all()) for p in module.parameters())
    ck = torch.load(tmp_path / "autopsy-record" / "last-clean.ckpt", weights_only=True, map_location="cpu")
    assert all(bool(torch.isfinite(t).all()) for t in ck["state_dict"].values() if t.is_floating_point())
