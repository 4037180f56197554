"""A judgment store: every backend result saved in SQLite (``JudgmentStore``), so re-runs recompute nothing; keys
and sharing across processes are in docs/design-notes.md."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from prom_reward.backends.base import Completion, GenerationRequest, GenerationResult, TokenLogprobs
from prom_reward.errors import ConfigError, StoreError

KEY_VERSION = 1  # bumped when the key recipe changes (old entries then stop matching)
DEFAULT_KEY_FORMAT = "prometheus2"  # keyed without naming it (the keys written before formats existed)

_SCHEMA = """CREATE TABLE IF NOT EXISTS judgments (
    key TEXT PRIMARY KEY, model TEXT, request TEXT NOT NULL, result TEXT NOT NULL, created REAL NOT NULL)"""
# columns named: a store with more columns (a later version's) still takes rows
_INSERT = "INSERT OR IGNORE INTO judgments (key, model, request, result, created) VALUES (?, ?, ?, ?, ?)"


def request_dict(request: GenerationRequest) -> dict[str, Any]:
    """The request as plain JSON data (sampling as ``SamplingConfig.to_dict()``)."""
    out = {k: getattr(request, k) for k in ("system", "user", "assistant_prefix", "sampling", "n", "attempt")}
    out["sampling"] = request.sampling.to_dict()
    if request.judge_format != DEFAULT_KEY_FORMAT:  # the default format's keys predate the field: they still hit
        out["judge_format"] = request.judge_format
    return out


def request_key(fingerprint: Mapping[str, Any], request: GenerationRequest, dup: int = 0) -> str:
    """sha256 of the canonical JSON of (fingerprint, request, dup); ``dup`` numbers identical requests of a batch."""
    payload = {"v": KEY_VERSION, "backend": fingerprint, "request": request_dict(request), "dup": dup}
    canon = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canon.encode("utf-8")).hexdigest()


_COMPLETION_FIELDS = ("text", "finish_reason", "completion_tokens")  # a stored completion's, logprobs aside


def result_to_dict(result: GenerationResult) -> dict[str, Any]:
    """A GenerationResult as JSON data (``result_from_dict`` inverts it exactly)."""
    completions = [
        {k: getattr(c, k) for k in _COMPLETION_FIELDS}
        | {"logprobs": None if c.logprobs is None else [[t.token, t.logprob, t.top] for t in c.logprobs]}
        for c in result.completions
    ]
    return {"prompt_tokens": result.prompt_tokens, "completions": completions}


def result_from_dict(data: dict[str, Any]) -> GenerationResult:
    """Rebuild a GenerationResult (tuples as tuples) from ``result_to_dict`` output."""
    completions = tuple(
        Completion(
            **{k: c[k] for k in _COMPLETION_FIELDS},
            logprobs=None
            if c["logprobs"] is None
            else tuple(TokenLogprobs(t, lp, dict(top)) for t, lp, top in c["logprobs"]),
        )
        for c in data["completions"]
    )
    return GenerationResult(completions=completions, prompt_tokens=data["prompt_tokens"])


def _json_text(data: dict[str, Any]) -> str:
    """``data`` as JSON text for a row, escaped when it holds a lone surrogate (SQLite stores only valid UTF-8)."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data)
    return text


