"""Many-tensor checkpoints (issue 15): batched small-tensor stats equal the one-tensor path, and the
scan table shows problem tensors and a per-file summary (every tensor with --all)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

import autopsy.checkpoints.safetensors_file as stf
from autopsy.checkpoints import scan_file
from autopsy.checkpoints.cli import scan_command

NAN, INF = float("nan"), float("inf")


def _mixed(n_layers: int = 40) -> dict[str, torch.Tensor]:
    """Every batched dtype, odd byte lengths (not 8-aligned), -0, all-zero, all-NaN, +-Inf, a big tensor between."""
    g = torch.Generator().manual_seed(3)
    d: dict[str, torch.Tensor] = {}
    for i in range(n_layers):
        d[f"layers.{i}.norm.weight"] = torch.randn(7, generator=g)
        d[f"layers.{i}.router.weight"] = torch.randn(3, 5, generator=g).to(torch.bfloat16)
        d[f"layers.{i}.bias16"] = torch.randn(5, generator=g).half()
        d[f"layers.{i}.f64"] = torch.randn(3, generator=g).double()
        d[f"layers.{i}.idx"] = torch.randint(0, 3, (5,), generator=g)
        d[f"layers.{i}.u8"] = torch.randint(0, 2, (3,), generator=g, dtype=torch.uint8)
        d[f"layers.{i}.mask"] = torch.rand(5, generator=g) > 0.5
        d[f"layers.{i}.fp8"] = torch.randn(9, generator=g).to(torch.float8_e4m3fn)
        d[f"layers.{i}.fp8b"] = torch.randn(9, generator=g).to(torch.float8_e5m2)
    d["layers.3.norm.weight"][2] = NAN
    d["layers.4.router.weight"][0, 0] = INF
    d["layers.4.router.weight"][1, 1] = -INF
    d["layers.5.bias16"][:] = NAN  # no finite value: max_abs None
    d["layers.6.norm.weight"][:] = 0.0
    d["layers.7.norm.weight"][:] = -0.0
    d["layers.8.fp8b"][1] = INF
    d["layers.9.idx"][:] = 0
    d["big.weight"] = torch.randn(400, 400, generator=g)  # > SMALL_TENSOR_BYTES: one-tensor path between batches
    for i in range(12):  # MoE-expert-sized (100 KB): batched, several batches of BATCH_BYTES_NO_DIGEST without digest
        d[f"experts.{i}.w"] = torch.randn(160, 160, generator=g)
    d["experts.5.w"][7, 7] = NAN
    d["experts.9.w"][:] = 0.0
    d["empty"] = torch.zeros(0)
    d["scalar"] = torch.tensor(2.5)
    return d


@pytest.mark.parametrize("digest", [True, False])
def test_batched_small_tensors_equal_the_one_tensor_path(tmp_path, monkeypatch, digest):
    p = tmp_path / "m.safetensors"
    save_file(_mixed(), str(p))
    batched = scan_file(p, digest=digest)
    monkeypatch.setattr(stf, "SMALL_TENSOR_BYTES", 0)  # every tensor through stats.feed, one at a time
    single = scan_file(p, digest=digest)
    assert batched.problems == single.problems == []
    key = {t.name: t for t in single.tensors}
    assert len(batched.tensors) == len(single.tensors) == len(_mixed())
    for t in batched.tensors:
        s = key[t.name]
        assert (t.dtype, t.shape, t.numel, t.nan, t.posinf, t.neginf, t.zeros, t.digest) == \
               (s.dtype, s.shape, s.numel, s.nan, s.posinf, s.neginf, s.zeros, s.digest), t.name
        assert t.max_abs == s.max_abs or (t.max_abs is None and s.max_abs is None), t.name
    by = {t.name: t for t in batched.tensors}
    assert (by["layers.3.norm.weight"].nan, by["layers.4.router.weight"].posinf, by["layers.4.router.weight"].neginf) == (1, 1, 1)
    assert by["layers.5.bias16"].max_abs is None and by["layers.5.bias16"].nan == 5
    assert by["layers.6.norm.weight"].all_zero and by["layers.7.norm.weight"].all_zero and by["layers.9.idx"].all_zero
    assert by["layers.8.fp8b"].posinf == 1
    if digest:  # the digest sees bytes: -0 and +0 differ, equal tensors agree
        assert by["layers.6.norm.weight"].digest != by["layers.7.norm.weight"].digest


def test_batched_digest_matches_across_neighbourhoods(tmp_path):
    """The same tensor batched with different neighbours (or alone) gets the same digest: unchanged detection."""
    t = torch.arange(11, dtype=torch.int8)
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_file({"a0": torch.ones(3, dtype=torch.int8), "x": t}, str(a))
    save_file({"x": t.clone(), "z9": torch.ones(1000, 100)}, str(b))
    da = {s.name: s.digest for s in scan_file(a).tensors}
    db = {s.name: s.digest for s in scan_file(b).tensors}
    assert da["x"] == db["x"] and da["x"] is not None


def test_scan_table_shows_problems_and_summary_all_rows_with_all(tmp_path, capsys):
    p = tmp_path / "moe.safetensors"
    d = {f"layers.{i}.experts.{e}.w": torch.ones(2) for i in range(30) for e in range(8)}
    d["layers.17.experts.3.w"] = torch.tensor([1.0, NAN])
    d["layers.2.experts.0.w"] = torch.zeros(2)
    save_file(d, str(p))
    assert scan_command([p]) == 1
    out = capsys.readouterr().out
    assert "summary: 240 tensors (F32 240), 480 values, 1 non-finite, 1 all-zero, max|x| 1" in out
    rows = [ln for ln in out.splitlines() if "│ F32" in ln]
    assert [r.split()[0] for r in rows] == ["layers.17.experts.3.w", "layers.2.experts.0.w"]
    assert "238 more tensors (all finite); --all lists every tensor" in out
    assert scan_command([p], show_all=True) == 1
    rows = [ln.split()[0] for ln in capsys.readouterr().out.splitlines() if "│ F32" in ln]
    assert len(rows) == 240 and rows[:3] == ["layers.17.experts.3.w", "layers.2.experts.0.w", "layers.0.experts.0.w"]
    assert rows.index("layers.2.experts.1.w") < rows.index("layers.10.experts.0.w")  # numeric layer order
    js = tmp_path / "o.json"
    assert scan_command([p], fmt="json", output=str(js)) == 1
    doc = json.loads(js.read_text())
    assert [t["name"] for t in doc["files"][0]["tensors"]][:2] == ["layers.17.experts.3.w", "layers.2.experts.0.w"]
    assert doc["summary"]["tensors"] == 240


def test_non_finite_max_abs_in_json_is_a_string_and_all_zero_rows_are_capped(tmp_path, capsys):
    p = tmp_path / "z.safetensors"
    save_file({f"b.{i}": torch.zeros(3) for i in range(30)} | {"w": torch.tensor([INF, 1.0])}, str(p))
    assert scan_command([p]) == 1
    out = capsys.readouterr().out
    assert "(10 all-zero, the rest finite)" in out
    assert sum(1 for ln in out.splitlines() if "│ F32" in ln) == 1 + 20


def test_json_tensor_text_equals_the_json_encoder(tmp_path):
    """scan --format json writes tensors by %-format (no dict each): the text must be the encoder's, character
    for character, for every dtype, odd names (quotes, backslash, non-ASCII), scalars, empty and all-NaN tensors."""
    from autopsy.checkpoints import scan_output as so

    d = _mixed()
    d['we"ird\\name.ünï.层.0'] = torch.tensor([1.5, NAN])
    d["scalar"] = torch.tensor(2.0)
    d["empty"] = torch.zeros(0, 4)
    d["all_nan"] = torch.full((3,), NAN)
    d["big"] = torch.full((2,), 3e38)
    save_file(d, str(tmp_path / "m.safetensors"))
    for digest in (False, True):
        ts = so.problem_first(scan_file(tmp_path / "m.safetensors", digest=digest).tensors)
        assert so._tensors_text(ts) == so._ENC.encode([so._tensor_json(t) for t in ts])[1:-1]
    out = tmp_path / "o.json"
    scan_command([str(tmp_path / "m.safetensors")], fmt="json", output=str(out))
    doc = json.loads(out.read_text())
    assert {t["name"] for t in doc["files"][0]["tensors"]} == set(d)


def _run_of(path):
    from autopsy.checkpoints import collect
    from autopsy.discover import discover
    from autopsy.ingest.base import RunBuilder

    builder = RunBuilder(path)
    builder.root = builder.run.root = path
    collect(builder, discover(path))
    return builder.run


def test_filtered_model_order_equals_filtering_the_sorted_weights(tmp_path):
    """The analysis orders only the tensors it keeps (the full 100k-name sort is skipped): the same order as
    filtering the model-ordered list, for a safetensors file stored by name (layers.10 before layers.2)."""
    from autopsy.checkpoints.analysis import model_order, weight_tensors

    d = {f"model.layers.{i}.mlp.experts.{e}.w": torch.randn(2, 3) for i in range(12) for e in (0, 1)}
    d["lm_head.weight"] = torch.randn(4, 3)
    d["model.embed_tokens.weight"] = torch.randn(4, 3)
    for name in ("model.layers.10.mlp.experts.1.w", "model.layers.2.mlp.experts.0.w", "lm_head.weight",
                 "model.embed_tokens.weight"):
        d[name][0, 0] = NAN
    (tmp_path / "ck").mkdir()
    save_file(d, str(tmp_path / "ck" / "model.safetensors"))
    run = _run_of(tmp_path / "ck")
    ck = run.checkpoints[0]
    full = weight_tensors(ck)
    names = [t.name for _, t in full]
    assert names[0] == "model.embed_tokens.weight" and names[-1] == "lm_head.weight"
    assert names.index("model.layers.2.mlp.experts.0.w") < names.index("model.layers.10.mlp.experts.0.w")
    picked = model_order(ck, [(p, t) for p, t in weight_tensors(ck, ordered=False) if t.nonfinite])
    assert [t.name for _, t in picked] == [t.name for _, t in full if t.nonfinite] == [
        "model.embed_tokens.weight", "model.layers.2.mlp.experts.0.w", "model.layers.10.mlp.experts.1.w", "lm_head.weight"]
    first_bad = run.checkpoint_analysis["first_bad"]
    assert [t["name"] for t in first_bad["tensors"]] == [t.name for _, t in picked]
    assert first_bad["layers"] == ["model.embed_tokens", "model.layers.2", "model.layers.10", "lm_head"]


def test_run_digests_tensors_only_when_checkpoints_can_be_compared(tmp_path):
    """Digests serve the comparison of consecutive checkpoints: a run with one checkpoint skips them, a run
    with two keeps them and finds the tensor that never changed."""
    frozen = torch.randn(8, 8)
    for step in (10, 20):
        (tmp_path / f"checkpoint-{step}").mkdir()
        save_file({"frozen.weight": frozen.clone(), "trained.weight": torch.randn(8, 8)},
                  str(tmp_path / f"checkpoint-{step}" / "model.safetensors"))
    two = _run_of(tmp_path)
    assert all(t.digest for c in two.checkpoints for t in c.tensors())
    pair = two.checkpoint_analysis["unchanged"]["pairs"][0]
    assert (pair["identical"], pair["compared"]) == (1, 2)
    one = _run_of(tmp_path / "checkpoint-10")
    assert [t.digest for t in one.checkpoints[0].tensors()] == [None, None]
    assert one.checkpoint_analysis["unchanged"]["pairs"] == []


def _interleaved() -> dict[str, torch.Tensor]:
    """MoE-style interleaving (name order = file order): BF16 experts with F32 scales, F16 and I64 neighbours, every
    length a multiple of 2 so the window is read in place as BF16; NaN, +-Inf, zeros and -0 in the main dtype and in
    the foreign ones (which must not leak into the BF16 stats through the shared passes)."""
    g = torch.Generator().manual_seed(5)
    d: dict[str, torch.Tensor] = {}
    for e in range(24):
        d[f"experts.{e:02d}.a.weight"] = torch.randn(40, 64, generator=g).to(torch.bfloat16)
        d[f"experts.{e:02d}.b.scales"] = torch.rand(4, generator=g) + 0.5
        d[f"experts.{e:02d}.c.weight"] = torch.randn(64, 40, generator=g).to(torch.bfloat16)
        if e % 5 == 0:
            d[f"experts.{e:02d}.d.half"] = torch.randn(6, generator=g).half()
            d[f"experts.{e:02d}.e.index"] = torch.randint(0, 5, (3,), generator=g)
    d["experts.03.a.weight"][0, 0] = NAN
    d["experts.04.c.weight"][1, 2] = INF
    d["experts.04.c.weight"][2, 1] = -INF
    d["experts.06.a.weight"][:] = 0.0
    d["experts.07.a.weight"][:] = -0.0
    d["experts.09.b.scales"][1] = NAN  # foreign NaN: only its own tensor
    d["experts.10.b.scales"][:] = INF
    d["experts.11.b.scales"][:] = 0.0  # foreign zeros beside BF16 tensors without any
    d["experts.15.d.half"][2] = -INF
    d["experts.20.e.index"][:] = 0
    return d


@pytest.mark.parametrize("digest", [True, False])
def test_interleaved_dtypes_read_in_place_equal_the_one_tensor_path(tmp_path, monkeypatch, digest):
    import autopsy.checkpoints.smallbatch as sb

    p = tmp_path / "moe.safetensors"
    save_file(_interleaved(), str(p))
    calls = []
    real = sb.stat_batch
    monkeypatch.setattr(sb, "stat_batch", lambda *a, **k: calls.append(k.get("keep") is not None) or real(*a, **k))
    batched = scan_file(p, digest=digest)
    assert any(calls) and len(calls) <= 8  # one window of 110 tensors read in place, a gathered pass per other dtype
    monkeypatch.setattr(stf, "SMALL_TENSOR_BYTES", 0)
    single = scan_file(p, digest=digest)
    assert batched.problems == single.problems == []
    assert [t.name for t in batched.tensors] == [t.name for t in single.tensors]  # file order kept
    for t, s in zip(batched.tensors, single.tensors):
        assert (t.dtype, t.shape, t.numel, t.nan, t.posinf, t.neginf, t.zeros, t.digest) == \
               (s.dtype, s.shape, s.numel, s.nan, s.posinf, s.neginf, s.zeros, s.digest), t.name
        assert t.max_abs == s.max_abs or (t.max_abs is None and s.max_abs is None), t.name
    by = {t.name: t for t in batched.tensors}
    assert by["experts.03.a.weight"].nan == 1 and by["experts.02.a.weight"].nan == 0
    assert (by["experts.04.c.weight"].posinf, by["experts.04.c.weight"].neginf) == (1, 1)
    assert by["experts.06.a.weight"].all_zero and by["experts.07.a.weight"].all_zero
    assert by["experts.09.b.scales"].nan == 1 and by["experts.10.b.scales"].max_abs is None
    assert by["experts.11.b.scales"].all_zero and by["experts.12.a.weight"].zeros == 0
