"""Loopback test servers for the HTTP policy runtimes (127.0.0.1 only, ephemeral ports).

* :class:`SGLangLoopback` follows SGLang's native ``/generate`` request/response shapes
  (``GenerateReqInput`` fields, batch = list-valued ``text``, ``meta_info`` with ``prompt_tokens`` and
  ``input_token_logprobs`` covering positions ``[logprob_start_len, prompt_tokens)``, position 0 -> None)
  and rejects with HTTP 400 ``{"error": {"message"}}`` what the real server rejects (no text, image count
  not matching the placeholders, ``logprob_start_len >= prompt length``, batch length mismatches, bad
  sampling params). It is stricter than SGLang in one way: unknown top-level fields are rejected, to
  catch client typos.
* :class:`OpenAILoopback` is an OpenAI-compatible ``/v1/chat/completions`` with three prompt-logprob
  behaviours: ``"vllm"`` (vLLM's extension), ``"ignore"`` (SGLang ``/v1``), ``"reject"`` (OpenAI: 400).

Both are backed by :class:`FakeModel`, a deterministic character-level model whose log-probabilities
depend on every earlier token, image tokens included, so prompts that differ only in images score
differently. Faults are injected per request from ``server.faults`` (a deque): ``"500"``, ``"429"``,
``"malformed"`` (invalid JSON with HTTP 200), ``"slow"`` (sleeps ``slow_s`` first), ``"missing"`` (JSON
without the expected fields). Servers stop by themselves after ``lifetime_s``.

Also here: :class:`MemoryArchive` and :func:`make_prompt`, small test fixtures for bound prompts.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.archive.base import StoredImage
from causalcache_memory.archive.images import validate_image_bytes
from causalcache_memory.errors import BlobNotFoundError
from causalcache_memory.render import BoundPrompt, ImagePart, ImageRef, Message, RenderedPrompt, TextPart

SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
)
_SPECIAL_RE = re.compile("(" + "|".join(re.escape(s) for s in SPECIALS) + ")")
_MASK = (1 << 64) - 1


# ---------------------------------------------------------------------- fake model
def default_responder(digest: int) -> str:
    return f"pyautogui.click(x={0.1 + (digest % 80) / 100:.2f}, y=0.50)"


class FakeModel:
    """Deterministic toy LM: characters are tokens, each image is ``image_tokens`` tokens.

    ``log p(tok_i | tok_<i) = -(0.05 + 4 * u_i)`` with ``u_i in [0, 1)`` a hash of ``(tok_<i, tok_i)``.
    """

    def __init__(self, *, image_tokens: int = 4, responder: Callable[[int], str] = default_responder) -> None:
        self.image_tokens = image_tokens
        self.responder = responder

    def tokenize(self, text: str, images: Sequence[bytes], roles: Sequence[str] | None = None) -> list[int]:
        """Token ids; with ``roles``, a ``history`` image gets ids of its own (the causalcache server plugin
        keys history images apart in the radix cache, and its adapter changes their K/V)."""
        tokens: list[int] = []
        image_iter = iter(images)
        role_iter = iter(roles or ())
        for piece in _SPECIAL_RE.split(text):
            if not piece:
                continue
            if piece == "<|image_pad|>":
                data = next(image_iter, None)
                if data is None:
                    raise ValueError("more image placeholders than images")
                role = next(role_iter, "current")
                h = hashlib.sha256(data if role != "history" else b"history\0" + data).digest()
                tokens.extend(2_000_000 + h[k] * 256 + h[k + 1] for k in range(self.image_tokens))
            elif piece in SPECIALS:
                tokens.append(SPECIALS.index(piece))
            else:
                tokens.extend(1000 + ord(c) for c in piece)
        if next(image_iter, None) is not None:
            raise ValueError("more images than image placeholders")
        return tokens

    def logprobs(self, tokens: Sequence[int]) -> list[float | None]:
        out: list[float | None] = [None] if tokens else []
        state = 1469598103934665603
        for i in range(1, len(tokens)):
            state = ((state ^ tokens[i - 1]) * 1099511628211) & _MASK
            u = (((state ^ (tokens[i] * 0x9E3779B97F4A7C15)) * 6364136223846793005) & _MASK) >> 11
            out.append(-(0.05 + 4.0 * u / float(1 << 53)))
        return out

    def digest(self, tokens: Sequence[int]) -> int:
        return int.from_bytes(hashlib.sha256(json.dumps(list(tokens)).encode()).digest()[:8], "big")

    def complete(self, tokens: Sequence[int], max_new_tokens: int) -> tuple[str, list[int], str]:
        """``(text, token_ids, finish_type)`` of greedy decoding (``length`` when truncated)."""
        full = self.responder(self.digest(tokens))
        text = full[:max_new_tokens]
        return text, [1000 + ord(c) for c in text], "length" if len(text) < len(full) else "stop"


def decode_image(value: Any) -> bytes:
    """Bytes of an image given as a data URL or raw base64 (SGLang's ``load_image`` string forms)."""
    if not isinstance(value, str):
        raise ValueError(f"image must be a data URL or base64 string, got {type(value).__name__}")
    payload = value.split(",", 1)[1] if value.startswith("data:") else value
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"image is not valid base64: {exc}") from exc
    from PIL import Image

    try:
        Image.open(io.BytesIO(data)).verify()
    except Exception as exc:
        raise ValueError(f"cannot identify image file: {exc}") from exc
    return data


