"""Remote checkpoints (issue 15): ``autopsy scan`` on https:// (a real local HTTP server with Range
support, started here), hf:// (the same server laid out like the Hub's resolve URLs, via HF_ENDPOINT:
the real Hub cannot be reached from CI) and s3:// (moto's S3 server mode, a real HTTP endpoint).
Results must equal the local scan of the same file, digests included, and no byte is written to disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from range_server import RangeHandler, serve
from safetensors.torch import save_file

from autopsy.checkpoints import remote as rm
from autopsy.checkpoints import scan_file
from autopsy.checkpoints.cli import scan_command

NAN, INF = float("nan"), float("inf")


@pytest.fixture()
def http_root(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    with serve(root) as base:
        yield root, base


def _model(n: int = 300) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    d = {f"model.layers.{i}.mlp.experts.{e}.w": torch.randn(4, 8, generator=g).to(torch.bfloat16)
         for i in range(n // 10) for e in range(10)}
    d["model.layers.1.mlp.experts.3.w"][1, 2] = NAN
    d["lm_head.weight"] = torch.randn(700, 1500, generator=g)  # 4.2 MB: spans several range blocks
    d["lm_head.weight"][699, 1499] = INF
    d["model.norm.weight"] = torch.zeros(64)
    return d


def _same(remote_scan, local_scan):
    key = lambda t: (t.name, t.dtype, t.shape, t.numel, t.nan, t.posinf, t.neginf, t.max_abs, t.zeros, t.digest)  # noqa: E731
    assert sorted(map(key, remote_scan.tensors), key=str) == sorted(map(key, local_scan.tensors), key=str)


def test_https_scan_equals_local_scan_with_parallel_ranges(http_root, monkeypatch, tmp_path):
    root, base = http_root
    save_file(_model(), str(root / "model.safetensors"))
    monkeypatch.setattr(rm, "BLOCK_BYTES", 1 << 20)  # several blocks in flight for a 4 MB file
    before = set(os.listdir(tmp_path))
    got = rm.scan_remote_file(f"{base}/model.safetensors", digest=True)
    assert got.problems == []
    _same(got, scan_file(root / "model.safetensors", digest=True))
    assert set(os.listdir(tmp_path)) == before  # nothing downloaded next to it
    size = (root / "model.safetensors").stat().st_size
    assert "GET whole file" not in RangeHandler.requests and all(r.startswith("GET bytes=") for r in RangeHandler.requests)
    spans = sorted(tuple(map(int, r[len("GET bytes="):].split("-"))) for r in RangeHandler.requests)
    # the first request brings the size and the header; then the data in blocks: each byte fetched once
    assert len(spans) >= 4 and spans[0][0] == 0 and spans[-1][1] == size - 1
    assert all(b[0] == a[1] + 1 for a, b in zip(spans, spans[1:]))
    assert got.metadata["remote"] == {"requests": len(spans), "bytes_read": size}


def test_scan_command_on_a_url_reports_like_a_local_file(http_root, tmp_path):
    root, base = http_root
    save_file(_model(), str(root / "model.safetensors"))
    out = tmp_path / "o.json"
    assert scan_command([f"{base}/model.safetensors"], fmt="json", output=str(out)) == 1
    doc = json.loads(out.read_text())
    f = doc["files"][0]
    assert f["path"] == f"{base}/model.safetensors"
    assert [t["name"] for t in f["tensors"][:2]] == ["lm_head.weight", "model.layers.1.mlp.experts.3.w"]
    assert doc["summary"]["nonfinite_tensors"] == 2 and doc["summary"]["tensors"] == 302


def test_index_url_scans_every_shard(http_root, tmp_path):
    root, base = http_root
    d = _model(40)
    names = sorted(d)
    a, b = dict((k, d[k]) for k in names[:20]), dict((k, d[k]) for k in names[20:])
    save_file(a, str(root / "model-00001-of-00002.safetensors"))
    save_file(b, str(root / "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    out = tmp_path / "o.json"
    assert scan_command([f"{base}/model.safetensors.index.json"], fmt="json", output=str(out)) == 1
    doc = json.loads(out.read_text())
    assert len(doc["files"]) == 2 and doc["summary"]["tensors"] == len(d)


def test_hf_url_through_the_hub_resolve_layout(http_root, monkeypatch):
    """hf://org/repo@rev/file is read from {HF_ENDPOINT}/org/repo/resolve/rev/file (the Hub's layout)."""
    root, base = http_root
    target = root / "acme" / "tiny-moe" / "resolve" / "v1"
    target.mkdir(parents=True)
    save_file(_model(50), str(target / "model.safetensors"))
    monkeypatch.setenv("HF_ENDPOINT", base)
    assert rm.hf_resolve("hf://acme/tiny-moe@v1/model.safetensors") == f"{base}/acme/tiny-moe/resolve/v1/model.safetensors"
    assert rm.hf_resolve("hf://datasets/acme/d/x.safetensors") == f"{base}/datasets/acme/d/resolve/main/x.safetensors"
    got = rm.scan_remote_file("hf://acme/tiny-moe@v1/model.safetensors", digest=True)
    assert got.problems == []
    _same(got, scan_file(target / "model.safetensors", digest=True))


