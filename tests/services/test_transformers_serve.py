"""A real OpenAI-compatible server: ``transformers serve`` with a tiny Qwen2.5-VL built in-process.

Two servers, both the real ``transformers serve``: one that can load the model's image processor
(``transformers_serve.py``), which must encode every image of a three-image prompt exactly as the library
does (``prompt_tokens`` equal to :class:`TransformersPolicy`'s encoding), and the stock command, whose
processor resolves to the tokenizer only and drops the images, which :class:`OpenAIPolicy` must detect.

Needs ``transformers[serving]`` (in the test extra); CI runs it (service ``transformers-serve``)."""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))  # tests/runtime/loopback.py
from loopback import MemoryArchive, make_prompt

from causalcache_memory.errors import ImagesIgnoredError
from causalcache_memory.runtime.openai_client import OpenAIPolicy

HERE = Path(__file__).resolve().parent
pytestmark = [pytest.mark.slow, pytest.mark.service("transformers-serve")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(argv: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [*argv, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _wait(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"transformers serve exited: {log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"transformers serve did not start: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """``(model_dir, url of the image-capable server, url of the stock server)``."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not transformers.utils.import_utils.is_serve_available():
        pytest.skip("transformers[serving] (fastapi, uvicorn, openai) is not installed")
    from causalcache_memory.runtime.qwen_encoding import image_only_processor_class
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    root = tmp_path_factory.mktemp("tf-serve")
    model = build_tiny_qwen_vl(root / "tiny-qwen2.5-vl", family="qwen2_5_vl")
    tokenizer = transformers.AutoTokenizer.from_pretrained(model)
    image_processor = transformers.Qwen2VLImageProcessorPil.from_pretrained(model)
    processor = image_only_processor_class("qwen2_5_vl")(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )
    processor.save_pretrained(model)
    cli = shutil.which("transformers", path=str(Path(sys.executable).parent)) or "transformers"
    ports = _free_port(), _free_port()
    logs = root / "serve.log", root / "stock.log"
    procs = [
        _start([sys.executable, str(HERE / "transformers_serve.py")], ports[0], logs[0]),
        _start([cli, "serve"], ports[1], logs[1]),
    ]
    try:
        for port, proc, log in zip(ports, procs, logs, strict=True):
            _wait(port, proc, log)
        yield model, *(f"http://127.0.0.1:{p}/v1" for p in ports)
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)


def _screen(color: tuple[int, int, int]) -> bytes:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (448, 280), color)
    ImageDraw.Draw(image).rectangle((40, 40, 200, 120), fill=(255 - color[0], color[2], color[1]))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def prompt():
    archive = MemoryArchive()
    return make_prompt(
        archive, history=[_screen((10, 20, 30)), _screen((200, 10, 10))], current=_screen((0, 120, 0))
    )


def test_openai_policy_sends_three_images_that_the_server_encodes(servers, prompt):
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    model, url, _ = servers
    with OpenAIPolicy(url, str(model), max_tokens=8, timeout_s=120) as policy:
        generation = policy.generate(prompt)
    local = TransformersPolicy.from_pretrained(model, max_new_tokens=8)
    encoded = local.encode(prompt)
    assert len(prompt.images) == 3 and len(encoded.image_spans) == 3
    image_tokens = sum(span.length for span in encoded.image_spans)
    assert image_tokens >= 3 * 4  # every screenshot is several tokens, not a placeholder
    assert generation.meta["prompt_tokens"] == len(encoded.input_ids)
    assert generation.meta["completion_tokens"] >= 1


def test_a_server_whose_processor_is_a_tokenizer_only_is_detected(servers, prompt):
    model, _, stock = servers
    with OpenAIPolicy(stock, str(model), max_tokens=8, timeout_s=120) as policy:
        with pytest.raises(ImagesIgnoredError, match="ignores images"):
            policy.generate(prompt)
    with OpenAIPolicy(stock, str(model), max_tokens=8, timeout_s=120, check_images=False) as blind:
        dropped = blind.generate(prompt).meta["prompt_tokens"]
    with OpenAIPolicy(servers[1], str(model), max_tokens=8, timeout_s=120) as seeing:
        assert dropped < seeing.generate(prompt).meta["prompt_tokens"]  # the images were dropped
