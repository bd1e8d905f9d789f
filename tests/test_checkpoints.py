"""Checkpoint forensics on real files written by the real writers (safetensors, torch.save, HF/PEFT)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from autopsy.checkpoints import collect, scan_file
from autopsy.checkpoints import safetensors_file as stf
from autopsy.checkpoints.cli import scan_command
from autopsy.checkpoints.safetensors_file import scan_safetensors
from autopsy.checkpoints.torch_file import scan_torch
from autopsy.discover import discover
from autopsy.ingest.base import RunBuilder


def read_run(path):
    """Only the checkpoint stage (the other readers are tested elsewhere)."""
    root = path if path.is_dir() else path.parent
    builder = RunBuilder(root)
    collect(builder, discover(path))
    return builder.run, None

NAN, INF = float("nan"), float("inf")
EXAMPLES = Path(__file__).parent / "fixtures" / "examples"


def _stats(scan):
    return {t.name: t for t in scan.tensors}


@pytest.mark.parametrize("dtype,code,max_abs", [
    (torch.float32, "F32", 100.0), (torch.bfloat16, "BF16", 100.0), (torch.float16, "F16", 100.0),
    (torch.float64, "F64", 100.0), (torch.float8_e5m2, "F8_E5M2", 96.0),
])
def test_ieee_counts_exact(tmp_path, dtype, code, max_abs):
    vals = [1.5, -3.0, 0.0, -0.0, NAN, INF, -INF, -NAN, 100.0, INF]
    p = tmp_path / "m.safetensors"
    save_file({"w": torch.tensor(vals).to(dtype), "clean": torch.ones(3, dtype=dtype)}, str(p))
    s = _stats(scan_safetensors(p))
    w = s["w"]
    assert (w.dtype, w.numel, w.nan, w.posinf, w.neginf, w.zeros, w.max_abs) == (code, 10, 2, 2, 1, 2, max_abs)
    c = s["clean"]
    assert (c.nonfinite, c.zeros, c.max_abs) == (0, 0, 1.0)


def test_bf16_nan_with_sign_bit_is_nan(tmp_path):
    raw = torch.tensor([0xFFFF, 0x7FC0, 0x3F80, 0x8000], dtype=torch.int32).to(torch.uint16)  # -NaN, NaN, 1.0, -0.0
    p = tmp_path / "m.safetensors"
    save_file({"b": raw.view(torch.bfloat16)}, str(p))
    b = _stats(scan_safetensors(p))["b"]
    assert (b.nan, b.posinf, b.neginf, b.zeros, b.max_abs) == (2, 0, 0, 1, 1.0)


def test_fp8_tables(tmp_path):
    e4 = torch.tensor([0x7F, 0xFF, 0x7E, 0x78, 0x00, 0x80], dtype=torch.uint8).view(torch.float8_e4m3fn)
    fnuz = torch.tensor([0x80, 0x00, 0x7F, 0x01], dtype=torch.uint8).view(torch.float8_e4m3fnuz)
    e8 = torch.tensor([0xFF, 0x7F, 0x81], dtype=torch.uint8).view(torch.float8_e8m0fnu)
    p = tmp_path / "m.safetensors"
    save_file({"e4": e4, "fnuz": fnuz, "e8": e8}, str(p))
    s = _stats(scan_safetensors(p))
    assert (s["e4"].nan, s["e4"].posinf, s["e4"].zeros, s["e4"].max_abs) == (2, 0, 2, 448.0)  # 0x78 = 256 is finite
    assert (s["fnuz"].nan, s["fnuz"].zeros, s["fnuz"].max_abs) == (1, 1, 240.0)
    assert (s["e8"].nan, s["e8"].zeros, s["e8"].max_abs) == (1, 0, 4.0)


def test_big_tensor_spans_chunks_and_digest(tmp_path):
    t = torch.randn(600_000)  # 2.4 MB: several 512 KiB chunks
    t[0], t[-1], t[300_000] = NAN, -INF, 0.0
    p, q = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_file({"t": t, "u": t.clone()}, str(p))
    t2 = t.clone()
    t2[599_998] += 1.0  # one change in the last chunk
    save_file({"t": t2, "u": t.clone()}, str(q))
    a, b = _stats(scan_safetensors(p)), _stats(scan_safetensors(q))
    assert (a["t"].nan, a["t"].neginf, a["t"].posinf) == (1, 1, 0)
    assert a["t"].zeros == int((t == 0).sum())
    fin = t[torch.isfinite(t)]
    assert a["t"].max_abs == pytest.approx(float(fin.abs().max()))
    assert a["t"].digest == a["u"].digest == b["u"].digest
    assert a["t"].digest != b["t"].digest


def _odd_offsets_file(path):
    """Tensors of several dtypes whose byte ranges start at odd offsets and straddle map windows."""
    g = torch.Generator().manual_seed(0)
    f32 = torch.randn(70_001, generator=g)
    f32[[3, 40_000, 70_000]] = torch.tensor([NAN, INF, 0.0])
    bf = torch.randn(50_003, generator=g).to(torch.bfloat16)
    bf[[0, 25_000, 50_002]] = torch.tensor([-INF, NAN, -0.0]).to(torch.bfloat16)
    tensors = {"a_u8": torch.arange(7, dtype=torch.uint8), "b_f32": f32, "c_bf16": bf,
               "d_f16": torch.randn(33_333, generator=g).half(), "e_f64": torch.zeros(5, dtype=torch.float64)}
    save_file(tensors, str(path))
    return tensors


def _truth(t):
    x = t.double()
    fin = x[torch.isfinite(x)]
    return (int(torch.isnan(x).sum()), int((x == INF).sum()), int((x == -INF).sum()), int((x == 0).sum()),
            float(fin.abs().max()) if fin.numel() else None)


def test_mapped_windows_and_read_fallback_agree_with_torch(tmp_path, monkeypatch):
    import mmap

    from autopsy.checkpoints import scanfile

    p = tmp_path / "odd.safetensors"
    tensors = _odd_offsets_file(p)
    monkeypatch.setattr(scanfile, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(scanfile, "WINDOW_BYTES", mmap.ALLOCATIONGRANULARITY * 3)  # many remaps, tensors straddle them
    monkeypatch.setattr(stf, "SMALL_TENSOR_BYTES", 64 * 1024)  # the 66-133 KB tensors one at a time, in chunks
    maps = []
    real_mmap = mmap.mmap

    def counting_mmap(*a, **kw):
        maps.append(kw.get("offset", 0))
        return real_mmap(*a, **kw)

    monkeypatch.setattr(scanfile.mmap, "mmap", counting_mmap)
    mapped = _stats(scan_safetensors(p))
    assert len(maps) > 10 and maps == sorted(set(maps))  # the window only slides forward

    def no_mmap(*a, **kw):
        raise OSError(19, "No such device")  # what a filesystem without mmap support answers

    monkeypatch.setattr(scanfile.mmap, "mmap", no_mmap)
    read = _stats(scan_safetensors(p))

    calls = []

    def fails_later(*a, **kw):  # mapping stops working part-way through a tensor (e.g. ENOMEM)
        calls.append(1)
        if len(calls) > 5:
            raise OSError(12, "Cannot allocate memory")
        return real_mmap(*a, **kw)

    monkeypatch.setattr(scanfile.mmap, "mmap", fails_later)
    switched = _stats(scan_safetensors(p))
    assert len(calls) == 6  # five windows mapped, then the rest of the file read
    for name, t in tensors.items():
        if t.dtype == torch.uint8:
            continue
        want = _truth(t)
        for got in (mapped[name], read[name], switched[name]):
            assert (got.nan, got.posinf, got.neginf, got.zeros) == want[:4], name
            assert got.max_abs == pytest.approx(want[4]), name
        assert mapped[name].digest == read[name].digest == switched[name].digest
    assert mapped["a_u8"].zeros == read["a_u8"].zeros == switched["a_u8"].zeros == 1


def test_truncated_file_is_never_mapped_past_its_end(tmp_path):
    p = tmp_path / "cut.safetensors"
    _odd_offsets_file(p)
    data = p.read_bytes()
    cut = len(data) - 50_000  # cuts into the last tensors
    p.write_bytes(data[:cut])
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8: 8 + n])
    whole = {k for k, v in header.items() if k != "__metadata__" and 8 + n + v["data_offsets"][1] <= cut}
    assert 0 < len(whole) < 5
    s = scan_safetensors(p)
    assert s.status == "partial" and any("truncated" in m for _, m in s.problems)
    assert {t.name for t in s.tensors} == whole


def test_scan_skips_the_digest_unless_asked(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({"w": torch.ones(10), "v": torch.ones(10)}, str(p))
    out = tmp_path / "s.json"
    assert scan_command([p], fmt="json", output=str(out)) == 0
    assert [t["digest"] for t in json.loads(out.read_text())["files"][0]["tensors"]] == [None, None]
    assert scan_command([p], fmt="json", output=str(out), digest=True) == 0
    digests = [t["digest"] for t in json.loads(out.read_text())["files"][0]["tensors"]]
    assert digests[0] == digests[1] and len(digests[0]) > 16
    assert scan_file(p).tensors[0].digest == digests[0]  # `run` (unchanged-tensor detection) keeps it


def _shards(tmp_path, n=3):
    paths = []
    for i in range(n):
        p = tmp_path / f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        t = torch.randn(50_000 + i).to(torch.bfloat16)
        t[i] = NAN if i == 1 else t[i]
        save_file({f"layer{i}.w": t, f"layer{i}.b": torch.zeros(3)}, str(p))
        paths.append(p)
    return paths


def _without_seconds(doc):
    for f in doc["files"]:
        f.pop("seconds")
    return doc


def test_worker_processes_report_exactly_what_one_process_does(tmp_path):
    paths = _shards(tmp_path)
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert scan_command(paths, fmt="json", workers=1, output=str(one)) == 1
    assert scan_command(paths, fmt="json", workers=3, output=str(two), digest=True) == 1
    a, b = _without_seconds(json.loads(one.read_text())), _without_seconds(json.loads(two.read_text()))
    assert [f["path"] for f in b["files"]] == [str(p) for p in paths]  # input order kept
    for f in b["files"]:
        for t in f["tensors"]:
            assert t.pop("digest") is not None
    for f in a["files"]:
        for t in f["tensors"]:
            assert t.pop("digest") is None
    assert a == b and a["summary"]["nonfinite_tensors"] == 1


def test_one_big_file_split_across_workers_reports_what_one_process_does(tmp_path, monkeypatch):
    from autopsy.checkpoints import cli

    g = torch.Generator().manual_seed(1)
    tensors = {f"model.layers.{i}.w": torch.randn(20_000 + 7 * i, generator=g).to(torch.bfloat16) for i in range(12)}
    tensors["model.layers.5.w"][100] = INF
    tensors["model.layers.11.w"][0] = NAN
    tensors["empty"] = torch.zeros(0)
    p = tmp_path / "model.safetensors"
    save_file(tensors, str(p))
    monkeypatch.setattr(cli, "MIN_PART_BYTES", 64 * 1024)  # forked workers inherit it
    assert cli._parts(p, None, p.stat().st_size, 3, 1) == [(0, 3), (1, 3), (2, 3)]
    one, three = tmp_path / "one.json", tmp_path / "three.json"
    assert scan_command([p], fmt="json", workers=1, output=str(one)) == 1
    assert scan_command([p], fmt="json", workers=3, output=str(three)) == 1
    a, b = _without_seconds(json.loads(one.read_text())), _without_seconds(json.loads(three.read_text()))
    assert a == b and len(a["files"][0]["tensors"]) == 13 and a["summary"]["nonfinite_tensors"] == 2
    parts = [scan_file(p, part=(i, 3)) for i in range(3)]
    assert all(x.tensors for x in parts) and sum(len(x.tensors) for x in parts) == 13  # each tensor in exactly one part
    assert len({t.name for x in parts for t in x.tensors}) == 13


def test_a_worker_process_that_dies_costs_its_files_not_the_scan(tmp_path, monkeypatch, capsys):
    import faulthandler
    import signal

    import autopsy.checkpoints as ck

    paths = _shards(tmp_path, 2)
    real = ck.scan_file

    def dies_on_second(path, kind=None, digest=True, part=(0, 1)):
        if path.name.startswith("model-00002"):
            faulthandler.disable()  # pytest's traceback dump would only add noise
            os.kill(os.getpid(), signal.SIGBUS)  # what touching a mapped page past a shrunk file's end does
        return real(path, kind, digest, part)

    monkeypatch.setattr(ck, "scan_file", dies_on_second)  # the forked workers inherit the patch
    out = tmp_path / "s.json"
    assert scan_command(paths, fmt="json", workers=2, output=str(out)) == 2
    files = {Path(f["path"]).name: f for f in json.loads(out.read_text())["files"]}
    dead = files["model-00002-of-00002.safetensors"]
    assert dead["status"] == "unreadable" and "worker process died" in dead["problems"][0]
    assert "rerun with --workers 1" in capsys.readouterr().err


def test_auto_workers_one_per_core_at_most_two(monkeypatch):
    from autopsy.checkpoints import scanfile

    for cores, want in ((None, 1), (1, 1), (2, 2), (4, 2), (64, 2)):
        monkeypatch.setattr(scanfile.os, "cpu_count", lambda c=cores: c)
        assert scanfile.auto_workers() == want


def test_safetensors_corrupt_inputs_never_raise(tmp_path):
    good = tmp_path / "g.safetensors"
    save_file({"a": torch.ones(1000), "b": torch.zeros(1000)}, str(good))
    data = good.read_bytes()
    cases = {
        "trunc.safetensors": data[: len(data) - 100],
        "short.safetensors": data[:5],
        "hugehdr.safetensors": (10**12).to_bytes(8, "little") + b"{}",
        "junk.safetensors": os.urandom(4096),
        "badjson.safetensors": (12).to_bytes(8, "little") + b"{not json!!}",
    }
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
        s = scan_safetensors(tmp_path / name)
        assert s.problems, name
    s = scan_safetensors(tmp_path / "trunc.safetensors")
    assert s.status == "partial" and [t.name for t in s.tensors] == ["a"]  # the intact tensor is still scanned
    assert scan_safetensors(tmp_path / "short.safetensors").status == "unreadable"
    assert "100 MB" in scan_safetensors(tmp_path / "hugehdr.safetensors").problems[0][1]


def test_torch_zip_and_legacy(tmp_path):
    sd = {"a": torch.tensor([1.0, NAN, -INF, 0.0]), "h": torch.tensor([7.0, INF], dtype=torch.float16),
          "v": torch.arange(12.0).reshape(3, 4).t(), "i": torch.tensor([0, 5, 0])}
    z, leg = tmp_path / "z.pt", tmp_path / "l.pt"
    torch.save(sd, z)
    torch.save(sd, leg, _use_new_zipfile_serialization=False)
    for path, fmt in ((z, "torch_zip"), (leg, "torch_legacy")):
        sc = scan_torch(path)
        assert sc.format == fmt and sc.status == "read", sc.problems
        s = _stats(sc)
        assert (s["a"].nan, s["a"].neginf, s["a"].zeros, s["a"].max_abs) == (1, 1, 1, 1.0)
        assert (s["h"].dtype, s["h"].posinf, s["h"].max_abs) == ("F16", 1, 7.0)
        assert (s["v"].shape, s["v"].zeros, s["v"].max_abs) == ([4, 3], 1, 11.0)  # non-contiguous view
        assert (s["i"].dtype, s["i"].zeros, s["i"].max_abs) == ("I64", 2, None)


class _Evil:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickles_are_never_executed(tmp_path):
    marker = tmp_path / "PWNED"
    payload = {"w": torch.ones(2), "x": _Evil(str(marker))}
    files = {"model.pt": {}, "legacy.pt": {"_use_new_zipfile_serialization": False}}
    ck = tmp_path / "run" / "checkpoint-2"
    ds = ck / "global_step2"
    ds.mkdir(parents=True)
    for name, kw in files.items():
        torch.save(payload, ck / name, **kw)
    torch.save({"scale": _Evil(str(marker)), "_growth_tracker": 0}, ck / "scaler.pt")
    torch.save({"optimizer_state_dict": {"loss_scaler": _Evil(str(marker)), "zero_stage": 2}}, ds / "zero_pp_rank_0_mp_rank_00_optim_states.pt")
    for p in [ck / "model.pt", ck / "legacy.pt", ck / "scaler.pt", ds / "zero_pp_rank_0_mp_rank_00_optim_states.pt"]:
        sc = scan_file(p)
        assert any("posix.system" in m and "NOT executed" in m for _, m in sc.problems), (p, sc.problems)
    run, _ = read_run(tmp_path / "run")
    probs = {a.path: a.problem for a in run.artifacts if a.problem}
    assert all("posix.system" in probs[k] for k in ("checkpoint-2/model.pt", "checkpoint-2/legacy.pt", "checkpoint-2/scaler.pt"))
    assert scan_command([ck / "model.pt"], fmt="json", output=str(tmp_path / "o.json")) == 1
    assert not marker.exists()


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=32)
    return LlamaForCausalLM(cfg)


def test_run_first_bad_last_clean_unchanged_and_optimizer(tmp_path):
    """Three HF-style checkpoints: clean, clean with a frozen layer, then NaN from layer 1 on."""
    model = _tiny_llama()
    out = tmp_path / "out"
    frozen = "model.layers.0.mlp.up_proj.weight"
    opt = torch.optim.AdamW([p for n, p in model.named_parameters() if n != frozen], lr=1e-3)
    x = torch.randint(0, 64, (2, 8))
    model.get_parameter(frozen).requires_grad_(False)
    for step in (1, 2, 3):
        model(input_ids=x, labels=x).loss.backward()
        opt.step()
        opt.zero_grad()
        if step == 3:
            with torch.no_grad():
                model.get_parameter("model.layers.1.self_attn.q_proj.weight")[0, 0] = NAN
                model.get_parameter("model.layers.1.mlp.down_proj.weight")[1, 1] = INF
        d = out / f"checkpoint-{step}"
        d.mkdir(parents=True)
        model.save_pretrained(d)
        torch.save(opt.state_dict(), d / "optimizer.pt")
        (d / "trainer_state.json").write_text(json.dumps({"global_step": step + (1 if step == 3 else 0)}))
    run, _ = read_run(out)
    a = run.checkpoint_analysis
    assert [c["checkpoint"] for c in a["checkpoints"]] == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    assert a["first_bad"]["checkpoint"] == "checkpoint-3" and a["first_bad"]["step"] == 3
    assert [t["name"] for t in a["first_bad"]["tensors"]] == ["model.layers.1.mlp.down_proj.weight",
                                                             "model.layers.1.self_attn.q_proj.weight"]
    assert a["first_bad"]["tensors"][0]["posinf"] == 1 and a["first_bad"]["tensors"][1]["nan"] == 1
    assert a["first_bad"]["layers"] == ["model.layers.1"]
    assert a["last_clean"] == {"checkpoint": "checkpoint-2", "step": 2}
    un = a["unchanged"]
    assert [p["identical"] for p in un["pairs"]] == [1, 1]
    # 21 float params, 20 in the optimizer: counts differ and safetensors is not in model order -> unknown
    assert un["unknown"] == [frozen] and un["trainable_unchanged"] == []
    o = a["optimizer"]
    assert (o["n_params"], o["n_with_state"], o["step_max"], o["trainer_global_step"], o["skipped_steps"]) == (20, 20, 3.0, 4, 1)
    assert a["skipped_steps"] == [{"checkpoint": "checkpoint-3", "step": 3, "source": "optimizer", "skipped": 1,
                                   "global_steps": 4, "optimizer_step": 3.0}]
    assert a["lora_b_all_zero"] is None and a["fp16_near_limit"] == []


def test_optimizer_without_state_names_mapped_from_torch_state_dict(tmp_path):
    """pytorch_model.bin is in model order, so optimizer indices map to names (shape-checked)."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    model(torch.randn(5, 4))[:, 0].sum().backward()
    model[1].bias.grad = None  # a param that never gets a gradient: index in params, no state
    model[0].bias.grad = torch.zeros(3)  # a gradient that is always exactly 0: exp_avg_sq all zero
    opt.step()
    d = tmp_path / "checkpoint-1"
    d.mkdir()
    torch.save(model.state_dict(), d / "pytorch_model.bin")
    torch.save(opt.state_dict(), d / "optimizer.pt")
    run, _ = read_run(tmp_path)
    o = run.checkpoint_analysis["optimizer"]
    assert o["names_mapped"] is True
    assert o["params_without_state"] == [{"index": 3, "group": 0, "name": "1.bias"}]
    assert o["exp_avg_sq_all_zero"] == [{"index": 1, "group": 0, "name": "0.bias"}]
    assert (o["n_params"], o["n_with_state"], o["step_max"]) == (4, 3, 1.0)


def test_scan_lists_layers_in_numeric_order_after_problem_tensors(tmp_path):
    p = tmp_path / "m.safetensors"
    save_file({"layers.10.w": torch.ones(2), "layers.2.w": torch.ones(2), "layers.9.w": torch.tensor([1.0, NAN]),
               "layers.11.b": torch.zeros(2)}, str(p))
    out = tmp_path / "s.json"
    assert scan_command([p], fmt="json", output=str(out)) == 1
    names = [t["name"] for t in json.loads(out.read_text())["files"][0]["tensors"]]
    assert names == ["layers.9.w", "layers.11.b", "layers.2.w", "layers.10.w"]


def test_scan_table_written_to_a_file_has_no_terminal_colours(tmp_path, monkeypatch):
    import sys

    p = tmp_path / "m.safetensors"
    save_file({"w": torch.tensor([1.0, NAN])}, str(p))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # as when run from a terminal
    out = tmp_path / "t.txt"
    assert scan_command([p], output=str(out)) == 1
    text = out.read_text()
    assert "1 non-finite" in text and "\x1b[" not in text