def test_hf_folder_is_listed_through_the_hub_api_and_every_shard_scanned(http_root, monkeypatch, tmp_path, capsys):
    """hf://org/repo[@rev][/folder]: the folder is listed by huggingface_hub's HfFileSystem (the real client)
    against the local server's stand-in of the two Hub API calls it makes (repo info, recursive tree; see
    tests/range_server.py), then every *.safetensors is read through the resolve URLs."""
    pytest.importorskip("huggingface_hub")
    root, base = http_root
    top = root / "acme" / "moe" / "resolve" / "v2"
    (top / "extra").mkdir(parents=True)
    d = _model(40)
    names = sorted(d)
    save_file({k: d[k] for k in names[:20]}, str(top / "model-00001-of-00002.safetensors"))
    save_file({k: d[k] for k in names[20:]}, str(top / "model-00002-of-00002.safetensors"))
    save_file({"x": torch.ones(3)}, str(top / "extra" / "head.safetensors"))
    (top / "config.json").write_text("{}")
    monkeypatch.setenv("HF_ENDPOINT", base)
    files, err = rm.remote_files("hf://acme/moe@v2")
    assert err is None
    assert [u for u, _ in files] == ["hf://acme/moe@v2/extra/head.safetensors",
                                     "hf://acme/moe@v2/model-00001-of-00002.safetensors",
                                     "hf://acme/moe@v2/model-00002-of-00002.safetensors"]
    assert [n for _, n in files] == [(top / "extra" / "head.safetensors").stat().st_size] + [
        (top / f"model-0000{i}-of-00002.safetensors").stat().st_size for i in (1, 2)]
    assert any(r.startswith("GET /api/models/acme/moe/tree/v2") for r in RangeHandler.requests)
    assert rm.remote_files("hf://models/acme/moe@v2/extra")[0] == [("hf://acme/moe@v2/extra/head.safetensors", files[0][1])]
    out = tmp_path / "o.json"
    assert scan_command(["hf://acme/moe@v2"], fmt="json", output=str(out)) == 1  # the planted NaN/Inf
    doc = json.loads(out.read_text())
    assert [f["path"] for f in doc["files"]] == [u for u, _ in files]
    assert doc["summary"]["tensors"] == len(d) + 1
    for f in doc["files"]:
        local = scan_file(top / f["path"].split("@v2/", 1)[1])
        assert sorted(t["name"] for t in f["tensors"]) == sorted(t.name for t in local.tensors)
    missing, err = rm.remote_files("hf://acme/nothing-here")
    assert missing == [] and "hf://acme/nothing-here: cannot list" in err and "not found" in err
    assert rm.remote_files("hf://acme/moe@v2/no-such-dir")[1] is not None
    assert scan_command(["hf://acme/nothing-here"]) == 2
    assert "hf://acme/nothing-here" in capsys.readouterr().err


