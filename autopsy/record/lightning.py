"""``AutopsyLightningCallback``: the flight recorder as a Lightning ``Callback``::

    trainer = L.Trainer(callbacks=[AutopsyLightningCallback(on_nonfinite="stop")])

Hooks used: ``on_train_start`` (hook the module, write the header), ``on_train_batch_start`` (the
batch), ``on_before_backward`` (the loss), ``on_before_optimizer_step`` (gradients accumulated and
unscaled, before clipping and the step: record, localise, act), ``on_train_batch_end`` (on "stop":
save ``autopsy-record/last-clean.ckpt`` with ``trainer.save_checkpoint`` and set
``trainer.should_stop``), ``on_train_end``. Works with ``lightning`` or ``pytorch_lightning``.
"""

from __future__ import annotations

import os
from typing import Any

try:
    from lightning.pytorch import Callback
except ImportError:  # the older package name
    from pytorch_lightning import Callback  # type: ignore[no-redef]

from autopsy.record.core import RING_SIZE, UPDATE_EVERY, Core, callback_options
from autopsy.record.format import RECORD_DIR


class AutopsyLightningCallback(Callback):
    """Record every step cheaply; on the first non-finite loss or gradient, say where it started,
    save the batch, and ``record`` / ``skip`` / ``stop``."""

    def __init__(self, output_dir: str | None = None, on_nonfinite: str = "record", deep: bool = False,
                 ring_size: int = RING_SIZE, update_every: int = UPDATE_EVERY, save_batch: bool = True,
                 replay: bool = True) -> None:
        self.output_dir = output_dir
        self.options = callback_options(on_nonfinite, deep, ring_size, update_every, save_batch, replay)
        self.core: Core | None = None
        self._batch: Any = None
        self._saved = False

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        if self.core is None:
            scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
            self.core = Core(self.output_dir or trainer.default_root_dir, "lightning",
                             overflow_is_normal=scaler is not None, **self.options)
        self.core.attach(pl_module)

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self._batch = batch

    def on_before_backward(self, trainer: Any, pl_module: Any, loss: Any) -> None:
        if self.core is not None:
            self.core.add_loss(loss)

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        if self.core is None:
            return
        scaler = getattr(getattr(trainer, "precision_plugin", None), "scaler", None)
        self.core.pre_step(trainer.global_step + 1, optimizer=optimizer, batch=self._batch, scaler=scaler)
        if self.core.stopped:
            trainer.should_stop = True

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.core is None or not self.core.stopped or self._saved:
            return
        self._saved = True
        trainer.should_stop = True
        path = os.path.join(str(self.core.dir), "last-clean.ckpt")
        trainer.save_checkpoint(path)
        self.core.checkpoint(trainer.global_step, f"{RECORD_DIR}/last-clean.ckpt", "stop")

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self.core is not None:
            self.core.close()
