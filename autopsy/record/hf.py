"""``AutopsyCallback``: the flight recorder as a ``transformers.TrainerCallback`` (TRL trainers,
being Trainers, take it too)::

    trainer = Trainer(model=model, args=args, train_dataset=ds,
                      callbacks=[AutopsyCallback(on_nonfinite="stop")])

Hooks used, in the Trainer's own order: ``on_train_begin`` (hook the model, write the header),
``on_pre_optimizer_step`` (gradients accumulated, optimizer not stepped: record, localise, act),
``on_step_end`` (on "stop": ask the Trainer to save and stop), ``on_save`` and ``on_train_end``.
The Trainer clips gradients before ``on_pre_optimizer_step``, and clipping by a NaN norm makes every
gradient NaN, so norms are taken when backward ends (a post-accumulate hook on the parameter that
receives its gradient last), before clipping. Nothing in the Trainer is patched.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback

from autopsy.record.core import RING_SIZE, UPDATE_EVERY, Core, callback_options


class AutopsyCallback(TrainerCallback):
    """Record every step cheaply; on the first non-finite loss or gradient, say where it started,
    save the batch, and ``record`` / ``skip`` / ``stop`` (stop: a last checkpoint with finite weights)."""

    def __init__(self, output_dir: str | None = None, on_nonfinite: str = "record", deep: bool = False,
                 ring_size: int = RING_SIZE, update_every: int = UPDATE_EVERY, save_batch: bool = True,
                 replay: bool = True) -> None:
        self.output_dir = output_dir
        self.options = callback_options(on_nonfinite, deep, ring_size, update_every, save_batch, replay)
        self.core: Core | None = None
        self._pre_at = -1

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.core is None:
            self.core = Core(self.output_dir or args.output_dir, "transformers",
                             overflow_is_normal=bool(getattr(args, "fp16", False)), early_norms=True, **self.options)
        if model is not None:
            self.core.attach(model)

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> Any:
        if self.core is None or self.core.model is None:
            return control
        self._pre_at = state.global_step + 1
        self.core.pre_step(state.global_step + 1, optimizer=optimizer)
        if self.core.stopped:
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_step_end(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kwargs: Any) -> Any:
        if self.core is not None and self.core.model is not None and self._pre_at != state.global_step:
            # a transformers without on_pre_optimizer_step (< 4.46): record after the step, nothing to prevent
            self.core.pre_step(state.global_step, optimizer=optimizer)
        if self.core is not None and self.core.stopped:
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.core is not None:
            reason = "stop" if self.core.stopped else "save"
            self.core.checkpoint(state.global_step, f"checkpoint-{state.global_step}", reason)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.core is not None:
            self.core.close()