def test_bad_remote_inputs_are_reported_not_raised(http_root, capsys):
    root, base = http_root
    (root / "junk.safetensors").write_bytes(b"\xff" * 20)
    full = _model(20)
    save_file(full, str(root / "ok.safetensors"))
    data = (root / "ok.safetensors").read_bytes()
    (root / "cut.safetensors").write_bytes(data[: len(data) - 1000])
    assert "not found" in rm.scan_remote_file(f"{base}/missing.safetensors").problems[0][1]
    assert rm.scan_remote_file(f"{base}/junk.safetensors").status == "unreadable"
    cut = rm.scan_remote_file(f"{base}/cut.safetensors")
    assert any("truncated" in m for _, m in cut.problems) and 0 < len(cut.tensors) < len(full)
    assert rm.scan_remote_file("http://127.0.0.1:9/x.safetensors").status == "unreadable"  # nothing listens
    RangeHandler.ignore_ranges = True  # a server without Range support: refused, never downloaded whole
    no_ranges = rm.scan_remote_file(f"{base}/ok.safetensors")
    assert no_ranges.status == "unreadable" and "ignores Range requests" in no_ranges.problems[0][1]
    RangeHandler.ignore_ranges = False
    assert scan_command([f"{base}/missing.safetensors"]) == 2
    assert scan_command([f"{base}/model.bin"]) == 2
    assert "remote torch pickles are not read" in capsys.readouterr().err


@pytest.fixture()
def s3_endpoint(monkeypatch):
    """moto's S3 server mode on a local port (a real HTTP endpoint), credentials and endpoint in the environment."""
    pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    import s3fs

    srv = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    try:
        host, port = srv.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
                     "AWS_ENDPOINT_URL": endpoint}.items():
            monkeypatch.setenv(k, v)
        s3fs.S3FileSystem.clear_instance_cache()
        yield endpoint
    finally:
        srv.stop()
        s3fs.S3FileSystem.clear_instance_cache()


def test_s3_scan_against_moto_server(tmp_path, s3_endpoint):
    import boto3

    endpoint = s3_endpoint
    if True:
        local = tmp_path / "model.safetensors"
        save_file(_model(), str(local))
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="ckpts")
        s3.upload_file(str(local), "ckpts", "run1/checkpoint-10/model.safetensors")
        got = rm.scan_remote_file("s3://ckpts/run1/checkpoint-10/model.safetensors", digest=True)
        assert got.problems == []
        _same(got, scan_file(local, digest=True))
        files, err = rm.remote_files("s3://ckpts/run1")  # a prefix is listed
        assert err is None and [u for u, _ in files] == ["s3://ckpts/run1/checkpoint-10/model.safetensors"]
        out = tmp_path / "o.json"
        assert scan_command(["s3://ckpts/run1"], fmt="json", output=str(out)) == 1
        assert json.loads(out.read_text())["summary"]["nonfinite_tensors"] == 2


def test_url_detection():
    assert rm.is_url("s3://b/k") and rm.is_url("hf://a/b/c") and rm.is_url("https://x/y")
    assert not rm.is_url("file:///tmp/x") and not rm.is_url("/tmp/x.safetensors") and not rm.is_url("C:\\x")
    assert rm.Url("s3://b/k/model.safetensors").name == "model.safetensors"
    assert isinstance(Path("x"), Path)


# -- autopsy run URL ---------------------------------------------------------------------------------

def _run_url(url: str, tmp_path: Path) -> tuple[int, dict, str]:
    from typer.testing import CliRunner

    from autopsy.cli import app

    out = tmp_path / "report.json"
    res = CliRunner().invoke(app, ["run", url, "-f", "json", "-o", str(out), "-q"])
    return res.exit_code, (json.loads(out.read_text()) if out.exists() else {}), res.output


def _nan_run(d: Path) -> None:
    """A HF-Trainer-like run: loss goes NaN at step 30, checkpoint-40 holds NaN weights."""
    logs = [{"step": s, "loss": 2.0 - 0.01 * s if s < 30 else float("nan"), "learning_rate": 1e-3, "grad_norm": 1.0}
            for s in range(10, 41, 10)]
    ck = d / "checkpoint-40"
    ck.mkdir(parents=True)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": 40, "log_history": logs}))
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16"}))
    save_file(_model(40), str(ck / "model.safetensors"))


