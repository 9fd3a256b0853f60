"""Names of models on a server: ``hf://ORG/REPO/FILE.gguf``, ``ORG/REPO[:QUANT]`` (llama.cpp's ``-hf``), URLs.

This module reads names only (no network): which text is a remote name, the Hub's base URL
(``MODEL_ENDPOINT`` or ``HF_ENDPOINT``, as llama.cpp reads them; ``https://huggingface.co`` by default), the
user's token (``HF_TOKEN``, else the file the Hugging Face tools keep: ``HF_TOKEN_PATH``, else
``$HF_HOME/token``, by default ``~/.cache/huggingface/token``), which hosts may see that token, and the
llama.cpp arguments that make llama.cpp download a model itself (``-hf ORG/REPO:QUANT``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from ..paths import read_small_file
from .errors import RemoteNameError

__all__ = [
    "RemoteName",
    "parse_name",
    "is_remote_name",
    "endpoint",
    "hub_token",
    "token_allowed",
    "model_arguments",
    "resolve_url",
]

HF_SCHEME = "hf://"
DEFAULT_ENDPOINT = "https://huggingface.co"
#: The Hub's own hosts, where the token may go when the endpoint is the default one (the site and its storage).
HF_HOSTS = ("huggingface.co", "hf.co")

_PART = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REPO_RE = re.compile(rf"^{_PART}/{_PART}$")
_QUANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_BARE_RE = re.compile(rf"^({_PART}/{_PART})(?::([A-Za-z0-9][A-Za-z0-9._-]*))?$")
_REVISION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")


@dataclass(frozen=True)
class RemoteName:
    """A parsed remote name. ``kind``: ``"file"`` (a file of a Hub repo), ``"quant"`` (a repo and a
    quantization tag, picked like llama.cpp's ``-hf``) or ``"url"`` (any http(s) URL)."""

    kind: str
    repo: str = ""
    file: str = ""
    quant: str = ""
    url: str = ""
    revision: str = "main"

    @property
    def display(self) -> str:
        """The name in its canonical form (what ``Model.source`` holds and ``parse_name`` reads back)."""
        if self.kind == "file":
            return f"{HF_SCHEME}{self.repo}/{self.file}"
        if self.kind == "quant":
            return f"{HF_SCHEME}{self.repo}" + (f":{self.quant}" if self.quant else "")
        return self.url

    def llama_args(self) -> list[str]:
        """The llama.cpp arguments in place of ``-m PATH`` that make llama.cpp download this model itself."""
        if self.kind == "file":
            return ["-hf", self.repo, "-hff", self.file]
        if self.kind == "quant":
            return ["-hf", f"{self.repo}:{self.quant}" if self.quant else self.repo]
        return ["-mu", self.url]


def _bad(text: str, why: str) -> RemoteNameError:
    return RemoteNameError(
        f"{text!r} is not a model name Layerdeck can open: {why}. Give hf://ORG/REPO/FILE.gguf, ORG/REPO:QUANT "
        "(as llama.cpp's -hf takes it), an https:// URL of a .gguf file, or a file on disk.",
        text,
    )


def _check_file(text: str, file: str) -> str:
    parts = file.split("/")
    if not file or any(p in ("", ".", "..") for p in parts) or "\\" in file or any(ord(c) < 32 for c in file):
        raise _bad(text, f"{file!r} is not a file path inside a repository")
    return file


def _hub_url_name(text: str, parts) -> RemoteName | None:
    """``https://huggingface.co/ORG/REPO/resolve|blob/REV/FILE`` (the page or download URL) as a repo file."""
    base = urlsplit(endpoint())
    if (parts.scheme, parts.netloc) != (base.scheme, base.netloc):
        return None
    segs = unquote(parts.path[len(base.path.rstrip("/")) :]).lstrip("/").split("/")
    if len(segs) >= 5 and segs[2] in ("resolve", "blob") and _REPO_RE.match("/".join(segs[:2])):
        return RemoteName("file", repo="/".join(segs[:2]), file=_check_file(text, "/".join(segs[4:])), revision=segs[3])
    return None


def parse_name(text: str) -> RemoteName | None:
    """The remote name ``text`` is, or None when it names a local file.

    ``hf://`` and ``http(s)://`` names are always remote (a malformed one raises
    :class:`~app.remote.errors.RemoteNameError`). A bare ``ORG/REPO`` or ``ORG/REPO:QUANT`` is remote when no
    file or folder of that name exists here and it does not end in ``.gguf`` (a mistyped local path stays a
    local path, and its error says the file is missing).
    """
    low = text.lower()
    if low.startswith(HF_SCHEME):
        rest = text[len(HF_SCHEME) :]
        rev = "main"  # another revision: hf://ORG/REPO@REV/FILE
        head, _, tail = rest.partition("/")
        second, _, file = tail.partition("/")
        if "@" in second:
            second, _, rev = second.partition("@")
            if not _REVISION_RE.match(rev):
                raise _bad(text, f"{rev!r} is not a branch, tag or commit")
        repo = f"{head}/{second}"
        if not file:
            m = re.match(rf"^({_PART}/{_PART})(?::(.*))?$", repo)
            if m is None:
                raise _bad(text, "hf:// must be followed by ORG/REPO")
            quant = m.group(2) or ""
            if quant and not _QUANT_RE.match(quant):
                raise _bad(text, f"{quant!r} is not a quantization name like Q4_K_M")
            return RemoteName("quant", repo=m.group(1), quant=quant, revision=rev)
        if not _REPO_RE.match(repo):
            raise _bad(text, f"{repo!r} is not a repository name (ORG/REPO)")
        return RemoteName("file", repo=repo, file=_check_file(text, file), revision=rev)
    if low.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise _bad(text, "the URL has no host")
        try:
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number
        except ValueError:
            raise _bad(text, "the URL's port is not a number") from None
        hub = _hub_url_name(text, parts)
        return hub or RemoteName("url", url=text)
    m = _BARE_RE.match(text)
    if m is None or low.endswith(".gguf") or os.path.lexists(text):
        return None
    return RemoteName("quant", repo=m.group(1), quant=m.group(2) or "")


def is_remote_name(text: str) -> bool:
    try:
        return parse_name(text) is not None
    except RemoteNameError:
        return True


def model_arguments(path: str) -> list[str]:
    """``-m PATH``, or for a remote name the arguments that make llama.cpp download it (``-hf ORG/REPO:QUANT``,
    ``-hf ORG/REPO -hff FILE``, ``-mu URL``)."""
    try:
        name = parse_name(path)
    except RemoteNameError:
        name = None
    return ["-m", path] if name is None else name.llama_args()


def endpoint() -> str:
    """The Hub's base URL, without a trailing slash: ``MODEL_ENDPOINT``, else ``HF_ENDPOINT`` (llama.cpp reads
    them in that order), else ``https://huggingface.co``."""
    value = os.environ.get("MODEL_ENDPOINT") or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT
    return value.rstrip("/")


def resolve_url(repo: str, file: str, revision: str = "main") -> str:
    """The download URL of ``file`` in ``repo`` (the Hub redirects it to its storage host)."""
    return f"{endpoint()}/{repo}/resolve/{quote(revision, safe='')}/{quote(file)}"


def _token_file() -> Path:
    explicit = os.environ.get("HF_TOKEN_PATH")
    if explicit:
        return Path(explicit).expanduser()
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home).expanduser() / "token"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(cache) / "huggingface" / "token"


def hub_token() -> tuple[str | None, str]:
    """``(token, where it came from)``: ``HF_TOKEN`` (or the older ``HUGGING_FACE_HUB_TOKEN``), else the token
    file of the Hugging Face tools; ``(None, why not)`` when there is none."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        value = (os.environ.get(var) or "").strip()
        if value:
            return value, var
    path = _token_file()
    try:
        value = read_small_file(path, 4096).decode("utf-8", errors="replace").strip()
    except OSError:
        return None, f"no HF_TOKEN and no token file at {path}"
    return (value, str(path)) if value else (None, f"the token file {path} is empty")


def token_allowed(url: str) -> bool:
    """Whether the token may be sent to ``url``: the Hub endpoint's own host (scheme, host and port), and with
    the default endpoint the Hub's storage hosts (``*.huggingface.co``, ``*.hf.co``) it redirects downloads to.
    Never another host, never over plain http to a remote host."""
    target, base = urlsplit(url), urlsplit(endpoint())
    if (target.scheme, target.netloc) == (base.scheme, base.netloc):
        return True
    if endpoint() != DEFAULT_ENDPOINT or target.scheme != "https":
        return False
    host = (target.hostname or "").lower()
    return any(host == h or host.endswith("." + h) for h in HF_HOSTS)
