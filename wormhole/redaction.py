"""The one rule for secrets: which keys hold one, and how documents, JSON text and URLs are shown.

Every place that hides a secret goes through here: the log processor (:mod:`wormhole.log`),
validation messages (``options.show_value``), ``task show`` (documents, and stored text that is
not JSON) and every message naming a task-database URL.

A key holds a secret when one of its *words* does (split on ``_ - .``, other punctuation, digits and
camelCase: ``dbPassword`` is ``db password``, ``authentication_string`` is ``authentication string``),
so a new spelling needs no new entry in a list of keys. A word is secret when it is a secret word
(``pass``, ``pwd``, ``token``, ``auth``, ...), contains an unambiguous one (``dbpassword``,
``clientsecret``), is one typo away from ``password`` (``pasword``), or is ``key`` after a word that
makes it a secret key (``private_key``, ``apiKey``). A word followed by one naming *where* or *how*
the secret is found rather than the secret itself (``password_env``, ``auth_plugin``,
``private_key_file``) does not count: those values are names, and showing them helps.
Words that only share letters (``author``, ``key_column``, ``primary_key``, ``bypass``) are not secret.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any
from urllib.parse import SplitResult, urlsplit

MASK = "***"

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

SECRET_WORDS = frozenset({
    "pass", "pwd", "passwd", "password", "passwords", "passphrase", "passcode", "secret", "secrets",
    "token", "tokens", "auth", "oauth", "authentication", "authorization", "credential", "credentials", "salt",
})
"""Words that are a secret on their own."""

SECRET_STEMS = ("password", "passwd", "passphrase", "secret", "credential", "apikey", "privatekey", "secretkey",
                "accesskey", "signingkey", "encryptionkey", "masterkey")
"""Secrets still recognisable inside a longer word (``dbpassword``, ``clientsecret``, ``myapikey``)."""

SECRET_ENDINGS = ("token", "tokens", "pwd")
"""Secrets recognisable at the end of a longer word only (``accesstoken``; ``tokenizer`` is not one)."""

KEY_QUALIFIERS = frozenset({"private", "api", "access", "secret", "signing", "encryption", "master", "client",
                            "auth", "session", "shared"})
"""Words that make a following ``key`` a secret (``private_key``, ``apiKey``); ``key`` alone is not."""

NOT_THE_SECRET = frozenset({"env", "file", "path", "type", "method", "mode", "plugin", "kind"})
"""A word after a secret word that makes the value a name or a way, not the secret (``password_env``)."""


def key_words(key: str) -> list[str]:
    """The lower-case words of a key: ``private_key``, ``privateKey``, ``PRIVATE-KEY`` -> private, key."""
    return [w.lower() for w in _WORD.findall(key)]


def _near_password(word: str) -> bool:
    """One insertion, deletion, substitution or swap away from ``password`` (``pasword``, ``passwrod``)."""
    target = "password"
    if abs(len(word) - len(target)) > 1 or not word.startswith("pa"):
        return False
    if len(word) == len(target):
        diff = [i for i in range(len(word)) if word[i] != target[i]]
        return len(diff) <= 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and word[diff[0]] == target[diff[1]] and word[diff[1]] == target[diff[0]])
    short, long_ = sorted((word, target), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def _secret_word(word: str) -> bool:
    return (word in SECRET_WORDS or any(stem in word for stem in SECRET_STEMS)
            or word.endswith(SECRET_ENDINGS) or _near_password(word))


@functools.lru_cache(maxsize=4096)  # every key of every log event asks: the same few keys
def is_secret_key(key: str) -> bool:
    """Whether the value under ``key`` (or a key path, ``source.params.password``) is never shown."""
    words = key_words(key)
    for i, word in enumerate(words):
        if word == "key" and i > 0 and words[i - 1] in KEY_QUALIFIERS:
            pass
        elif not _secret_word(word):
            continue
        if i + 1 < len(words) and words[i + 1] in NOT_THE_SECRET:
            continue
        return True
    return False


def redact(value: Any) -> Any:
    """``value`` (a JSON-like document) with the value of every secret key replaced by ``***``."""
    if isinstance(value, dict):
        return {k: MASK if isinstance(k, str) and is_secret_key(k) else redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value


# -- JSON text that does not parse (a task row written by another system) -----------------------------

_JSON_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*')
_JSON_SCALAR = re.compile(r"[^,}\]\s]*")


def _string_end(text: str, start: int) -> int:
    """The index after the string opening at ``start`` (the end of the text when it never closes)."""
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i + 1
        i += 1
    return len(text)


def _value_end(text: str, start: int) -> int:
    """The index after the JSON value starting at ``start``, as far as broken text allows."""
    if start >= len(text):
        return start
    if text[start] == '"':
        return _string_end(text, start)
    if text[start] not in "[{":
        match = _JSON_SCALAR.match(text, start)
        return match.end() if match else start
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = _string_end(text, i)
            continue
        depth += 1 if ch in "[{" else -1 if ch in "]}" else 0
        i += 1
        if depth == 0:
            return i
    return len(text)


def _unescape(key: str) -> str:
    try:
        return str(json.loads(f'"{key}"'))
    except ValueError:
        return key


def redact_json_text(text: str) -> str:
    """Text that should have been JSON, each secret key's value (string, number, array or object,
    cut where the text ends) replaced by ``"***"``; best effort, as the text does not parse."""
    out: list[str] = []
    pos = 0
    while (match := _JSON_KEY.search(text, pos)) is not None:
        out.append(text[pos:match.end()])
        end = _value_end(text, match.end())
        if is_secret_key(_unescape(match.group(1))):
            out.append(f'"{MASK}"')
        elif end > match.end() and text[match.end()] == '"':
            out.append(text[match.end():end])  # skipped whole: a string value is never read as a key
        else:
            end = match.end()
        pos = end
    out.append(text[pos:])
    return "".join(out)


# -- URLs -----------------------------------------------------------------------------------------

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_QUERY_VALUE = re.compile(r"(^|&)([^=&]*)=[^&]*")
_MASKED_VALUE = rf"\1\2={MASK}"


def url_scheme(url: str) -> str | None:
    """The scheme ``url`` starts with (``mysql``), or None: text before a ``:`` that is no scheme is not one."""
    match = _SCHEME.match(url)
    return match.group(0)[:-1] if match else None


def split_url(url: str) -> SplitResult | None:
    """``url`` split as a task-database opener reads it, or None when it cannot be read unambiguously:
    no ``scheme://``, a ``#``, an ``@`` after the host (an unencoded ``/ ? #`` in a password cut it
    short), or a host or port that does not parse. Credentials end at the host's last ``@``."""
    scheme = _SCHEME.match(url)
    if scheme is None or not url[scheme.end():].startswith("//") or "#" in url:
        return None
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError on a port that is not a number
        _ = parts.hostname  # raises ValueError on an unbalanced '['
    except ValueError:
        return None
    if "@" in parts.path or "@" in parts.query:
        return None
    return parts


def redact_url(url: str) -> str:
    """``url`` for a message: the password and every query value as ``***``
    (``mysql://root:***@host:3306/db?connect_timeout=***``); a URL that :func:`split_url` cannot read
    shows nothing after its scheme (``mysql://***``), since any of it may be a piece of a password.
    A JDBC URL is shown the same way after its ``jdbc:`` (``jdbc:mysql://***``)."""
    if url[:5].lower() == "jdbc:":
        return url[:5] + redact_url(url[5:])
    parts = split_url(url)
    if parts is None:
        scheme = url_scheme(url)
        if scheme is None:
            return MASK
        return f"{scheme}:" + ("//" if url[len(scheme) + 1:].startswith("//") else "") + MASK
    user, at, host = parts.netloc.rpartition("@")
    if at:
        name, colon, _password = user.partition(":")
        user = f"{name}:{MASK}@" if colon else f"{name}@"
    query = "?" + _QUERY_VALUE.sub(_MASKED_VALUE, parts.query) if parts.query else ""
    return f"{parts.scheme}://{user}{host}{parts.path}{query}"