def test_run_on_an_https_safetensors_url(http_root, tmp_path):
    root, base = http_root
    save_file(_model(), str(root / "model.safetensors"))
    code, doc, _ = _run_url(f"{base}/model.safetensors", tmp_path)
    assert code == 1 and doc["run"]["root"] == f"{base}/model.safetensors"
    assert "CKPT001" in [f["code"] for f in doc["findings"]]
    (ck,) = doc["run"]["checkpoints"]
    assert ck["tensors"] == 302 and ck["nonfinite_tensors"] == 2
    assert "GET whole file" not in RangeHandler.requests  # ranges only: never the whole file
    assert [p for p in tmp_path.rglob("*.safetensors") if root not in p.parents] == []  # nothing downloaded


def test_run_on_an_index_url_scans_the_shards(http_root, tmp_path):
    root, base = http_root
    d = _model(40)
    names = sorted(d)
    a, b = {k: d[k] for k in names[:20]}, {k: d[k] for k in names[20:]}
    save_file(a, str(root / "model-00001-of-00002.safetensors"))
    save_file(b, str(root / "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
    (root / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    code, doc, _ = _run_url(f"{base}/model.safetensors.index.json", tmp_path)
    assert code == 1
    (ck,) = doc["run"]["checkpoints"]
    assert ck["tensors"] == len(d) and len(ck["files"]) == 3  # the index and both shards


def test_run_on_an_s3_run_folder_reads_logs_and_scans_checkpoints_remotely(tmp_path, s3_endpoint, monkeypatch):
    import boto3

    from autopsy.checkpoints import remote_run

    local = tmp_path / "run"
    _nan_run(local)
    (local / "huge.log").write_text("x" * 5000)
    (local / "checkpoint-40" / "optimizer.pt").write_bytes(b"not read remotely")
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="runs")
    for f in local.rglob("*"):
        if f.is_file():
            s3.upload_file(str(f), "runs", f"exp1/{f.relative_to(local)}")
    monkeypatch.setattr(remote_run, "MAX_SIDE_BYTES", 4096)  # huge.log is over it: listed, not fetched
    code, doc, _ = _run_url("s3://runs/exp1", tmp_path / "out")
    assert code == 1 and doc["run"]["root"] == "s3://runs/exp1"
    codes = [f["code"] for f in doc["findings"]]
    assert "CKPT001" in codes  # the checkpoint, scanned by ranges
    arts = {a["path"]: a for a in doc["artifacts"]}
    assert arts["checkpoint-40/trainer_state.json"]["status"] == "read"  # fetched and read: the logged loss
    assert "loss" in json.dumps(doc["run"]["metrics"]) and arts["config.json"]["status"] == "read"
    assert arts["checkpoint-40/model.safetensors"]["status"] == "read"
    assert "not fetched" in arts["huge.log"]["problem"] and "s3://runs/exp1/huge.log" in arts["huge.log"]["problem"]
    assert "remote torch pickles are not read" in arts["checkpoint-40/optimizer.pt"]["problem"]
    assert remote_run.PLACEHOLDERS == {}  # the staging folder and its registry are gone


def test_run_url_problems_name_the_url(http_root, tmp_path, monkeypatch):
    root, base = http_root
    save_file(_model(20), str(root / "ok.safetensors"))
    data = (root / "ok.safetensors").read_bytes()
    (root / "cut.safetensors").write_bytes(data[: len(data) - 1000])
    code, _, out = _run_url("http://127.0.0.1:9/run/model.safetensors", tmp_path)  # nothing listens
    assert code == 2 and "http://127.0.0.1:9/run/model.safetensors" in out and "cannot reach" in out
    code, _, out = _run_url(f"{base}/missing.safetensors", tmp_path)
    assert code == 2 and f"{base}/missing.safetensors" in out and "not found" in out
    code, doc, _ = _run_url(f"{base}/cut.safetensors", tmp_path)  # partly readable: the analysis goes on
    (art,) = [a for a in doc["artifacts"] if a["path"] == "cut.safetensors"]
    assert art["status"] == "partial" and "truncated" in art["problem"] and f"{base}/cut.safetensors" in art["problem"]
    code, _, out = _run_url(f"{base}/somewhere/", tmp_path)
    assert code == 2 and "cannot be listed" in out
    monkeypatch.setitem(__import__("sys").modules, "fsspec", None)  # the remote extra is not installed
    code, _, out = _run_url("s3://bucket/run", tmp_path)
    assert code == 2 and "s3://bucket/run" in out and "pip install 'autopsy-ml[remote]'" in out
