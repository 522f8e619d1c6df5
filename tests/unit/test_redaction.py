"""The one secret rule (wormhole.redaction): keys by their words, both sides of it, and every place using it."""

from __future__ import annotations

import pytest

from wormhole.options import show_value
from wormhole.redaction import is_secret_key, key_words, redact, redact_json_text

SECRET = ["password", "PASSWORD", "passwd", "pwd", "pass", "passphrase", "pasword", "passwrod", "dbPassword",
          "db_password", "mysql-pwd", "auth", "Authorization", "authentication_string", "x-auth-token",
          "accessToken", "refresh_token", "secret", "client_secret", "clientSecret", "credentials",
          "api_key", "apiKey", "API-KEY", "private_key", "privateKey", "myapikey", "salt", "oauth"]
PLAIN = ["author", "authors", "authority", "key", "keys", "key_column", "keyColumn", "primary_key", "ssl_key",
         "monkey", "bypass", "passport", "passed", "rows_passed", "tokenizer", "user", "host", "table",
         "password_env", "passwordEnv", "salt_env", "auth_plugin", "auth_method", "private_key_file", "token_path"]


@pytest.mark.parametrize("key", SECRET)
def test_secret_keys(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", PLAIN)
def test_keys_that_are_no_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_words_split_on_punctuation_digits_and_camel_case() -> None:
    assert key_words("authentication_string") == ["authentication", "string"]
    assert key_words("dbPassword2") == ["db", "password", "2"]
    assert key_words("APIKey.x-y") == ["api", "key", "x", "y"]


def test_documents_text_and_messages_follow_one_rule() -> None:
    doc = {"auth": {"user": "u", "pass": "p"}, "author": "a", "list": [{"pwd": 1}], "password_env": "PW"}
    assert redact(doc) == {"auth": "***", "author": "a", "list": [{"pwd": "***"}], "password_env": "PW"}
    text = '{"a": "x\\": \\"pwd\\": 1", "pwd": 12, "auth": {"u": ["s"]}, "author": "a", "cut": "q'
    assert redact_json_text(text) == '{"a": "x\\": \\"pwd\\": 1", "pwd": "***", "auth": "***", "author": "a", "cut": "q'
    # A validation message hides a value under a secret key at any depth, as a document does.
    assert show_value("s3", "source.params.credentials[0].user") == "***"
    assert show_value("s3", "source.params.passphrase") == "***"
    assert show_value("a", "source.params.author") == "'a'"