# ---------------------------------------------------------------------- server base
class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status == 429:
            self.send_header("Retry-After", "0")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        found = self.server.app.get_info(self.path)
        if found is not None:
            self._send(200, json.dumps(found).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        app = self.server.app
        fault = app.next_fault()
        if fault == "slow":
            time.sleep(app.slow_s)
        elif fault in ("500", "429"):
            self._send(int(fault), json.dumps({"error": {"message": f"injected {fault}"}}).encode())
            return
        elif fault == "malformed":
            self._send(200, b'{"text": "unterminated')
            return
        try:
            payload = json.loads(raw)
        except json.JSONDecodeError as exc:
            self._send(400, json.dumps({"error": {"message": f"invalid JSON body: {exc}"}}).encode())
            return
        app.record(self.path, payload, dict(self.headers))
        if fault == "missing":
            self._send(200, b'{"unexpected": true}')
            return
        status, body = app.handle(self.path, payload)
        self._send(status, json.dumps(body).encode())


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: LoopbackApp

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is expected under fault injection


class LoopbackApp:
    """Common lifecycle of the loopback servers: ``with App() as app: app.url``."""

    def __init__(
        self, *, model: FakeModel | None = None, lifetime_s: float = 60.0, slow_s: float = 1.0
    ) -> None:
        self.model = model or FakeModel()
        self.lifetime_s = lifetime_s
        self.slow_s = slow_s
        self.faults: deque[str] = deque()
        self.requests: list[tuple[str, Any, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._timer: threading.Timer | None = None
        self._url = ""

    # lifecycle
    def start(self) -> LoopbackApp:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.app = self
        self._url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LoopbackApp:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._url, "server not started"
        return self._url  # kept after stop(), so a stopped server reads as a down server

    # bookkeeping
    def next_fault(self) -> str | None:
        with self._lock:
            return self.faults.popleft() if self.faults else None

    def record(self, path: str, payload: Any, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append((path, payload, headers))

    def info(self) -> dict[str, Any]:
        return {"model_path": "fake"}

    def get_info(self, path: str) -> Any:
        """The body of ``GET path``, or None for 404."""
        return self.info() if path in ("/health", "/v1/models") else None

    def handle(self, path: str, payload: Any) -> tuple[int, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


# sockets that keep the ports of free_port_url() reserved until the test process exits
_RESERVED: list[socket.socket] = []


def free_port_url() -> str:
    """A URL on 127.0.0.1 where nothing listens (a server that is down).

    The port stays bound, but never listening, by a socket this process keeps open: a connection is
    refused at once, and no other server (another test, a parallel run) can take the port between this
    call and its use, as it could if the port were bound, closed and only then used.
    """
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    _RESERVED.append(s)
    return f"http://127.0.0.1:{s.getsockname()[1]}"


def _error(message: str, status: int = 400) -> tuple[int, Any]:
    return status, {"error": {"message": message}, "object": "error", "code": status}


# ---------------------------------------------------------------------- SGLang /generate
_SGLANG_FIELDS = frozenset(
    {
        "text",
        "input_ids",
        "image_data",
        "sampling_params",
        "return_logprob",
        "logprob_start_len",
        "top_logprobs_num",
        "return_text_in_logprobs",
        "stream",
        "rid",
        "modalities",
        "lora_path",
        "session_params",
        "custom_logit_processor",
        "return_hidden_states",
        "routing_key",
        "extra_key",
        "mm_processor_kwargs",
        # sent by the SGLang Model Gateway (smg 1.13) on every /generate it forwards; all but `model` are
        # GenerateReqInput fields, and the real server ignores keys it does not know
        "model",
        "background",
        "log_metrics",
        "no_logs",
        "return_bytes",
        "return_entropy",
    }
)
_SAMPLING_KEYS = frozenset(
    {
        "temperature",
        "max_new_tokens",
        "top_p",
        "top_k",
        "min_p",
        "stop",
        "stop_token_ids",
        "n",
        "repetition_penalty",
        "frequency_penalty",
        "presence_penalty",
        "ignore_eos",
        "skip_special_tokens",
        "no_stop_trim",
        "json_schema",
        "regex",
        "min_new_tokens",
        "spaces_between_special_tokens",
    }
)


class SGLangLoopback(LoopbackApp):
    """Fake SGLang server (``/generate``; ``/server_info``, ``/model_info`` and ``/v1/models`` in SGLang's
    shapes, which the SGLang Model Gateway reads when it registers a worker).

    Image roles (``mm_processor_kwargs``) are read as the causalcache server plugin reads them (a list for
    one request, a rid -> roles map for a batch; a malformed value is a 400); ``role_aware = False``
    behaves like stock SGLang and ignores them. ``cached_tokens`` is the longest token prefix shared with
    an earlier prompt (a radix cache), capped at ``logprob_start_len`` when logprobs are asked for, as
    SGLang caps its prefix match; ``POST /flush_cache`` empties it.
    """

    role_aware = True

    def get_info(self, path: str) -> Any:
        if path == "/health":
            return {}
        if path == "/v1/models":
            return {"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "sglang"}]}
        if path in ("/server_info", "/get_server_info"):
            return {"model_path": "fake", "served_model_name": "fake", "version": "0.5.23", "tp_size": 1}
        if path in ("/model_info", "/get_model_info"):
            return {"model_path": "fake", "served_model_name": "fake", "is_generation": True}
        return None

    def handle(self, path: str, payload: Any) -> tuple[int, Any]:
        if path == "/flush_cache":
            with self._lock:
                self.__dict__["_radix"] = []
            return 200, {}
        if path != "/generate":
            return _error(f"no route {path}", 404)
        if not isinstance(payload, dict):
            return _error("request body must be a JSON object (GenerateReqInput)", 422)
        unknown = sorted(set(payload) - _SGLANG_FIELDS)
        if unknown:
            return _error(f"unknown GenerateReqInput fields {unknown}", 422)
        try:
            return 200, self._generate(payload)
        except ValueError as exc:  # SGLang answers ValueError as 400 {"error": {"message"}}
            return _error(str(exc))

    def _generate(self, req: dict[str, Any]) -> Any:
        text = req.get("text")
        if text is None or req.get("input_ids") is not None:
            raise ValueError(
                "Either text, input_ids or input_embeds should be provided (this fake: text only)."
            )
        if req.get("stream"):
            raise ValueError("the loopback server does not stream")
        single = isinstance(text, str)
        texts = [text] if single else text
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or not texts:
            raise ValueError("text must be a string or a non-empty list of strings")
        n = len(texts)
        images = self._per_item(req.get("image_data"), n, single)
        sampling = self._per_item_param(req.get("sampling_params"), n, "sampling_params", {})
        want_lp = self._per_item_param(req.get("return_logprob"), n, "return_logprob", False)
        starts = self._per_item_param(req.get("logprob_start_len"), n, "logprob_start_len", -1)
        rids = self._per_item_param(req.get("rid"), n, "rid", None)
        roles = [self._roles(req.get("mm_processor_kwargs"), rids[i], len(images[i])) for i in range(n)]
        out = [self._one(texts[i], images[i], sampling[i], want_lp[i], starts[i], roles[i]) for i in range(n)]
        return out[0] if single else out

    def _roles(self, kwargs: Any, rid: Any, n_images: int) -> list[str] | None:
        from causalcache_memory.runtime.sglang_server.roles import parse_roles

        if not self.role_aware:
            return None
        if kwargs is not None and not isinstance(kwargs, dict):
            raise ValueError("mm_processor_kwargs must be an object")
        return parse_roles(kwargs, rid=rid, n_images=n_images)  # ConfigError is a ValueError: HTTP 400

    def _cached(self, tokens: list[int], limit: int) -> int:
        with self._lock:
            radix = self.__dict__.setdefault("_radix", [])
            best = 0
            for seen in radix:
                n = 0
                while n < min(len(seen), len(tokens)) and seen[n] == tokens[n]:
                    n += 1
                best = max(best, n)
            radix.append(tokens)
            del radix[:-64]
        return max(0, min(best, limit))

    @staticmethod
    def _per_item(image_data: Any, n: int, single: bool) -> list[list[Any]]:
        if image_data is None:
            return [[] for _ in range(n)]
        if single:
            return [image_data if isinstance(image_data, list) else [image_data]]
        if not isinstance(image_data, list) or len(image_data) != n:
            raise ValueError("The length of image_data should be equal to the batch size.")
        return [[] if item is None else item if isinstance(item, list) else [item] for item in image_data]

    @staticmethod
    def _per_item_param(value: Any, n: int, name: str, default: Any) -> list[Any]:
        if value is None:
            return [default] * n
        if isinstance(value, list):
            if len(value) != n:
                raise ValueError(f"{name} has {len(value)} entries for a batch of {n}")
            return value
        return [value] * n

    def _one(
        self,
        text: str,
        image_data: list[Any],
        sampling: Any,
        want_lp: Any,
        start: Any,
        roles: list[str] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(sampling, dict):
            raise ValueError("sampling_params must be an object")
        bad = sorted(set(sampling) - _SAMPLING_KEYS)
        if bad:
            raise ValueError(f"unknown sampling params {bad}")
        max_new = sampling.get("max_new_tokens", 128)
        if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 0:
            raise ValueError(f"max_new_tokens must be at least 0, got {max_new!r}")
        temperature = sampling.get("temperature", 1.0)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
            raise ValueError(f"temperature must be non-negative, got {temperature!r}")
        n_placeholders = text.count("<|image_pad|>")
        if n_placeholders != len(image_data):
            raise ValueError(
                f"the prompt has {n_placeholders} image placeholders but {len(image_data)} images were given"
            )
        tokens = self.model.tokenize(text, [decode_image(v) for v in image_data], roles)
        if not isinstance(start, int) or isinstance(start, bool) or start < -1:
            raise ValueError(f"logprob_start_len must be -1 or >= 0, got {start!r}.")
        if start >= len(tokens):
            raise ValueError(
                f"logprob_start_len ({start}) must be smaller than the prompt length ({len(tokens)})."
            )
        out_text, out_ids, finish = self.model.complete(tokens, max_new)
        meta: dict[str, Any] = {
            "id": hashlib.sha1(text.encode()).hexdigest()[:16],
            "finish_reason": {"type": finish, "length": max_new} if finish == "length" else {"type": "stop"},
            "prompt_tokens": len(tokens),
            "completion_tokens": len(out_ids),
            "cached_tokens": self._cached(
                tokens, min(len(tokens) - 1, start if want_lp and start >= 0 else len(tokens))
            ),
        }
        if want_lp:
            first = len(tokens) - 1 if start == -1 else start
            full_lp = self.model.logprobs(tokens + out_ids)
            meta["input_token_logprobs"] = [[full_lp[i], tokens[i], None] for i in range(first, len(tokens))]
            meta["output_token_logprobs"] = [
                [full_lp[len(tokens) + k], tid, None] for k, tid in enumerate(out_ids)
            ]
        return {"text": out_text, "output_ids": out_ids, "meta_info": meta}


# ---------------------------------------------------------------------- OpenAI /v1/chat/completions
class OpenAILoopback(LoopbackApp):
    """Fake OpenAI-compatible chat endpoint.

    Args:
        served_model: the only model name accepted (others get 404 like vLLM).
        prompt_logprobs: ``"vllm"`` | ``"ignore"`` | ``"reject"`` (see the module docstring).
    """

    def __init__(
        self, *, served_model: str = "fake-vl", prompt_logprobs: str = "vllm", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.served_model = served_model
        self.prompt_logprobs_mode = prompt_logprobs

    def info(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": self.served_model, "object": "model"}]}

    def handle(self, path: str, payload: Any) -> tuple[int, Any]:
        if path != "/v1/chat/completions":
            return _error(f"no route {path}", 404)
        if not isinstance(payload, dict):
            return _error("body must be a JSON object")
        if payload.get("model") != self.served_model:
            return _error(f"The model `{payload.get('model')}` does not exist.", 404)
        if "prompt_logprobs" in payload and self.prompt_logprobs_mode == "reject":
            return _error("Unrecognized request argument supplied: prompt_logprobs")
        try:
            return 200, self._chat(payload)
        except ValueError as exc:
            return _error(str(exc))

    def _render(self, messages: Any, *, add_generation_prompt: bool, continue_final: bool) -> list[int]:
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        text, images = [], []
        for k, message in enumerate(messages):
            role, content = message.get("role"), message.get("content")
            if role not in ("system", "user", "assistant"):
                raise ValueError(f"messages[{k}].role={role!r} is not supported")
            text.append(f"<|im_start|>{role}\n")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
            if not isinstance(blocks, list):
                raise ValueError(f"messages[{k}].content must be a string or a list of blocks")
            for block in blocks:
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    text.append(block["text"])
                elif block.get("type") == "image_url":
                    url = (block.get("image_url") or {}).get("url", "")
                    if not url.startswith("data:image/"):
                        raise ValueError(f"messages[{k}] image_url must be a data:image/... URL in this fake")
                    images.append(decode_image(url))
                    text.append("<|vision_start|><|image_pad|><|vision_end|>")
                else:
                    raise ValueError(f"messages[{k}] has an unsupported content block {str(block)[:80]}")
            last = k == len(messages) - 1
            if not (last and continue_final):
                text.append("<|im_end|>\n")
        if continue_final and messages[-1].get("role") != "assistant":
            raise ValueError("continue_final_message needs a final assistant message")
        if add_generation_prompt and not continue_final:
            text.append("<|im_start|>assistant\n")
        return self.model.tokenize("".join(text), images)

    def _chat(self, req: dict[str, Any]) -> dict[str, Any]:
        max_tokens = req.get("max_tokens", 16)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens!r}")
        continue_final = bool(req.get("continue_final_message", False))
        add_gen = bool(req.get("add_generation_prompt", True))
        if continue_final and add_gen:
            raise ValueError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        tokens = self._render(
            req.get("messages"), add_generation_prompt=add_gen, continue_final=continue_final
        )
        text, ids, finish = self.model.complete(tokens, max_tokens)
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": self.served_model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
            ],
            "usage": {
                "prompt_tokens": len(tokens),
                "completion_tokens": len(ids),
                "total_tokens": len(tokens) + len(ids),
            },
        }
        if self.prompt_logprobs_mode == "vllm" and req.get("prompt_logprobs") is not None:
            lps = self.model.logprobs(tokens)
            body["prompt_logprobs"] = [
                None if lp is None else {str(tok): {"logprob": lp, "rank": 1, "decoded_token": ""}}
                for tok, lp in zip(tokens, lps, strict=True)
            ]
            if req.get("return_token_ids"):
                body["prompt_token_ids"] = tokens
        return body


# ---------------------------------------------------------------------- prompts
class MemoryArchive:
    """Minimal in-memory screenshot archive (tests only)."""

    url = "memory://loopback"

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def put(self, data: bytes) -> StoredImage:
        sha = hashlib.sha256(data).hexdigest()
        self._blobs[sha] = data
        return StoredImage.of(sha, validate_image_bytes(data), len(data))

    def get_bytes(self, sha256: str) -> bytes:
        try:
            return self._blobs[sha256]
        except KeyError:
            raise BlobNotFoundError(f"blob {sha256} not found") from None

    def open_image(self, sha256: str) -> Any:
        from PIL import Image

        return Image.open(io.BytesIO(self.get_bytes(sha256)))

    def __contains__(self, sha256: object) -> bool:
        return sha256 in self._blobs


def make_prompt(
    archive: MemoryArchive,
    *,
    history: Sequence[bytes],
    current: bytes,
    goal: str = "Open the settings page",
    episode_id: str | None = None,
) -> BoundPrompt:
    """A retained-turn prompt with ``len(history)`` history images plus the current screen."""
    t = len(history) + 1
    allocation = make_allocation(range(1, t), t=t, budget=len(history), allocator="test")
    messages = [
        Message("system", (TextPart("You are a GUI agent."),)),
        Message(
            "user", (TextPart(f"Task: {goal}\nSteps:\n" + "\n".join(f"{j}. clicked" for j in range(1, t))),)
        ),
    ]
    images: list[ImageRef] = []
    for j, data in enumerate(history, start=1):
        messages.append(Message("assistant", (TextPart(f"pyautogui.click(x=0.{j}, y=0.5)"),)))
        images.append(ImageRef("history", archive.put(data).sha256, j))
        messages.append(Message("user", (TextPart(f"Screen after step {j}:"), ImagePart(len(images) - 1))))
    images.append(ImageRef("current", archive.put(current).sha256, None))
    messages.append(
        Message("user", (TextPart("Current screen:"), ImagePart(len(images) - 1), TextPart("Next action?")))
    )
    meta: dict[str, object] = {"t": t}
    if episode_id is not None:
        meta["episode_id"] = episode_id
    return RenderedPrompt(tuple(messages), tuple(images), allocation, goal, meta).bind(archive)
