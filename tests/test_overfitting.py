"""FIT001 on real HF Trainer runs (tiny Llama built in code, CPU): a model trained 60 epochs on 24 rows memorises them,
its evaluation loss (32 other rows of the same generator) rising from its best while the training loss falls to
~0.08; the same model trained 3 epochs on 400 rows, whose evaluation loss falls, is left alone. The warning keeps the
verdict healthy (the training is sound) and is named in its headline, with the checkpoint nearest the best evaluation."""

from __future__ import annotations

import torch

from autopsy.pipeline import analyze

V = 500


def _rows(n: int, seed: int) -> list[dict[str, list[int]]]:
    """A weakly learnable language: each token is 7x the previous one plus noise in [0, 40), mod V."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        x = [int(torch.randint(0, V, (1,), generator=g))]
        for _ in range(23):
            x.append((x[-1] * 7 + int(torch.randint(0, 40, (1,), generator=g))) % V)
        out.append({"input_ids": x, "labels": x})
    return out


def _train(out, n_train: int, epochs: int) -> list[dict]:
    from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                         tie_word_embeddings=False))
    steps = n_train * epochs // 8
    args = TrainingArguments(output_dir=str(out), num_train_epochs=epochs, per_device_train_batch_size=8,
                             learning_rate=3e-3, logging_steps=5, eval_strategy="steps", eval_steps=steps // 12,
                             save_strategy="steps", save_steps=steps // 3, report_to=[], use_cpu=True, seed=0,
                             warmup_steps=5)
    trainer = Trainer(model=model, args=args, train_dataset=_rows(n_train, 1), eval_dataset=_rows(32, 2),
                      data_collator=lambda r: {k: torch.tensor([x[k] for x in r]) for k in r[0]})
    trainer.train()
    return trainer.state.log_history


def test_memorising_run_is_named_overfitting_and_stays_healthy(tmp_path):
    hist = _train(tmp_path, 24, 60)
    ev = [h["eval_loss"] for h in hist if "eval_loss" in h]
    assert ev[-1] > 1.1 * min(ev)  # the run really overfits
    dx = analyze(tmp_path).diagnosis
    assert dx.verdict.status == "healthy"
    fit = [f for f in dx.findings if f.code == "FIT001"]
    assert len(fit) == 1 and fit[0].severity == "warning" and fit[0].symptom == "eval_rise"
    best_step = [h["step"] for h in hist if h.get("eval_loss") == min(ev)][0]
    assert fit[0].first_step == best_step and f"Overfitting from step {best_step}" in dx.verdict.headline
    assert any(r.startswith("Keep checkpoint-60 (step 60") for r in fit[0].remedies)


def test_run_whose_evaluation_improves_is_not_flagged(tmp_path):
    hist = _train(tmp_path, 400, 2)
    ev = [h["eval_loss"] for h in hist if "eval_loss" in h]
    assert ev[-1] < ev[0]
    dx = analyze(tmp_path).diagnosis
    assert not [f for f in dx.findings if f.code == "FIT001"] and dx.verdict.status == "healthy"


def lightning_memoriser(root, max_epochs: int, check_every: int, loggers: list, callbacks: list = ()) -> None:
    """The real Lightning Trainer fitting an MLP to 32 rows whose labels are a third wrong (it memorises them: the
    training loss goes to ~0 while val_loss, on 64 clean rows, rises from the first validation on)."""
    import lightning as L
    from torch import nn

    torch.manual_seed(0)
    x = torch.randn(32, 20)
    y = (x[:, 0] > 0).long()
    y[:10] = 1 - y[:10]
    xv = torch.randn(64, 20)
    yv = (xv[:, 0] > 0).long()

    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(20, 256), nn.ReLU(), nn.Linear(256, 2))

        def training_step(self, b, i):
            loss = nn.functional.cross_entropy(self.net(b[0]), b[1])
            self.log("train_loss", loss, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, b, i):
            self.log("val_loss", nn.functional.cross_entropy(self.net(b[0]), b[1]))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=3e-3)

    loaders = [torch.utils.data.DataLoader(torch.utils.data.TensorDataset(a, b), batch_size=bs)
               for a, b, bs in ((x, y, 8), (xv, yv, 64))]
    trainer = L.Trainer(default_root_dir=str(root), max_epochs=max_epochs, enable_progress_bar=False, log_every_n_steps=1,
                        check_val_every_n_epoch=check_every, enable_model_summary=False, logger=loggers,
                        callbacks=list(callbacks))
    trainer.fit(Net(), *loaders)


def test_lightning_run_that_memorises_noisy_labels(tmp_path):
    """The same with Lightning (CSVLogger and TensorBoardLogger, val_loss)."""
    import lightning as L

    lightning_memoriser(tmp_path, 100, 10, [L.pytorch.loggers.CSVLogger(str(tmp_path)),
                                            L.pytorch.loggers.TensorBoardLogger(str(tmp_path))])
    dx = analyze(tmp_path).diagnosis
    fit = [f for f in dx.findings if f.code == "FIT001"]
    assert dx.verdict.status == "healthy" and len(fit) == 1 and "Overfitting from step 39" in dx.verdict.headline
