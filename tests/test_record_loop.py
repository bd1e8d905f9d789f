"""Flight recorder with a plain loop (Recorder): a NaN planted in model.layers.2.mlp at step 4 is
named with its direction and step by the record and by `autopsy run`; skip/stop keep the weights
finite; deep mode; the record's bytes per step."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from record_loop import PLANT_LAYER, PLANT_STEP, train
from record_plants import all_finite

from autopsy.pipeline import analyze
from autopsy.record.format import read_record

MODULE = f"model.layers.{PLANT_LAYER}.mlp"
GROUP = f"model.layers.{PLANT_LAYER}"


def _record(out):
    return read_record(out / "autopsy-record" / "record.jsonl")


def _rec001(out):
    analysis = analyze(out)
    found = [f for f in analysis.diagnosis.findings if f.code == "REC001"]
    assert len(found) == 1, [f.code for f in analysis.diagnosis.findings]
    return found[0], analysis


def test_forward_nan_named_by_record_and_autopsy_run(tmp_path):
    train(tmp_path, "forward")
    rec = _record(tmp_path)
    assert rec.problems == [] and rec.header["format"] == "autopsy-record"
    on = rec.onset
    assert on["step"] == PLANT_STEP and on["direction"] == "forward" and on["module"] == MODULE
    assert on["input_finite"] is True and on["how"] == "replay" and on["group"] == GROUP
    assert on["lengths"] == [12, 11, 10, 12] and on["action"] == "record"
    # every step before the onset is finite, the onset step's loss is not
    steps = {s["step"]: s for s in rec.steps}
    assert all(math.isfinite(steps[i]["loss"]) for i in range(1, PLANT_STEP))
    assert steps[PLANT_STEP]["nf"] == 1 and steps[1]["ids"] == [0, 1, 2, 3]
    assert len(steps[1]["g"]) == len(rec.groups) and steps[1]["sup"] == steps[1]["tokens"] == 45
    assert rec.updates and rec.rings and rec.end["status"] == "finished"
    from safetensors.torch import load_file

    batch = load_file(str(tmp_path / on["batch"]))
    assert batch["input_ids"].shape == (4, 12) and batch["idx"].tolist() == [12, 13, 14, 15]
    f, analysis = _rec001(tmp_path)
    assert f.first_step == PLANT_STEP and MODULE in f.title and "forward" in f.title
    assert "lengths [12, 11, 10, 12]" in f.message
    assert any("per-layer gradient norms" in e.detail for e in f.evidence)


def test_backward_nan_names_first_in_backward_order(tmp_path):
    train(tmp_path, "backward", deep=True)
    on = _record(tmp_path).onset
    assert on["step"] == PLANT_STEP and on["direction"] == "backward" and on["what"] == "grad"
    assert on["group"] == GROUP and on["param"].startswith(MODULE) and on["how"] == "backward-order"
    # NaN spread to the layers before: model order alone would blame the embedding
    assert on["first_in_model_order"] == "model.embed_tokens.weight"
    assert on["deep"]["first_nonfinite_output"] is None and on["deep"]["first_nonfinite_grad"].startswith(MODULE)
    f, _ = _rec001(tmp_path)
    assert f.first_step == PLANT_STEP and "backward" in f.title and GROUP in f.message
    assert "model.embed_tokens.weight" in f.message


def test_deep_mode_names_forward_module(tmp_path):
    train(tmp_path, "forward", deep=True)
    rec = _record(tmp_path)
    assert rec.header["mode"] == "deep" and rec.onset["deep"]["first_nonfinite_output"] == MODULE
    ring = rec.rings[0]["steps"]
    assert [s["step"] for s in ring] == [1, 2, 3, 4] and len(ring[0]["fwd_amax"]) == len(rec.header["modules"])


@pytest.mark.parametrize("action", ["skip", "stop"])
def test_skip_and_stop_keep_weights_finite(tmp_path, action):
    model, rec = train(tmp_path, "forward", action=action)
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    r = _record(tmp_path)
    assert [e["step"] for e in r.nonfinite] == [PLANT_STEP] and r.onset["action"] == action
    if action == "stop":
        assert r.end["status"] == "stopped" and max(s["step"] for s in r.steps) == PLANT_STEP
        ck = tmp_path / "autopsy-record" / "last-clean" / "model.safetensors"
        assert all_finite(ck) and r.checkpoints[-1]["clean"] is True
        f, _ = _rec001(tmp_path)
        assert any("last-clean" in r for r in f.remedies)
    else:
        assert max(s["step"] for s in r.steps) == 7  # training went on past the skipped step


def test_killed_process_leaves_a_readable_record(tmp_path):
    """SIGKILL mid-run: the record up to the last whole line is read; a cut line is reported."""
    script = [sys.executable, str(__import__("record_loop").__file__), str(tmp_path), "--steps", "400",
              "--plant-step", "3", "--sleep", "0.05"]
    proc = subprocess.Popen(script)
    path = tmp_path / "autopsy-record" / "record.jsonl"
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if path.exists() and path.read_bytes().count(b"\n") >= 12:
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    with open(path, "ab") as fh:  # as if killed in the middle of a write
        fh.write(b'{"t":"step","step":99,"loss":1.2')
    rec = _record(tmp_path)
    assert rec.end is None and rec.truncated_tail and rec.onset["step"] == 3
    f, analysis = _rec001(tmp_path)
    assert f.first_step == 3
    art = [a for a in analysis.run.artifacts if a.path == "autopsy-record/record.jsonl"][0]
    assert art.status == "partial" and "cut short" in art.problem


def test_record_bytes_per_step_30_layers(tmp_path):
    train(tmp_path, "forward", steps=4, plant_step=99, layers=30)
    lines = (tmp_path / "autopsy-record" / "record.jsonl").read_text().splitlines()
    steps = [ln for ln in lines if json.loads(ln)["t"] == "step"]
    assert len(json.loads(lines[0])["groups"]) == 33
    assert max(len(s.encode()) for s in steps) < 2048


def test_import_autopsy_record_does_not_import_torch():
    code = "import sys, autopsy, autopsy.record, autopsy.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bad_action_rejected(tmp_path):
    from autopsy.record import Recorder

    with pytest.raises(ValueError, match="on_nonfinite"):
        Recorder(tmp_path, on_nonfinite="halt")


def test_overflow_in_parent_code_and_non_finite_input(tmp_path):
    """A plain nn.Module (not HF), tensor batches: an overflow computed in a block's own forward code
    (between its children) is attributed to that block; a NaN in the input batch is named as such."""
    from autopsy.record import Recorder

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner, self.outer = torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)
            self.boost = 1.0

        def forward(self, x):
            return self.outer(self.inner(x) * self.boost)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.Sequential(Block(), Block(), Block())
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.blocks(x)).mean()

    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    rec = Recorder(tmp_path, model=net, on_nonfinite="skip")
    for step in range(1, 5):
        x = torch.randn(4, 8)
        net.blocks[1].boost = 1e39 if step == 2 else 1.0  # fp32 overflow to inf inside blocks.1's own code
        if step == 3:
            x[1, 2] = float("nan")
        loss = net(x)
        loss.backward()
        if rec.step(loss=loss, optimizer=opt, batch=x):
            opt.step()
        opt.zero_grad()
    rec.close()
    events = {e["step"]: e for e in _record(tmp_path).nonfinite}
    assert events[2]["direction"] == "forward" and events[2]["module"] == "blocks.1"
    assert "blocks.1.outer received a non-finite input" in events[2]["note"]
    assert events[3]["module"] == "(input batch)"
    assert all(bool(torch.isfinite(p).all()) for p in net.parameters())


def test_children_hooks_follow_what_the_loop_calls(tmp_path):
    """The model's children are hooked only while the loop may call them directly: dropped after a
    step that called the model itself, hooked again after a step that did not, so a later step that
    calls the children (not the model) is still replayed and its origin named."""
    from autopsy.record import Recorder

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.head(self.blocks(x)).mean()

    torch.manual_seed(0)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    rec = Recorder(tmp_path, model=net, on_nonfinite="skip")
    hooked = []
    for step in range(1, 6):
        x = torch.randn(4, 8)
        if step == 5:
            with torch.no_grad():
                net.blocks[1].bias[0] = float("nan")
        # steps 1-2 call the model; from step 3 the loop calls its children itself
        loss = net(x) if step <= 2 else net.head(net.blocks(x)).mean()
        loss.backward()
        if rec.step(loss=loss, optimizer=opt, batch=x):
            opt.step()
        opt.zero_grad()
        hooked.append(len(rec.core._child_hooks) > 0)
    rec.close()
    # hooked after step 3 (the model was not called), kept while the children are called
    assert hooked == [False, False, True, True, True]
    on = _record(tmp_path).onset
    assert on["step"] == 5 and on["direction"] == "forward" and on["module"] == "blocks.1" and on["how"] == "replay"