class JudgmentStore:
    """Judge results in the SQLite file ``path``, safe for several processes and threads: made with its folder
    unless ``create`` is False (looking into a store: a missing one is a ``StoreError``, as is a lock another
    process holds for more than ``timeout`` seconds)."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0, create: bool = True) -> None:
        self.path = Path(path)
        if self.path.suffix.lower() in (".jsonl", ".json", ".parquet", ".pq"):
            raise ConfigError(
                f"judgment store {path}: expected an SQLite file path (e.g. judgments.sqlite), "
                f"got a {self.path.suffix} export path; export with `prom-reward store export STORE "
                "-o OUT` instead"
            )
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not 0 <= timeout < 1e6:
            raise ConfigError(f"store timeout: expected seconds from 0 to 1e6, got {timeout!r}")
        if not create and not self.path.is_file():
            raise StoreError(f"{self.path}: no judgment store there; fix: give the SQLite file given to --store")
        self.__setstate__({"path": self.path, "timeout": float(timeout)})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"{self.path}: cannot create its folder ({e.strerror or e}); fix: give another --store path"
            ) from None
        with self._errors():
            self._check_foreign(create)
            conn = self._connect()
            conn.execute("SELECT key, model, request, result, created FROM judgments LIMIT 0")
            conn.execute("BEGIN IMMEDIATE")  # a store another process keeps locked fails here, not mid-job
            try:
                if create:  # a store that cannot take a row (read-only, another schema) fails here too
                    conn.execute(_INSERT.replace(" OR IGNORE", ""), ("(open check)", None, "{}", "{}", 0.0))
            finally:
                conn.rollback()  # a no-op when SQLite rolled back by itself

    def _check_foreign(self, create: bool) -> None:
        """Refuse an SQLite file without a ``judgments`` table that holds others (or none, unless ``create``)."""
        if not self.path.is_file() or self.path.stat().st_size == 0 and create:
            return
        with contextlib.closing(sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None)) as conn:
            tables = [t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        if "judgments" in tables:
            return
        if tables:
            raise StoreError(
                f"{self.path}: another SQLite database, not a judgment store (its tables: {', '.join(tables[:5])}); "
                "fix: give another --store path (this file is left as it was)"
            )
        if not create:
            raise StoreError(
                f"{self.path}: an empty file, not a judgment store; fix: give the SQLite file given to --store"
            )

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite failures as ``StoreError`` naming the file and the fix."""
        try:
            yield
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise StoreError(
                    f"{self.path}: locked by another process for more than {self.timeout:g} s ({e}); "
                    "fix: wait until that process is done, raise --store-timeout, or give another "
                    "--store"
                ) from None
            if "full" in str(e):
                raise StoreError(
                    f"{self.path}: cannot save judgments: {e}; fix: free space on its disk, or give another --store "
                    "path (what was saved before is kept)"
                ) from None
            raise StoreError(
                f"{self.path}: not a usable judgment store ({e}); fix: check it with `prom-reward "
                "store info`, or give another --store path"
            ) from None
        except sqlite3.IntegrityError as e:
            raise StoreError(
                f"{self.path}: its judgments table is of another schema ({e}: a later prom-reward's, or another "
                "program's); fix: use the prom-reward that wrote it, or give another --store path"
            ) from None
        except sqlite3.DatabaseError as e:
            raise StoreError(
                f"{self.path}: not a judgment store, or a damaged one ({e}); fix: give another --store "
                "path (move this file away if it was one: the judgments in it are lost)"
            ) from None

    # connections are per process: pickling drops it; the copy, as a new store, connects on first use
    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "timeout": self.timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path, self.timeout = state["path"], state["timeout"]
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None  # a connection inherited through fork must not be used
        deadline = time.monotonic() + self.timeout
        while True:
            conn = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None, check_same_thread=False)
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute(_SCHEMA)
                break
            except sqlite3.OperationalError as e:  # another process is converting/creating the file
                conn.close()
                if ("locked" not in str(e) and "busy" not in str(e)) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self._conn, self._pid = conn, os.getpid()
        return conn

    def get_many(self, keys: Sequence[str]) -> dict[str, GenerationResult]:
        """The stored results among ``keys`` (missing keys are simply absent)."""
        return {key: self._stored_result(key, result) for key, result in self._select("key, result", keys)}

    def _stored_result(self, key: str, text: str) -> GenerationResult:
        """A stored row's result; a damaged one is a ``StoreError`` naming the file, the key and the fix."""
        try:
            result = result_from_dict(json.loads(text))
            if all(isinstance(c.text, str) for c in result.completions):
                return result
            problem = "a completion's text is not a string"
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            problem = f"{type(e).__name__}: {e}"
        raise self._damaged(key, problem, "or give another --store path")

    def _damaged(self, key: str, problem: object, then: str) -> StoreError:
        return StoreError(
            f"{self.path}: the judgment stored under key {key} is damaged ({problem}); fix: delete it (sqlite3 "
            f"{self.path} \"DELETE FROM judgments WHERE key = '{key}'\") {then}"
        )

    def stored_keys(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` that are stored (their results not read)."""
        return {key for (key,) in self._select("key", keys)}

    def _select(self, columns: str, keys: Sequence[str]) -> list[tuple[Any, ...]]:
        """``columns`` of the stored rows among ``keys`` (each key once), asked 500 keys at a time."""
        unique, rows = list(dict.fromkeys(keys)), []
        for i in range(0, len(unique), 500):
            part = unique[i : i + 500]
            rows += self._query(f"SELECT {columns} FROM judgments WHERE key IN ({','.join('?' * len(part))})", *part)
        return rows

    def put_many(self, items: Iterable[tuple[str, str | None, GenerationRequest, GenerationResult]]) -> None:
        """Save ``(key, model, request, result)`` tuples in one transaction; existing keys are kept."""
        rows = [
            (key, model, _json_text(request_dict(req)), _json_text(result_to_dict(res)), time.time())
            for key, model, req, res in items
        ]
        if not rows:
            return
        with self._lock, self._errors():
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            with conn:  # commits, or rolls back (a no-op when SQLite did so by itself: a full disk)
                conn.executemany(_INSERT, rows)

    def _query(self, sql: str, *args: Any) -> list[Any]:
        with self._lock, self._errors():
            return self._connect().execute(sql, args).fetchall()

    def keys(self) -> list[str]:
        """Every stored key."""
        return [k for (k,) in self._query("SELECT key FROM judgments ORDER BY rowid")]

    def models(self) -> dict[str, int]:
        """Stored judgments per judge model."""
        rows = self._query("SELECT model, COUNT(*) FROM judgments GROUP BY model ORDER BY model")
        return {str(m): int(c) for m, c in rows}

    def __len__(self) -> int:
        return int(self._query("SELECT COUNT(*) FROM judgments")[0][0])

    def __contains__(self, key: object) -> bool:
        return bool(self._query("SELECT 1 FROM judgments WHERE key = ?", key))

    def entries(self, *, chunk: int = 1000) -> Iterator[dict[str, Any]]:
        """Every entry in insertion order as ``{"key", "model", "request", "result", "created"}`` dicts, read
        ``chunk`` rows at a time."""
        with self._lock, self._errors():
            cur = self._connect().execute("SELECT key, model, request, result, created FROM judgments ORDER BY rowid")
            while batch := cur.fetchmany(chunk):
                for k, m, q, r, c in batch:
                    try:
                        request, result = json.loads(q), json.loads(r)
                    except (ValueError, TypeError) as e:
                        raise self._damaged(k, e, "and export again") from None
                    yield {"key": k, "model": m, "request": request, "result": result, "created": c}

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` ("ok" when the file is sound)."""
        return str(self._query("PRAGMA integrity_check")[0][0])

    def close(self) -> None:
        """Close this process's connection (safe to call twice; a later use reconnects)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> JudgmentStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"JudgmentStore({str(self.path)!r})"


def open_store(store: str | Path | JudgmentStore) -> JudgmentStore:
    """A JudgmentStore from a path, or the given store unchanged."""
    if isinstance(store, JudgmentStore):
        return store
    if isinstance(store, (str, Path)):
        return JudgmentStore(store)
    raise ConfigError(
        f"store: expected a path or a JudgmentStore, got {type(store).__name__}; pass e.g. store='judgments.sqlite'"
    )
